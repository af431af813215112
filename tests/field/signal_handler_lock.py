"""A signal handler takes a lock that the code it interrupted holds.

Source: the signal module documentation ("Python signal handlers are always
executed in the main Python thread ... a handler can be called at any
point"; "Note on Signal Handlers and Exceptions"), Python issue bpo-13697
and the logging-in-signal-handler deadlocks (bpo-6721's family): the
handler logs, the main thread was inside the logging lock.

The main thread holds a plain Lock in a `with` block when SIGUSR1 arrives;
the handler's `with lock:` never gets it.

Senior engineer: deadlock, certain: the main thread waits for a lock it
holds itself (its own `with` block, below the handler on its stack).
"""

import os
import signal
import threading

import _field

lock = threading.Lock()
log = []


def on_usr1(signum, frame):
    with lock:
        log.append("got %d" % signum)


def main():
    signal.signal(signal.SIGUSR1, on_usr1)
    _field.report_later(_field.expect("deadlock", "certain", threads=["MainThread"],
                                      objects=["lock"]),
                        objects={"lock": id(lock)})
    with lock:
        log.append("working")
        os.kill(os.getpid(), signal.SIGUSR1)
        log.append("done")


if __name__ == "__main__":
    main()
