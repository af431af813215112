#!/usr/bin/env python3
"""Times `pyscope why` against a process with 100 threads.

Starts tests/integration/programs/many_threads.py (100 threads in Event.wait
or time.sleep at varying depths, plus the main thread) with each interpreter
given, waits for it to settle, and runs pyscope repeatedly:

  * why --interval 0   the diagnosis without the progress check's delay
  * why                the default, whose total includes one --interval sleep
  * dump               for comparison

It prints the median and the spread of the wall-clock times, per interpreter.

usage: bench/bench_why.py [--pyscope PATH] [--runs N] [--nice N] [--python PATH ...]
"""

import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TARGET = os.path.join(REPO, "tests", "integration", "programs", "many_threads.py")


def default_pythons():
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9].*/bin/python3.1?")) +
                   glob.glob(os.path.expanduser("~/.pyenv/versions/3.[89].*/bin/python3.[89]")))
    found += sorted(glob.glob(os.path.expanduser("~/.cache/debian-python/3.1?/root/usr/bin/python3.1?")))
    return found or [sys.executable]


def start_target(python, workdir):
    report = os.path.join(workdir, "report-%d.json" % time.monotonic_ns())
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen([python, TARGET, report], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(report):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("%s: target did not start" % python)
        time.sleep(0.05)
    with open(report) as f:
        return proc, json.load(f)


def time_runs(argv, runs):
    """Wall-clock and CPU (user + system) milliseconds of each run."""
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        times.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
        if done.returncode != 0:
            raise RuntimeError("%s failed: %s" % (" ".join(argv), done.stderr.decode()))
    return times, cpu, done.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyscope", default=os.path.join(REPO, "pyscope"))
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--python", action="append", help="interpreter (repeatable)")
    parser.add_argument("--nice", type=int, default=None,
                        help="run pyscope at this nice level (e.g. -10 as root), to measure it "
                             "apart from other load on a shared machine")
    args = parser.parse_args()
    prefix = ["nice", "-n", str(args.nice)] if args.nice is not None else []
    pythons = args.python or default_pythons()
    print("pyscope on %s (101 threads), %d runs each; milliseconds, median [min-max];"
          % (os.path.basename(TARGET), args.runs))
    print("cpu = median user+system time of the pyscope process")
    print("load average before: %.2f %.2f %.2f%s" % (os.getloadavg() + (
        "; pyscope at nice %d" % args.nice if args.nice is not None else "",)))
    print("%-10s %-22s %-8s %-22s %-22s %-8s %s" % ("python", "why --interval 0", "cpu",
                                                  "why (150 ms interval)", "dump", "cpu",
                                                  "threads/verdict"))
    with tempfile.TemporaryDirectory(prefix="bench_why-") as workdir:
        for python in pythons:
            proc, report = start_target(python, workdir)
            try:
                pid = str(proc.pid)
                fast, fast_cpu, out = time_runs(prefix + [args.pyscope, "why", "--json", "--interval", "0", pid],
                                                args.runs)
                doc = json.loads(out)
                full, _, _ = time_runs(prefix + [args.pyscope, "why", "--json", pid], max(5, args.runs // 3))
                dump, dump_cpu, _ = time_runs(prefix + [args.pyscope, "dump", "--json", pid], args.runs)

                def fmt(t):
                    return "%5.1f [%4.1f-%6.1f]" % (statistics.median(t), min(t), max(t))
                print("%-10s %-22s %-8.1f %-22s %-22s %-8.1f %d/%s"
                      % (report["python_version"], fmt(fast), statistics.median(fast_cpu), fmt(full),
                         fmt(dump), statistics.median(dump_cpu), len(doc["threads"]), doc["verdict"]))
            finally:
                os.killpg(proc.pid, 9)
                proc.wait()


if __name__ == "__main__":
    main()
