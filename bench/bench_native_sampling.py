"""record --native (issue #19): merged C+Python stacks per second at -r max
(1 thread x 50 Python frames, inside a C call), the target's slowdown at
100 Hz with --native (perf_event and the ptrace fallback) against Python-only
sampling and no sampling, and pyscope's memory over a long --native
recording of 20 threads. Prints numbers (medians of interleaved rounds); it
never fails on one.

usage: /usr/bin/python3 bench/bench_native_sampling.py [--only throughput,cost,memory]
       [--python PATH] [--rounds N] [--memory-seconds S] [--baseline PYSCOPE]
       [--cost-rate HZ] [--cost-workload mixed|c] [--window S] [--pin CPU]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

TARGET = r'''
import ctypes, sys, threading, time
lib = ctypes.PyDLL(sys.argv[1])
lib.hog_checksum.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint]
BUF = b"x" * 4096
mode, depth, threads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def work(n):
    # a fixed amount of mixed work: Python arithmetic and short C calls
    total = 0
    for i in range(n):
        total += i * i % 7
        if i % 64 == 0:
            lib.hog_checksum(BUF, len(BUF), 1)
    return total

def in_c(n):
    # the same number of iterations, nearly all of the time inside C calls
    for i in range(n // 64):
        lib.hog_checksum(BUF, len(BUF), 16)


def deep(k, body):
    if k:
        return deep(k - 1, body)
    return body()

def hog_forever():
    while True:
        lib.hog_checksum(BUF, len(BUF), 20000)

if mode in ("chunks", "chunks-c"):
    # fixed work in chunks, each timed: CLOCK_MONOTONIC at its end (pyscope's
    # clock, so that the bench knows which chunks a recording covered), its
    # wall time and its CPU time (the kernel's work at a perf sample, in an
    # interrupt or at a context switch, is charged to the thread it samples)
    print("ready", flush=True)
    while True:
        start, cpu = time.perf_counter(), time.thread_time()
        deep(depth, lambda: (work if mode == "chunks" else in_c)(int(sys.argv[5])))
        print("%d %.9f %.9f" % (time.monotonic_ns(), time.perf_counter() - start,
                                time.thread_time() - cpu), flush=True)
elif mode == "hog":
    for _ in range(threads - 1):
        threading.Thread(target=deep, args=(depth, hog_forever), daemon=True).start()
    print("ready", flush=True)
    deep(depth, hog_forever)
else:
    print("ready", flush=True)
    sys.stdin.readline()
    start, cpu = time.perf_counter(), time.process_time()
    deep(depth, lambda: work(int(mode)))
    print("%.6f %.6f" % (time.perf_counter() - start, time.process_time() - cpu), flush=True)
'''


def load():
    return "load %.1f" % os.getloadavg()[0]


def build_lib(tmp):
    out = os.path.join(tmp, "libgilhog.so")
    subprocess.run(["gcc", "-O0", "-g", "-shared", "-fPIC", "-pthread", "-o", out,
                    os.path.join(REPO, "tests", "integration", "native", "gilhog.c")], check=True)
    return out


def start(args, tmp, lib, mode, depth, threads):
    script = os.path.join(tmp, "target.py")
    with open(script, "w") as f:
        f.write(TARGET)
    proc = subprocess.Popen([args.python, script, lib, mode, str(depth), str(threads)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    if proc.stdout.readline().strip() != b"ready":
        sys.exit("target did not start")
    return proc


def throughput(args, tmp, lib):
    """Stacks per second of the recording, and per second of pyscope's own
    CPU time (user+sys), which a loaded machine changes less: at -r max
    pyscope would use a whole core if it got one. With --baseline, that
    pyscope binary's rounds are interleaved with these."""
    print("== merged C+Python stacks/s at -r max, 1 thread x 50 frames in a C call (%s)" % load())
    proc = start(args, tmp, lib, "hog", 50, 1)
    binaries = [("", args.pyscope)] + ([(" [baseline]", args.baseline)] if args.baseline else [])
    modes = [("--native (perf_event)", ["--native"]), ("Python only", [])]
    try:
        rows = {name + tag: [] for tag, _ in binaries for name, _ in modes}
        for _ in range(args.rounds):
            for name, extra in modes:
                for tag, binary in binaries:
                    out = os.path.join(tmp, "t.json")
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    subprocess.run([binary, "record", "-p", str(proc.pid), "-r", "max", "-d",
                                    str(args.seconds), "-f", "json", "-q", "-o", out] + extra,
                                   stderr=subprocess.DEVNULL, check=True)
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                    with open(out) as f:
                        meta = json.load(f)["meta"]
                    secs = meta["duration_ns"] / 1e9
                    merged = meta["native"]["merged"] if extra else meta["stacks_sampled"]
                    rows[name + tag].append((merged / secs, merged / max(cpu, 1e-6)))
        for name, values in rows.items():
            print("  %-36s median %7.0f stacks/s, %7.0f per CPU-second  (rounds: %s)" % (
                name, statistics.median(v[0] for v in values),
                statistics.median(v[1] for v in values),
                ", ".join("%.0f/%.0f" % v for v in values)))
    finally:
        proc.kill()
        proc.wait()
    print("  (%s)" % load())


def target_status(pid):
    """The target's context switches so far (voluntary, preempted)."""
    vol = invol = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                vol = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                invol = int(line.split()[1])
    return vol, invol


def cost(args, tmp, lib):
    """The target's own time for fixed work while each mode records it at
    100 Hz. Two identical targets run chunks of fixed work for the whole
    bench, side by side, each chunk timed by the target itself: its thread's
    CPU time (the kernel's perf sampling, in its interrupts and context
    switches, is charged to it) and its wall time (where a ptrace stop
    shows). Each round gives every mode a window of --window seconds (in a
    different order per round) in which pyscope records one of the two, the
    other not: a mode's figure for a round is the recorded target's mean
    chunk time against the unrecorded one's over the same window, so that
    what the machine's load does at that moment weighs on both; the median
    over rounds is printed. Which target is recorded alternates, and pyscope
    starts --warmup seconds before its window (its start-up, reading the
    target's ELF and DWARF, is not the recording's steady cost). The window
    in which neither is recorded is the noise floor: what this machine makes
    of two equal targets."""
    work = args.chunk_work
    print("== target slowdown at %.0f Hz: CPU and wall time of fixed work (%s), recorded target "
          "against an unrecorded twin running beside it, 1 thread x 50 frames, chunks of %d "
          "iterations, %d rounds x %.0f s windows, %s (%s)" % (
              args.cost_rate, args.cost_workload, work, args.rounds, args.window,
              "both on CPU %d" % args.pin if args.pin >= 0 else "not pinned", load()))
    modes = [("not recorded (noise floor)", None, None),
             ("Python only", args.pyscope, []), ("--native (perf_event)", args.pyscope, ["--native"]),
             ("--native-mode=ptrace", args.pyscope, ["--native", "--native-mode", "ptrace"])]
    if args.baseline:
        modes += [("Python only [baseline]", args.baseline, []),
                  ("--native (perf_event) [baseline]", args.baseline, ["--native"])]
    for name in args.cost_env:
        env = dict(v.partition("=")[::2] for v in name.split(","))
        modes.append(("--native " + name, args.pyscope, ["--native"], env))
    modes = [m if len(m) == 4 else m + (None,) for m in modes]
    script = os.path.join(tmp, "target.py")
    with open(script, "w") as f:
        f.write(TARGET)
    procs, chunks = [], []
    for _ in range(2):
        proc = subprocess.Popen([args.python, script, lib,
                                 "chunks" if args.cost_workload == "mixed" else "chunks-c", "50", "1",
                                 str(work)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if proc.stdout.readline().strip() != b"ready":
            sys.exit("target did not start")
        if args.pin >= 0:
            # both on one CPU: the speed of the CPU under them (what else
            # runs on its core, here and on the host) is then the same for both
            os.sched_setaffinity(proc.pid, {args.pin})
        procs.append(proc)
        chunks.append([])

    def reader(proc, out):
        for line in proc.stdout:
            end, wall, cpu = line.split()
            out.append((int(end), float(wall), float(cpu)))

    for proc, out in zip(procs, chunks):
        threading.Thread(target=reader, args=(proc, out), daemon=True).start()
    windows = {m[0]: [] for m in modes}  # (recorded index, start, end, switches/s, pyscope cpu)
    loads = []
    try:
        time.sleep(1)
        for r in range(args.rounds):
            loads.append(os.getloadavg()[0])
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            for k, (name, binary, extra, env) in enumerate(order):
                x = (r + k) % 2
                rec = None
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                if binary:
                    rec = subprocess.Popen(
                        [binary, "record", "-p", str(procs[x].pid), "-r", str(args.cost_rate), "-f", "json", "-q",
                         "-o", os.path.join(tmp, "c.json")] + extra,
                        stderr=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))
                    time.sleep(args.warmup)
                sw0 = target_status(procs[x].pid)
                t0 = time.monotonic_ns()
                time.sleep(args.window)
                t1 = time.monotonic_ns()
                sw1 = target_status(procs[x].pid)
                if rec:
                    rec.send_signal(2)
                    rec.wait()
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                pcpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                # the kernel's samples of the target (this version's metadata
                # only), per second of the recording
                taken = None
                if rec and "--native-mode" not in extra:
                    try:
                        with open(os.path.join(tmp, "c.json")) as f:
                            meta = json.load(f)["meta"]
                        secs = meta["duration_ns"] / 1e9
                        taken = (meta["native"]["clock_samples"] / secs,
                                 meta["native"]["switch_samples"] / secs)
                    except (OSError, ValueError, KeyError):
                        pass
                windows[name].append((x, t0, t1, (sw1[1] - sw0[1]) / args.window,
                                      pcpu / (args.window + (args.warmup if binary else 0)), taken))
                time.sleep(0.3)
        time.sleep(0.5)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    loads.append(os.getloadavg()[0])

    def means(series, t0, t1):
        inside = [c for c in series if c[0] - c[1] * 1e9 >= t0 and c[0] <= t1]
        if not inside:
            return None
        return statistics.median(c[1] for c in inside), statistics.median(c[2] for c in inside)

    for name, _, _, _ in modes:
        cpu, wall = [], []
        for x, t0, t1, *_ in windows[name]:
            got, other = means(chunks[x], t0, t1), means(chunks[1 - x], t0, t1)
            if got and other:
                wall.append(100 * (got[0] / other[0] - 1))
                cpu.append(100 * (got[1] / other[1] - 1))
        if not cpu:
            print("  %-34s no chunk inside its windows (raise --window)" % name)
            continue
        w = windows[name]
        taken = [v[5] for v in w if v[5]]
        print("  %-34s cpu %+6.2f%%  wall %+6.2f%%  (per round, cpu: %s; wall: %s; recorded target"
              " preempted %.0f/s; pyscope %.1f%% of a CPU%s)" % (
                  name, statistics.median(cpu), statistics.median(wall),
                  " ".join("%+.1f" % v for v in cpu), " ".join("%+.1f" % v for v in wall),
                  statistics.median(v[3] for v in w), 100 * statistics.median(v[4] for v in w),
                  "; perf samples/s of it: clock %.0f, at switches %.0f" % (
                      statistics.median(t[0] for t in taken), statistics.median(t[1] for t in taken))
                  if taken else ""))
    print("  (load during the rounds: %s)" % " ".join("%.1f" % v for v in loads))


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def memory(args, tmp, lib):
    print("== pyscope memory recording 20 threads x 50 frames with --native at 100 Hz for %d s (%s)"
          % (args.memory_seconds, load()))
    proc = start(args, tmp, lib, "hog", 50, 20)
    try:
        out = os.path.join(tmp, "m.json")
        rec = subprocess.Popen([args.pyscope, "record", "--native", "--idle", "-p", str(proc.pid),
                                "-d", str(args.memory_seconds), "-f", "json", "-q", "-o", out],
                               stderr=subprocess.DEVNULL)
        points = []
        started = time.monotonic()
        # wait4, not poll(), reaps it: its rusage gives the peak, the
        # writing of the output included.
        usage = None
        while usage is None:
            time.sleep(args.memory_seconds / 12)
            pid, _, ru = os.wait4(rec.pid, os.WNOHANG)
            if pid:
                usage = ru
                rec.returncode = 0
                break
            try:
                points.append((time.monotonic() - started, rss_kb(rec.pid)))
            except OSError:
                pass
        for t, kb in points:
            print("  t=%5.0f s  VmRSS %6.1f MB" % (t, kb / 1024))
        # Only points inside the recording: the last ones catch it writing
        # its output and exiting.
        good = [(t, kb) for t, kb in points if kb and t <= args.memory_seconds - 5]
        if len(good) >= 3:
            (t0, m0), (t1, m1) = good[1], good[-1]
            rate = (m1 - m0) / 1024 / max(t1 - t0, 1) * 60
            print("  growth after the first point: %.2f MB/min; extrapolated to 10 min: %.1f MB"
                  % (rate, m1 / 1024 + rate * (600 - t1) / 60))
        print("  peak VmRSS (VmHWM, output written): %.1f MB" % (usage.ru_maxrss / 1024))
        with open(out) as f:
            meta = json.load(f)["meta"]
        print("  passes %d, C stacks: %s" % (meta["passes"], meta.get("native")))
    finally:
        proc.kill()
        proc.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=os.path.expanduser(
        "~/.pyenv/versions/3.12.1/bin/python3.12"))
    parser.add_argument("--pyscope", default=os.path.join(REPO, "pyscope"))
    parser.add_argument("--baseline", help="another pyscope binary, side by side (interleaved rounds)")
    parser.add_argument("--only", default="throughput,cost,memory")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--cost-env", action="append", default=[],
                        help="cost: one more --native mode, pyscope run with VAR=VALUE[,VAR=VALUE] in its "
                             "environment (PYSCOPE_CHECK_UNWIND=1, or a build's own settings)")
    parser.add_argument("--cost-workload", choices=["mixed", "c"], default="mixed",
                        help="cost: Python arithmetic with short C calls, or nearly all in C calls")
    parser.add_argument("--pin", type=int, default=0,
                        help="cost: the CPU both targets run on (-1: wherever the kernel puts them)")
    parser.add_argument("--cost-rate", type=float, default=100, help="cost: the sampling rate")
    parser.add_argument("--chunk-work", type=int, default=100000,
                        help="cost: iterations of work per timed chunk")
    parser.add_argument("--window", type=float, default=4,
                        help="cost: seconds each mode records per round")
    parser.add_argument("--warmup", type=float, default=1.5,
                        help="cost: seconds between pyscope's start and its window")
    parser.add_argument("--memory-seconds", type=int, default=120)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_lib(tmp)
        for section in args.only.split(","):
            {"throughput": throughput, "cost": cost, "memory": memory}[section](args, tmp, lib)


if __name__ == "__main__":
    main()
