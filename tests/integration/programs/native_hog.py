"""Target for record/top --native: C functions a sampled stack must show.

    hog       hog_loop() calls hog_checksum (ctypes.PyDLL: keeps the GIL)
              over and over, each call some tens of milliseconds
    spinner   pure Python, wanting the GIL the hog keeps (so it is a GIL hog)
    locker    locker() calls wait_for_lock (ctypes.CDLL: without the GIL),
              blocked in pthread_mutex_lock on a mutex MainThread took
    MainThread time.sleep (in _target.park)

usage: python native_hog.py REPORT.json LIBRARY
The report's extra names each Python caller and the line of its call.
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
        lib.hog_checksum(buf, len(buf), 600)  # hog-call


def spin():
    STARTED.append("spinner")
    n = 0
    while True:
        n += 1


def locker(lib):
    STARTED.append("locker")
    lib.wait_for_lock()  # lock-call


def main():
    path, library = _target.report_path(), sys.argv[2]
    pydll, cdll = ctypes.PyDLL(library), ctypes.CDLL(library)
    pydll.hog_checksum.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint]
    cdll.take_lock()
    buf = b"x" * 65536
    threads = [threading.Thread(target=locker, args=(cdll,), name="locker", daemon=True),
               threading.Thread(target=spin, name="spinner", daemon=True),
               threading.Thread(target=hog_loop, args=(pydll, buf), name="hog", daemon=True)]
    for t in threads:
        t.start()
    while len(STARTED) < len(threads):
        pass
    extra = {"callers": {
        "hog": {"function": hog_loop.__name__, "line": _target.marker_line(hog_loop, "# hog-call")},
        "locker": {"function": locker.__name__,
                   "line": _target.marker_line(locker, "# lock-call")}},
        "library": library}
    _target.park(__file__, path, extra=extra, settle=False)


if __name__ == "__main__":
    main()
