"""Target for record --native: a thread inside a C function whose stack
frame (64 KiB) is larger than the stack a perf sample copies.

    big       big_loop() calls hog_big_frame (ctypes.PyDLL) over and over
    MainThread time.sleep (in _target.park)

usage: python native_big_frame.py REPORT.json LIBRARY
The report's extra names the Python caller and the line of its call.
"""

import ctypes
import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402

STARTED = []


def big_loop(lib, buf):
    STARTED.append("big")
    while True:
        lib.hog_big_frame(buf, len(buf), 300)  # big-call


def main():
    path, library = _target.report_path(), sys.argv[2]
    lib = ctypes.PyDLL(library)
    lib.hog_big_frame.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint]
    buf = b"y" * 65536
    thread = threading.Thread(target=big_loop, args=(lib, buf), name="big", daemon=True)
    thread.start()
    while not STARTED:
        pass
    extra = {"caller": {"function": big_loop.__name__,
                        "line": _target.marker_line(big_loop, "# big-call")}}
    _target.park(__file__, path, extra=extra, settle=False)


if __name__ == "__main__":
    main()
