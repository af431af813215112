"""Target whose main thread ends with pthread_exit while two workers run
on: the process's leader is then a zombie (its /proc/PID/maps, exe and root
are empty) and only the workers' /proc entries show the memory.

usage: python leader_exit.py REPORT.json
"""

import ctypes
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def worker():
    while True:
        time.sleep(3600)


def main():
    path = _target.report_path()
    for index in range(2):
        threading.Thread(target=worker, name="worker-%d" % index).start()
    _target.wait_settled()
    report = _target.build_report(__file__)
    report["threads"] = [t for t in report["threads"] if t["ident"] != threading.get_ident()]
    _target.write_report(path, report)
    # CDLL releases the GIL around the call, so the workers can still take it.
    ctypes.CDLL(None).pthread_exit(None)


if __name__ == "__main__":
    main()
