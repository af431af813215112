"""Target for `pyscope record --async`: an event loop (thread "loop") whose
tasks take turns burning CPU, so that what each task runs, and for how long,
is known.

    main (awaits gather of heavy and light)
      heavy: burns 30 ms, yields, again
      light (awaits the task inner)
        inner: burns 10 ms, yields, again
    sleeper: asyncio.sleep(3600), awaited by no task, never runs
    a plain callback (loop.call_soon, no task) burns 5 ms every round

Each burst is logged as "MONOTONIC_END NAME SECONDS" to REPORT.json.log, so
that a test can tell what share of the time each task really had, even on a
machine short of CPU. The report's extra gives each burning task's logical
stack as record --async should show it (outermost first, up to burn()), and
the suspended ones' as they wait.

usage: python rec_async.py REPORT.json
"""

import asyncio
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

LOG = None


def burn(name, seconds):
    start = time.perf_counter()
    end = start + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    LOG.write("%.6f %s %.6f\n" % (time.monotonic(), name, time.perf_counter() - start))
    return x


def plain_callback(loop):
    burn("callback", 0.005)
    loop.call_later(0.04, plain_callback, loop)


async def worker(name, seconds, started=None):
    if started is not None:
        # Its first step: light awaits it, main the gather, by now.
        started.set()
    while True:
        burn(name, seconds)
        await asyncio.sleep(0)


async def light(started):
    await asyncio.create_task(worker("inner", 0.010, started), name="inner")


async def sleeper():
    await asyncio.sleep(3600)


async def main(started):
    asyncio.current_task().set_name("main")
    loop = asyncio.get_running_loop()
    loop.call_soon(plain_callback, loop)
    sleeping = asyncio.create_task(sleeper(), name="sleeper")
    await asyncio.gather(asyncio.create_task(worker("heavy", 0.030), name="heavy"),
                         asyncio.create_task(light(started), name="light"))
    await sleeping


def run_loop(started):
    asyncio.run(main(started))


def stacks():
    """Logical stacks, outermost first: each burning task's down to burn(),
    and each task suspended for good down to its innermost coroutine of this
    file (what follows is asyncio's own)."""
    def name(f):
        return _target.function_name(f.__code__)
    running = {
        "heavy": ["<task main>", name(main), "<task heavy>", name(worker), name(burn)],
        "inner": ["<task main>", name(main), "<task light>", name(light), "<task inner>",
                  name(worker), name(burn)],
    }
    waiting = {"sleeper": ["<task sleeper>", name(sleeper)]}
    return running, waiting


def main_thread():
    global LOG
    path = _target.report_path()
    LOG = open(path + ".log", "w", buffering=1)
    started = threading.Event()
    thread = threading.Thread(target=run_loop, args=(started,), name="loop", daemon=True)
    thread.start()
    started.wait()
    running, waiting = stacks()
    _target.park(__file__, path, settle=False,
                 extra={"thread": "loop", "native_id": thread.native_id
                        if hasattr(thread, "native_id") else None,
                        "running": running, "waiting": waiting,
                        "callback": _target.function_name(plain_callback.__code__),
                        "loop_function": _target.function_name(run_loop.__code__)})


if __name__ == "__main__":
    main_thread()
