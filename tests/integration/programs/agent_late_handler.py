"""Target: installs a Python handler for SIGUSR1 only when told to (the
file ARG2 appears), then writes ARG2 + ".done". Until then no signal but
SIGINT has one. A reader that keeps where the handler table is between two
looks must still read what the table holds now.

usage: python agent_late_handler.py REPORT.json TRIGGER
"""

import os
import signal
import sys
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def main():
    path = _target.report_path()
    trigger = sys.argv[2]
    _target.write_report(path, _target.build_report(__file__))
    while not os.path.exists(trigger):
        time.sleep(0.02)
    signal.signal(signal.SIGUSR1, lambda signo, frame: None)
    with open(trigger + ".done", "w") as f:
        f.write("installed\n")
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
