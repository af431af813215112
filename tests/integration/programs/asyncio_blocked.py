"""An event loop blocked by a coroutine that calls time.sleep(2) over and
over instead of awaiting: the loop thread never gets back to its selector,
so the loop's other tasks (asleep in asyncio.sleep) never run.

With the argument "eager" (3.12+), the blocker is an eager task stuck in its
first step, which CPython keeps apart from the scheduled tasks. With
"callback", it is no task but a plain callback (loop.call_soon) that sleeps.

With "callback", a trivial callback is queued before the blocking one, so
that the blocking one is the second of its loop iteration.

With "cpu", the blocker computes instead of sleeping: a CPU-bound step
that never awaits (a parse, a sort, a checksum in a handler), its stack
different at every look, the loop still inside the one step.

With "uvloop" (last), the loop is Debian's python3-uvloop's, which has no
_run_once: "run_once" is then {}.

extra: {"blocker": task name, "blocker_address": id(task),
        "loop_tid": native id of the loop's thread, "other_tasks": count,
        "loop": id(loop), "tasks": [_asyncio_truth.task_truth(task)] of
        every task of the loop, the blocker's chain at its time.sleep}
       (with "callback": {"callback": its function's name, "loop_tid", "tasks"})
       and "run_once": what asyncio's _run_once frame holds while the blocking
       step runs, read by the step itself: {"end_time": when the iteration
       left select (loop clock), "index": 1-based, "of": callbacks the
       iteration runs}
"""

import asyncio
import sys
import threading
import time

import _target
from _asyncio_truth import all_tasks, task_truth


async def idle():
    await asyncio.sleep(3600)


RUN_ONCE = {}


def note_run_once():
    """The innermost _run_once frame's end_time, i and ntodo, as asyncio
    itself holds them for the callback running now."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "_run_once":
        frame = frame.f_back
    if frame is not None:
        f_locals = frame.f_locals
        RUN_ONCE.update(end_time=f_locals["end_time"], index=f_locals["i"] + 1,
                        of=f_locals["ntodo"])


def checksum(block):
    total = 0
    for i, byte in enumerate(block):
        total = (total * 31 + byte + i) % 1000003
    return total


async def blocker(started):
    note_run_once()
    started.set()
    if sys.argv[2:] == ["cpu"]:
        block = bytes(range(256)) * 64
        while True:
            checksum(block)  # blocks the loop
    while True:
        time.sleep(2)  # blocks the loop


def blocking_callback(started):
    note_run_once()
    started.set()
    while True:
        time.sleep(2)  # blocks the loop


async def main(path):
    others = [asyncio.ensure_future(idle()) for _ in range(3)]
    await asyncio.sleep(0)
    started = threading.Event()
    tid = threading.get_native_id()
    holder = []

    if sys.argv[2:] == ["callback"]:
        def report_callback():
            started.wait()
            extra = {"callback": blocking_callback.__name__, "loop_tid": tid,
                     "tasks": len(others) + 1,   # and main itself
                     "run_once": RUN_ONCE}
            _target.write_report(path, _target.build_report("asyncio_blocked.py", [], extra))
            while True:
                time.sleep(3600)
        threading.Thread(target=report_callback, daemon=True).start()
        asyncio.get_running_loop().call_soon(lambda: None)
        asyncio.get_running_loop().call_soon(blocking_callback, started)
        await asyncio.sleep(3600)
        return others

    loop = asyncio.get_running_loop()

    def report():
        started.wait()
        while not holder:
            time.sleep(0.01)
        if sys.argv[2:] != ["cpu"]:     # a computing thread never settles
            _target.wait_settled()
        task = holder[0]()
        extra = {"blocker": task.get_name(), "blocker_address": id(task), "loop_tid": tid,
                 "other_tasks": len(others) + 1,   # and main itself
                 "run_once": RUN_ONCE, "loop": id(loop),
                 "tasks": [task_truth(t) for t in all_tasks(loop)]}
        _target.write_report(path, _target.build_report("asyncio_blocked.py", [], extra))
        while True:
            time.sleep(3600)
    threading.Thread(target=report, daemon=True).start()
    if sys.argv[2:] == ["eager"]:
        # Its first step runs inside create_task, which never returns;
        # 3.12 and 3.13 keep it in a registry of its own meanwhile.
        loop = asyncio.get_running_loop()
        loop.set_task_factory(asyncio.eager_task_factory)
        holder.append(lambda: asyncio.current_task(loop))
        loop.create_task(blocker(started), name="blocker")
    task = asyncio.ensure_future(blocker(started))
    task.set_name("blocker")
    holder.append(lambda: task)
    await asyncio.sleep(3600)
    return others


if __name__ == "__main__":
    if sys.argv[-1] == "uvloop":
        import uvloop
        uvloop.install()
        sys.argv.pop()
    sys.exit(asyncio.run(main(_target.report_path())))
