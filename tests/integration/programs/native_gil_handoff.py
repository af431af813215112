"""Target for record --native's GIL-hog report: threads that hand the GIL
to each other all the time.

    spin-1..3  `while True: pass`, pure Python at one instruction: each holds
               the GIL for a switch interval, then waits for it in take_gil
               (its Python stack the same throughout), so a C stack sampled
               during the wait must not be charged to its hold
    hog        hog_loop() calls hog_checksum (ctypes.PyDLL: keeps the GIL)
               for some tens of milliseconds at a time
    MainThread time.sleep (in _target.park)

Only hog_checksum (and the ctypes call around it) holds the GIL in C: the
spinners hold it in the eval loop alone.

usage: python native_gil_handoff.py REPORT.json LIBRARY
"""

import ctypes
import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402

STARTED = []


def hog_loop(lib, buf):
    STARTED.append("hog")
    while True:
        lib.hog_checksum(buf, len(buf), 200)  # hog-call


def spin():
    STARTED.append("spin")
    while True:
        pass


def main():
    path, library = _target.report_path(), sys.argv[2]
    pydll = ctypes.PyDLL(library)
    pydll.hog_checksum.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint]
    buf = b"x" * 65536
    threads = [threading.Thread(target=spin, name="spin-%d" % k, daemon=True) for k in (1, 2, 3)]
    threads.append(threading.Thread(target=hog_loop, args=(pydll, buf), name="hog", daemon=True))
    for t in threads:
        t.start()
    while len(STARTED) < len(threads):
        pass
    extra = {"callers": {
        "hog": {"function": hog_loop.__name__, "line": _target.marker_line(hog_loop, "# hog-call")},
        "spin": {"function": spin.__name__}},
        "library": library}
    _target.park(__file__, path, extra=extra, settle=False)


if __name__ == "__main__":
    main()
