"""asyncio: a coroutine awaits a blocking function run in the default
executor, and that function waits on a threading.Event that only the
coroutine's own side would set.

Source: the asyncio documentation on loop.run_in_executor (the awaiting
task is suspended until the function returns) and on threading.Event (wait
without a timeout blocks until another thread sets it); the usual shape is
a stop flag meant to be set by a callback or a later task that, with the
only task waiting for the executor, never runs.

Senior engineer: hung for good: the executor's worker thread waits on the
Event, which no thread will set (the loop's thread, the only other one,
sleeps in its selector with no timer, no I/O but its wake-up socket and no
signal handler, waiting for that very worker); never_notified, certain,
blaming the worker; the loop's thread is stuck too.
"""

import asyncio
import threading

import _field

stop = threading.Event()


def worker_name():
    return [t.name for t in threading.enumerate()
            if t is not threading.main_thread() and t.name != _field.REPORTER][0]


async def main():
    loop = asyncio.get_running_loop()
    _field.report_later(lambda: _field.expect("never_notified", "certain",
                                              threads=[worker_name()],
                                              objects=["stop"],
                                              stuck=[worker_name(), "MainThread"]),
                        objects={"stop": id(stop)},
                        before=_field.main_blocked_in("select"))
    await loop.run_in_executor(None, stop.wait)


if __name__ == "__main__":
    asyncio.run(main())
