#!/usr/bin/env python3
"""Wall time of `pyscope dump` on one event loop holding 1,000 and 100,000
pending tasks (bench/targets/many_tasks.py), on every interpreter found:
median, min and max of --runs dumps, and the tasks the dump counted (shown
in detail up to --max-tasks, default 1000, the rest counted). Goals (issue
18): 1,000 tasks under 20 ms; 100,000 under 1 s, output bounded.
A benchmark, not a test: it prints numbers and never fails on them.

usage: bench/bench_tasks.py [--pyscope PATH] [--runs N] [--sizes 1000,100000]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from conftest import discovery  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pyscope", default=os.path.join(REPO, "pyscope"))
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--only", default="", help="comma-separated interpreter ids")
    args = ap.parse_args()
    target = os.path.join(HERE, "targets", "many_tasks.py")
    print("load average before: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    print("%-14s %8s %8s %8s %8s %8s %10s %12s" % ("python", "tasks", "median", "min", "max",
                                                  "cpu", "counted", "output bytes"))
    only = set(filter(None, args.only.split(",")))
    for interp in discovery().supported:
        if only and interp.id not in only:
            continue
        for n in [int(s) for s in args.sizes.split(",")]:
            proc = subprocess.Popen([interp.path, target, str(n)], stdout=subprocess.PIPE,
                                    text=True)
            try:
                if proc.stdout.readline().strip() != "ready":
                    print("%-14s %8d target did not start" % (interp.id, n))
                    continue
                one = subprocess.run([args.pyscope, "dump", "--json", str(proc.pid)],
                                     stdout=subprocess.PIPE, check=False)
                doc = json.loads(one.stdout)
                counted = sum(len(l["tasks"]) + l["tasks_not_shown"]
                              for l in doc["asyncio"]["loops"])
                text = subprocess.run([args.pyscope, "dump", str(proc.pid)],
                                      stdout=subprocess.PIPE, check=False).stdout
                times, cpu = [], []
                for _ in range(args.runs):
                    used = resource.getrusage(resource.RUSAGE_CHILDREN)
                    start = time.perf_counter()
                    subprocess.run([args.pyscope, "dump", str(proc.pid)],
                                   stdout=subprocess.DEVNULL, check=False)
                    times.append((time.perf_counter() - start) * 1000)
                    now = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu.append((now.ru_utime - used.ru_utime + now.ru_stime - used.ru_stime) * 1000)
                print("%-14s %8d %8.1f %8.1f %8.1f %8.1f %10d %12d"
                      % (interp.id, n, statistics.median(times), min(times), max(times),
                         statistics.median(cpu), counted, len(text)))
            finally:
                proc.kill()
                proc.wait()
    print("load average after: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
