"""asyncio: a coroutine holding an asyncio.Lock calls a helper that takes
the same lock.

Source: the threading documentation's distinction between Lock and RLock
(a Lock acquired again by its holder blocks for ever), which asyncio
carries over without an RLock: asyncio.Lock is not reentrant, and a helper
that locks, called from code already holding the lock, waits for itself.
A service's periodic task keeps the loop's timer running, so the loop is
not idle.

Senior engineer: deadlock, certain: the main task waits in the helper's
`async with cache_lock` for the lock it holds itself in update()'s
`async with`; the heartbeat only sleeps and cannot release it. The loop's
thread still runs the heartbeat: the task is stuck, not the thread.
"""

import asyncio

import _field

cache_lock = None   # made in the running loop (3.8 and 3.9 bind a Lock to a loop)


async def store(value):
    async with cache_lock:
        return value


async def update(value):
    async with cache_lock:
        return await store(value)     # the same lock, again


async def heartbeat():
    while True:
        await asyncio.sleep(0.5)


async def main():
    global cache_lock
    cache_lock = asyncio.Lock()
    beat = asyncio.create_task(heartbeat())
    # The finding is the loop's thread's, which still runs the heartbeat:
    # the task is stuck, not the thread.
    _field.report_later(_field.expect("deadlock", "certain", threads=["MainThread"],
                                      objects=["lock"], stuck=[]),
                        objects={"lock": id(cache_lock)},
                        before=_field.main_blocked_in("select"))
    await update(1)
    beat.cancel()


if __name__ == "__main__":
    asyncio.run(main())
