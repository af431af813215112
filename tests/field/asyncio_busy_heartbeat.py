"""asyncio: the permits of a connection-limiting asyncio.Semaphore leak
(as in asyncio_semaphore_leak.py), while a periodic stats task wakes every
0.25 s and spends tens of milliseconds on the loop's thread computing
latency percentiles before it sleeps again.

Source: the asyncio documentation's "Developing with asyncio" (CPU-bound
code called from a coroutine runs on the loop's thread and holds it up),
and the common metrics task of aiohttp and FastAPI services that sorts a
window of request latencies in place to report p50/p99. Such a step makes
the loop's thread run often and for a while, so a look taken just after
the task wakes finds the loop inside its step rather than in its selector.

Senior engineer: probably hung, never_notified: three requests wait in
Semaphore.acquire with no timeout; the two that took the permits ended with
an exception, and the only task that still runs is the stats task, which
reads latencies and sleeps but never touches the semaphore. The loop's
thread runs a fair share of the time, yet nothing it runs can move the
requests: "the process used CPU" is not progress of the stuck tasks.
Probable rather than certain, as for the heartbeat of the plain leak.
"""

import asyncio
import random

import _field

limit = None   # made in the running loop (3.8 and 3.9 bind primitives to a loop)
latencies = [random.random() for _ in range(60000)]
report = {}


async def fetch(n):
    await limit.acquire()
    if n < 2:
        raise ConnectionResetError("request %d: connection reset" % n)
    limit.release()          # reached only on success
    return n


async def stats():
    while True:
        await asyncio.sleep(0.25)
        # Runs on the loop's thread: a copy, a shuffle and a sort of the window.
        window = list(latencies)
        random.shuffle(window)
        window.sort()
        report["p50"] = window[len(window) // 2]
        report["p99"] = window[len(window) * 99 // 100]


async def main():
    global limit
    limit = asyncio.Semaphore(2)
    stats_task = asyncio.create_task(stats(), name="stats")
    failed = await asyncio.gather(fetch(0), fetch(1), return_exceptions=True)
    assert all(isinstance(e, ConnectionResetError) for e in failed), failed
    waiting = [asyncio.create_task(fetch(n), name="request-%d" % n) for n in (2, 3, 4)]
    _field.report_later(_field.expect("never_notified", "probable", threads=["MainThread"],
                                      objects=["sema"], stuck=[]),
                        objects={"sema": id(limit)},
                        before=_field.main_blocked_in("select"))
    await asyncio.gather(*waiting)
    stats_task.cancel()


if __name__ == "__main__":
    asyncio.run(main())
