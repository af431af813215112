"""A connection-limiting semaphore leaks permits: tasks that fail return
without release(), and once the permits are gone every new task waits.

Source: the threading documentation's Semaphore example (a
BoundedSemaphore limiting connections, "with pool_sema:"), and the
connection-pool exhaustion reports it prevents, e.g. urllib3 issue #1252
(pool blocked forever after exceptions) — here without the `with`.

Senior engineer: never_notified, certain: client-2 waits on the semaphore
without timeout; the two tasks that hold its permits have exited.
"""

import threading

import _field

pool_sema = threading.BoundedSemaphore(2)


def task(fail):
    pool_sema.acquire()
    if fail:
        raise OSError("connection reset")   # release() below never runs
    pool_sema.release()


def main():
    _field.quiet_excepthook()
    for i in range(2):
        t = threading.Thread(target=task, args=(True,), name="client-%d" % i)
        t.start()
        t.join()
    last = threading.Thread(target=task, args=(False,), name="client-2")
    last.start()
    _field.report_later(_field.expect("never_notified", "certain", threads=["client-2"],
                                      blocked=["MainThread"], objects=["sema"]),
                        objects={"sema": id(pool_sema)})
    last.join()


if __name__ == "__main__":
    main()
