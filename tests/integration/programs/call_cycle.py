"""Target for stacks read while they change: the "cycler" thread calls
through_python() -> spin() (Python, 2 ms on the clock) and then through_c()
-> sorted() (C, about 2 ms), over and over. At any moment worth a dump it
is in spin() under through_python(), or in through_c(): through_python()
is innermost only for the instant between its first instruction and its
call, and spin() never runs under through_c(). A dump that walks a copy of
the stack taken after the thread moved on shows exactly those: a frame
spin() has returned from still sits in memory above its old caller's slot,
which through_c() now fills.

With a second argument N, N such threads ("cycler", "cycler-2", ...) take
turns at the GIL.

usage: python call_cycle.py REPORT.json [N]
"""

import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def spin():
    until = time.perf_counter() + 0.002
    while time.perf_counter() < until:
        pass


def through_python():
    spin()


def through_c():
    sorted(range(50000), key=abs)


running = threading.Event()


def cycle():
    running.set()
    while True:
        through_python()
        through_c()


def main():
    path = _target.report_path()
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    names = ["cycler"] + ["cycler-%d" % i for i in range(2, count + 1)]
    for name in names:
        running.clear()
        threading.Thread(target=cycle, name=name, daemon=True).start()
        running.wait()  # the report shows the frames below cycle()
    _target.park(__file__, path, settle=False, extra={"threads": names})


if __name__ == "__main__":
    main()
