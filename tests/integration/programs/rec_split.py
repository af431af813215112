"""Target for `pyscope record`: one thread ("splitter") spends a known share
of wall-clock time in each of two functions, alternating 70 ms in seventy()
and 30 ms in thirty(), phases cut on an absolute clock so that a late switch
(the thread was preempted) never shifts the following phases. The main
thread sleeps.

On a machine short of CPU the thread can miss its phase ends, so it also
logs what it really did: one line per period, "END SEVENTY THIRTY" (the
time.monotonic() at the end of the period and the wall time spent in each
function), to REPORT.json.log.

usage: python rec_split.py REPORT.json [PERIOD_S]
"""

import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

SHARE = 0.7


def seventy(until):
    x = 0
    while time.perf_counter() < until:
        x += 1
    return x


def thirty(until):
    x = 0
    while time.perf_counter() < until:
        x += 1
    return x


def alternate(period, log):
    start = time.perf_counter()
    k = 0
    while True:
        begin = start + k * period
        t0 = time.perf_counter()
        seventy(begin + SHARE * period)
        t1 = time.perf_counter()
        thirty(begin + period)
        t2 = time.perf_counter()
        log.write("%.6f %.6f %.6f\n" % (time.monotonic(), t1 - t0, t2 - t1))
        k += 1


def main():
    path = _target.report_path()
    period = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
    log = open(path + ".log", "w", buffering=1)
    threading.Thread(target=alternate, args=(period, log), name="splitter",
                     daemon=True).start()
    _target.park(__file__, path, settle=False,
                 extra={"thread": "splitter", "share": SHARE, "period": period})


if __name__ == "__main__":
    main()
