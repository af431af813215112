"""Target: an asyncio loop idle in select() with five suspended tasks, three
awaiting an Event nobody sets and two in asyncio.sleep for an hour. None of
them is on a thread's stack: what asyncio tooling reads of them lies on the
heap. The report's extra holds the ids of the main task, of the tasks and of
the loop's scheduled timer handles.

usage: python core_asyncio.py REPORT.json
"""

import asyncio
import sys

sys.dont_write_bytecode = True
import _target  # noqa: E402


async def waiter(event):
    await event.wait()


async def sleeper(n):
    await asyncio.sleep(3600 + n)


async def main(path):
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    tasks = [loop.create_task(waiter(event)) for _ in range(3)]
    tasks += [loop.create_task(sleeper(n)) for n in range(2)]
    await asyncio.sleep(0)  # every task has run to its first await
    extra = {"main_task": id(asyncio.current_task()),
             "tasks": [id(t) for t in tasks],
             "scheduled": [id(h) for h in loop._scheduled]}
    _target.write_report(path, _target.build_report("core_asyncio.py", main_frames=[],
                                                    extra=extra))
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main(_target.report_path()))
