"""Times `pyscope dump --native PID` on a live 50-thread process and
`pyscope dump --core FILE` (with and without --native) on a kernel core of
the same program, and prints the medians; gdb's `thread apply all bt` on the
same process is timed once for comparison.

usage: python3 bench/native_bench.py [--python PATH] [--runs N] [--pyscope PATH]
"""
import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(argv, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            sys.exit("%s failed: %s" % (" ".join(argv), proc.stderr.decode()[-500:]))
    return statistics.median(times) * 1000, min(times) * 1000


def start_target(python, cwd, allow_core):
    def setup():
        if allow_core:
            resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)
    proc = subprocess.Popen([python, os.path.join(HERE, "native_target.py")], cwd=cwd,
                            stdout=subprocess.PIPE, preexec_fn=setup)
    if proc.stdout.readline().strip() != b"ready":
        sys.exit("target did not start")
    return proc


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3.12"))
    parser.add_argument("--pyscope", default=os.path.join(HERE, "..", "pyscope"))
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc = start_target(args.python, tmp, allow_core=True)
        try:
            med, best = timed([args.pyscope, "dump", "--native", str(proc.pid)], args.runs)
            print("dump --native, live, 50 threads: median %.1f ms (min %.1f)" % (med, best))
            med, best = timed([args.pyscope, "dump", str(proc.pid)], args.runs)
            print("dump (Python only), live:        median %.1f ms (min %.1f)" % (med, best))
            if shutil.which("gdb"):
                med, _ = timed(["gdb", "-batch", "-p", str(proc.pid), "-ex",
                                "thread apply all bt"], 1)
                print("gdb thread apply all bt (once):  %.1f ms" % med)
            proc.send_signal(signal.SIGQUIT)       # default action: core dump
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        cores = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.startswith("core")]
        if not cores:
            print("no kernel core written (core_pattern %r); core timings skipped"
                  % open("/proc/sys/kernel/core_pattern").read().strip())
            return
        core = cores[0]
        size = os.path.getsize(core) / 1e6
        med, best = timed([args.pyscope, "dump", "--core", core], args.runs)
        print("dump --core (%.0f MB core):        median %.1f ms (min %.1f)" % (size, med, best))
        med, best = timed([args.pyscope, "dump", "--core", core, "--native"], args.runs)
        print("dump --core --native:            median %.1f ms (min %.1f)" % (med, best))


if __name__ == "__main__":
    main()
