"""Target for the HTML report's tests: CPU work in two timed phases.

Thread "cruncher" runs phase_one() for PHASE seconds, then phase_two() for
PHASE seconds, while "spinner" competes with it for the GIL in spin();
"sleeper" sleeps and "locked" waits for a lock that is never released, so
that the timeline has rows holding, waiting for the GIL and idle. Writes the
wall-clock bounds of each phase and the threads' native ids to REPORT.json,
then exits.

usage: python phases.py REPORT.json [PHASE_SECONDS]

Unlike the other programs here it does not park: `pyscope record -- python
phases.py ...` records it from start to exit. Runs on CPython 3.8 to 3.15.
"""

import json
import sys
import threading
import time


# Each loop is written out in its function, so that the function itself,
# not a shared helper, is where the samples land.

def phase_one(deadline):
    x = 1
    while time.monotonic() < deadline:
        for _ in range(500):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def phase_two(deadline):
    x = 2
    while time.monotonic() < deadline:
        for _ in range(500):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def spin(stop):
    x = 3
    while not stop.is_set():
        for _ in range(500):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def crunch(phase, bounds):
    start = time.monotonic()
    bounds["phase_one"] = [time.time()]
    phase_one(start + phase)
    bounds["phase_one"].append(time.time())
    bounds["phase_two"] = [time.time()]
    phase_two(start + 2 * phase)
    bounds["phase_two"].append(time.time())


def main():
    report = sys.argv[1]
    phase = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    stop = threading.Event()
    never = threading.Lock()
    never.acquire()
    bounds = {}
    threads = [
        threading.Thread(target=time.sleep, args=(3600,), name="sleeper", daemon=True),
        threading.Thread(target=never.acquire, name="locked", daemon=True),
        threading.Thread(target=spin, args=(stop,), name="spinner", daemon=True),
        threading.Thread(target=crunch, args=(phase, bounds), name="cruncher"),
    ]
    for t in threads:
        t.start()
    threads[-1].join()
    stop.set()
    threads[2].join()
    with open(report, "w") as f:
        json.dump({"bounds": bounds,
                   "threads": {t.name: t.native_id for t in threads + [threading.main_thread()]}}, f)


if __name__ == "__main__":
    main()
