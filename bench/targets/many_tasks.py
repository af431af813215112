"""N tasks asleep on one event loop (each awaiting asyncio.sleep inside a
two-coroutine chain); prints "ready" once they are all suspended.

usage: many_tasks.py N"""
import asyncio
import sys


async def leaf():
    await asyncio.sleep(3600)


async def task_body():
    await leaf()


async def main(n):
    keep = [asyncio.ensure_future(task_body()) for _ in range(n)]
    for _ in range(3):
        await asyncio.sleep(0)
    print("ready", flush=True)
    await asyncio.sleep(3600)
    return keep


asyncio.run(main(int(sys.argv[1])))
