"""Target: two threads deadlocked on two RLocks (each holds one in a `with`
block and waits for the other), and a third thread joining one of them.

usage: python why_rlock_deadlock.py REPORT.json
"""

import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402


def worker(first, second, both_hold_first):
    with first:
        both_hold_first.wait()
        with second:  # never entered: the other thread holds it
            pass


def joiner(thread):
    thread.join()


def start():
    """Start the threads; the main thread keeps no reference to the locks."""
    left, right = threading.RLock(), threading.RLock()
    both = threading.Barrier(2)
    a = threading.Thread(target=worker, args=(left, right, both), name="worker-a", daemon=True)
    b = threading.Thread(target=worker, args=(right, left, both), name="worker-b", daemon=True)
    a.start()
    b.start()
    j = threading.Thread(target=joiner, args=(a,), name="joiner", daemon=True)
    j.start()
    return {"locks": {"left": id(left), "right": id(right)},
            "waits": {"worker-a": {"lock": id(right), "owner": "worker-b"},
                      "worker-b": {"lock": id(left), "owner": "worker-a"}},
            "joiner": {"joins": "worker-a", "thread_object": id(a)}}


def main():
    path = _target.report_path()
    extra = start()
    _target.park(__file__, path, extra=extra)


if __name__ == "__main__":
    main()
