"""What waiting for a function costs a program's start-up: the wall time of
`python -c CODE` alone and under `pyscope watch --reentry NAME -- python -c
CODE` for a NAME the program never defines (so pyscope waits the whole run,
searching every code object Python enters), medians of RUNS runs, run
alternately. With --old PATH also under another pyscope binary (e.g. one
that only polled sys.modules every 0.2 s), for comparison.

usage: python3 bench/bench_watch_start.py [--python PATH]... [--runs N]
                                          [--pyscope PATH] [--old PATH]
"""
import argparse
import os
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = [
    ("pass", "pass"),
    ("import asyncio, json, decimal, http.client", "import asyncio, json, decimal, http.client"),
]


def wall(argv):
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", action="append")
    parser.add_argument("--pyscope", default=os.path.join(HERE, "..", "pyscope"))
    parser.add_argument("--old")
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    pythons = args.python or [os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3.12")]
    watchers = [("watched", args.pyscope)] + ([("old pyscope", args.old)] if args.old else [])
    print("median of %d runs each" % args.runs)
    print("| python | program | alone | " + " | ".join(w for w, _ in watchers) + " |")
    print("|---|---|---|" + "---|" * len(watchers))
    for python in pythons:
        version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                                 stdout=subprocess.PIPE, text=True).stdout.strip()
        for label, code in PROGRAMS:
            argv = [python, "-c", code]
            times = {"alone": []}
            for _, binary in watchers:
                times[binary] = []
            for _ in range(args.runs):
                times["alone"].append(wall(argv))
                for _, binary in watchers:
                    times[binary].append(wall([binary, "watch", "--reentry", "never_defined_here",
                                               "--"] + argv))
            cells = ["%.0f ms" % (statistics.median(times["alone"]) * 1000)]
            for _, binary in watchers:
                cells.append("%.0f ms" % (statistics.median(times[binary]) * 1000))
            print("| %s | `%s` | %s |" % (version, label, " | ".join(cells)), flush=True)


if __name__ == "__main__":
    main()
