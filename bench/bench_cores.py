#!/usr/bin/env python3
"""Times `pyscope dump --core` on the core of a process with a large heap
(bench/targets/heap_core.py, 1 GiB by default), plain and compressed with
zstd, lz4, xz and gzip by their own command-line tools.

For each file it prints the medians of --runs dumps: wall time, CPU time
(user + system of pyscope), the expansion's own wall time as `dump -v`
reports it, and, for comparison, the wall and CPU time of the format's own
tool expanding the file to /dev/null. The kernel must write cores into the
working directory (core_pattern "core" or "core.%p"-like, no pipe).

usage: bench/bench_cores.py [--pyscope PATH] [--python PATH] [--heap-mib N] [--runs N]
                            [--dir DIR] [--keep] [--reuse DIR]

--keep leaves the cores in their directory; --reuse DIR times the cores a
kept run left there (heap.core and heap.core.FORMAT) without making them
again.
"""

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TARGET = os.path.join(HERE, "targets", "heap_core.py")

# Compression as the tools do it by default (xz and gzip at their fastest
# level: their default levels take minutes on a 1 GiB core, and the level
# changes little of the expansion's speed).
FORMATS = [
    ("zstd", ["zstd", "-q", "-T1", "-c"], ["zstd", "-q", "-d", "-c"]),
    ("lz4", ["lz4", "-q", "-c"], ["lz4", "-q", "-d", "-c"]),
    ("xz", ["xz", "-T1", "-1", "-c"], ["xz", "-d", "-c"]),
    ("gzip", ["gzip", "-1", "-c"], ["gzip", "-d", "-c"]),
]


def load():
    return "load %.2f" % os.getloadavg()[0]


def timed(argv, stdin=None, stdout=subprocess.DEVNULL):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(argv, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
    wall = (time.monotonic() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000
    return proc, wall, cpu


def make_core(python, mib, workdir):
    proc = subprocess.run([python, TARGET, str(mib)], cwd=workdir, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL)
    cores = [p for p in os.listdir(workdir) if p.startswith("core")]
    if not cores:
        sys.exit("no core written (core_pattern: %s)"
                 % open("/proc/sys/kernel/core_pattern").read().strip())
    core = os.path.join(workdir, "heap.core")
    os.rename(os.path.join(workdir, cores[0]), core)
    return core, proc.stdout.decode().strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pyscope", default=os.path.join(REPO, "pyscope"))
    ap.add_argument("--python", default=os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3.12"))
    ap.add_argument("--heap-mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where the cores go (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the cores")
    ap.add_argument("--reuse", default=None, help="a directory of cores a --keep run left")
    args = ap.parse_args()
    if args.reuse:
        args.keep = True
    workdir = args.reuse or tempfile.mkdtemp(prefix="pyscope-bench-cores-", dir=args.dir)
    try:
        if args.reuse:
            core, objects = os.path.join(workdir, "heap.core"), "?"
        else:
            print("building a %d MiB heap with %s (%s)" % (args.heap_mib, args.python, load()))
            core, objects = make_core(args.python, args.heap_mib, workdir)
        size = os.path.getsize(core)
        print("core: %.0f MiB, %s records" % (size / 2**20, objects))
        files = [("plain", core, None)]
        for name, compress, expand in FORMATS:
            if args.reuse:
                if os.path.exists(core + "." + name):
                    files.append((name, core + "." + name, expand))
                continue
            if shutil.which(compress[0]) is None:
                print("%s: %s not installed, skipped" % (name, compress[0]))
                continue
            out = core + "." + name
            with open(core, "rb") as fin, open(out, "wb") as fout:
                _, wall, _ = timed(compress, stdin=fin, stdout=fout)
            print("%s: %.0f MiB (ratio %.1f), compressed in %.1f s (%s)"
                  % (name, os.path.getsize(out) / 2**20, size / os.path.getsize(out),
                     wall / 1000, load()))
            files.append((name, out, expand))
        print()
        print("%-6s %10s %10s %12s %12s %12s %12s" % ("file", "dump wall", "dump CPU", "expansion",
                                                    "stacks", "tool wall", "tool CPU"))
        for name, path, expand in files:
            walls, cpus, expands, stacks = [], [], [], []
            for _ in range(args.runs):
                proc, wall, cpu = timed([args.pyscope, "dump", "-v", "--core", path])
                if proc.returncode != 0:
                    sys.exit("pyscope failed on %s: %s" % (path, proc.stderr.decode()))
                err = proc.stderr.decode()
                m = re.search(r"expanded to \d+ bytes \(in [^)]*\) in (\d+) ms", err)
                expands.append(float(m.group(1)) if m else 0.0)
                m = re.search(r"threads in ([\d.]+) ms", err)
                total = float(m.group(1)) if m else wall
                stacks.append(total - expands[-1])
                walls.append(wall)
                cpus.append(cpu)
            tool_wall = tool_cpu = float("nan")
            if expand:
                tw, tc = [], []
                for _ in range(args.runs):
                    with open(path, "rb") as fin:
                        _, w, c = timed(expand, stdin=fin)
                    tw.append(w)
                    tc.append(c)
                tool_wall, tool_cpu = statistics.median(tw), statistics.median(tc)
            print("%-6s %8.0f ms %7.0f ms %9.0f ms %9.0f ms %9.0f ms %9.0f ms   (%s)"
                  % (name, statistics.median(walls), statistics.median(cpus),
                     statistics.median(expands), statistics.median(stacks), tool_wall, tool_cpu,
                     load()))
    finally:
        if args.keep:
            print("cores kept in %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
