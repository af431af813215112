"""Target for `pyscope watch --reentry FUNC -- python early_pool.py`: the
memory pool of issue #12, failing within moments of its start.

`_append_to_free_list` finds where a block goes in the sorted free list,
then allocates (a record and a set); with the collector's thresholds low,
the allocation starts a collection, the collector finalizes a garbage Block,
and the Block's finalizer frees its memory into the same pool: the append
runs again on the same thread while the first one holds an index that is no
longer right. The first activation then inserts at the stale index, the free
list is no longer sorted, and the program notices, writes what it knows to
TRUTH.json and exits with status 3.

usage: python early_pool.py TRUTH.json [MODE] [--seconds N] [--start-after FILE]
  MODE method:    Pool._append_to_free_list, a method (default)
  MODE nested:    make_pool.<locals>._append_to_free_list, a function defined
                  inside make_pool (its code object lives in make_pool's
                  constants; the function object exists only once make_pool ran)
  MODE generator: Pool._append_to_free_list is a generator; the pool has two
                  of them (arenas), each resumed with send(size) for every
                  free; a finalizer resumes the other one while one runs
  MODE coroutine: the same with `async def`: two coroutines, each awaiting
                  the next size, resumed with send(size)
  MODE iterate:   Pool._append_to_free_list is a generator that takes its
                  sizes from a queue; the pool has two of them, each stepped by
                  a for loop in free(); a finalizer steps the other one while
                  one runs (3.12+ resume a generator a for loop steps inside
                  the interpreter loop, with no C frame in between)
  MODE await:     two coroutines of Pool._append_to_free_list, each awaited
                  for good by a serving coroutine (as a task's coroutine awaits
                  what it runs); free() sends the size to a server, whose await
                  resumes its coroutine (inside the interpreter loop on 3.12+)
  MODE spare:     the generator pool with one arena; a finalizer's free() while
                  it runs only creates a spare generator of the append, which
                  never starts: never re-entered, never corrupted
  MODE calm:      the method, but no garbage: never re-entered, never corrupted

--start-after FILE: print "ready", then wait until FILE exists before making
the pool (for a watcher attaching with -p: the function objects of the pool
do not exist yet, only their code).

TRUTH.json, written at exit, is the program's own account, kept with a
reentrancy counter (depth) in the pool:
  {"mode": ..., "appends": N, "reentries": N, "corrupted": bool,
   "spares": generators created while an arena ran (spare mode),
   "first_reentry": null or {"after_s": seconds since start,
                             "outer_append": the running activation's number,
                             "inner_append": the re-entering one's number}}
Every activation numbers itself (local `number`, 1, 2, ...), so a report
taken at a re-entry can be matched with the truth.
Exits 3 on corruption; 0 when --seconds (default 20) pass without one.
"""

import gc
import json
import random
import sys
import time

START = time.monotonic()


class FreeBlock:
    __slots__ = ("size",)

    def __init__(self, size):
        self.size = size


class Accounting:
    """The pool's reentrancy counter and the truth it leads to."""

    def __init__(self, mode):
        self.mode = mode
        self.depth = 0
        self.active = []
        self.appends = 0
        self.reentries = 0
        self.first_reentry = None
        self.spares = 0

    def enter(self):
        self.appends += 1
        number = self.appends
        self.depth += 1
        if self.depth > 1:
            self.reentries += 1
            if self.first_reentry is None:
                self.first_reentry = {"after_s": round(time.monotonic() - START, 4),
                                      "outer_append": self.active[-1],
                                      "inner_append": number}
        self.active.append(number)
        return number

    def leave(self):
        self.active.pop()
        self.depth -= 1

    def write(self, path, corrupted):
        with open(path + ".tmp", "w") as f:
            json.dump({"mode": self.mode, "appends": self.appends, "reentries": self.reentries,
                       "corrupted": corrupted, "spares": self.spares,
                       "first_reentry": self.first_reentry}, f)
        import os
        os.replace(path + ".tmp", path)


def insert(free_list, size, acct):
    """The append's body, shared by every mode."""
    number = acct.enter()
    index = 0
    while index < len(free_list) and free_list[index].size < size:
        index += 1
    record = FreeBlock(size)
    seen = [set(), set(), set()]       # may start the collector
    for i in range(3):                 # 3.12+ collect at a loop's back edge
        seen[i].add(i)
    free_list.insert(index, record)    # stale if a finalizer appended meanwhile
    acct.leave()
    return number


class Pool:
    def __init__(self, acct):
        self.free_list = [FreeBlock(0), FreeBlock(1 << 20)]
        self.acct = acct

    def _append_to_free_list(self, size):
        number = insert(self.free_list, size, self.acct)
        return number

    def free(self, size):
        self._append_to_free_list(size)


def running(arena):
    return arena.cr_running if hasattr(arena, "cr_running") else arena.gi_running


class GeneratorPool(Pool):
    def __init__(self, acct):
        Pool.__init__(self, acct)
        self.arenas = [self._append_to_free_list(), self._append_to_free_list()]
        for arena in self.arenas:
            arena.send(None)

    def _append_to_free_list(self):
        while True:
            size = yield
            number = insert(self.free_list, size, self.acct)
            del number

    def free(self, size):
        arena = self.arenas[size % 2]
        if running(arena):
            arena = self.arenas[1 - size % 2]
        if not running(arena):
            arena.send(size)


class SparePool(GeneratorPool):
    def __init__(self, acct):
        GeneratorPool.__init__(self, acct)
        self.spares = []

    def free(self, size):
        if running(self.arenas[0]):
            # Kept: closing one that never started throws GeneratorExit into
            # it, which 3.8-3.11 do by entering its frame.
            self.spares.append(self._append_to_free_list())
            self.acct.spares += 1
        else:
            self.arenas[0].send(size)


class NextSize:
    """What a coroutine of CoroutinePool awaits: the size sent to it."""

    def __await__(self):
        size = yield
        return size


class CoroutinePool(GeneratorPool):
    async def _append_to_free_list(self):
        while True:
            size = await NextSize()
            number = insert(self.free_list, size, self.acct)
            del number


def make_pool(acct):
    free_list = [FreeBlock(0), FreeBlock(1 << 20)]

    def _append_to_free_list(size):
        number = insert(free_list, size, acct)
        return number

    class NestedPool:
        def __init__(self):
            self.free_list = free_list

        def free(self, size):
            _append_to_free_list(size)

    return NestedPool()


# After make_pool: a bare _append_to_free_list finds the four above first
# (the hardware watches four at most).
class IterPool(Pool):
    def __init__(self, acct):
        Pool.__init__(self, acct)
        self.pending = [[], []]
        self.arenas = [self._append_to_free_list(0), self._append_to_free_list(1)]
        # Before any garbage: the for loop in free() is specialised by then.
        for size in range(8):
            self.free(size)

    def _append_to_free_list(self, which):
        while True:
            size = self.pending[which].pop()
            number = insert(self.free_list, size, self.acct)
            yield number

    def free(self, size):
        which = size % 2
        if running(self.arenas[which]):
            which = 1 - which
        if running(self.arenas[which]):
            return
        self.pending[which].append(size)
        for number in self.arenas[which]:
            break


class AwaitPool(Pool):
    def __init__(self, acct):
        Pool.__init__(self, acct)
        self.servers = [self._serve(), self._serve()]
        for server in self.servers:
            server.send(None)

    async def _append_to_free_list(self):
        while True:
            size = await NextSize()
            number = insert(self.free_list, size, self.acct)
            del number

    async def _serve(self):
        await self._append_to_free_list()

    def free(self, size):
        server = self.servers[size % 2]
        if running(server):
            server = self.servers[1 - size % 2]
        if not running(server) and server.cr_frame is not None:   # closed at exit
            server.send(size)


class Block:
    def __init__(self, pool, size):
        self.pool = pool
        self.size = size
        self.cycle = self              # garbage only the collector frees

    def __del__(self):
        self.pool.free(self.size)


def sorted_ok(free_list):
    previous = -1
    for block in free_list:
        if block.size < previous:
            return False
        previous = block.size
    return True


def main():
    truth = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else "method"
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 20
    if "--start-after" in sys.argv:
        go = sys.argv[sys.argv.index("--start-after") + 1]
        print("ready", flush=True)
        import os
        while not os.path.exists(go):
            time.sleep(0.01)
    acct = Accounting(mode)
    global START
    START = time.monotonic()
    if mode == "generator":
        pool = GeneratorPool(acct)
    elif mode == "coroutine":
        pool = CoroutinePool(acct)
    elif mode == "spare":
        pool = SparePool(acct)
    elif mode == "iterate":
        pool = IterPool(acct)
    elif mode == "await":
        pool = AwaitPool(acct)
    elif mode == "nested":
        pool = make_pool(acct)
    else:
        pool = Pool(acct)
    gc.set_threshold(20, 2, 2)
    rng = random.Random(12)
    step = 0
    while time.monotonic() - START < seconds:
        step += 1
        if mode != "calm" and rng.random() < 0.7:
            Block(pool, rng.randrange(1000))
        pool.free(rng.randrange(997))
        if not sorted_ok(pool.free_list):
            acct.write(truth, True)
            print("free list corrupted after %d appends (%d re-entries)"
                  % (acct.appends, acct.reentries), flush=True)
            sys.exit(3)
        if len(pool.free_list) > 64:
            del pool.free_list[1:33]
    acct.write(truth, False)
    print("done %d appends, %d re-entries" % (acct.appends, acct.reentries), flush=True)


if __name__ == "__main__":
    main()
