#!/usr/bin/env python3
"""Wall time of `pyscope dump` on one event loop holding 1,000 and 100,000
pending tasks (bench/targets/many_tasks.py), on every interpreter found:
median, min and max of --runs dumps, and the tasks the dump counted (shown
in detail up to --max-tasks, default 1000, the rest counted). Goals (issue
18): 1,000 tasks under 20 ms; 100,000 under 1 s, output bounded: the last
column says whether the median met them.
A benchmark, not a test: it prints numbers and never fails on them.

With --baseline PATH (another build, e.g. of main), both binaries dump the
same target in turn, run after run, and each gets its own row: a side by
side comparison under the same load.

With --await future, each task awaits a Future of its own that main keeps
in a dict (an RPC client's pending requests): the dump then also looks for
who holds each Future.

usage: bench/bench_tasks.py [--pyscope PATH] [--baseline PATH] [--runs N] [--sizes 1000,100000]
                            [--await sleep|future]
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


# Issue 18's goals for the wall time of one dump (the median of the runs).
GOALS_MS = {1000: 20.0, 100000: 1000.0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pyscope", default=os.path.join(REPO, "pyscope"))
    ap.add_argument("--baseline", default="", help="another pyscope to time alongside")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--only", default="", help="comma-separated interpreter ids")
    ap.add_argument("--await", dest="kind", default="sleep", choices=("sleep", "future"))
    args = ap.parse_args()
    target = os.path.join(HERE, "targets", "many_tasks.py")
    print("load average before: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    binaries = [("", args.pyscope)]
    if args.baseline:
        binaries = [("before", args.baseline), ("after", args.pyscope)]
    print("%-14s %-7s %8s %8s %8s %8s %8s %10s %12s %6s" % ("python", "build", "tasks", "median",
                                                            "min", "max", "cpu", "counted",
                                                            "output bytes", "goal"))
    only = set(filter(None, args.only.split(",")))
    for interp in discovery().supported:
        if only and interp.id not in only:
            continue
        for n in [int(s) for s in args.sizes.split(",")]:
            proc = subprocess.Popen([interp.path, target, str(n), args.kind], stdout=subprocess.PIPE,
                                    text=True)
            try:
                if proc.stdout.readline().strip() != "ready":
                    print("%-14s %8d target did not start" % (interp.id, n))
                    continue
                times = {label: [] for label, _ in binaries}
                cpu = {label: [] for label, _ in binaries}
                shape = {}
                for label, binary in binaries:
                    one = subprocess.run([binary, "dump", "--json", str(proc.pid)],
                                         stdout=subprocess.PIPE, check=False)
                    doc = json.loads(one.stdout)
                    counted = sum(len(l["tasks"]) + l["tasks_not_shown"]
                                  for l in doc["asyncio"]["loops"])
                    text = subprocess.run([binary, "dump", str(proc.pid)],
                                          stdout=subprocess.PIPE, check=False).stdout
                    shape[label] = (counted, len(text))
                for _ in range(args.runs):
                    for label, binary in binaries:
                        used = resource.getrusage(resource.RUSAGE_CHILDREN)
                        start = time.perf_counter()
                        subprocess.run([binary, "dump", str(proc.pid)],
                                       stdout=subprocess.DEVNULL, check=False)
                        times[label].append((time.perf_counter() - start) * 1000)
                        now = resource.getrusage(resource.RUSAGE_CHILDREN)
                        cpu[label].append((now.ru_utime - used.ru_utime + now.ru_stime -
                                           used.ru_stime) * 1000)
                for label, _ in binaries:
                    t = times[label]
                    goal = GOALS_MS.get(n)
                    print("%-14s %-7s %8d %8.1f %8.1f %8.1f %8.1f %10d %12d %6s"
                          % (interp.id, label, n, statistics.median(t), min(t), max(t),
                             statistics.median(cpu[label]), shape[label][0], shape[label][1],
                             "-" if goal is None else "met" if statistics.median(t) < goal
                             else "MISSED"))
            finally:
                proc.kill()
                proc.wait()
    print("load average after: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
