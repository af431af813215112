"""Tasks suspended on plain Futures that something else holds, one holder
each: "by_task" awaits a Future the task "resolver" keeps in its local `fut`
while it sleeps; "by_timer" one a call_later handle will complete
(fut.set_result); "by_thread" one a thread keeps in its local `fut`;
"by_global" one only the module global HELD refers to; "by_partial" one
the global list KEPT holds and a functools.partial in the global LATER
refers to (a C object pyscope does not look into: it can only count that
reference).

extra: {"loop_tid", "tasks": {name: {"address"}},
        "resolver": {"function", "file", "line"},
        "thread": {"tid", "function", "file", "line"},
        "timer": {"callback", "due"} (loop.time() it is due),
        "partial_refs": referrers of by_partial's Future that are no part of
                        its own task (gc's view), KEPT's list among them}
"""

import asyncio
import functools
import gc
import sys
import threading

import _target

HELD = None
LATER = None
KEPT = []
BOX = []
THREAD = {}


async def wait_on(fut):
    await fut


async def resolve(fut):
    await asyncio.sleep(3600)
    fut.set_result(None)


def keep():
    fut = BOX.pop()
    THREAD.update(tid=threading.get_native_id(), frame=sys._getframe())
    THREAD["ready"].set()
    THREAD["stop"].wait()
    fut.set_result(None)


def start(loop, name, fut):
    task = loop.create_task(wait_on(fut))
    task.set_name(name)
    return task


def pair(loop):
    fut = loop.create_future()
    resolver = loop.create_task(resolve(fut))
    resolver.set_name("resolver")
    return start(loop, "by_task", fut), resolver


def others(fut, task):
    """Referrers of fut outside its waiting task's own chain."""
    mine = {id(task), id(task.get_coro()), id(task.get_coro().cr_frame)}
    return [r for r in gc.get_referrers(fut)
            if id(r) not in mine and not type(r).__name__.endswith("FutureIter")
            and r is not sys._getframe()]


def setup(loop):
    """The five Futures and their holders, made where no variable of main
    outlives them (a frame's f_locals would be one more holder)."""
    global HELD, LATER
    tasks = {}
    tasks["by_task"], resolver = pair(loop)
    for name in ("by_timer", "by_thread", "by_global", "by_partial"):
        fut = loop.create_future()
        tasks[name] = start(loop, name, fut)
        if name == "by_timer":
            handle = loop.call_later(3600, fut.set_result, None)
        elif name == "by_thread":
            BOX.append(fut)
        elif name == "by_global":
            HELD = fut
        else:
            LATER = functools.partial(print, fut)
            KEPT.append(fut)
    del fut
    THREAD.update(ready=threading.Event(), stop=threading.Event())
    threading.Thread(target=keep, daemon=True).start()
    THREAD["ready"].wait()
    return tasks, resolver, handle


async def main(path):
    loop = asyncio.get_running_loop()
    tasks, resolver, handle = setup(loop)
    await asyncio.sleep(0.1)
    frame = resolver.get_coro().cr_frame
    resolver_at = {"function": _target.function_name(frame.f_code),
                   "file": frame.f_code.co_filename, "line": frame.f_lineno}
    tframe = THREAD["frame"]
    thread_at = {"tid": THREAD["tid"], "function": _target.function_name(tframe.f_code),
                 "file": tframe.f_code.co_filename, "line": tframe.f_lineno}
    partial_refs = len(others(LATER.args[0], tasks["by_partial"]))
    extra = {"loop_tid": threading.get_native_id(),
             "tasks": {n: {"address": id(t)} for n, t in tasks.items()},
             "resolver": resolver_at, "thread": thread_at,
             "timer": {"callback": handle._callback.__name__, "due": handle.when()},
             "partial_refs": partial_refs}
    del frame, tframe
    _target.write_report(path, _target.build_report("asyncio_future_holders.py", [], extra))
    await asyncio.sleep(3600)
    return tasks, resolver, handle


if __name__ == "__main__":
    sys.exit(asyncio.run(main(_target.report_path())))
