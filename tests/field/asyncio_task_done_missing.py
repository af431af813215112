"""asyncio: await queue.join() never returns because a worker skips
task_done() on one path, while a heartbeat task keeps the loop's timer
going.

Source: the asyncio documentation's Queue example (workers call
queue.task_done() for every item; "the count of unfinished tasks goes down
whenever a consumer calls task_done()") and the reports of join() hanging
when a `continue` skips it (e.g. Stack Overflow 43154003, "asyncio queue
join hangs"); task_done_missing.py is the threads version.

Senior engineer: hung for good, never_notified, certain: main waits in
Queue.join with items never marked done; the worker, which alone could
mark them, waits in Queue.get on that queue, which nobody else can put
into (nothing but the two tasks refers to it). The heartbeat cannot reach
the queue.
"""

import asyncio

import _field


async def worker(queue):
    while True:
        item = await queue.get()
        if item % 3 == 0:
            continue                  # skips task_done(): join() waits for ever
        queue.task_done()


async def heartbeat():
    while True:
        await asyncio.sleep(0.2)


async def main():
    queue = asyncio.Queue()
    beat = asyncio.create_task(heartbeat(), name="heartbeat")
    consumer = asyncio.create_task(worker(queue), name="worker")
    for item in range(7):
        queue.put_nowait(item)
    _field.report_later(_field.expect("never_notified", "certain", threads=["MainThread"],
                                      objects=["queue"], stuck=[]),
                        objects={"queue": id(queue)},
                        before=_field.main_blocked_in("select"))
    await queue.join()
    consumer.cancel()
    beat.cancel()


if __name__ == "__main__":
    asyncio.run(main())
