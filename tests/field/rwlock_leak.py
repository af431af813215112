"""A readers-writer lock built on threading.Condition leaks a read lock: the
reader's lookup raises KeyError between acquire_read() and release_read()
(no try/finally), so _readers stays 1 and every writer waits in
Condition.wait() forever. The reader catches the error and goes on polling
in `while True: time.sleep(...)`.

Source: the readers-writer lock recipe (ActiveState recipe 577803, "Reader
Writer Lock with priority for writers") and the pitfall every such recipe's
comments raise: release in a finally block. Reproduced from pyscope issue 11.

Senior engineer: never_notified, probable: the writers wait without timeout
on the condition; the only thread that could still notify it (the reader,
which can reach the lock) only sleeps. The state that explains it is
RWLock: _readers=1, _writer=False.
"""

import threading
import time

import _field


class RWLock:
    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False

    def acquire_read(self):
        with self._cond:
            while self._writer:
                self._cond.wait()
            self._readers += 1

    def release_read(self):
        with self._cond:
            self._readers -= 1
            if self._readers == 0:
                self._cond.notify_all()

    def acquire_write(self):
        with self._cond:
            while self._writer or self._readers:
                self._cond.wait()
            self._writer = True

    def release_write(self):
        with self._cond:
            self._writer = False
            self._cond.notify_all()


def reader(rw, table, read_done):
    try:
        rw.acquire_read()
        table["missing"]          # KeyError: release_read() never runs
        rw.release_read()
    except KeyError:
        pass
    read_done.set()
    while True:
        time.sleep(1)             # the service goes on polling


def writer(rw, table):
    rw.acquire_write()
    table["x"] = 1
    rw.release_write()


def main():
    rw, table, read_done = RWLock(), {}, threading.Event()
    threading.Thread(target=reader, args=(rw, table, read_done), name="reader",
                     daemon=True).start()
    read_done.wait()
    writers = [threading.Thread(target=writer, args=(rw, table), name="writer-%d" % i)
               for i in range(2)]
    for t in writers:
        t.start()
    _field.report_later(
        _field.expect("never_notified", "probable", threads=["writer-0", "writer-1"],
                      blocked=["MainThread"], objects=["cond"]),
        objects={"cond": id(rw._cond), "rwlock": id(rw)},
        extra={"owner_state": {"_readers": 1, "_writer": False}})
    for t in writers:
        t.join()


if __name__ == "__main__":
    main()
