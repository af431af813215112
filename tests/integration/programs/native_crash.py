"""Crashes on purpose: thread "parser" calls parse(), which passes NULL to a C
function that reads through it (SIGSEGV). Used under `pyscope run`.

usage: python native_crash.py LIBCALLTHROUGH.so
"""

import ctypes
import sys
import threading


def parse(data, lib):
    secret = {"token": [1, 2, 3]}
    count = len(data)
    return lib.pyscope_crash_read(None)  # crash-line


def main():
    lib = ctypes.CDLL(sys.argv[1])
    worker = threading.Thread(target=parse, args=(b"payload", lib), name="parser")
    worker.start()
    worker.join()


if __name__ == "__main__":
    main()
