"""record --native (issue #19): merged C+Python stacks per second at -r max
(1 thread x 50 Python frames, inside a C call), the target's slowdown at
100 Hz with --native (perf_event and the ptrace fallback) against Python-only
sampling and no sampling, and pyscope's memory over a long --native
recording of 20 threads. Prints numbers (medians of interleaved rounds); it
never fails on one.

usage: /usr/bin/python3 bench/bench_native_sampling.py [--only throughput,cost,memory]
       [--python PATH] [--rounds N] [--memory-seconds S] [--baseline PYSCOPE]
"""
import argparse
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

def deep(k, body):
    if k:
        return deep(k - 1, body)
    return body()

def hog_forever():
    while True:
        lib.hog_checksum(BUF, len(BUF), 20000)

if mode == "hog":
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


def run_work(args, tmp, lib, n, record):
    proc = start(args, tmp, lib, str(n), 50, 1)
    rec = None
    try:
        if record:
            rec = subprocess.Popen([args.pyscope, "record", "-p", str(proc.pid), "-r", "100", "-f",
                                    "json", "-q", "-o", os.path.join(tmp, "c.json")] + record,
                                   stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        elapsed = tuple(float(v) for v in proc.stdout.readline().split())
    finally:
        if rec:
            rec.send_signal(2)
            rec.wait()
        proc.kill()
        proc.wait()
    return elapsed


def cost(args, tmp, lib):
    """The target's own time for a fixed amount of work: wall time (what a
    ptrace stop costs it shows here) and its CPU time (user+sys: the
    kernel's copy of its registers and stack at each perf sample is charged
    to it). Each round runs every mode once, in turn; the slowdown is the
    median over rounds of a mode's time against the unrecorded run of the
    same round, so that the load of a moment weighs on both."""
    print("== target slowdown at 100 Hz: its own time for fixed work, 1 thread x 50 frames (%s)"
          % load())
    modes = [("not recorded", None), ("Python only", []), ("--native (perf_event)", ["--native"]),
             ("--native-mode=ptrace", ["--native", "--native-mode", "ptrace"])]
    times = {name: [] for name, _ in modes}
    for _ in range(args.rounds):
        for name, extra in modes:
            times[name].append(run_work(args, tmp, lib, args.work, extra))
    base = times["not recorded"]
    for name, _ in modes:
        wall = [t[0] for t in times[name]]
        cpu = [t[1] for t in times[name]]
        print("  %-24s wall median %.3f s %+6.2f%%  cpu median %.3f s %+6.2f%%  (rounds, wall/cpu:"
              " %s)" % (
                  name, statistics.median(wall),
                  100 * statistics.median([t[0] / b[0] - 1 for t, b in zip(times[name], base)]),
                  statistics.median(cpu),
                  100 * statistics.median([t[1] / b[1] - 1 for t, b in zip(times[name], base)]),
                  ", ".join("%.2f/%.2f" % t for t in times[name])))
    print("  (%s)" % load())


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
        while rec.poll() is None:
            time.sleep(args.memory_seconds / 12)
            try:
                points.append((time.monotonic() - started, rss_kb(rec.pid)))
            except OSError:
                break
        rec.wait()
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
    parser.add_argument("--baseline", help="another pyscope binary, for throughput side by side")
    parser.add_argument("--only", default="throughput,cost,memory")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--work", type=int, default=1000000)
    parser.add_argument("--memory-seconds", type=int, default=120)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_lib(tmp)
        for section in args.only.split(","):
            {"throughput": throughput, "cost": cost, "memory": memory}[section](args, tmp, lib)


if __name__ == "__main__":
    main()
