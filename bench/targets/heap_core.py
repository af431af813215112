"""Builds a heap of ordinary objects (tuples of ints, strings, floats and
lists) of about MIB mebibytes, starts a second thread, and aborts, leaving a
kernel core in the working directory (RLIMIT_CORE is raised first).

usage: python heap_core.py MIB
"""

import os
import resource
import sys
import threading
import time


def worker(ready):
    ready.set()
    time.sleep(3600)


def main():
    target = int(sys.argv[1]) << 20
    data, size, i = [], 0, 0
    while size < target:
        s = "record-%d-%s" % (i, "x" * (i % 50))
        data.append((i, s, i * 0.5, [i, i + 1]))
        # tuple, str, float, list and its two ints, and the outer list's slot
        size += 72 + 49 + len(s) + 24 + 72 + 64 + 8
        i += 1
    ready = threading.Event()
    threading.Thread(target=worker, args=(ready,), name="worker").start()
    ready.wait()
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    print(len(data), flush=True)
    os.abort()


if __name__ == "__main__":
    main()
