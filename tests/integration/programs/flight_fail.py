"""Fails after a delay, for `pyscope run --record-last`: while the main thread
counts down, a "cruncher" thread keeps the CPU (and the GIL) busy and a
"sleeper" thread is blocked in Event.wait. Then, depending on MODE:

  exception  fail_exception() raises RuntimeError (uncaught)
  exit       fail_exit() calls sys.exit(3)
  crash      thread "crasher" passes NULL to a C function that reads through
             it (SIGSEGV), from fail_crash()
  signal     nothing fails: the program keeps counting down for HOLD more
             seconds (the test sends it SIGUSR2 meanwhile), or until the
             file REPORT.json.done exists, then exits 0

usage: python flight_fail.py REPORT.json MODE DELAY_SECONDS [LIBCALLTHROUGH.so] [HOLD]

REPORT.json is written twice: at the start (pid, thread ids; "failing_at"
null) and just before the failure, with "failing_at" = time.time(). A SIGUSR2
that reaches the program is noted in the report as "usr2_seen".
"""

import ctypes
import json
import os
import signal
import sys
import threading
import time

usr2_seen = []


def write_report(path, report):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f)
    os.replace(tmp, path)


def crunch(stop):
    total = 0
    while not stop.is_set():
        for i in range(2000):
            total += i * i
    return total


def sleep_forever(stop):
    stop.wait()


def countdown(seconds, until=None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if until and os.path.exists(until):
            return
        time.sleep(0.01)


def fail_exception(token, attempts):
    limit = attempts * 2
    raise RuntimeError("gave up after %d attempts" % limit)  # raise-here


def fail_exit():
    sys.exit(3)


def fail_crash(lib):
    payload = b"flight"
    return lib.pyscope_crash_read(None)  # crash-here


def main():
    report_path, mode, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
    lib = ctypes.CDLL(sys.argv[4]) if mode == "crash" else None
    hold = float(sys.argv[5]) if len(sys.argv) > 5 else 3.0
    signal.signal(signal.SIGUSR2, lambda *args: usr2_seen.append(time.time()))
    stop = threading.Event()
    workers = [threading.Thread(target=crunch, args=(stop,), name="cruncher", daemon=True),
               threading.Thread(target=sleep_forever, args=(stop,), name="sleeper", daemon=True)]
    for worker in workers:
        worker.start()
    report = {"pid": os.getpid(), "mode": mode, "failing_at": None,
              "threads": {t.name: t.native_id for t in workers + [threading.main_thread()]}}
    write_report(report_path, report)
    countdown(delay)
    if mode == "signal":
        countdown(hold, report_path + ".done")
        report["usr2_seen"] = usr2_seen
        write_report(report_path, report)
        return
    report["failing_at"] = time.time()
    if mode == "crash":
        crasher = threading.Thread(target=fail_crash, args=(lib,), name="crasher")
        report["threads"]["crasher"] = None
        write_report(report_path, report)
        crasher.start()
        crasher.join()
    write_report(report_path, report)
    if mode == "exception":
        fail_exception("abc", 21)
    fail_exit()


if __name__ == "__main__":
    main()
