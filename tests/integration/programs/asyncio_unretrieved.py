"""Done asyncio tasks whose exception nobody retrieved: "failed" raised
ValueError and is kept in a list, never awaited (asyncio would log "Task
exception was never retrieved" when it is collected); "seen" raised KeyError
and the program called its exception(); "fine" returned. A fourth task,
"waiter", stays pending.

extra: {"loop_tid", "tasks": [{"name", "address", "done", "exception",
        "log_traceback"}]}: log_traceback is what the task itself says
        (Future._log_traceback, the flag asyncio logs by).
"""

import asyncio
import sys
import threading

import _target


async def fail(exc):
    raise exc


async def fine():
    return 1


async def waiter():
    await asyncio.sleep(3600)


async def main(path):
    kept = [asyncio.ensure_future(fail(ValueError("lost"))),
            asyncio.ensure_future(fail(KeyError("seen"))),
            asyncio.ensure_future(fine()),
            asyncio.ensure_future(waiter())]
    for task, name in zip(kept, ("failed", "seen", "fine", "waiter")):
        task.set_name(name)
    await asyncio.sleep(0.1)
    kept[1].exception()
    tasks = []
    for task in kept:
        # exception() would clear the flag it reports on: the private
        # field, which the C Future exposes as _exception too, does not.
        exc = task._exception if task.done() else None
        tasks.append({"name": task.get_name(), "address": id(task), "done": task.done(),
                      "exception": type(exc).__name__ if exc is not None else None,
                      "log_traceback": bool(task._log_traceback)})
    extra = {"loop_tid": threading.get_native_id(), "tasks": tasks}
    _target.write_report(path, _target.build_report("asyncio_unretrieved.py", [], extra))
    await asyncio.sleep(3600)
    return kept


if __name__ == "__main__":
    sys.exit(asyncio.run(main(_target.report_path())))
