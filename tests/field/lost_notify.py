"""A lost wake-up: the producer calls Condition.notify() before the consumer
waits, and the consumer waits without a predicate loop, so it sleeps forever.

Source: the threading documentation on Condition ("the while loop checking
for the application's condition is necessary"; wait_for()), and Python
issue bpo-18393 / Stack Overflow 23175296 ("Condition.wait() never returns
after notify()").

Senior engineer: never_notified, certain: the consumer waits on the
condition with no timeout; the producer has exited and the main thread only
joins the consumer, so nothing can notify it.
"""

import threading

import _field


def producer(cond, ready):
    with cond:
        ready.append("data")
        cond.notify()             # nobody waits yet: the notification is lost


def consumer(cond, ready, produced):
    produced.wait()
    with cond:
        cond.wait()               # should have been: while not ready: cond.wait()
        ready.pop()


def main():
    cond, ready, produced = threading.Condition(), [], threading.Event()
    c = threading.Thread(target=consumer, args=(cond, ready, produced), name="consumer")
    c.start()
    p = threading.Thread(target=producer, args=(cond, ready), name="producer")
    p.start()
    p.join()
    produced.set()
    _field.report_later(_field.expect("never_notified", "certain", threads=["consumer"],
                                      blocked=["MainThread"], objects=["cond"]),
                        objects={"cond": id(cond)})
    del cond, ready, produced, p
    c.join()


if __name__ == "__main__":
    main()
