"""Target for `pyscope record --subprocesses`: a multiprocessing Pool of two
workers, each busy in burn() (pure-Python CPU work) for as long as the
process lives. The report's extra lists the workers' pids.

usage: python rec_pool.py REPORT.json
"""

import multiprocessing
import sys
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def burn(seconds):
    deadline = time.monotonic() + seconds
    x = 1
    while time.monotonic() < deadline:
        for _ in range(10000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def main():
    path = _target.report_path()
    pool = multiprocessing.Pool(2)
    # One task per worker: a busy worker does not take the second one.
    pending = pool.map_async(burn, [3600, 3600], chunksize=1)
    workers = [p.pid for p in pool._pool]
    _target.park(__file__, path, settle=False,
                 extra={"worker_pids": workers, "function": "burn",
                        "start_method": multiprocessing.get_start_method(),
                        "pending": not pending.ready()})


if __name__ == "__main__":
    main()
