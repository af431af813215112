"""Target: 101 threads, as a server with a big pool has them: 2 busy
threads spinning in Python, 40 idle in Event.wait, 38 in Queue.get, 20 in a
time.sleep loop, and the main thread parked.

extra.busy: the native ids of the busy threads; extra.idle: how many idle
threads wait in each function, by the name pyscope gives it (the qualified
name on 3.11+); extra.threads: 101.

usage: python busy_pool.py REPORT.json
"""

import queue
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

STOP = threading.Event()
JOBS = queue.Queue()


def spin():
    n = 0
    while True:
        n += 1


def sleeper():
    while True:
        time.sleep(3600)


def main():
    path = _target.report_path()
    started = []
    for i in range(2):
        started.append(threading.Thread(target=spin, name="busy-%d" % i, daemon=True))
    for i in range(40):
        started.append(threading.Thread(target=STOP.wait, name="event-%d" % i, daemon=True))
    for i in range(38):
        started.append(threading.Thread(target=JOBS.get, name="queue-%d" % i, daemon=True))
    for i in range(20):
        started.append(threading.Thread(target=sleeper, name="sleep-%d" % i, daemon=True))
    for t in started:
        t.start()
    time.sleep(0.5)
    busy = [t.native_id for t in started if t.name.startswith("busy-")]
    idle = {_target.function_name(threading.Event.wait.__code__): 40,
            _target.function_name(queue.Queue.get.__code__): 38,
            _target.function_name(sleeper.__code__): 20}
    _target.park(__file__, path, extra={"busy": busy, "idle": idle,
                                        "threads": threading.active_count()},
                 settle=False)   # the busy threads never settle


if __name__ == "__main__":
    main()
