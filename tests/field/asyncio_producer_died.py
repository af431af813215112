"""asyncio: a consumer awaits queue.get() forever because its producer task
died of an exception nobody retrieved.

Source: the asyncio documentation's "Detect never-retrieved exceptions"
(an exception in a task is only logged when the task is garbage-collected),
and the many reports of consumers hanging after a producer failed (e.g.
Stack Overflow 60045289 "asyncio.Queue consumer hangs"). Here the main task
keeps a reference to the dead producer, so nothing is even logged.

Senior engineer: hung for good, never_notified, certain: the loop's only
thread sleeps in its selector with no timer and no I/O; the consumer awaits
Queue.get on a queue only the dead producer would fill, and the main task
awaits the consumer.
"""

import asyncio

import _field


async def produce(q):
    await q.put(1)
    raise ValueError("bad record")


async def consume(q):
    while True:
        await q.get()


async def main():
    q = asyncio.Queue()
    producer = asyncio.ensure_future(produce(q))
    consumer = asyncio.ensure_future(consume(q))
    _field.report_later(_field.expect("never_notified", "certain", threads=["MainThread"]))
    await consumer
    await producer


if __name__ == "__main__":
    asyncio.run(main())
