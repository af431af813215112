"""Two threads join each other: a shutdown routine joins the worker, and the
worker's cleanup joins the thread that runs the shutdown.

Source: the threading documentation on Thread.join() ("join() raises a
RuntimeError if an attempt is made to join the current thread as that would
cause a deadlock" — it does not detect the two-thread case), and the
shutdown-ordering bugs of the same shape in Python issue bpo-18808.

Senior engineer: deadlock, certain: "shutdown" joins "worker", which joins
"shutdown"; the main thread joins shutdown behind them.
"""

import threading

import _field


def main():
    peers = {}
    both = threading.Barrier(2)

    def shutdown():
        both.wait()
        peers["worker"].join()

    def worker():
        both.wait()
        peers["shutdown"].join()

    peers["shutdown"] = threading.Thread(target=shutdown, name="shutdown")
    peers["worker"] = threading.Thread(target=worker, name="worker")
    for t in peers.values():
        t.start()
    _field.report_later(_field.expect("deadlock", "certain", threads=["shutdown", "worker"],
                                      blocked=["MainThread"]))
    peers["shutdown"].join()


if __name__ == "__main__":
    main()
