"""What the agent costs a program that context-switches a lot: two Python
threads pass an item back and forth through queues, pinned to one CPU
(every hand-over a switch), and count round trips per second. Runs of
--seconds each, interleaved: without an agent, with an agent sampling it
that counts runs with its BPF program (--bpf), and with one reading each
process's CPU clock (the default). The BPF program runs at every charge of
CPU time on the host, the ping-pong's included; reading a clock adds nothing
to the target's switches. Medians are printed.

usage: /usr/bin/python3 bench/bench_switches.py [--rounds 7] [--seconds 3] [--interp PATH]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from conftest import pick_interp  # noqa: E402

PINGPONG = r"""
import queue, sys, threading, time
a, b = queue.Queue(), queue.Queue()
def echo():
    while True:
        b.put(a.get())
threading.Thread(target=echo, daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
n, end = 0, time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    a.put(n)
    b.get()
    n += 1
print(n / float(sys.argv[1]), flush=True)
"""


def start_agent(pyscope, marker, extra, log):
    agent = subprocess.Popen([str(pyscope), "agent", "--listen", "127.0.0.1:0", "--rate", "19",
                              "--cpu-budget", "0", "--match", re.escape(marker), "--log", log]
                             + extra, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return agent


def one_run(interp, pyscope, mode, seconds, workdir):
    marker = os.path.join(workdir, "pingpong-marker")
    proc = subprocess.Popen(["taskset", "-c", "0", interp, "-c", PINGPONG, str(seconds), marker],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    agent = None
    if mode != "none":
        log = os.path.join(workdir, "agent-%s.log" % mode)
        if os.path.exists(log):
            os.unlink(log)
        agent = start_agent(pyscope, marker, ["--bpf"] if mode == "bpf" else [], log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if os.path.exists(log) and "sampling process %d" % proc.pid in open(log).read():
                break
            time.sleep(0.05)
        time.sleep(0.5)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    rate = float(proc.stdout.readline())
    proc.wait()
    if agent:
        agent.terminate()
        agent.wait()
    return rate


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--interp")
    args = ap.parse_args()
    pyscope = Path(os.environ.get("PYSCOPE", ROOT / "pyscope"))
    interp = args.interp or pick_interp().path
    modes = ("none", "bpf", "cpu_clock")
    got = {m: [] for m in modes}
    print("%s, ping-pong pinned to CPU 0, %g s runs, load %s" % (interp, args.seconds,
                                                               os.getloadavg()))
    with tempfile.TemporaryDirectory() as workdir:
        for rnd in range(args.rounds):
            order = modes if rnd % 2 == 0 else modes[::-1]
            for m in order:
                got[m].append(one_run(interp, pyscope, m, args.seconds, workdir))
            print("  round %d: %s" % (rnd + 1, ", ".join("%s %.0f/s" % (m, got[m][-1])
                                                         for m in modes)), flush=True)
    base = statistics.median(got["none"])
    for m in modes:
        med = statistics.median(got[m])
        print("%-9s median %.0f round trips/s (%+.1f%% against no agent), range %.0f-%.0f"
              % (m, med, 100 * (med - base) / base, min(got[m]), max(got[m])))


if __name__ == "__main__":
    main()
