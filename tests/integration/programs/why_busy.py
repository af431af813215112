"""Target: a busy, healthy process: two threads compute, a producer and a
consumer pass items through a queue, and a ticker sleeps briefly in a loop.
Nothing is stuck.

usage: python why_busy.py REPORT.json
"""

import queue
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def compute(n):
    total = 0
    while True:
        for i in range(n):
            total += i * i
        total %= 1000003


def produce(q):
    count = 0
    while True:
        q.put(count)
        count += 1
        time.sleep(0.001)


def consume(q):
    while True:
        q.get(timeout=1)


def tick():
    while True:
        time.sleep(0.01)


def main():
    path = _target.report_path()
    q = queue.Queue()
    for name, target, args in (("compute-1", compute, (5000,)), ("compute-2", compute, (7000,)),
                               ("producer", produce, (q,)), ("consumer", consume, (q,)),
                               ("ticker", tick, ())):
        threading.Thread(target=target, args=args, name=name, daemon=True).start()
    time.sleep(0.2)
    _target.park(__file__, path, settle=False)


if __name__ == "__main__":
    main()
