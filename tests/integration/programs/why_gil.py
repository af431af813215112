"""Target: a thread that holds the GIL while blocked in a C call (ctypes
PyDLL keeps the GIL across the call), so the threads that want to run
Python wait for the GIL forever.

usage: python why_gil.py REPORT.json
"""

import ctypes
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

libc = ctypes.PyDLL(None)  # PyDLL: calls keep the GIL


def spin():
    count = 0
    while True:
        count += 1


def block_with_gil(delay):
    time.sleep(delay)  # let the main thread write the report first
    libc.pause()  # a syscall no Python code makes: easy to wait for


def main():
    path = _target.report_path()
    for index in range(2):
        threading.Thread(target=spin, name="spinner-%d" % index, daemon=True).start()
    threading.Thread(target=block_with_gil, args=(0.5,), name="gil-holder", daemon=True).start()
    _target.park(__file__, path, settle=False)


if __name__ == "__main__":
    main()
