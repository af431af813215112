#!/usr/bin/env python3
"""Times `pyscope dump --core` on the core of a process with a large heap
(bench/targets/heap_core.py, 1 GiB by default), plain and compressed with
zstd, lz4, xz and gzip by their own command-line tools.

For each file it prints the medians of --runs dumps, wall time, CPU time (user
+ system of pyscope) and peak memory: a first look with the cache off, a
first look into an empty cache, and the second look that opens what the
first kept; and, as the floor, the format's own tool expanding the file to
/dev/null. With --before PATH (another pyscope binary, e.g. one built from
main), each run times both binaries one after the other, alternating which
goes first, and the table shows them side by side; then where a first look's
wall time went and each thread's CPU time (dump -v). The kernel must write
cores into the working directory (core_pattern "core" or "core.%p"-like, no
pipe).

usage: bench/bench_cores.py [--pyscope PATH] [--before PATH] [--python PATH]
                            [--heap-mib N] [--runs N] [--dir DIR] [--keep]
                            [--reuse DIR] [--only FORMAT,...]

--keep leaves the cores in their directory; --reuse DIR times the cores a
kept run left there (heap.core and heap.core.FORMAT) without making them
again.
"""

import argparse
import os
import re
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
    """Runs argv; returns (process, wall ms, CPU ms, peak RSS MiB) of that process alone."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, env=env)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.monotonic() - start) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr_text = err.decode(errors="replace")
    cpu = (usage.ru_utime + usage.ru_stime) * 1000
    return proc, wall, cpu, usage.ru_maxrss / 1024


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
    ap.add_argument("--before", default=None, help="another pyscope binary to time alongside")
    ap.add_argument("--only", default=None, help="formats to time (e.g. plain,zstd,lz4)")
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
                _, wall, _, _ = timed(compress, stdin=fin, stdout=fout)
            print("%s: %.0f MiB (ratio %.1f), compressed in %.1f s (%s)"
                  % (name, os.path.getsize(out) / 2**20, size / os.path.getsize(out),
                     wall / 1000, load()))
            files.append((name, out, expand))
        if args.only:
            wanted = set(args.only.split(","))
            files = [f for f in files if f[0] in wanted]
        binaries = [("after", args.pyscope)]
        if args.before:
            binaries.append(("before", args.before))
        print()
        print("first: the first look with the cache off; kept: the first look into an empty")
        print("cache; second: the look that opens what the first kept; tool: the format's own")
        print("tool to /dev/null. Medians of %d runs; wall ms / CPU ms / peak MiB" % args.runs)
        print("%-6s %-6s %22s %22s %9s %16s" % ("file", "binary", "first", "kept", "second",
                                                 "tool"))
        splits = []
        for name, path, expand in files:
            results = {label: {"first": [], "kept": [], "second": []} for label, _ in binaries}
            for run in range(args.runs):
                order = binaries if run % 2 == 0 else binaries[::-1]
                for label, binary in order:
                    cache = os.path.join(workdir, "cache-%s-%d" % (label, run))
                    for mode, key in (("off", "first"), (cache, "kept"), (cache, "second")):
                        env = dict(os.environ, PYSCOPE_CORE_CACHE=mode)
                        proc, wall, cpu, rss = timed([binary, "dump", "-v", "--core", path],
                                                     env=env)
                        if proc.returncode != 0:
                            sys.exit("%s failed on %s: %s" % (binary, path, proc.stderr_text))
                        m = re.search(r"\(decoding (\d+), reading (\d+), storing (\d+)[;)]",
                                      proc.stderr_text)
                        split = tuple(float(x) for x in m.groups()) if m else (0.0, 0.0, 0.0)
                        m = re.search(r"CPU: (\d+) decoding, (\d+) storing alongside",
                                      proc.stderr_text)
                        threads = tuple(float(x) for x in m.groups()) if m else (0.0, 0.0)
                        results[label][key].append((wall, cpu, rss) + split + threads)
                    shutil.rmtree(cache, ignore_errors=True)
            tool = (float("nan"),) * 3
            if expand:
                runs = []
                for _ in range(args.runs):
                    with open(path, "rb") as fin:
                        _, wall, cpu, rss = timed(expand, stdin=fin)
                    runs.append((wall, cpu, rss))
                tool = tuple(statistics.median(r[k] for r in runs) for k in range(3))

            def med(runs, k):
                return statistics.median(r[k] for r in runs)
            for i, (label, _) in enumerate(binaries):
                res = results[label]
                cells = ["%6.0f /%6.0f /%5.0f" % (med(res["first"], 0), med(res["first"], 1),
                                                  med(res["first"], 2)),
                         "%6.0f /%6.0f /%5.0f" % (med(res["kept"], 0), med(res["kept"], 1),
                                                  med(res["kept"], 2)),
                         "%6.0f" % med(res["second"], 0)]
                toolcell = ("%6.0f /%6.0f" % tool[:2]) if i == 0 and expand else ""
                print("%-6s %-6s %22s %22s %9s %16s   (%s)"
                      % (name if i == 0 else "", label, cells[0], cells[1], cells[2], toolcell,
                         load()))
                splits.append((name, label, [med(res["first"], k) for k in (3, 4, 5)],
                               [med(res["kept"], k) for k in (3, 4, 5)],
                               [med(res["first"], k) for k in (6, 7)]))
        print()
        print("where the first look's wall time goes (dump -v): decoding, reading the compressed")
        print("file, storing (copying pages out into memory, or writing the cache's file)")
        for name, label, mem, kept, threads in splits:
            if any(mem + kept):
                print("%-6s %-6s cache off: %6.0f + %5.0f + %5.0f ms   into the cache: %6.0f + "
                      "%5.0f + %5.0f ms" % ((name, label) + tuple(mem) + tuple(kept)))
        print()
        print("CPU of the decoding thread and of the store thread beside it, first look with")
        print("the cache off (dump -v; with a free second core the wall time is about the larger)")
        for name, label, mem, kept, threads in splits:
            if any(threads):
                print("%-6s %-6s %6.0f ms decoding, %6.0f ms storing" % ((name, label) + tuple(threads)))
    finally:
        if args.keep:
            print("cores kept in %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
