"""Target for torn stacks: threads whose Python stacks grow and shrink all
the time (5-300 frames, no pause at the leaf), so that a sampler reading
them without stopping the process often catches a stack mid-change.

usage: python rec_churn.py REPORT.json [THREADS] [SEED]
"""

import random
import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402


def descend(remaining):
    if remaining > 0:
        return descend(remaining - 1) + 1
    return 0


def churn(seed):
    rng = random.Random(seed)
    while True:
        descend(rng.randint(5, 300))


def main():
    path = _target.report_path()
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    sys.setrecursionlimit(2000)
    threading.stack_size(16 * 1024 * 1024)
    for index in range(threads):
        threading.Thread(target=churn, args=(seed + index,), name="churn-%d" % index,
                         daemon=True).start()
    _target.park(__file__, path, settle=False,
                 extra={"functions": ["churn", "descend"], "threads": threads})


if __name__ == "__main__":
    main()
