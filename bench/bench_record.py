#!/usr/bin/env python3
"""Benchmarks of `pyscope record` (issue #3). Prints numbers; never fails on
them. See bench/README.md for what each section prints.

Sections (--only takes a comma-separated subset):
  throughput  max-rate stacks/s, 1 thread x 50 frames: pyscope on pyenv 3.12.1
              and Debian 3.15, CPython 3.15's own sampler (profiling.sampling)
              on 3.15, Austin on 3.12.1 with --austin PATH; side by side,
              interleaved rounds
  threads10   10 threads x 50 frames at max rate: complete passes/s and the
              share of failed passes (pyscope; profiling.sampling alongside)
  torn        3.8-3.10: stacks_torn / stacks_sampled at max rate and 100 Hz
  cost        slowdown of a fixed amount of work (cpu_deep.py --work N) while
              pyscope records at 100 Hz vs not recording (runs interleaved),
              and pyscope's own CPU use (user+sys / wall) at max rate and 100 Hz
  memory      peak RSS of pyscope recording 50 threads at 1 kHz for
              --memory-seconds (default 60; the requirement is < 50 MB for 600)

Targets: ../shared/reference/bench/cpu_deep.py (recursion to --depth frames,
then a pure-Python loop at the leaf), run with the interpreters the
integration tests find (tests/integration/conftest.py).

usage: bench/bench_record.py [--pyscope PATH] [--compare PATH] [--austin PATH] [--rounds N]
                             [--seconds S] [--only SECTIONS] [--memory-seconds S]
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from conftest import discovery  # noqa: E402  (the test suite's interpreter discovery)

CPU_DEEP = os.path.join(os.path.dirname(REPO), "shared", "reference", "bench", "cpu_deep.py")
SECTIONS = ("throughput", "threads10", "torn", "cost", "memory")


def find_interp(ident):
    for interp in discovery().supported:
        if interp.id == ident:
            return interp
    return None


def median(values):
    return statistics.median(values) if values else float("nan")


def fmt_list(values, digits=0):
    return " ".join(("%.*f" % (digits, v)) for v in values)


class Target:
    """cpu_deep.py running in its own process group; ready once it wrote its
    pid file and had a second to reach full depth."""

    def __init__(self, python, depth=50, threads=1, seconds=None, work=None, settle=1.0):
        self.tmp = tempfile.mkdtemp(prefix="bench_record.")
        pidfile = os.path.join(self.tmp, "pid")
        args = [python, CPU_DEEP, "--depth", str(depth), "--threads", str(threads),
                "--pidfile", pidfile]
        args += ["--seconds", str(seconds)] if work is None else ["--work", str(work)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(pidfile):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("cpu_deep.py did not start: %s" % self.proc.stderr.read())
            time.sleep(0.02)
        time.sleep(settle)
        self.pid = self.proc.pid

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        subprocess.run(["rm", "-rf", self.tmp])


def run_with_rusage(argv, timeout, merge_stdout=False):
    """Runs argv; returns (exit status, wall s, user+sys s, max RSS KiB,
    stderr, with stdout too when merge_stdout)."""
    err = tempfile.TemporaryFile()
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=err if merge_stdout else subprocess.DEVNULL, stderr=err)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.01)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err.seek(0)
    return (proc.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss,
            err.read().decode(errors="replace"))


def pyscope_record(args, pid, options, seconds, out, binary=None):
    """pyscope record -p PID -d seconds -f json -q -o out OPTIONS; returns
    (meta, cpu seconds, wall seconds, max RSS KiB). binary: another pyscope."""
    argv = [binary or args.pyscope, "record", "-p", str(pid), "-d", str(seconds), "-f", "json", "-q",
            "-o", out] + options
    code, wall, cpu, rss, err = run_with_rusage(argv, seconds + 60)
    if code != 0:
        raise RuntimeError("pyscope exit %s: %s" % (code, err[-500:]))
    with open(out) as f:
        meta = json.load(f)["meta"]
    return meta, cpu, wall, rss


# ---------------------------------------------------------------- throughput

def tachyon_run(python315, depth, threads, seconds, out):
    """CPython 3.15's sampler launching cpu_deep.py; returns (stacks in the
    collapsed file, passes it reports, error rate %, its duration)."""
    seconds = max(1, int(round(seconds)))     # it takes whole seconds
    argv = [python315, "-m", "profiling.sampling", "run", "-a", "-r", "1000khz", "-d",
            str(seconds), "--collapsed", "-o", out, CPU_DEEP, "--depth", str(depth),
            "--threads", str(threads), "--seconds", str(seconds + 2)]
    if os.path.exists(out):
        os.unlink(out)
    code, wall, cpu, rss, err = run_with_rusage(argv, seconds + 60, merge_stdout=True)
    if code != 0 or not os.path.exists(out):
        raise RuntimeError("profiling.sampling exit %s: %s" % (code, err[-500:]))
    stacks = 0
    with open(out) as f:
        for line in f:
            stacks += int(line.rsplit(" ", 1)[1])
    captured = re.search(r"Captured (\d+) samples in ([0-9.]+) seconds", err)
    errors = re.search(r"Error rate: ([0-9.]+)", err)
    passes = int(captured.group(1)) if captured else 0
    duration = float(captured.group(2)) if captured else float(seconds)
    return stacks, passes, float(errors.group(1)) if errors else float("nan"), duration


def austin_run(austin, pid, seconds):
    """austin -i 1 -x seconds -o /dev/null -p PID; returns (thread stacks, s)."""
    seconds = max(1, int(round(seconds)))     # it takes whole seconds
    code, wall, cpu, rss, err = run_with_rusage(
        [austin, "-i", "1", "-x", str(seconds), "-o", "/dev/null", "-p", str(pid)], seconds + 60)
    err = re.sub(r"\x1b\[[0-9;]*m", "", err)
    samples = re.search(r"Long sampling rate : \d+/(\d+)", err)
    duration = re.search(r"Sampling duration : ([0-9.]+)", err)
    if not samples or not duration:
        raise RuntimeError("austin statistics not found: %s" % err[-300:])
    return int(samples.group(1)), float(duration.group(1))


def bench_throughput(args):
    print("== max-rate throughput, 1 thread x 50 frames (cpu_deep.py --depth 50 --threads 1)")
    p312, p315 = find_interp("3.12.1"), find_interp("debian-3.15")
    tools = []
    if p312:
        tools.append(("pyscope, pyenv 3.12.1", "pyscope", p312))
        if args.compare:
            tools.append(("--compare, pyenv 3.12.1", "compare", p312))
    if p315:
        tools.append(("pyscope, Debian 3.15", "pyscope", p315))
        if args.compare:
            tools.append(("--compare, Debian 3.15", "compare", p315))
        if not args.compare:
            tools.append(("profiling.sampling, 3.15", "tachyon", p315))
    if args.austin and p312:
        tools.append(("austin %s, pyenv 3.12.1" % austin_version(args.austin), "austin", p312))
    rates = {label: [] for label, _, _ in tools}
    for _ in range(args.rounds):
        for label, kind, interp in tools:
            out = os.path.join(args.tmp, "throughput.%s" % kind)
            if kind == "tachyon":
                stacks, passes, errors, duration = tachyon_run(interp.path, 50, 1,
                                                               args.seconds, out)
                rates[label].append(stacks / duration)
                continue
            target = Target(interp.path, threads=1, seconds=args.seconds + 10)
            try:
                if kind == "austin":
                    stacks, duration = austin_run(args.austin, target.pid, args.seconds)
                    rates[label].append(stacks / duration)
                else:
                    binary = args.compare if kind == "compare" else None
                    meta, _, _, _ = pyscope_record(args, target.pid, ["-r", "max"],
                                                   args.seconds, out, binary)
                    rates[label].append(meta["stacks_sampled"] / (meta["duration_ns"] / 1e9))
            finally:
                target.stop()
    print("%-32s %10s   %s" % ("sampler, target", "median/s", "each round (stacks/s)"))
    for label, _, _ in tools:
        print("%-32s %10.0f   %s" % (label, median(rates[label]), fmt_list(rates[label])))


def austin_version(path):
    out = subprocess.run([path, "-V"], capture_output=True, text=True)
    return (out.stdout or out.stderr).strip().split()[-1] if out.returncode == 0 else "?"


# ---------------------------------------------------------------- threads10

def bench_threads10(args):
    print("== 10 threads x 50 frames at max rate (cpu_deep.py --depth 50 --threads 10)")
    rows = {}
    tools = []
    for ident in ("3.12.1", "debian-3.15"):
        interp = find_interp(ident)
        if interp:
            tools.append(("pyscope, %s" % ident, "pyscope", interp))
    p315 = find_interp("debian-3.15")
    if p315:
        tools.append(("profiling.sampling, 3.15", "tachyon", p315))
    for label, _, _ in tools:
        rows[label] = []
    for _ in range(args.rounds):
        for label, kind, interp in tools:
            out = os.path.join(args.tmp, "threads10.%s" % kind)
            if kind == "tachyon":
                stacks, passes, errors, duration = tachyon_run(interp.path, 50, 10,
                                                               args.seconds, out)
                rows[label].append((passes / duration * (1 - errors / 100), errors,
                                    passes / duration, stacks / duration))
                continue
            target = Target(interp.path, threads=10, seconds=args.seconds + 10)
            try:
                meta, _, _, _ = pyscope_record(args, target.pid, ["-r", "max"], args.seconds, out)
            finally:
                target.stop()
            seconds = meta["duration_ns"] / 1e9
            passes, failed = meta["passes"], meta["passes_failed"]
            rows[label].append(((passes - failed) / seconds, 100.0 * failed / max(passes, 1),
                                passes / seconds, meta["stacks_sampled"] / seconds))
    print("%-28s %14s %10s %12s %12s" % ("sampler, target", "complete/s", "failed %",
                                          "passes/s", "stacks/s"))
    for label, _, _ in tools:
        values = rows[label]
        print("%-28s %14.0f %10.2f %12.0f %12.0f   (medians of %d; complete/s each: %s)" % (
            label, median([v[0] for v in values]), median([v[1] for v in values]),
            median([v[2] for v in values]), median([v[3] for v in values]), len(values),
            fmt_list([v[0] for v in values])))
    print("   profiling.sampling: complete = passes x (1 - its reported error rate)")


# ---------------------------------------------------------------- torn

def bench_torn(args):
    print("== torn stacks on 3.8-3.10: stacks_torn / stacks_sampled "
          "(cpu_deep.py --depth 50 --threads 10)")
    print("%-10s %-6s %10s %10s %8s %14s" % ("python", "rate", "stacks", "torn", "torn %",
                                             "failed passes %"))
    for ident in ("3.8.18", "3.9.18", "3.10.13"):
        interp = find_interp(ident)
        if not interp:
            print("%-10s not found" % ident)
            continue
        for rate in ("max", "100"):
            shares, fails, stacks, torn = [], [], [], []
            for _ in range(args.rounds):
                target = Target(interp.path, threads=10, seconds=args.seconds + 10)
                try:
                    meta, _, _, _ = pyscope_record(args, target.pid, ["-r", rate], args.seconds,
                                                   os.path.join(args.tmp, "torn.json"))
                finally:
                    target.stop()
                stacks.append(meta["stacks_sampled"])
                torn.append(meta["stacks_torn"])
                shares.append(100.0 * meta["stacks_torn"] / max(meta["stacks_sampled"], 1))
                fails.append(100.0 * meta["passes_failed"] / max(meta["passes"], 1))
            print("%-10s %-6s %10.0f %10.0f %8.3f %14.3f   (torn %% each: %s)" % (
                ident, rate, median(stacks), median(torn), median(shares), median(fails),
                fmt_list(shares, 3)))


# ---------------------------------------------------------------- cost

def target_elapsed(stderr):
    m = re.findall(r"elapsed=([0-9.]+)s", stderr)
    return float(m[-1]) if m else float("nan")


def bench_cost(args):
    interp = find_interp("3.12.1") or discovery().supported[0]
    work = args.work
    print("== cost to the target: cpu_deep.py --depth 50 --threads 1 --work %d on %s, "
          "%d runs per mode, interleaved" % (work, interp.id, args.cost_runs))
    modes = [("not recorded", None), ("pyscope -r 100", ["-r", "100"]),
             ("pyscope -r max", ["-r", "max"])]
    elapsed = {label: [] for label, _ in modes}
    sampler_cpu = {label: [] for label, _ in modes}
    for _ in range(args.cost_runs):
        for label, options in modes:
            base = [interp.path, CPU_DEEP, "--depth", "50", "--threads", "1", "--work", str(work)]
            if options is None:
                code, wall, cpu, rss, err = run_with_rusage(base, 600)
            else:
                out = os.path.join(args.tmp, "cost.json")
                code, wall, cpu, rss, err = run_with_rusage(
                    [args.pyscope, "record", "-f", "json", "-q", "-o", out] + options +
                    ["--"] + base, 600)
            elapsed[label].append(target_elapsed(err))
    base = elapsed["not recorded"]
    print("%-16s %10s %14s   %s" % ("mode", "median s", "slowdown", "each run (target's own s)"))
    for label, _ in modes:
        m = median(elapsed[label])
        # Runs of one round ran back to back, under about the same load.
        paired = median([100.0 * (a - b) / b for a, b in zip(elapsed[label], base)])
        print("%-16s %10.3f %+6.1f%% %+6.1f%%   %s" % (
            label, m, 100.0 * (m - median(base)) / median(base), paired,
            fmt_list(elapsed[label], 3)))
    print("   slowdown: of the medians, then the median of each round's own ratio")

    print("-- pyscope's own CPU (user+sys of the pyscope process / wall), attached for %.0f s "
          "to cpu_deep.py --depth 50 on %s" % (args.seconds, interp.id))
    print("%-10s %-6s %10s %12s" % ("threads", "rate", "CPU %", "passes/s"))
    for threads in (1, 10):
        for rate in ("max", "100"):
            shares, rates = [], []
            for _ in range(args.rounds):
                target = Target(interp.path, threads=threads, seconds=args.seconds + 10)
                try:
                    meta, cpu, wall, _ = pyscope_record(args, target.pid, ["-r", rate],
                                                        args.seconds,
                                                        os.path.join(args.tmp, "cpu.json"))
                finally:
                    target.stop()
                shares.append(100.0 * cpu / wall)
                rates.append(meta["passes"] / (meta["duration_ns"] / 1e9))
            print("%-10d %-6s %10.1f %12.0f   (CPU %% each: %s)" % (
                threads, rate, median(shares), median(rates), fmt_list(shares, 1)))


# ---------------------------------------------------------------- memory

def status_kib(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def bench_memory(args):
    interp = find_interp("3.12.1") or discovery().supported[0]
    seconds = args.memory_seconds
    print("== memory: pyscope recording 50 threads x 50 frames at 1 kHz for %.0f s "
          "(%s, -f json)" % (seconds, interp.id))
    target = Target(interp.path, threads=50, seconds=seconds + 60, settle=2.0)
    out = os.path.join(args.tmp, "memory.json")
    peak_file = os.path.join(args.tmp, "memory.peak")
    # GNU time reports pyscope's own peak: measured through wait4 here, the
    # peak would include this Python process, which pyscope was forked from
    # (the kernel carries the larger of the two over exec).
    argv = ["/usr/bin/time", "-f", "%M", "-o", peak_file, args.pyscope, "record", "-p",
            str(target.pid), "-r", "1000", "-d", str(seconds), "-f", "json", "-q", "-o", out]
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pyscope_pid = None
    series = []
    next_probe = start
    step = max(1.0, seconds / 12)
    while proc.poll() is None:
        now = time.monotonic()
        if pyscope_pid is None:
            try:
                with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
                    pyscope_pid = int(f.read().split()[0])
            except (OSError, IndexError, ValueError):
                pass
        if pyscope_pid and now >= next_probe:
            rss, hwm = status_kib(pyscope_pid, "VmRSS"), status_kib(pyscope_pid, "VmHWM")
            if rss is not None:
                series.append((now - start, rss, hwm))
            next_probe += step
        time.sleep(0.05)
    try:
        with open(peak_file) as f:
            peak = int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        peak = None
    target.stop()
    try:
        with open(out) as f:
            meta = json.load(f)["meta"]
        size = os.path.getsize(out)
    except (OSError, ValueError):
        meta, size = None, 0
    print("%8s %10s %10s" % ("t (s)", "VmRSS MiB", "VmHWM MiB"))
    for t, rss, hwm in series:
        print("%8.0f %10.1f %10.1f" % (t, rss / 1024, (hwm or 0) / 1024))
    if peak is not None:
        print("peak RSS (GNU time %%M, whole run incl. writing): %.1f MiB" % (peak / 1024))
    if meta:
        print("recorded %.0f s, %d passes (%.0f/s), %d stacks, %d failed passes; "
              "output %.1f MiB" % (meta["duration_ns"] / 1e9, meta["passes"],
                                   meta["passes"] / (meta["duration_ns"] / 1e9),
                                   meta["stacks_sampled"], meta["passes_failed"], size / 2**20))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pyscope", default=os.path.join(REPO, "pyscope"))
    ap.add_argument("--austin", help="an Austin binary to compare with (built elsewhere)")
    ap.add_argument("--compare", help="another pyscope binary (e.g. before a change), run "
                    "interleaved with --pyscope in the throughput rounds")
    ap.add_argument("--rounds", type=int, default=5, help="runs per measurement (median)")
    ap.add_argument("--seconds", type=float, default=5.0, help="recording length")
    ap.add_argument("--work", type=int, default=2500,
                    help="cpu_deep.py --work for the cost section (leaf calls)")
    ap.add_argument("--cost-runs", type=int, default=5, help="runs per mode, cost section")
    ap.add_argument("--memory-seconds", type=float, default=60.0)
    ap.add_argument("--only", default=",".join(SECTIONS))
    args = ap.parse_args()
    if not os.path.exists(CPU_DEEP):
        sys.exit("%s not found" % CPU_DEEP)
    args.tmp = tempfile.mkdtemp(prefix="bench_record.")
    load = os.getloadavg()
    print("bench_record: %s, %d CPUs, load average %.1f %.1f %.1f at start" % (
        args.pyscope, os.cpu_count(), *load))
    try:
        for section in args.only.split(","):
            if section not in SECTIONS:
                sys.exit("unknown section %r (%s)" % (section, ", ".join(SECTIONS)))
            started = time.monotonic()
            globals()["bench_" + section](args)
            print("   (%s: %.0f s, load average now %.1f)\n" % (
                section, time.monotonic() - started, os.getloadavg()[0]))
            sys.stdout.flush()
    finally:
        subprocess.run(["rm", "-rf", args.tmp])


if __name__ == "__main__":
    main()
