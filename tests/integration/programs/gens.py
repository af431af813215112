"""Target: threads blocked inside generator and coroutine bodies, so that
generator/coroutine frames are on the live stack:

  * "generator": next() on a generator that delegates (yield from) to a
    generator method, which sleeps before its first yield;
  * "coroutine": coro.send(None) on a coroutine that awaits another one,
    which sleeps (blocking) in its body;
  * "asyncio": asyncio.run() of a task whose awaited coroutine blocks in
    time.sleep, so the event loop's own frames are below it.

usage: python gens.py REPORT.json
"""

import asyncio
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


class Pipeline:
    def stage(self):
        while True:
            time.sleep(3600)
            yield 1


def delegate():
    yield from Pipeline().stage()


def run_generator():
    next(delegate())


async def leaf():
    while True:
        time.sleep(3600)


async def trunk():
    await leaf()


def run_coroutine():
    coroutine = trunk()
    coroutine.send(None)


async def blocking_in_task():
    await asyncio.sleep(0)
    await leaf()


def run_asyncio():
    asyncio.run(blocking_in_task())


def main():
    path = _target.report_path()
    for name, target in (("generator", run_generator),
                         ("coroutine", run_coroutine),
                         ("asyncio", run_asyncio)):
        threading.Thread(target=target, name=name, daemon=True).start()
    _target.park(__file__, path)


if __name__ == "__main__":
    main()
