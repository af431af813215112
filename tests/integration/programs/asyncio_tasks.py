"""Tasks suspended in each kind of await, on two event loops (the main
thread's and a second thread's), reported as asyncio sees them.

extra: {"loops": [{"loop": id(loop), "tid": native id of its thread,
                   "tasks": [{"address": id(task), "name": ..., "chain": [...],
                              "awaits_task": id or null, "gather_children": [...],
                              "sleep_due": loop.time() its asyncio.sleep ends, or null,
                              "orphan": nothing else refers to the Future it awaits}]}]}

A task's chain is its coroutine, then what each coroutine awaits
(cr_await, gi_yieldfrom, an async generator's ag_await), innermost first,
with each frame's function (co_qualname on 3.11+), file and f_lineno.
With the argument "uvloop", both loops are uvloop's.
"""

import asyncio
import gc
import sys
import threading
import time

import _target

AGENS = []


def chain_of(task):
    return [{"function": _target.function_name(frame.f_code),
             "file": frame.f_code.co_filename, "line": frame.f_lineno}
            for frame, _ in chain_frames(task)]


def chain_frames(task):
    """(frame, coroutine or generator) of each link, innermost first."""
    frames = []
    obj = task.get_coro()
    for _ in range(64):
        if asyncio.iscoroutine(obj) and hasattr(obj, "cr_frame"):
            frame, nxt = obj.cr_frame, obj.cr_await
        elif hasattr(obj, "gi_frame"):
            frame, nxt = obj.gi_frame, obj.gi_yieldfrom
        elif type(obj).__name__ == "async_generator_asend":
            # The asend object does not show its generator: the one that is
            # running (awaiting) is ours.
            gens = [g for g in AGENS if g.ag_await is not None]
            assert len(gens) == 1, gens
            frame, nxt = gens[0].ag_frame, gens[0].ag_await
        else:
            break
        if frame is None:
            break
        frames.append((frame, gens[0] if type(obj).__name__ == "async_generator_asend"
                       else obj))
        obj = nxt
    return list(reversed(frames))


async def sleeper():
    await asyncio.sleep(3600)


async def getter(queue):
    return await queue.get()


async def event_waiter(event):
    await event.wait()


async def lock_waiter(lock):
    async with lock:
        pass


async def future_waiter(future):
    await future


async def child():
    await asyncio.sleep(3600)


async def parent(task):
    await task


async def await_peer(peers, me):
    await asyncio.sleep(0)
    await peers[1 - me]


async def grouped():
    async with asyncio.TaskGroup() as group:
        for _ in range(2):
            group.create_task(child())


async def gatherer():
    await asyncio.gather(child(), child())


async def ticker():
    while True:
        await asyncio.sleep(3600)
        yield 1


async def consumer():
    gen = ticker()
    AGENS.append(gen)
    async for _ in gen:
        pass


def only_held_by(task, waiter):
    """Nothing but the task, its chain's frames and the FutureIter it
    awaits refers to waiter (gc's view)."""
    # Its one done callback is the task's own wake-up.
    if type(waiter) is not asyncio.Future or len(waiter._callbacks or ()) != 1:
        return False
    allowed = {id(task), id(sys._getframe()), id(sys._getframe(1))}
    for frame, obj in chain_frames(task):
        allowed.update((id(frame), id(obj)))
    for ref in gc.get_referrers(waiter):
        if id(ref) not in allowed and not type(ref).__name__.endswith("FutureIter"):
            return False
    return True


def timer_due(loop, waiter):
    """asyncio.sleep's timer: when the scheduled handle that sets the future
    the task waits on is due (uvloop's timers are not visible from Python).
    A function of its own: a comprehension in snapshot() would keep waiter
    in a closure cell (up to 3.11), a reference of the program's own."""
    return [h.when() for h in getattr(loop, "_scheduled", ())
            if h._args and h._args[0] is waiter]


def snapshot(loop, tid):
    tasks = []
    for task in asyncio.all_tasks(loop):
        waiter = getattr(task, "_fut_waiter", None)
        orphan = only_held_by(task, waiter)
        children = [id(c) for c in getattr(waiter, "_children", [])]
        # A TaskGroup's owner awaits, in __aexit__, the group's children.
        group = [f.f_locals.get("self") for f, _ in chain_frames(task)
                 if f.f_code.co_name in ("__aexit__", "_aexit")]
        if group and isinstance(group[-1], getattr(asyncio, "TaskGroup", ())):
            children = [id(c) for c in group[-1]._tasks]
        due = timer_due(loop, waiter)
        tasks.append({"address": id(task), "name": task.get_name(), "chain": chain_of(task),
                      "awaits_task": id(waiter) if isinstance(waiter, asyncio.Task) else None,
                      "gather_children": children, "sleep_due": due[0] if due else None,
                      "orphan": orphan})
    return {"loop": id(loop), "tid": tid, "tasks": tasks}


async def main_loop(done, out):
    loop = asyncio.get_running_loop()
    queue, event, lock = asyncio.Queue(), asyncio.Event(), asyncio.Lock()
    await lock.acquire()
    future = loop.create_future()
    keep = [asyncio.ensure_future(sleeper()), asyncio.ensure_future(getter(queue)),
            asyncio.ensure_future(event_waiter(event)), asyncio.ensure_future(lock_waiter(lock)),
            asyncio.ensure_future(future_waiter(future)), asyncio.ensure_future(gatherer()),
            asyncio.ensure_future(consumer())]
    # A future nobody else holds: nothing can ever complete it.
    orphan = asyncio.ensure_future(future_waiter(loop.create_future()))
    orphan.set_name("orphan")
    keep.append(orphan)
    inner = asyncio.ensure_future(child())
    inner.set_name("inner")
    keep.append(asyncio.ensure_future(parent(inner)))
    # Two tasks awaiting each other: a cycle that never ends.
    peers = []
    peers.extend(asyncio.ensure_future(await_peer(peers, i)) for i in range(2))
    if hasattr(asyncio, "TaskGroup"):
        keep.append(asyncio.ensure_future(grouped()))
    keep[0].set_name("sleeper")
    for _ in range(5):
        await asyncio.sleep(0)
    out.append((loop, threading.get_native_id()))
    done.set()
    await asyncio.sleep(3600)
    return keep


def second_thread(started, out):
    async def run():
        keep = [asyncio.ensure_future(sleeper()) for _ in range(2)]
        for _ in range(3):
            await asyncio.sleep(0)
        out.append((asyncio.get_running_loop(), threading.get_native_id()))
        started.set()
        await asyncio.sleep(3600)
        return keep
    asyncio.run(run())


def main():
    path = _target.report_path()
    if sys.argv[2:] == ["uvloop"]:
        import uvloop
        uvloop.install()
    loops = []
    started = threading.Event()
    threading.Thread(target=second_thread, args=(started, loops), name="loop-2",
                     daemon=True).start()
    started.wait()
    done = threading.Event()

    def report():
        done.wait()
        _target.wait_settled()
        # The loops are idle in their selectors: their tasks stay as read.
        extra = {"loops": [snapshot(loop, tid) for loop, tid in loops]}
        _target.write_report(path, _target.build_report("asyncio_tasks.py", [], extra))
        while True:
            time.sleep(3600)
    threading.Thread(target=report, daemon=True).start()
    asyncio.run(main_loop(done, loops))


if __name__ == "__main__":
    sys.exit(main())
