"""asyncio: a connection-limiting asyncio.Semaphore leaks its permits:
requests that fail return without release(), and once the permits are gone
every new request waits, while a heartbeat task keeps the loop's timer
going (so the loop never looks idle).

Source: the asyncio documentation of Semaphore ("The preferred way to use a
Semaphore is an async with statement"), and the connection-pool exhaustion
that form prevents (urllib3 issue #1252, a pool blocked forever after
exceptions, which semaphore_leak.py reproduces with threads). Here the
permit is taken with acquire() and given back only on success.

Senior engineer: probably hung, never_notified: three requests wait in
Semaphore.acquire with no timeout; no task will release a permit (the two
that took them ended with an exception), and the only task left that runs
at all is the heartbeat, which merely sleeps. It is "probable", not
certain, because the heartbeat (a coroutine of the same module) could, as
far as anything outside can tell, release the semaphore when it wakes. The
loop's thread still runs the heartbeat: the tasks are stuck, not the thread.
"""

import asyncio

import _field

limit = None   # made in the running loop (3.8 and 3.9 bind primitives to a loop)


async def fetch(n):
    await limit.acquire()
    if n < 2:
        raise ConnectionResetError("request %d: connection reset" % n)
    limit.release()          # reached only on success
    return n


async def heartbeat():
    while True:
        await asyncio.sleep(0.2)


async def main():
    global limit
    limit = asyncio.Semaphore(2)
    beat = asyncio.create_task(heartbeat(), name="heartbeat")
    failed = await asyncio.gather(fetch(0), fetch(1), return_exceptions=True)
    assert all(isinstance(e, ConnectionResetError) for e in failed), failed
    waiting = [asyncio.create_task(fetch(n), name="request-%d" % n) for n in (2, 3, 4)]
    _field.report_later(_field.expect("never_notified", "probable", threads=["MainThread"],
                                      objects=["sema"], stuck=[]),
                        objects={"sema": id(limit)},
                        before=_field.main_blocked_in("select"))
    await asyncio.gather(*waiting)
    beat.cancel()


if __name__ == "__main__":
    asyncio.run(main())
