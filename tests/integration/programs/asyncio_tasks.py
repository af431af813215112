"""Tasks suspended in each kind of await, on two event loops (the main
thread's and a second thread's), reported as asyncio sees them.

extra: {"asyncio_file": the file holding _asyncio (its extension module or the
        interpreter), "loops": [{"loop": id(loop), "tid": native id of its thread,
                   "tasks": [_asyncio_truth.task_truth(task), with
                             "sleep_due": loop.time() its asyncio.sleep ends, or null,
                             "orphan": nothing else refers to the Future it awaits]}]}

A task's chain is its coroutine, then what each coroutine awaits
(cr_await, gi_yieldfrom, an async generator's ag_await), innermost first,
with each frame's function (co_qualname on 3.11+), file and f_lineno; its
stack is what Task.get_stack() says.
With the argument "uvloop", both loops are uvloop's. With "pytask", every
task is asyncio's pure-Python Task (asyncio.tasks._PyTask, through each
loop's task factory); with "nocext", _asyncio cannot be imported, so that
asyncio is pure Python throughout (its Futures and running loop too).
"""

import sys

if sys.argv[2:] == ["nocext"]:
    sys.modules["_asyncio"] = None      # asyncio falls back to its Python classes

import asyncio
import gc
import os
import threading
import time

import _target
from _asyncio_truth import AGENS, all_tasks, referrers_outside, task_truth, timer_due


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
    return not referrers_outside(waiter, [task], allowed=[sys._getframe(1)])


def snapshot(loop, tid):
    tasks = []
    for task in all_tasks(loop):
        truth = task_truth(task)
        waiter = getattr(task, "_fut_waiter", None)
        truth.update(sleep_due=timer_due(loop, waiter), orphan=only_held_by(task, waiter))
        tasks.append(truth)
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


def asyncio_file():
    """The file holding the _asyncio module: its extension module, or the
    interpreter when it is built in (null without _asyncio)."""
    module = sys.modules.get("_asyncio")
    if module is None:
        return None
    return os.path.realpath(getattr(module, "__file__", None) or sys.executable)


def pure_tasks(loop):
    """With "pytask": the loop makes asyncio's pure-Python Tasks."""
    if sys.argv[2:] == ["pytask"]:
        loop.set_task_factory(lambda loop, coro, **kw: asyncio.tasks._PyTask(coro, loop=loop, **kw))
    return loop


def run_loop(coro):
    """asyncio.run, on a loop made to run only pure-Python tasks if asked
    (asyncio.run makes its main task before the program could set one)."""
    if sys.argv[2:] != ["pytask"]:
        return asyncio.run(coro)
    loop = pure_tasks(asyncio.new_event_loop())
    asyncio.set_event_loop(loop)
    return loop.run_until_complete(coro)


def second_thread(started, out):
    async def run():
        keep = [asyncio.ensure_future(sleeper()) for _ in range(2)]
        for _ in range(3):
            await asyncio.sleep(0)
        out.append((asyncio.get_running_loop(), threading.get_native_id()))
        started.set()
        await asyncio.sleep(3600)
        return keep
    run_loop(run())


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
        extra = {"loops": [snapshot(loop, tid) for loop, tid in loops],
                 "asyncio_file": asyncio_file()}
        _target.write_report(path, _target.build_report("asyncio_tasks.py", [], extra))
        while True:
            time.sleep(3600)
    threading.Thread(target=report, daemon=True).start()
    run_loop(main_loop(done, loops))


if __name__ == "__main__":
    sys.exit(main())
