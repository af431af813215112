"""Target: COUNT threads (default 1,100, more than the default limit of
1,024 open files) all in time.sleep.

usage: python many_sleepers.py REPORT.json [COUNT]
"""

import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def sleeper():
    while True:
        time.sleep(3600)


def main():
    path = _target.report_path()
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1100
    threading.stack_size(256 * 1024)
    for index in range(count):
        threading.Thread(target=sleeper, name="sleeper-%04d" % index, daemon=True).start()
    _target.park(__file__, path, settle=False, extra={"count": count})


if __name__ == "__main__":
    main()
