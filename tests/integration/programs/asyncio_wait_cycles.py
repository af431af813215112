"""asyncio tasks that wait for each other for ever, each through something
only the next can do, and a control that looks the same but can still end:

    "a", "b": a holds a lock (inside `async with`) and waits for an Event
              that only b refers to; b waits for the lock to set the Event
    "x", "y", "z": x waits for lock_1, which y holds (inside `async with`)
              while it awaits task z; z waits in queue.get() on a Queue only
              x refers to (x would put into it once it had the lock)
    "peer_1", "peer_2": each awaits the other
    "c", "d": like a and b, but main keeps the Event too (main could set it)

The rest of the program (main) sleeps on a timer.

extra: {"loop_tid", "tasks": {name: id(task)}, "objects": {"lock", "event",
        "lock_1", "queue", "event_2": id(...)}, "outside": {"event", "queue",
        "event_2": the types of gc's referrers of it that are no part of the
        chains of the tasks named above (main's for event_2)}}
"""

import asyncio
import gc
import sys
import threading
import time

import _target
from _asyncio_truth import referrers_outside


async def hold_and_wait(lock, event, entered):
    async with lock:
        entered.set()
        await event.wait()


async def take_and_set(lock, event):
    async with lock:
        event.set()


async def take_and_put(lock, queue):
    async with lock:
        queue.put_nowait(1)


async def hold_and_await(lock, task, entered):
    async with lock:
        entered.set()
        await task


async def get(queue):
    return await queue.get()


async def await_peer(peers, me):
    await asyncio.sleep(0)
    await peers[1 - me]


async def pairs(tasks, objects, keep):
    """The tasks, made where no variable of main's keeps what they share
    (but event_2, which main is given to keep)."""
    for names, kept in ((("a", "b"), False), (("c", "d"), True)):
        lock, event, entered = asyncio.Lock(), asyncio.Event(), asyncio.Event()
        tasks[names[0]] = asyncio.ensure_future(hold_and_wait(lock, event, entered))
        await entered.wait()
        tasks[names[1]] = asyncio.ensure_future(take_and_set(lock, event))
        if kept:
            keep.append(event)
            objects["event_2"] = id(event)
        else:
            objects.update(lock=id(lock), event=id(event))
    lock, queue, entered = asyncio.Lock(), asyncio.Queue(), asyncio.Event()
    tasks["z"] = asyncio.ensure_future(get(queue))
    tasks["y"] = asyncio.ensure_future(hold_and_await(lock, tasks["z"], entered))
    await entered.wait()
    tasks["x"] = asyncio.ensure_future(take_and_put(lock, queue))
    objects.update(lock_1=id(lock), queue=id(queue))
    peers = []
    peers.extend(asyncio.ensure_future(await_peer(peers, i)) for i in range(2))
    tasks["peer_1"], tasks["peer_2"] = peers
    for name, task in tasks.items():
        task.set_name(name)


def report(path, tasks, objects, loop_tid):
    _target.wait_settled()
    ours = list(tasks.values())
    outside = {}
    for name in ("event", "queue", "event_2"):
        obj = [o for o in _objects() if id(o) == objects[name]][0]
        outside[name] = [type(r).__name__ for r in referrers_outside(obj, ours)]
        del obj
    extra = {"loop_tid": loop_tid,
             "tasks": {name: id(task) for name, task in tasks.items()},
             "objects": objects, "outside": outside}
    _target.write_report(path, _target.build_report("asyncio_wait_cycles.py", [], extra))
    while True:
        time.sleep(3600)


def _objects():
    return gc.get_objects()


async def main(path):
    tasks, objects, keep = {}, {}, []
    await pairs(tasks, objects, keep)
    for _ in range(10):
        await asyncio.sleep(0)
    threading.Thread(target=report, args=(path, tasks, objects, threading.get_native_id()),
                     daemon=True).start()
    await asyncio.sleep(3600)
    return keep


if __name__ == "__main__":
    sys.exit(asyncio.run(main(_target.report_path())))
