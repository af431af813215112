"""Target for record --native --idle (off-CPU): a thread "waiter" blocked in
a C extension's mutex with the GIL released, as a thread waiting on a C
library (a driver, an RPC runtime) is: its time is idle, and only its C
stack says where it waits.

    waiter      wait() calls pyscope_nativeext.wait_for_lock(), blocked in
                pthread_mutex_lock on the mutex MainThread took
    MainThread  time.sleep (in _target.park)

usage: python native_mutex.py REPORT.json DIRECTORY
  DIRECTORY holds pyscope_nativeext.so (tests/integration/native/nativeext.c)
The report's extra names the waiter's Python caller and the line of its call.
"""

import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def wait(ext, started):
    started.set()
    ext.wait_for_lock()  # wait-call


def main():
    path = _target.report_path()
    sys.path.insert(0, sys.argv[2])
    import pyscope_nativeext
    pyscope_nativeext.take_lock()
    started = threading.Event()
    waiter = threading.Thread(target=wait, args=(pyscope_nativeext, started), name="waiter",
                              daemon=True)
    waiter.start()
    started.wait()
    # started only says the waiter is about to call; a loaded machine can
    # leave it runnable for a while, and a test reading the report must
    # find it blocked in the mutex, not on its way there.
    for _ in range(2000):
        if pyscope_nativeext.waiters():
            break
        time.sleep(0.005)
    extra = {"caller": {"function": wait.__name__,
                        "line": _target.marker_line(wait, "# wait-call")}}
    _target.park(__file__, path, extra=extra)


if __name__ == "__main__":
    main()
