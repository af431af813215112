"""notify() where notify_all() was needed: two consumers wait for a shutdown
flag, the producer sets it and wakes only one, then goes on polling.

Source: the threading documentation on Condition.notify() ("wakes up at most
n of the threads waiting"), and the notify-vs-notify_all bugs of Python
issue bpo-8777 and Stack Overflow 37029850.

Senior engineer: never_notified, probable: consumer-b waits on the
condition without timeout; the only thread that can still notify it (the
producer) only sleeps in a loop.
"""

import threading
import time

import _field


def consumer(cond, state, woke):
    with cond:
        while not state["stop"]:
            cond.wait()
    woke.append(threading.current_thread().name)


def producer(cond, state, waiting):
    while len(waiting()) < 2:
        time.sleep(0.001)
    with cond:
        state["stop"] = True
        cond.notify()             # should have been notify_all()
    while True:
        time.sleep(1)


def main():
    cond, state, woke = threading.Condition(), {"stop": False}, []
    consumers = [threading.Thread(target=consumer, args=(cond, state, woke),
                                  name="consumer-%s" % c) for c in "ab"]
    for t in consumers:
        t.start()
    waiting = lambda: getattr(cond, "_waiters", ())  # noqa: E731
    threading.Thread(target=producer, args=(cond, state, waiting), name="producer",
                     daemon=True).start()

    def expectation():
        left = [t.name for t in consumers if t.name not in woke]
        return _field.expect("never_notified", "probable", threads=left,
                             blocked=["MainThread"], objects=["cond"])

    _field.report_later(expectation, objects={"cond": id(cond)})
    for t in consumers:
        t.join()


if __name__ == "__main__":
    main()
