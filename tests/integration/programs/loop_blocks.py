"""Target for record's loop-blocking episodes: an event loop (thread "loop")
that idles (a timer every 10 ms) until the file REPORT.json.go exists, then
blocks itself from inside the coroutine blocker() with time.sleep(0.3)
exactly 3 times and with time.sleep(0.02), under the 100 ms threshold,
8 times, idling between blocks, then idles for good.

When done it writes REPORT.json.blocks: the wall-clock start and the
measured duration of each long block, the short ones' count, and the
blocking coroutine's function and the line of its long time.sleep.

With the argument "uvloop", the loop is uvloop's.

usage: python loop_blocks.py REPORT.json [uvloop]
"""

import asyncio
import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

LONG, SHORT = 0.3, 0.02
N_LONG, N_SHORT = 3, 8


async def blocker(path):
    while not os.path.exists(path + ".go"):
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    long_blocks = []
    for _ in range(N_LONG):
        start, t0 = time.time(), time.perf_counter()
        time.sleep(LONG)  # long-block
        long_blocks.append({"start_unix": start, "seconds": time.perf_counter() - t0})
        await asyncio.sleep(0.15)
    for _ in range(N_SHORT):
        time.sleep(SHORT)
        await asyncio.sleep(0.08)
    _target.write_report(path + ".blocks", {
        "long": long_blocks, "short": N_SHORT, "short_seconds": SHORT,
        "function": _target.function_name(blocker.__code__),
        "line": _target.marker_line(blocker, "# long-block")})
    while True:
        await asyncio.sleep(0.01)


def run_loop(path, started):
    if sys.argv[2:] == ["uvloop"]:
        import uvloop
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    loop.call_soon(started.set)
    loop.run_until_complete(loop.create_task(blocker(path), name="blocker"))


def main_thread():
    path = _target.report_path()
    started = threading.Event()
    thread = threading.Thread(target=run_loop, args=(path, started), name="loop", daemon=True)
    thread.start()
    started.wait()
    _target.park(__file__, path, settle=False, extra={"thread": "loop"})


if __name__ == "__main__":
    main_thread()
