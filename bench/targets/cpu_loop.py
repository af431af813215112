"""Bench target for the agent's effect on what it samples: one thread
spinning a pure-Python loop, printing every 0.25 s the loop count and the
CPU time of the process (so that a reader can take iterations per CPU
second as well as per wall second).

usage: python cpu_loop.py [MARKER]
"""

import sys
import time


def spin():
    n = 0
    clock, cpu = time.monotonic, time.process_time
    next_report = clock() + 0.25
    while True:
        for _ in range(10000):
            n += 1
        now = clock()
        if now >= next_report:
            print("%d %.6f %.6f" % (n, now, cpu()), flush=True)
            next_report = now + 0.25


if __name__ == "__main__":
    spin()
