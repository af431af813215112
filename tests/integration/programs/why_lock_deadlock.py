"""Target: two pairs of threads deadlocked on plain Locks. The "with" pair
takes its locks in `with` blocks; the "acquire" pair calls acquire()
explicitly, so nothing but the program's structure says who holds what.

usage: python why_lock_deadlock.py REPORT.json
"""

import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402


def with_worker(first, second, both_hold_first):
    with first:
        both_hold_first.wait()
        with second:  # never entered
            pass


def acquire_worker(first, second, both_hold_first):
    first.acquire()
    both_hold_first.wait()
    second.acquire()  # never returns
    second.release()
    first.release()


def start_pair(target, prefix):
    one, two = threading.Lock(), threading.Lock()
    both = threading.Barrier(2)
    threading.Thread(target=target, args=(one, two, both), name=prefix + "-a", daemon=True).start()
    threading.Thread(target=target, args=(two, one, both), name=prefix + "-b", daemon=True).start()
    return {prefix + "-a": {"lock": id(two), "owner": prefix + "-b"},
            prefix + "-b": {"lock": id(one), "owner": prefix + "-a"}}


def main():
    path = _target.report_path()
    waits = {}
    waits.update(start_pair(with_worker, "with"))
    waits.update(start_pair(acquire_worker, "acquire"))
    _target.park(__file__, path, extra={"waits": waits})


if __name__ == "__main__":
    main()
