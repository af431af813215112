#!/usr/bin/env python3
"""Wall time of `pyscope dump` on a process with 50 threads x 100 frames.

For every interpreter found it starts bench/targets/sleep_deep.py, checks that
one dump shows every frame, then times repeated dumps and prints the median.
A benchmark, not a test: it prints numbers and never fails on them.

usage: bench/bench_dump.py [--pyscope PATH] [--compare PATH] [--runs N] [--threads T] [--depth D] [--json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from conftest import discovery  # noqa: E402  (the test suite's interpreter discovery)


def time_dumps(pyscope, pid, runs, extra):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([pyscope, "dump", *extra, str(pid)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pyscope", default=os.path.join(REPO, "pyscope"))
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--compare", help="another pyscope binary (e.g. before a change): dumps "
                    "alternate between the two and both medians are printed")
    ap.add_argument("--pause", action="store_true",
                    help="with --compare: time dump --pause instead of the plain dump")
    args = ap.parse_args()
    target = os.path.join(HERE, "targets", "sleep_deep.py")
    print("pyscope dump, %d threads x %d frames, median of %d runs (ms)"
          % (args.threads, args.depth, args.runs))
    if args.compare:
        print("%-14s %8s %8s  %7s  %s" % ("python", "pyscope", "compare", "change", "frames seen"))
    else:
        print("%-14s %8s %8s %8s %8s  %s" % ("python", "median", "min", "max", "paused",
                                             "frames seen"))
    for interp in discovery().supported:
        proc = subprocess.Popen([interp.path, target, str(args.threads), str(args.depth)],
                                stdout=subprocess.PIPE, text=True)
        try:
            if proc.stdout.readline().strip() != "ready":
                print("%-14s target did not start" % interp.id)
                continue
            out = subprocess.run([args.pyscope, "dump", "--json", str(proc.pid)],
                                 capture_output=True, text=True)
            frames = sum(1 for t in json.loads(out.stdout)["threads"]
                         for f in t["frames"] if f["function"] == "descend")
            if args.compare:
                # one dump of each binary in turn, so both see the same load
                mine, other = [], []
                for _ in range(args.runs):
                    flags = ["--pause"] if args.pause else []
                    mine += time_dumps(args.pyscope, proc.pid, 1, flags)
                    other += time_dumps(args.compare, proc.pid, 1, flags)
                print("%-14s %8.2f %8.2f  %+6.1f%%  %d/%d descend frames" % (
                    interp.id, statistics.median(mine), statistics.median(other),
                    100 * (statistics.median(mine) / statistics.median(other) - 1),
                    frames, args.threads * args.depth))
                continue
            live = time_dumps(args.pyscope, proc.pid, args.runs, [])
            paused = time_dumps(args.pyscope, proc.pid, args.runs, ["--pause"])
            print("%-14s %8.2f %8.2f %8.2f %8.2f  %d/%d descend frames" % (
                interp.id, statistics.median(live), min(live), max(live),
                statistics.median(paused), frames, args.threads * args.depth))
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
