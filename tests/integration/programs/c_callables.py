"""Target for the C callable a frame calls (no --native needed): each thread
sits in one call of a C callable, which the report names as Python would.

    regex     PATTERN.match(TEXT), catastrophic backtracking, holding the GIL
    ctypes    lib.checksum_blocks(buf, n) from LIBRARY (ctypes.CDLL)
    lock      BLOCK.acquire()
    list      list(iter(queue.get, None)): a C type consuming a C iterator (the
              iterator made on a line of its own: a C callable called just
              before, still in a stale stack slot, would make the call ambiguous)
    spinner   pure Python, so that the regex thread holds the GIL while another
              thread waits for it (a GIL hog)
    MainThread time.sleep (in _target.park)

usage: python c_callables.py REPORT.json LIBRARY [BACKTRACKING]
  BACKTRACKING: length of the regex's input (default 22, each match some
  tenths of a second; fewer for slow debug builds)
"""

import ctypes
import queue
import re
import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402

PATTERN = re.compile(r"(a+)+$")
TEXT = "a" * (int(sys.argv[3]) if len(sys.argv) > 3 else 22) + "b"
BLOCK = threading.Lock()
STARTED = []


def regex_loop():
    STARTED.append("regex")
    while True:
        PATTERN.match(TEXT)


def ctypes_call(lib):
    buf = ctypes.create_string_buffer(b"x" * 64)
    STARTED.append("ctypes")
    lib.checksum_blocks(buf, 64)


def lock_wait():
    STARTED.append("lock")
    BLOCK.acquire()


def list_wait(q):
    items = iter(q.get, None)
    STARTED.append("list")
    list(items)


def spin():
    STARTED.append("spinner")
    n = 0
    while True:
        n += 1


def main():
    path, library = _target.report_path(), sys.argv[2]
    lib = ctypes.CDLL(library)
    BLOCK.acquire()
    threads = [threading.Thread(target=regex_loop, name="regex", daemon=True),
               threading.Thread(target=ctypes_call, args=(lib,), name="ctypes", daemon=True),
               threading.Thread(target=lock_wait, name="lock", daemon=True),
               threading.Thread(target=list_wait, args=(queue.SimpleQueue(),), name="list",
                                daemon=True),
               threading.Thread(target=spin, name="spinner", daemon=True)]
    for t in threads:
        t.start()
    while len(STARTED) < len(threads):
        pass
    # What each thread calls, as Python names it.
    extra = {"callables": {
        "regex": "%s.%s.%s" % (type(PATTERN).__module__, type(PATTERN).__qualname__,
                               PATTERN.match.__name__),
        "ctypes": "%s (%s)" % (lib.checksum_blocks.__name__, library.rsplit("/", 1)[-1]),
        "lock": "%s.%s.acquire" % (type(BLOCK).__module__, type(BLOCK).__qualname__),
        "list": list.__qualname__,
        "MainThread": "time.sleep"}}
    _target.park(__file__, path, extra=extra, settle=False)


if __name__ == "__main__":
    main()
