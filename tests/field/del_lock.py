"""A finalizer (__del__) takes a lock the thread already holds: the object's
last reference goes away inside a `with lock:` block.

Source: the Python data model documentation on __del__ ("__del__() can be
executed during ... arbitrary code, including from any arbitrary thread ...
if __del__() needs to take a lock ... it may deadlock"), and Python issue
bpo-14976 (queue.Queue deadlocked by a __del__ that logs).

Senior engineer: deadlock, certain: the worker waits for a Lock it holds
itself (its own `with` block, below __del__ on its stack); the main thread
joins it.
"""

import threading

import _field

registry_lock = threading.Lock()
registry = {}


class Resource:
    def __init__(self, name):
        self.name = name
        with registry_lock:
            registry[name] = True

    def __del__(self):
        with registry_lock:
            registry.pop(self.name, None)


def worker():
    res = Resource("db")
    with registry_lock:
        res = None                # last reference: __del__ runs here
        registry["closed"] = True


def main():
    t = threading.Thread(target=worker, name="worker")
    t.start()
    _field.report_later(_field.expect("deadlock", "certain", threads=["worker"],
                                      blocked=["MainThread"], objects=["lock"]),
                        objects={"lock": id(registry_lock)})
    t.join()


if __name__ == "__main__":
    main()
