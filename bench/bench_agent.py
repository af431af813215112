"""pyscope agent's own cost: PROCESSES Python processes x THREADS threads
(bench/targets/agent_service.py) under one agent, at each --rate given; the
agent's CPU (user+sys from /proc/PID/stat over the measured span, after
every process is attached) as a share of one core, its resident memory,
and the rate it kept (samples per process per second from its /metrics).
The agent runs with --cpu-budget 0, so that the figure is its real cost,
not the budget's effect. Rounds interleave the rates; medians are printed.

usage: /usr/bin/python3 bench/bench_agent.py [--processes 50] [--threads 10]
           [--rates 19,100] [--seconds 30] [--rounds 3] [--interp PATH]
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from conftest import pick_interp  # noqa: E402

TARGET = ROOT / "bench" / "targets" / "agent_service.py"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def metric(text, name):
    return [float(v) for v in re.findall(r"^%s(?:\{[^}]*\})? (\S+)$" % name, text, re.M)]


def one_run(pyscope, rate, seconds, processes, marker, budget="0", settle=2):
    log = Path(marker) / ("agent-%g.log" % rate)
    if log.exists():
        log.unlink()  # the agent appends: a previous run's port is not this one's
    agent = subprocess.Popen([str(pyscope), "agent", "--listen", "127.0.0.1:0", "--rate", str(rate),
                              "--cpu-budget", budget, "--match", re.escape(marker), "--log", str(log)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port = None
        for _ in range(500):
            m = re.search(r":(\d+)/", log.read_text()) if log.exists() else None
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.02)
        url = "http://127.0.0.1:%d/metrics" % port
        for _ in range(300):
            text = urllib.request.urlopen(url).read().decode()
            if sum(metric(text, "pyscope_agent_processes")[:1]) >= processes:
                break
            time.sleep(0.1)
        time.sleep(settle)  # attaching done, first whys taken (and the budget applied)
        text = urllib.request.urlopen(url).read().decode()
        passes0 = sum(metric(text, "pyscope_process_samples_total"))
        cpu0, t0 = cpu_seconds(agent.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = cpu_seconds(agent.pid), time.monotonic()
        text = urllib.request.urlopen(url).read().decode()
        passes1 = sum(metric(text, "pyscope_process_samples_total"))
        return {"cpu": (cpu1 - cpu0) / (t1 - t0) * 100, "rss": rss_mb(agent.pid),
                "rate": (passes1 - passes0) / (t1 - t0) / processes,
                "in_force": metric(text, "pyscope_agent_rate_hz")[0],
                "limited": metric(text, "pyscope_agent_cpu_budget_limited")[0]}
    finally:
        agent.send_signal(signal.SIGTERM)
        if agent.wait(timeout=10) != 0:
            print("agent exited %s" % agent.returncode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=50)
    ap.add_argument("--threads", type=int, default=10)
    ap.add_argument("--rates", default="19,100")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--interp")
    ap.add_argument("--budget", help="also a run at 19 Hz with this --cpu-budget (percent), "
                    "after a settling minute: the rate the budget leaves and the CPU it keeps")
    args = ap.parse_args()
    pyscope = Path(os.environ.get("PYSCOPE", ROOT / "pyscope"))
    interp = args.interp or pick_interp().path
    marker = "/tmp/pyscope-bench-agent-%d" % os.getpid()
    os.makedirs(marker, exist_ok=True)
    targets = []
    try:
        for _ in range(args.processes):
            targets.append(subprocess.Popen([interp, str(TARGET), str(args.threads), marker],
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        for t in targets:
            t.stdout.readline()
        rates = [float(r) for r in args.rates.split(",")]
        results = {r: [] for r in rates}
        print("%d processes x %d threads (%s), %g s per run, load %s"
              % (args.processes, args.threads, interp, args.seconds, os.getloadavg()))
        for rnd in range(args.rounds):
            for r in rates:
                res = one_run(pyscope, r, args.seconds, args.processes, marker)
                results[r].append(res)
                print("  round %d at %g Hz: CPU %.2f%% of a core, RSS %.1f MB, kept %.1f Hz"
                      % (rnd + 1, r, res["cpu"], res["rss"], res["rate"]), flush=True)
        if args.budget:
            res = one_run(pyscope, 19, args.seconds, args.processes, marker, args.budget, settle=40)
            print("19 Hz with --cpu-budget %s: CPU %.2f%% of a core (measured after 40 s of "
                  "settling), rate in force %.2f Hz, limited=%d, RSS %.1f MB"
                  % (args.budget, res["cpu"], res["in_force"], res["limited"], res["rss"]))
        for r in rates:
            med = {k: statistics.median(x[k] for x in results[r]) for k in ("cpu", "rss", "rate")}
            print("%g Hz: median CPU %.2f%% of one core, RSS %.1f MB, rate kept %.1f Hz (load %s)"
                  % (r, med["cpu"], med["rss"], med["rate"], os.getloadavg()))
    finally:
        for t in targets:
            t.kill()
            t.wait()
        for f in Path(marker).iterdir():
            f.unlink()
        os.rmdir(marker)


if __name__ == "__main__":
    main()
