"""Queue.join() never returns: a worker died on a bad item before calling
task_done(), so unfinished_tasks never reaches 0.

Source: the queue documentation ("join() blocks until all items in the
queue have been gotten and processed ... a task_done() call for every
item"), and Stack Overflow 49637086 ("queue.join() hangs when the worker
raises"). The usual fix is try/finally around the work.

Senior engineer: never_notified, certain: the main thread waits in
Queue.join() without timeout; the only worker has exited, no live thread
can reach the queue to call task_done().
"""

import queue
import threading

import _field


def worker(q):
    while True:
        item = q.get()
        int(item)                 # ValueError on "bad": task_done() is skipped
        q.task_done()


def main():
    _field.quiet_excepthook()
    q = queue.Queue()
    for item in ("1", "2", "bad"):
        q.put(item)
    t = threading.Thread(target=worker, args=(q,), name="worker", daemon=True)
    t.start()
    t.join()                      # it dies on "bad"
    _field.report_later(_field.expect("never_notified", "certain", threads=["MainThread"],
                                      objects=["q"]),
                        objects={"q": id(q)})
    q.join()


if __name__ == "__main__":
    main()
