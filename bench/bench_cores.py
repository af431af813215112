#!/usr/bin/env python3
"""Times `pyscope dump --core` on the core of a process with a large heap
(bench/targets/heap_core.py, 1 GiB by default), plain and compressed with
zstd, lz4, xz and gzip by their own command-line tools.

For each file it prints the medians of --runs dumps, wall and CPU time (user
+ system of pyscope): a first look with the cache off (expanded in memory), a
first look into an empty cache (expanded into the cache's file), and the
second look that opens the kept expansion; and, for comparison, the CPU time
of the format's own tool expanding the file to /dev/null. The kernel must write cores into the
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


def timed(argv, stdin=None, stdout=subprocess.DEVNULL, env=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(argv, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, env=env)
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
        print("first look: expanded in memory (PYSCOPE_CORE_CACHE=off); kept: expanded into an")
        print("empty cache; second look: the kept expansion opened; medians of %d runs" % args.runs)
        print("%-6s %13s %13s %13s %12s %12s %10s" % ("file", "first wall", "first CPU",
                                                  "kept wall", "kept CPU", "second wall",
                                                  "tool CPU"))
        splits = []
        for name, path, expand in files:
            first, kept, second = [], [], []
            for run in range(args.runs):
                cache = os.path.join(workdir, "cache-%d" % run)
                for mode, out in (("off", first), (cache, kept), (cache, second)):
                    env = dict(os.environ, PYSCOPE_CORE_CACHE=mode)
                    proc, wall, cpu = timed([args.pyscope, "dump", "-v", "--core", path], env=env)
                    if proc.returncode != 0:
                        sys.exit("pyscope failed on %s: %s" % (path, proc.stderr.decode()))
                    m = re.search(r"\(decoding (\d+), reading (\d+), storing (\d+)\)",
                                  proc.stderr.decode())
                    split = tuple(float(x) for x in m.groups()) if m else (0.0, 0.0, 0.0)
                    out.append((wall, cpu) + split)
                shutil.rmtree(cache, ignore_errors=True)
            tool_cpu = float("nan")
            if expand:
                tc = []
                for _ in range(args.runs):
                    with open(path, "rb") as fin:
                        _, _, c = timed(expand, stdin=fin)
                    tc.append(c)
                tool_cpu = statistics.median(tc)

            def med(runs, k):
                return statistics.median(r[k] for r in runs)
            print("%-6s %10.0f ms %10.0f ms %10.0f ms %9.0f ms %9.0f ms %7.0f ms   (%s)"
                  % (name, med(first, 0), med(first, 1), med(kept, 0), med(kept, 1),
                     med(second, 0), tool_cpu, load()))
            splits.append((name, [med(first, k) for k in (2, 3, 4)],
                           [med(kept, k) for k in (2, 3, 4)]))
        print()
        print("where the expansion's wall time goes (dump -v): decoding, reading the compressed")
        print("file, storing (copying pages out into memory, or writing the cache's file)")
        for name, mem, kept in splits:
            if any(mem + kept):
                print("%-6s in memory: %6.0f + %5.0f + %5.0f ms   into the cache: %6.0f + %5.0f "
                      "+ %5.0f ms" % ((name,) + tuple(mem) + tuple(kept)))
    finally:
        if args.keep:
            print("cores kept in %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
