"""asyncio and threads: a coroutine blocks the event loop's thread on an
executor Future's result(), and the executor's worker waits for a coroutine
it handed to that same loop with run_coroutine_threadsafe().

Source: the asyncio documentation, "Developing with asyncio": run blocking
work with loop.run_in_executor() and await it, never block the loop's
thread; and run_coroutine_threadsafe() returns a concurrent.futures.Future
that only the loop's thread completes, when it next runs its callbacks.
The two together are the classic sync-over-async deadlock of code that
mixes a thread pool with a loop (a library's sync wrapper calling back into
async code).

Senior engineer: deadlock between MainThread (the loop's thread, blocked
in pool_future.result() inside main()) and the pool's worker (blocked in the
result() of the Future run_coroutine_threadsafe returned, which only the
loop's thread can complete: its callback waits in the loop's ready queue).
Probable rather than certain: nothing in either Future records who will
complete it; that is inferred from what each thread can reach.
"""

import asyncio
import concurrent.futures
import time

import _field

pending = {}


async def lookup(key):
    return key.upper()


def sync_lookup(loop, key):
    while "pool_future" not in pending:   # main() is about to block on it
        time.sleep(0.001)
    done = asyncio.run_coroutine_threadsafe(lookup(key), loop)
    _field.report_later(_field.expect("deadlock", "probable", threads=["MainThread", "worker_0"],
                                      objects=["pool_future", "done"]),
                        objects={"pool_future": id(pending["pool_future"]), "done": id(done)})
    return done.result()              # needs the loop's thread to run lookup()


async def main():
    loop = asyncio.get_running_loop()
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="worker")
    pending["pool_future"] = pool_future = pool.submit(sync_lookup, loop, "key")
    return pool_future.result()       # blocks the loop's thread: lookup() never runs


if __name__ == "__main__":
    asyncio.run(main())
