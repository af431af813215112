"""fork() while another thread holds a lock, seen from the parent: the
parent waits for the child to exit, and the child has deadlocked on the
lock it inherited locked.

Source: Python issue bpo-6721 ("Locks in the standard library should be
sanitized on fork") and the os.fork() documentation's warning (3.12+) that
forking a multi-threaded process can deadlock the child; the parent's side
is what its user sees: a program stuck in os.waitpid (or
subprocess/multiprocessing's wait) with no traceback. fork_held_lock.py
diagnoses the child; this one the parent.

Senior engineer: the parent is hung, for good: its MainThread waits for a
child that can never exit, because the child's only thread waits on an RLock
whose owner is a thread of the parent, which does not exist in the child.
lock_never_released, certain (the child's verdict), blaming the parent's
MainThread. The parent's holder thread only sleeps.
"""

import os
import sys
import threading
import time
import warnings

import _field

lock = threading.RLock()


def holder(held):
    with lock:
        held.set()
        time.sleep(3600)


def main():
    warnings.simplefilter("ignore")   # 3.12+: DeprecationWarning on fork with threads
    held = threading.Event()
    threading.Thread(target=holder, args=(held,), name="holder", daemon=True).start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        with lock:
            os._exit(0)
    _field.report_later(_field.expect("lock_never_released", "certain", threads=["MainThread"]),
                        extra={"child": pid, "child_stuck": True},
                        before=lambda: (_field.blocked_in_syscall(pid, 202)(),  # futex
                                        _field.main_blocked_in("<module>", "main")()))
    os.waitpid(pid, 0)
    sys.exit(1)


if __name__ == "__main__":
    main()
