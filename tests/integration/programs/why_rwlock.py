"""Target: a readers-writer lock left locked by a writer that raised before
releasing it. Every later writer, and a reader, freeze on its write lock.

usage: python why_rwlock.py REPORT.json
"""

import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402

WRITERS = 3


class RWLock:
    def __init__(self):
        self._write_lock = threading.Lock()
        self._readers = 0

    def acquire_read(self):
        with self._write_lock:  # readers wait while a writer holds it
            self._readers += 1

    def release_read(self):
        with self._write_lock:
            self._readers -= 1

    def acquire_write(self):
        self._write_lock.acquire()

    def release_write(self):
        self._write_lock.release()


def update(store, key):
    raise KeyError(key)


def buggy_writer(rw, store):
    rw.acquire_write()
    update(store, "missing")  # raises: release_write() below never runs
    rw.release_write()


def writer(rw, store):
    rw.acquire_write()
    store["x"] = 1
    rw.release_write()


def reader(rw, store):
    rw.acquire_read()
    store.get("x")
    rw.release_read()


def quiet_excepthook(args):
    """The buggy writer's KeyError is expected: keep stderr clean."""


def start():
    threading.excepthook = quiet_excepthook
    rw, store = RWLock(), {}
    first = threading.Thread(target=buggy_writer, args=(rw, store), name="buggy-writer")
    first.start()
    first.join()
    names = []
    for index in range(WRITERS):
        name = "writer-%d" % index
        threading.Thread(target=writer, args=(rw, store), name=name, daemon=True).start()
        names.append(name)
    threading.Thread(target=reader, args=(rw, store), name="reader", daemon=True).start()
    return {"lock": id(rw._write_lock), "writers": names, "reader": "reader"}


def main():
    path = _target.report_path()
    extra = start()
    _target.park(__file__, path, extra=extra)


if __name__ == "__main__":
    main()
