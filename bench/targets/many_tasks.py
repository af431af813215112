"""N tasks on one event loop, each inside a two-coroutine chain, awaiting
asyncio.sleep ("sleep", the default) or a Future of its own that main keeps
in a dict, the way an RPC client keeps its pending requests ("future":
N - 1 of them, so that with main's task all N are shown in detail and
their holders looked for); prints "ready" once they are all suspended.

usage: many_tasks.py N [sleep|future]"""
import asyncio
import sys


async def leaf(pending, i):
    if pending is None:
        await asyncio.sleep(3600)
    else:
        fut = asyncio.get_running_loop().create_future()
        pending[i] = fut
        await fut


async def task_body(pending, i):
    await leaf(pending, i)


async def main(n, kind):
    pending = {} if kind == "future" else None
    keep = [asyncio.ensure_future(task_body(pending, i))
            for i in range(n if pending is None else n - 1)]
    for _ in range(3):
        await asyncio.sleep(0)
    print("ready", flush=True)
    await asyncio.sleep(3600)
    return keep


asyncio.run(main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "sleep"))
