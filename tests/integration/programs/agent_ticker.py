"""Target: a service whose workers wake every 20 ms, do a little, and wait
again, so that the process is on a CPU between any two of the agent's ticks
(its CPU clock always moves). With MODE "same" each worker always waits at
the same call, so every pass finds every thread where the last one did;
with "varied" the worker "ticker-1" also computes for 10 ms at each of its
wake-ups, in one of four functions drawn at random, so passes keep finding
it otherwise than the pass before (a third of its time holding the GIL,
and at one of five stacks); it keeps in DONE_FILE.work the wall seconds it
has spent in that work, and those it has spent awake (from the return of
its wait to the next one: the work, handle() and writing that file, whose
system calls run without the GIL). On SIGUSR1 the worker "ticker-0" runs
burst() for BURST seconds of wall time at its next wake-up, then writes to
DONE_FILE its own CPU seconds for the burst (time.thread_time) and the wall
seconds from the signal to the end of the burst, as agent_still.py does.

usage: python agent_ticker.py REPORT.json MODE DONE_FILE [BURST]
"""

import os
import random
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402
from agent_still import burst, go, report_burst, wake_on_sigusr1  # noqa: E402


def handle(n):
    total = 0
    for i in range(50):
        total += i * n
    return total


def wait_here():
    time.sleep(0.02)


# ticker-1's work in "varied", each in a stack of its own.
def work_a():
    burst(0.01)


def work_b():
    burst(0.01)


def work_c():
    burst(0.01)


def work_d():
    burst(0.01)


WORK = (work_a, work_b, work_c, work_d)


def tick(n, varied, done_file, seconds):
    rng = random.Random(n)
    worked = awake = 0.0
    while True:
        woke = time.monotonic()
        handle(n)
        if n == 0 and go.is_set():
            go.clear()
            report_burst(done_file, seconds)
        if varied and n == 1:
            start = time.monotonic()
            rng.choice(WORK)()
            worked += time.monotonic() - start
            # The wall seconds spent in its work and awake so far, for the
            # test to read at any time (a whole file, never half of one).
            with open(done_file + ".work.tmp", "w") as f:
                f.write("%.6f %.6f\n" % (worked, awake + time.monotonic() - woke))
            os.replace(done_file + ".work.tmp", done_file + ".work")
        awake += time.monotonic() - woke
        wait_here()


def main():
    path = _target.report_path()
    varied = sys.argv[2] == "varied"
    done_file = sys.argv[3]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 1.5
    wake_on_sigusr1()
    threads = [threading.Thread(target=tick, args=(n, varied, done_file, seconds),
                                name="ticker-%d" % n, daemon=True) for n in range(3)]
    for t in threads:
        t.start()
    # Its workers never all sleep at once for long: reported unsettled.
    _target.park(__file__, path, extra={t.name: t.native_id for t in threads}, settle=False)


if __name__ == "__main__":
    main()
