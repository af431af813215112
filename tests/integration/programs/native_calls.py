"""Target for --native: a thread "caller" runs outer() -> C -> inner(), and
inner blocks on a lock, so its stack has a C frame between two Python frames.
The C frame comes from the pyscope_nativeext extension ("ext") or from a
ctypes-loaded library ("ctypes", for interpreters without headers). The
library also starts a thread Python does not know ("pyscope-idle").

usage: python native_calls.py REPORT.json MODE LIBRARY
  MODE ext: LIBRARY is the directory holding pyscope_nativeext.so
  MODE ctypes: LIBRARY is the path of libcallthrough.so
"""

import ctypes
import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402

READY = threading.Event()
BLOCK = threading.Lock()


def inner():
    READY.set()
    BLOCK.acquire()


def outer(call):
    call(inner)


def main():
    path, mode, library = _target.report_path(), sys.argv[2], sys.argv[3]
    BLOCK.acquire()
    if mode == "ext":
        sys.path.insert(0, library)
        import pyscope_nativeext
        call = pyscope_nativeext.call
        lib = None
    else:
        lib = ctypes.CDLL(library)
        callback_type = ctypes.CFUNCTYPE(None)
        keep = []

        def call(function):
            callback = callback_type(function)
            keep.append(callback)
            lib.pyscope_call_through(callback)
    threading.Thread(target=outer, args=(call,), name="caller", daemon=True).start()
    READY.wait()
    idle_library = lib or ctypes.CDLL(sys.argv[4])
    idle_library.pyscope_start_idle_thread()
    _target.park(__file__, path, extra={"mode": mode})


if __name__ == "__main__":
    main()
