"""asyncio: a worker thread hands its result to the loop with loop.call_soon
instead of loop.call_soon_threadsafe.

Source: the asyncio documentation, "Concurrency and Multithreading": almost
no asyncio object is thread-safe, and a callback is scheduled from another
thread with call_soon_threadsafe(); call_soon() only appends to the loop's
ready queue, and a loop asleep in select() with no timeout is not woken, so
the awaiting task waits until some other event happens to wake the loop,
here never.

Senior engineer: hung for good: the main task awaits a Future whose
set_result sits in the loop's ready queue, but the loop sleeps in its
selector with nothing to wake it; never_notified, certain, on the loop's
thread; the cure is call_soon_threadsafe.
"""

import asyncio
import threading

import _field


async def main():
    loop = asyncio.get_running_loop()
    result = loop.create_future()

    def worker():
        # Once the loop is asleep in select(), as a slow worker finds it.
        _field.main_blocked_in("select")()
        loop.call_soon(result.set_result, 42)   # should be call_soon_threadsafe

    thread = threading.Thread(target=worker, name="worker")
    thread.start()
    # Reported once the worker is gone (it is in no report then).
    _field.report_later(_field.expect("never_notified", "certain", threads=["MainThread"]),
                        extra={"hint": "call_soon_threadsafe"},
                        before=lambda: (thread.join(), _field.main_blocked_in("select")()))
    await result


if __name__ == "__main__":
    asyncio.run(main())
