"""A Future nobody will complete: a callback registry drops the request
when its handler raises, and the caller waits on the Future without timeout.

Source: the concurrent.futures documentation on Future.result() ("If
timeout is not specified or None, there is no limit to the wait time"),
and the "Future never resolved" reports of grpc (grpc/grpc issue 17020)
and of custom RPC code: an exception path that forgets set_exception().

Senior engineer: never_notified, certain: the main thread waits on a Future
that no live thread can reach (the dispatcher died with the request).
"""

import concurrent.futures
import threading

import _field


def dispatch(pending):
    future = pending.pop()
    raise ConnectionError("peer closed")  # set_exception(future) was forgotten
    future.set_result(None)


def main():
    _field.quiet_excepthook()
    future = concurrent.futures.Future()
    t = threading.Thread(target=dispatch, args=([future],), name="dispatcher")
    t.start()
    t.join()
    _field.report_later(_field.expect("never_notified", "certain", threads=["MainThread"],
                                      objects=["future"]),
                        objects={"future": id(future)})
    future.result()


if __name__ == "__main__":
    main()
