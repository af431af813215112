"""Target: the main thread waits forever on an Event, the shape of a daemon's
"wait until told to stop". With "handler" as second argument a SIGTERM
handler sets the Event, so a signal can still wake the main thread;
without it nothing can.

usage: python why_signal_wait.py REPORT.json [handler]
"""

import signal
import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402

stop = threading.Event()


def main():
    path = _target.report_path()
    handler = len(sys.argv) > 2 and sys.argv[2] == "handler"
    if handler:
        signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    _target.write_report(path, _target.build_report(__file__, extra={"event": id(stop),
                                                                     "handler": handler}))
    stop.wait()


if __name__ == "__main__":
    main()
