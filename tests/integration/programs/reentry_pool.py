"""Target for `pyscope watch --reentry`: the bug of issue #5 in miniature.

A memory pool keeps a sorted free list. Adding to it allocates (a set),
which may start the cyclic garbage collector; the collector finalizes
garbage Blocks, and a Block's finalizer frees its memory into the same pool,
so the append runs again on the same thread while the first one is half
done. The thresholds are lowered so that this happens within moments.

usage: python reentry_pool.py REPORT.json MODE [LIBRARY] [--seconds N] [--calm]
                              [--threads N --delay S]
  MODE python: the pool is Python (watch Pool._append_to_free_list)
  MODE ext:    the append is C in the pyscope_reentry extension found in the
               directory LIBRARY (watch the C symbol pyscope_pool_append)
  MODE ctypes: the append is C in the library LIBRARY, called with ctypes,
               calling back into Python (watch pyscope_pool_append)
--calm: no garbage Blocks, so the append is called all the time but never
re-entered.
--threads N: the work runs in N threads ("worker-1"...), each with its own
pool, started S seconds (--delay) after the report, while the main thread
waits: threads a watcher that attached in between has to follow.
The program runs until the file REPORT.json.stop exists (or N seconds
passed, default 120), then prints "done N appends, M re-entries" and exits 0.
It writes REPORT.json (see _target.py) once it is running.
"""

import ctypes
import gc
import os
import random
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


class FreeBlock:
    """The record of a free block. Not a list: small lists come from a free
    list of their own, which the collector's count (3.8-3.11) never sees."""

    __slots__ = ("size",)

    def __init__(self, size):
        self.size = size


class Pool:
    def __init__(self, native_append=None):
        self.free_list = [FreeBlock(0), FreeBlock(1 << 20)]   # sorted by size
        self.depth = 0
        self.appends = 0
        self.reentries = 0
        self.native_append = native_append

    def _append_to_free_list(self, size):
        self.depth += 1
        if self.depth > 1:
            self.reentries += 1
        self.appends += 1
        # Allocations that may start the collector. The record outlives the
        # call: up to 3.11 the collector counts objects that stay, so with
        # the trimming done elsewhere, collections start here most often.
        record = FreeBlock(size)
        seen = set()
        index = 0
        # A loop: 3.12+ run a pending collection at its back edge.
        while self.free_list[index].size < size:
            seen.add(index)
            index += 1
        self.free_list.insert(index, record)
        self.depth -= 1

    def trim(self):
        if len(self.free_list) > 64:
            del self.free_list[1:33]

    def insert_sorted(self, size):
        """The Python half of the C append (called back from C)."""
        self._append_to_free_list(size)

    def free(self, size):
        if self.native_append is not None:
            self.native_append(size)
        else:
            self._append_to_free_list(size)


class Block:
    def __init__(self, pool, size):
        self.pool = pool
        self.size = size
        self.cycle = self             # garbage only the cyclic collector frees

    def __del__(self):
        self.pool.free(self.size)


def native_append_for(mode, library, pool):
    if mode == "ext":
        sys.path.insert(0, library)
        import pyscope_reentry
        return lambda size: pyscope_reentry.append(pool, size)
    lib = ctypes.CDLL(library)
    callback_type = ctypes.CFUNCTYPE(None, ctypes.c_int)
    callback = callback_type(pool.insert_sorted)
    lib.pyscope_pool_append.argtypes = [callback_type, ctypes.c_int]
    pool.keep_callback = callback
    return lambda size: lib.pyscope_pool_append(callback, size)


def main():
    path = _target.report_path()
    mode = sys.argv[2] if len(sys.argv) > 2 else "python"
    library = sys.argv[3] if len(sys.argv) > 3 and not sys.argv[3].startswith("--") else None
    seconds = float(option("--seconds", "120"))
    calm = "--calm" in sys.argv
    pool = Pool()
    if mode != "python":
        pool.native_append = native_append_for(mode, library, pool)
    gc.set_threshold(20, 2, 2)
    stop_file = path + ".stop"
    deadline = time.monotonic() + seconds
    threads = int(option("--threads", "0"))
    _target.write_report(path, _target.build_report(__file__, extra={"mode": mode}))
    if threads == 0:
        work(pool, calm, stop_file, deadline, 5)
    else:
        time.sleep(float(option("--delay", "0")))
        pools = [pool] + [Pool(pool.native_append) for _ in range(threads - 1)]
        workers = [threading.Thread(target=work, name="worker-%d" % (i + 1),
                                    args=(pools[i], calm, stop_file, deadline, i))
                   for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        pool.appends = sum(p.appends for p in pools)
        pool.reentries = sum(p.reentries for p in pools)
    print("done %d appends, %d re-entries" % (pool.appends, pool.reentries), flush=True)


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def work(pool, calm, stop_file, deadline, seed):
    step = 0
    # Irregular garbage: with a fixed pattern the collector can settle into
    # always starting at the same allocation, outside the append.
    rng = random.Random(seed)
    while True:
        step += 1
        if not calm and rng.random() < 0.7:
            Block(pool, step % 1000)
        pool.free(step % 997)
        pool.trim()
        if step % 200 == 0 and (os.path.exists(stop_file) or time.monotonic() > deadline):
            break


if __name__ == "__main__":
    main()
