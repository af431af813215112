"""asyncio: a token-bucket rate limiter. Requests wait in
Semaphore.acquire while a refill task, which sleeps between refills, gives
a permit back every 0.4 s.

Source: the rate-limiting recipe of aiolimiter and of many "asyncio rate
limit" answers (e.g. Stack Overflow 35196974): a semaphore started at zero
and released by a periodic task, so that requests go out at a fixed pace.

Senior engineer: not hung: the requests wait their turn, and the refiller
releases one every 0.4 s, so a look that spans a refill sees the loop make
progress. From the outside this differs from
asyncio_semaphore_leak.py only in what the sleeping task does when it
wakes, which is why `why` must watch it wake before it judges.
"""

import asyncio

import _field

tokens = None   # made in the running loop (3.8 and 3.9 bind primitives to a loop)
sent = 0


async def refill():
    while True:
        await asyncio.sleep(0.4)
        tokens.release()


async def request():
    global sent
    while True:
        await tokens.acquire()
        sent += 1


async def main():
    global tokens
    tokens = asyncio.Semaphore(0)
    refiller = asyncio.create_task(refill(), name="refill")
    requests = [asyncio.create_task(request(), name="request-%d" % n) for n in range(3)]
    _field.report_later(_field.expect("not_hung", None), before=_field.main_blocked_in("select"))
    await asyncio.gather(*requests)
    refiller.cancel()


if __name__ == "__main__":
    asyncio.run(main())
