"""Check-then-act race on a queue: `while not q.empty(): job = q.get()`.

Source: the queue module documentation warns that "if empty() returns False
it doesn't guarantee that a subsequent call to get() will not block"; the
pattern is the classic one in Stack Overflow question 1541797 ("Are queues
thread-safe in Python?") and Python issue bpo-5412's discussion. Three
workers see one job left; one takes it, two block in Queue.get() forever,
and the main thread waits in Thread.join().

A barrier holds the three workers between empty() and get() so the race
always goes the losing way.

Senior engineer: queue_starved, certain: the queue is empty, no live thread
can put into it (the main thread only joins); the two workers that lost the
race are to blame, the main thread is stuck behind them.
"""

import queue
import threading

import _field

q = queue.Queue()
q.put("last job")
between = threading.Barrier(3)
winners = []


def worker():
    while not q.empty():
        between.wait()
        job = q.get()
        winners.append(threading.current_thread().name)
        q.task_done()
        del job


def main():
    workers = [threading.Thread(target=worker, name="worker-%d" % i) for i in range(3)]
    for t in workers:
        t.start()

    def expectation():
        losers = [t.name for t in workers if t.name not in winners]
        return _field.expect("queue_starved", "certain", threads=losers,
                             blocked=["MainThread"], objects=["q"])

    _field.report_later(expectation, objects={"q": id(q)})
    for t in workers:
        t.join()


if __name__ == "__main__":
    main()
