"""pyscope agent's own cost: PROCESSES Python processes x THREADS threads
(bench/targets/agent_service.py) under one agent, at each --rate given; the
agent's CPU (user+sys from /proc/PID/stat over the measured span, after
every process is attached) as a share of one core, its resident memory,
and the rate it kept (ticks per process per second from its /metrics: its
passes, and a quiet process's ticks that a pass at another tick of the
same stretch stood for, see --idle-stride).
The agent runs with --cpu-budget 0, so that the figure is its real cost,
not the budget's effect. Rounds interleave the rates; medians are printed.
On a loaded machine the agent may not keep the rate: its CPU per process
tick (one process, all its threads) and that times the requested rate are
printed too.

Then the targets' slowdown: one more process spins a Python loop
(bench/targets/cpu_loop.py) among the others while an agent at 19 Hz samples
them all; the agent is stopped (SIGSTOP) and let go (SIGCONT) in turn, and
the loop's iterations per wall second and per CPU second are compared,
medians over --slowdown-rounds pairs (0: skip).

With --binary-b PATH every run is done with both binaries, interleaved, and
printed side by side (A is $PYSCOPE or ./pyscope); --args-a and --args-b
add agent options to one of them (A and B may then be the same binary:
--binary-b ./pyscope --args-a=--bpf).

With --together (and --binary-b), instead of one after the other, the
agents of both binaries sample the same processes at the same time in each
round, so that a shared, noisy machine weighs on both alike; their CPU is
taken over the same span (neither makes the targets run: both only read).

With --floor, bench/look_floor (the agent's look at the same processes at
the same rate, and nothing else: target/run_clock.c) runs over each
measured span too, and its CPU is printed beside the agents': the part of
their cost no change around the look can remove, on the machine as it is
during that span. On a shared machine whose speed varies from one minute
to the next, the agent's CPU less the floor's is the steadier figure.

With --rss-minutes M, instead: one agent per binary at 19 Hz on the same
processes at the same time for M minutes, their RSS every --rss-every
seconds, and the growth per minute over the second half of the run
extrapolated to one hour.

usage: /usr/bin/python3 bench/bench_agent.py [--processes 50] [--threads 10] [--wake 0.05]
           [--why-every S]
           [--rates 19,100] [--seconds 30] [--rounds 3] [--settle 2] [--interp PATH]
           [--slowdown-rounds 5] [--slowdown-seconds 10] [--binary-b PATH]
           [--args-a=OPTIONS] [--args-b=OPTIONS] [--together] [--floor]
           [--rss-minutes M [--rss-every 30]]
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from conftest import pick_interp  # noqa: E402

TARGET = ROOT / "bench" / "targets" / "agent_service.py"
LOOP = ROOT / "bench" / "targets" / "cpu_loop.py"
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


WHY_EVERY = None  # --why-every, for every agent started
FLOOR_PIDS = None  # --floor: the processes its look is run on
FLOOR = ROOT / "build" / "release" / "bench" / "look_floor"


class Floor:
    """bench/look_floor at rate on FLOOR_PIDS, if --floor; .cpu() over the span
    from .begin() (percent of a core), None without --floor."""

    def __init__(self, rate):
        self.proc = None
        if FLOOR_PIDS:
            self.proc = subprocess.Popen([str(FLOOR), str(rate)] + [str(p) for p in FLOOR_PIDS],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True)

    def begin(self):
        if self.proc:
            self.start = cpu_seconds(self.proc.pid), time.monotonic()

    def cpu(self):
        if not self.proc:
            return None
        cpu1, t1 = cpu_seconds(self.proc.pid), time.monotonic()
        return (cpu1 - self.start[0]) / (t1 - self.start[1]) * 100

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.communicate(timeout=10)


def start_agent(pyscope, rate, processes, marker, budget="0", name=""):
    """-> (the agent's Popen, its /metrics URL) once it samples processes.
    pyscope: the binary, or (the binary, more agent options)."""
    pyscope, extra = pyscope if isinstance(pyscope, tuple) else (pyscope, [])
    log = Path(marker) / ("agent%s-%g.log" % (name, rate))
    if log.exists():
        log.unlink()  # the agent appends: a previous run's port is not this one's
    agent = subprocess.Popen([str(pyscope), "agent", "--listen", "127.0.0.1:0", "--rate", str(rate),
                              "--cpu-budget", budget, "--match", re.escape(marker), "--log", str(log)]
                             + (["--why-every", str(WHY_EVERY)] if WHY_EVERY else []) + extra,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
    return agent, url


def stop_agent(agent):
    agent.send_signal(signal.SIGCONT)
    agent.send_signal(signal.SIGTERM)
    if agent.wait(timeout=10) != 0:
        print("agent exited %s" % agent.returncode)


def ticks_covered(text):
    """Process ticks so far: passes, and ticks a quiet process's pass stood for."""
    return (sum(metric(text, "pyscope_process_samples_total")) +
            sum(metric(text, "pyscope_agent_quiet_ticks_skipped_total")))


def one_run(pyscope, rate, seconds, processes, marker, budget="0", settle=2):
    agent, url = start_agent(pyscope, rate, processes, marker, budget)
    floor = Floor(rate)
    try:
        time.sleep(settle)  # attaching done, first whys taken (and the budget applied)
        text = urllib.request.urlopen(url).read().decode()
        passes0 = ticks_covered(text)
        cpu0, t0 = cpu_seconds(agent.pid), time.monotonic()
        floor.begin()
        time.sleep(seconds)
        cpu1, t1 = cpu_seconds(agent.pid), time.monotonic()
        floor_cpu = floor.cpu()
        text = urllib.request.urlopen(url).read().decode()
        passes1 = ticks_covered(text)
        per_pass = (cpu1 - cpu0) / max(passes1 - passes0, 1)
        return {"cpu": (cpu1 - cpu0) / (t1 - t0) * 100, "rss": rss_mb(agent.pid),
                "rate": (passes1 - passes0) / (t1 - t0) / processes,
                "us_pass": per_pass * 1e6, "projected": per_pass * rate * processes * 100,
                "in_force": metric(text, "pyscope_agent_rate_hz")[0],
                "limited": metric(text, "pyscope_agent_cpu_budget_limited")[0],
                "floor": floor_cpu}
    finally:
        floor.stop()
        stop_agent(agent)


def together_run(binaries, rate, seconds, processes, marker, settle):
    """One agent per binary on the same processes at once: {name: result}."""
    agents = {}
    floor = Floor(rate)
    try:
        for b, path in binaries.items():
            agents[b] = start_agent(path, rate, processes, marker, name=b)
        time.sleep(settle)
        before = {}
        for b, (agent, url) in agents.items():
            text = urllib.request.urlopen(url).read().decode()
            before[b] = (ticks_covered(text),
                         cpu_seconds(agent.pid), time.monotonic())
        floor.begin()
        time.sleep(seconds)
        floor_cpu = floor.cpu()
        results = {}
        for b, (agent, url) in agents.items():
            cpu1, t1 = cpu_seconds(agent.pid), time.monotonic()
            text = urllib.request.urlopen(url).read().decode()
            passes1 = ticks_covered(text)
            passes0, cpu0, t0 = before[b]
            per_pass = (cpu1 - cpu0) / max(passes1 - passes0, 1)
            results[b] = {"cpu": (cpu1 - cpu0) / (t1 - t0) * 100, "rss": rss_mb(agent.pid),
                          "rate": (passes1 - passes0) / (t1 - t0) / processes,
                          "us_pass": per_pass * 1e6,
                          "projected": per_pass * rate * processes * 100, "floor": floor_cpu}
        return results
    finally:
        floor.stop()
        for agent, _ in agents.values():
            stop_agent(agent)


class LoopReader:
    """The cpu_loop target's reports, (count, wall, cpu), as they come."""

    def __init__(self, proc):
        self.lines = []
        self.thread = threading.Thread(target=self.read, args=(proc,), daemon=True)
        self.thread.start()

    def read(self, proc):
        for line in proc.stdout:
            n, wall, cpu = line.split()
            self.lines.append((int(n), float(wall), float(cpu)))

    def rates(self, seconds):
        """Iterations per wall second and per CPU second over the next seconds."""
        time.sleep(0.5)
        a = self.lines[-1]
        time.sleep(seconds)
        b = self.lines[-1]
        return (b[0] - a[0]) / (b[1] - a[1]), (b[0] - a[0]) / max(b[2] - a[2], 1e-9)


def slowdown(pyscope, loop, processes, marker, rounds, seconds):
    """Medians of the loop's rates with the agent stopped and running."""
    agent, _ = start_agent(pyscope, 19, processes + 1, marker)
    off, on = [], []
    try:
        time.sleep(2)
        for rnd in range(rounds):
            for running in ((False, True) if rnd % 2 == 0 else (True, False)):
                agent.send_signal(signal.SIGCONT if running else signal.SIGSTOP)
                (on if running else off).append(loop.rates(seconds))
    finally:
        stop_agent(agent)
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    return {"wall_off": med(off, 0), "wall_on": med(on, 0), "cpu_off": med(off, 1),
            "cpu_on": med(on, 1)}


def rss_growth(binaries, processes, marker, minutes, every):
    """Agents of every binary side by side: RSS points and the hour's projection."""
    agents = {b: start_agent(path, 19, processes, marker, name=b)[0]
              for b, path in binaries.items()}
    start = time.monotonic()
    points = {b: [] for b in binaries}
    try:
        while True:
            t = time.monotonic() - start
            for b, agent in agents.items():
                points[b].append((t / 60, rss_mb(agent.pid)))
            print("  %5.1f min: %s" % (t / 60, ", ".join("%s RSS %.1f MB" % (b, points[b][-1][1])
                                                          for b in binaries)), flush=True)
            if t >= minutes * 60:
                break
            time.sleep(min(every, max(minutes * 60 - t, 0.1)))
    finally:
        for agent in agents.values():
            stop_agent(agent)
    for b in binaries:
        late = [p for p in points[b] if p[0] >= minutes / 2]
        slope = ((late[-1][1] - late[0][1]) / (late[-1][0] - late[0][0])
                 if len(late) > 1 and late[-1][0] > late[0][0] else 0)
        print("%s RSS %.1f MB after %.1f min, %+.3f MB a minute over the second half: "
              "%.1f MB projected at 60 min" % (b, points[b][-1][1], points[b][-1][0], slope,
                                               points[b][-1][1] + slope * (60 - points[b][-1][0])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=50)
    ap.add_argument("--threads", type=int, default=10)
    ap.add_argument("--wake", type=float, default=0.05,
                    help="seconds between a worker's wake-ups (larger: a quieter service)")
    ap.add_argument("--rates", default="19,100")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settle", type=float, default=2,
                    help="seconds between attaching and measuring (over --window-s, 60 by "
                         "default, the agent's window of samples has stopped growing)")
    ap.add_argument("--interp")
    ap.add_argument("--why-every", type=float,
                    help="the agents' --why-every (default theirs, 30 s, which a run shorter "
                         "than that mostly misses: its whys come in the settling time)")
    ap.add_argument("--budget", help="also a run at 19 Hz with this --cpu-budget (percent), "
                    "after a settling minute: the rate the budget leaves and the CPU it keeps")
    ap.add_argument("--slowdown-rounds", type=int, default=5)
    ap.add_argument("--slowdown-seconds", type=float, default=10)
    ap.add_argument("--binary-b", help="a second pyscope, run interleaved with the first")
    ap.add_argument("--args-a", default="", help="more agent options for A (e.g. --bpf)")
    ap.add_argument("--args-b", default="", help="more agent options for B")
    ap.add_argument("--rss-minutes", type=float, help="only the memory growth over this long")
    ap.add_argument("--together", action="store_true",
                    help="both binaries' agents at once in each round (with --binary-b)")
    ap.add_argument("--rss-every", type=float, default=30)
    ap.add_argument("--floor", action="store_true",
                    help="also the CPU of the look alone over each span (bench/look_floor)")
    args = ap.parse_args()
    global WHY_EVERY, FLOOR_PIDS
    WHY_EVERY = args.why_every
    if args.floor:
        subprocess.run(["make", "-s", "-C", str(ROOT), "build/release/bench/look_floor"],
                       check=True)
    binaries = {"A": Path(os.environ.get("PYSCOPE", ROOT / "pyscope"))}
    if args.binary_b:
        binaries["B"] = Path(args.binary_b).resolve()
    for name, path in list(binaries.items()):
        extra = (args.args_a if name == "A" else args.args_b).split()
        binaries[name] = (path, extra)
        print("%s: %s %s" % (name, path, " ".join(extra)))
    interp = args.interp or pick_interp().path
    marker = "/tmp/pyscope-bench-agent-%d" % os.getpid()
    os.makedirs(marker, exist_ok=True)
    targets = []
    try:
        for _ in range(args.processes):
            targets.append(subprocess.Popen([interp, str(TARGET), str(args.threads), marker,
                                             str(args.wake)],
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        for t in targets:
            t.stdout.readline()
        if args.floor:
            FLOOR_PIDS = [t.pid for t in targets]
        if args.rss_minutes:
            print("%d processes x %d threads (%s), load %s"
                  % (args.processes, args.threads, interp, os.getloadavg()))
            rss_growth(binaries, args.processes, marker, args.rss_minutes, args.rss_every)
            return
        rates = [float(r) for r in args.rates.split(",")]
        results = {(b, r): [] for b in binaries for r in rates}
        print("%d processes x %d threads (%s), waking every %g s, %g s per run after %g s, "
              "load %s" % (args.processes, args.threads, interp, args.wake, args.seconds,
                           args.settle, os.getloadavg()))
        for rnd in range(args.rounds):
            for r in rates:
                order = list(binaries) if rnd % 2 == 0 else list(binaries)[::-1]
                if args.together:
                    both = together_run({b: binaries[b] for b in order}, r, args.seconds,
                                        args.processes, marker, args.settle)
                for b in order:
                    res = both[b] if args.together else one_run(
                        binaries[b], r, args.seconds, args.processes, marker, settle=args.settle)
                    results[(b, r)].append(res)
                    print("  round %d, %s at %g Hz: CPU %.2f%% of a core, RSS %.1f MB, kept %.1f Hz, "
                          "%.1f us of CPU per process tick (x %g Hz x %d: %.2f%%)%s"
                          % (rnd + 1, b, r, res["cpu"], res["rss"], res["rate"], res["us_pass"], r,
                             args.processes, res["projected"],
                             "" if res["floor"] is None else "; the look alone %.2f%%, the rest "
                             "%.2f%%" % (res["floor"], res["cpu"] - res["floor"])), flush=True)
        if args.budget:
            for b in binaries:
                res = one_run(binaries[b], 19, args.seconds, args.processes, marker, args.budget,
                              settle=40)
                print("%s, 19 Hz with --cpu-budget %s: CPU %.2f%% of a core (measured after 40 s of "
                      "settling), rate in force %.2f Hz, limited=%d, RSS %.1f MB"
                      % (b, args.budget, res["cpu"], res["in_force"], res["limited"], res["rss"]))
        for r in rates:
            for b in binaries:
                med = {k: statistics.median(x[k] for x in results[(b, r)])
                       for k in ("cpu", "rss", "rate", "us_pass", "projected")}
                print("%s %g Hz: median CPU %.2f%% of one core at %.1f Hz kept, %.1f us per process "
                      "tick (at %g Hz: %.2f%% of one core), RSS %.1f MB (load %s)"
                      % (b, r, med["cpu"], med["rate"], med["us_pass"], r, med["projected"],
                         med["rss"], os.getloadavg()))
                if args.floor:
                    runs = results[(b, r)]
                    print("%s %g Hz: median of the look alone %.2f%%, of the agent less it %.2f%% "
                          "(per round: %s)"
                          % (b, r, statistics.median(x["floor"] for x in runs),
                             statistics.median(x["cpu"] - x["floor"] for x in runs),
                             ", ".join("%.2f-%.2f" % (x["cpu"], x["floor"]) for x in runs)))
        if args.slowdown_rounds > 0:
            proc = subprocess.Popen([interp, str(LOOP), marker], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
            targets.append(proc)
            loop = LoopReader(proc)
            for b in binaries:
                sd = slowdown(binaries[b], loop, args.processes, marker, args.slowdown_rounds,
                              args.slowdown_seconds)
                print("%s slowdown of a CPU-bound loop under the agent at 19 Hz (medians of %d "
                      "interleaved pairs of %g s): %.0f -> %.0f iterations per wall second "
                      "(%+.2f%%), %.0f -> %.0f per CPU second (%+.2f%%)"
                      % (b, args.slowdown_rounds, args.slowdown_seconds, sd["wall_off"],
                         sd["wall_on"], (sd["wall_on"] / sd["wall_off"] - 1) * 100, sd["cpu_off"],
                         sd["cpu_on"], (sd["cpu_on"] / sd["cpu_off"] - 1) * 100), flush=True)
    finally:
        for t in targets:
            t.kill()
            t.wait()
        for f in Path(marker).iterdir():
            f.unlink()
        os.rmdir(marker)


if __name__ == "__main__":
    main()
