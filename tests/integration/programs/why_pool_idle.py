"""Target: an idle ThreadPoolExecutor held by a module global, the way
applications keep one. Its workers wait in SimpleQueue.get for work that
the main thread (sleeping, and able to reach the pool) may still submit:
idle, not hung.

usage: python why_pool_idle.py REPORT.json
"""

import concurrent.futures
import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402

WORKERS = 3
POOL = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="pool")


def main():
    path = _target.report_path()
    # The pool starts a worker only when none is idle: tasks that wait for
    # each other make it start all of them.
    everyone = threading.Barrier(WORKERS)
    for future in [POOL.submit(everyone.wait) for _ in range(WORKERS)]:
        future.result()
    del everyone
    workers = sorted(t.name for t in POOL._threads)
    _target.park(__file__, path, extra={"work_queue": id(POOL._work_queue), "workers": workers})


if __name__ == "__main__":
    main()
