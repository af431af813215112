"""Target for the "process exits during the dump" race: several threads
whose stacks keep growing and shrinking (50-400 frames), then the process
exits after a short random delay, either abruptly (os._exit) or through
normal interpreter finalization with the daemon threads still running.

usage: python exits_soon.py REPORT.json [SEED]
The report is written as soon as the threads run; it is not compared.
"""

import os
import random
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

THREADS = 6
MAX_DELAY = 0.4


def descend(remaining, rng):
    if remaining > 0:
        return descend(remaining - 1, rng)
    time.sleep(rng.random() * 0.002)


def churn(seed):
    rng = random.Random(seed)
    while True:
        descend(rng.randint(50, 400), rng)


def main():
    path = _target.report_path()
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else random.randrange(1 << 30)
    rng = random.Random(seed)
    sys.setrecursionlimit(2000)
    threading.stack_size(16 * 1024 * 1024)
    for index in range(THREADS):
        threading.Thread(target=churn, args=(seed + index,), name="churn-%d" % index,
                         daemon=True).start()
    delay = rng.uniform(0, MAX_DELAY)
    how = rng.choice(["_exit", "finalize"])
    _target.write_report(path, _target.build_report(
        __file__, extra={"seed": seed, "delay": delay, "exit": how}))
    time.sleep(delay)
    if how == "_exit":
        os._exit(0)
    # Otherwise fall off the end: finalization with daemon threads alive.


if __name__ == "__main__":
    main()
