"""A worker pool idling on `q.get(timeout=...)`: the documented healthy way
to wait for work while staying responsive to shutdown.

Source: the queue documentation (get(block=True, timeout=None)), and the
Python FAQ recommendation to use timeouts so that workers notice a stop
flag; a hang detector must not call this hung.

Senior engineer: idle: every worker waits with a timeout, the main thread
joins them; nothing is stuck.
"""

import queue
import threading

import _field


def worker(q, stop):
    while not stop.is_set():
        try:
            q.get(timeout=30)
        except queue.Empty:
            pass


def main():
    q, stop = queue.Queue(), threading.Event()
    workers = [threading.Thread(target=worker, args=(q, stop), name="worker-%d" % i)
               for i in range(3)]
    for t in workers:
        t.start()
    _field.report_later(_field.expect("idle", None))
    for t in workers:
        t.join()


if __name__ == "__main__":
    main()
