"""A ThreadPoolExecutor task waits on another task of the same, full pool.

Source: the concurrent.futures documentation, ThreadPoolExecutor: "Deadlocks
can occur when the callable associated with a Future waits on the results
of another Future ... with max_workers=1" (the documented example), and
Python issue bpo-29386.

Senior engineer: never_notified, certain: the only worker waits in
Future.result() on the inner future, which only a pool worker could run,
and the pool's only worker is itself; the main thread waits on the outer
future behind it.
"""

import concurrent.futures
import threading

import _field

executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="pool")
inner_ids = []


def inner():
    return 6 * 7


def outer():
    future = executor.submit(inner)
    inner_ids.append(id(future))
    return future.result()        # waits for a worker: there is none left


def main():
    result = executor.submit(outer)
    while not inner_ids:
        threading.Event().wait(0.005)
    _field.report_later(_field.expect("never_notified", "certain", threads=["pool_0"],
                                      blocked=["MainThread"], objects=["inner"]),
                        objects={"inner": inner_ids[0], "outer": id(result)})
    result.result()


if __name__ == "__main__":
    main()
