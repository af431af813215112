"""Target for thread churn: threads start and end thousands of times a
second while a CPU is kept busy, so that a sampler walking the thread
list often finds a thread state freed and its memory reused by a newer
thread (the list then reads as a cycle). Counts its own thread starts.

usage: python thread_churn.py REPORT.json [SPAWNERS]
"""

import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

started = [0]


def short_life(depth):
    if depth:
        return short_life(depth - 1)
    return 0


def spawner(index):
    while True:
        batch = [threading.Thread(target=short_life, args=(index % 7,), daemon=True)
                 for _ in range(8)]
        for t in batch:
            t.start()
        for t in batch:
            t.join()
        started[0] += len(batch)


def main():
    path = _target.report_path()
    spawners = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    # The hog is a process of its own: in here it would hold the GIL and
    # slow the churn down. It dies with its parent's process group.
    subprocess.Popen([sys.executable, "-c", "while True: pass"])
    for index in range(spawners):
        threading.Thread(target=spawner, args=(index,), name="spawner-%d" % index,
                         daemon=True).start()
    # Measured before reporting, so the test knows the churn really happens.
    before, t0 = started[0], time.monotonic()
    time.sleep(0.5)
    rate = (started[0] - before) / (time.monotonic() - t0)
    _target.park(__file__, path, settle=False,
                 extra={"thread_starts_per_second": rate, "spawners": spawners})


if __name__ == "__main__":
    main()
