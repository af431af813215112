"""Target: a consumer that checks queue.empty(), sees an item, and then
blocks forever in queue.get() because another consumer took the item in
between. The producer has finished, so nothing will ever put again.

usage: python why_queue.py REPORT.json
"""

import queue
import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402


def producer(q):
    q.put("the only item")


def careful_consumer(q, looked, taken):
    if not q.empty():
        looked.set()
        taken.wait()  # the other consumer empties the queue meanwhile
        q.get()  # blocks forever


def greedy_consumer(q, looked, taken):
    looked.wait()
    q.get()
    taken.set()


def start():
    """The main thread keeps no reference to the queue."""
    q = queue.Queue()
    looked, taken = threading.Event(), threading.Event()
    p = threading.Thread(target=producer, args=(q,), name="producer")
    p.start()
    p.join()
    greedy = threading.Thread(target=greedy_consumer, args=(q, looked, taken), name="greedy")
    greedy.start()
    threading.Thread(target=careful_consumer, args=(q, looked, taken), name="consumer",
                     daemon=True).start()
    greedy.join()
    return {"queue": id(q), "consumer": "consumer"}


def main():
    path = _target.report_path()
    extra = start()
    _target.park(__file__, path, extra=extra)


if __name__ == "__main__":
    main()
