"""Target for `pyscope watch` across fork (issue 13): while pyscope watches
the pool's append (Python, or C through ctypes with LIBRARY), the program
starts children that run the same re-entering pool: one with os.fork(), one
with os.posix_spawn (a vfork-style clone sharing the parent's memory until
it execs) of this interpreter running the pool. pyscope traces only the
parent, so each child must run as if nothing watched it: no SIGTRAP, its
work done, exit status 0. The parent then re-enters the append itself, so
the watch must still be alive after the forks.

usage: python fork_watch.py TRUTH.json MODE [LIBRARY]
  MODE python or ctypes (as reentry_pool.py)
TRUTH.json: {"fork": wait status, "spawn": wait status, "parent_reentries": N}
(a child exits 4 if its pool was never re-entered, 5 on an exception).
"""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reentry_pool  # noqa: E402


def run_pool(mode, library, seconds, seed):
    pool = reentry_pool.Pool()
    if mode != "python":
        pool.native_append = reentry_pool.native_append_for(mode, library, pool)
    reentry_pool.work(pool, False, "/nonexistent", time.monotonic() + seconds, seed)
    return pool


def main():
    truth, mode = sys.argv[1], sys.argv[2]
    library = sys.argv[3] if len(sys.argv) > 3 else None
    import gc
    gc.set_threshold(20, 2, 2)
    if mode == "child":
        pool = run_pool(sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None, 0.5, 7)
        sys.exit(0 if pool.reentries > 0 else 4)
    pid = os.fork()
    if pid == 0:
        try:
            pool = run_pool(mode, library, 0.5, 3)
            os._exit(0 if pool.reentries > 0 else 4)
        except BaseException:
            os._exit(5)
    _, fork_status = os.waitpid(pid, 0)
    argv = [sys.executable, os.path.abspath(__file__), truth, "child", mode] + \
        ([library] if library else [])
    spawned = os.posix_spawn(sys.executable, argv, os.environ)
    _, spawn_status = os.waitpid(spawned, 0)
    parent = run_pool(mode, library, 1.0, 5)
    with open(truth, "w") as f:
        json.dump({"fork": fork_status, "spawn": spawn_status,
                   "parent_reentries": parent.reentries}, f)
    print("done", flush=True)


if __name__ == "__main__":
    main()
