"""fork() while another thread holds a lock: the child inherits the lock
locked, by a thread that does not exist in the child, and deadlocks on its
first use.

Source: Python issue bpo-6721 ("Locks in the standard library should be
sanitized on fork"; the logging module's handler RLock was the case that
got fixed with os.register_at_fork), and the os.fork() documentation's
warning (3.12+) that forking a multi-threaded process can deadlock the
child. This reproduces it with the application's own RLock, the shape of
logging's lock before the fix.

The test diagnoses the child (its pid is in the report).

Senior engineer: lock_never_released, certain: the child's only thread waits
on an RLock whose recorded owner is a thread of the parent, gone in the
child.
"""

import os
import sys
import threading
import warnings

import _field

lock = threading.RLock()


def holder(held, done):
    with lock:
        held.set()
        done.wait()


def main():
    warnings.simplefilter("ignore")   # 3.12+: DeprecationWarning on fork with threads
    held, done = threading.Event(), threading.Event()
    threading.Thread(target=holder, args=(held, done), name="holder", daemon=True).start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        _field.write(_field.expect("lock_never_released", "certain", threads=["MainThread"],
                                   objects=["lock"]),
                     objects={"lock": id(lock)})
        with lock:
            os._exit(0)
    os.waitpid(pid, 0)
    sys.exit(1)


if __name__ == "__main__":
    main()
