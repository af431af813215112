"""Target: a thread that exits while holding an RLock, and a thread that
then waits for that RLock forever.

usage: python why_orphan_rlock.py REPORT.json
"""

import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def leave_locked(lock, idents, go):
    lock.acquire()
    idents.append(threading.get_ident())
    go.wait()
    # returns without release(): the RLock still names this thread


def wait_for(lock):
    with lock:
        pass


def start():
    """A thread ident is the address of glibc's thread descriptor, inside
    the thread's stack, and glibc gives an exited thread's stack (and so
    its ident, and the RLock with it) to the next thread it creates. So the
    waiter starts while the leaver is still alive, and no thread is created
    after the leaver exits."""
    lock = threading.RLock()
    idents = []
    go = threading.Event()
    leaver = threading.Thread(target=leave_locked, args=(lock, idents, go), name="leaver")
    leaver.start()
    while not idents:
        time.sleep(0.01)
    threading.Thread(target=wait_for, args=(lock,), name="waiter", daemon=True).start()
    go.set()
    leaver.join()
    return {"lock": id(lock), "owner_ident": idents[0]}


def main():
    path = _target.report_path()
    extra = start()
    _target.park(__file__, path, extra=extra)


if __name__ == "__main__":
    main()
