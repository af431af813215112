"""Two asyncio tasks that take two locks in opposite orders, each inside
`async with` (the classic lock-order deadlock, in one event loop): "first"
holds lock_a and waits for lock_b, "second" holds lock_b and waits for
lock_a. The rest of the program sleeps on a timer.

extra: {"loop_tid", "tasks": {name: id(task)}, "locks": {name: id(lock)}}
"""

import asyncio
import sys
import threading

import _target


async def take(mine, other, i_have, they_have):
    async with mine:
        i_have.set()
        await they_have.wait()
        async with other:
            pass


async def main(path):
    lock_a, lock_b = asyncio.Lock(), asyncio.Lock()
    a_has, b_has = asyncio.Event(), asyncio.Event()
    tasks = {"first": asyncio.ensure_future(take(lock_a, lock_b, a_has, b_has)),
             "second": asyncio.ensure_future(take(lock_b, lock_a, b_has, a_has))}
    for name, task in tasks.items():
        task.set_name(name)
    # Until each waits in the other's lock.
    while not (lock_a._waiters and lock_b._waiters):
        await asyncio.sleep(0.01)
    extra = {"loop_tid": threading.get_native_id(),
             "tasks": {name: id(task) for name, task in tasks.items()},
             "locks": {"lock_a": id(lock_a), "lock_b": id(lock_b)}}
    _target.write_report(path, _target.build_report("asyncio_lock_cycle.py", [], extra))
    await asyncio.sleep(3600)
    return tasks


if __name__ == "__main__":
    sys.exit(asyncio.run(main(_target.report_path())))
