"""asyncio tasks waiting on what nothing else in the program can reach, and
controls that look the same but can still be woken:

    "consumer": queue.get() on a Queue its producer shared with it alone;
                the producer raised and is gone (its exception is kept in
                `kept`, never retrieved)
    "waiter": event.wait() on an Event it made itself
    "cond_waiter": `async with cond: await cond.wait()` on a Condition only
                it refers to
    "sem_waiter": `async with sem:` on a Semaphore(1) whose one permit a
                task took with sem.acquire() and never released: it raised
    "fed": queue.get() on a Queue main still holds (main could put)
    "timer_waiter": event.wait() on an Event a call_later handle will set
    "timed_waiter": asyncio.wait_for(event.wait(), 600) on an Event nothing
                else refers to (the wait ends at its deadline)

The loop also runs main, asleep on a timer.

extra: {"loop_tid", "tasks": {role: {"address", "object": id of what it
        waits on, "type": its class, "method": "Class.method" it waits in,
        "outside": gc's referrers of the object that are no part of the
        waiting tasks' chains nor frames of the tracebacks of finished tasks
        (their types; null when it waits in no method of an object)}}}
"""

import asyncio
import sys
import threading
import time

import _target
from _asyncio_truth import all_tasks, primitive, referrers_outside, traceback_frames


async def get(queue):
    return await queue.get()


async def produce(queue):
    await asyncio.sleep(0)
    raise RuntimeError("the producer died")


async def wait_alone():
    ready = asyncio.Event()
    await ready.wait()


async def wait_condition(cond):
    async with cond:
        await cond.wait()


async def leak(sem):
    await sem.acquire()
    raise RuntimeError("died holding the permit")


async def enter(sem):
    async with sem:
        pass


async def wait_event(event):
    await event.wait()


async def wait_timed(event):
    await asyncio.wait_for(event.wait(), 600)


def start(loop, kept):
    """The tasks, made where no variable of main's keeps what they share."""
    tasks = {}
    queue = asyncio.Queue()
    tasks["consumer"] = asyncio.ensure_future(get(queue))
    kept.append(asyncio.ensure_future(produce(queue)))
    tasks["waiter"] = asyncio.ensure_future(wait_alone())
    tasks["cond_waiter"] = asyncio.ensure_future(wait_condition(asyncio.Condition()))
    sem = asyncio.Semaphore(1)
    kept.append(asyncio.ensure_future(leak(sem)))
    tasks["sem_waiter"] = asyncio.ensure_future(enter(sem))
    event = asyncio.Event()
    loop.call_later(3600, event.set)
    tasks["timer_waiter"] = asyncio.ensure_future(wait_event(event))
    tasks["timed_waiter"] = asyncio.ensure_future(wait_timed(asyncio.Event()))
    for name, task in tasks.items():
        task.set_name(name)
    return tasks


def waiting_on(loop, obj):
    """The tasks waiting in a method of obj (a function of its own: a
    comprehension would keep obj in a cell up to 3.11, one more referrer)."""
    out = []
    for task in all_tasks(loop):
        if primitive(task)[1] is obj:
            out.append(task)
    return out


def report(path, loop, tasks, kept, loop_tid):
    _target.wait_settled()
    facts = {}
    for role, task in tasks.items():
        method, obj = primitive(task)
        outside = None
        if obj is not None:     # (up to 3.11 wait_for runs event.wait() as a task of its own)
            dead = traceback_frames(kept)
            outside = [type(r).__name__ for r in referrers_outside(
                obj, waiting_on(loop, obj), allowed=dead)]
            del dead
        facts[role] = {"address": id(task), "object": id(obj), "type": type(obj).__name__,
                       "method": method, "outside": outside}
        del obj
    extra = {"loop_tid": loop_tid, "tasks": facts}
    _target.write_report(path, _target.build_report("asyncio_orphans.py", [], extra))
    while True:
        time.sleep(3600)


async def main(path):
    loop = asyncio.get_running_loop()
    kept = []
    tasks = start(loop, kept)
    queue = asyncio.Queue()
    tasks["fed"] = asyncio.ensure_future(get(queue))
    tasks["fed"].set_name("fed")
    for _ in range(10):
        await asyncio.sleep(0)
    threading.Thread(target=report, args=(path, loop, tasks, kept, threading.get_native_id()),
                     daemon=True).start()
    await asyncio.sleep(3600)
    return kept, queue


if __name__ == "__main__":
    sys.exit(asyncio.run(main(_target.report_path())))
