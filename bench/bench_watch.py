"""The slowdown `pyscope watch --reentry FUNC -p PID` causes in a program
that calls FUNC N times (default 10**6) without ever re-entering it: the
program times its own calls, once alone and once watched, and the medians
of RUNS runs are compared. FUNC is the Python method of watch_target.py
(per interpreter; 3.11+ also with --exact) or, with --native, a C function
called through ctypes. With --others the program calls another Python
function instead, N times, while FUNC is watched: what every other call
pays (where debug registers never trap, or with PYSCOPE_WATCH_NO_DR=1 in
the environment, every Python frame start is a breakpoint).

With --compare OTHER, a second pyscope binary (the build before a change)
watches the same program in the same rounds: each round runs the program
alone, watched by OTHER and watched by --pyscope, one after the other, and
the line shows both medians per call.

usage: python3 bench/bench_watch.py [--python PATH]... [--calls N] [--runs N]
                                    [--exact] [--native] [--others] [--pyscope PATH]
                                    [--compare OTHER]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FUNC = "watch_target.py:Pool._append_to_free_list"
GEN_FUNC = "watch_target.py:Pool._appender"


CPU = {}   # pyscope's CPU seconds (user + system) of each watched run, by binary


def run_once(python, calls, mode, library, pyscope, watch_args):
    argv = [python, os.path.join(HERE, "watch_target.py"), str(calls), mode]
    if library:
        argv.append(library)
    target = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    watcher = None
    try:
        if target.stdout.readline().strip() != b"ready":
            sys.exit("target did not start")
        if watch_args is not None:
            watcher = subprocess.Popen([pyscope, "watch"] + watch_args + ["-p", str(target.pid)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            # Start the calls once pyscope watches the function.
            deadline = time.monotonic() + 30
            seen = b""
            while b"watching" not in seen:
                line = watcher.stderr.readline()
                if not line or time.monotonic() > deadline:
                    sys.exit("pyscope did not start watching: %s" % seen.decode())
                seen += line
            drain = threading.Thread(target=watcher.stderr.read, daemon=True)
            drain.start()
        target.stdin.write(b"go\n")
        target.stdin.flush()
        line = target.stdout.readline().split()
        target.wait(timeout=3600)
        if watcher is not None:
            # wait4, not wait: its rusage is pyscope's CPU time.
            deadline = time.monotonic() + 60
            while watcher.returncode is None and time.monotonic() < deadline:
                pid, status, usage = os.wait4(watcher.pid, os.WNOHANG)
                if pid:
                    watcher.returncode = os.waitstatus_to_exitcode(status)
                    CPU.setdefault(pyscope, []).append(usage.ru_utime + usage.ru_stime)
                else:
                    time.sleep(0.01)
            if watcher.returncode != 0:
                sys.exit("pyscope watch failed with %d" % watcher.returncode)
        return float(line[1])
    finally:
        for proc in (watcher, target):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def version_of(python):
    out = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                         stdout=subprocess.PIPE, check=True)
    return out.stdout.decode().strip()


def measure(label, python, args, mode, library, watch_args):
    if args.compare:
        plain, other, watched = [], [], []
        for _ in range(args.runs):
            plain.append(run_once(python, args.calls, mode, library, args.pyscope, None))
            other.append(run_once(python, args.calls, mode, library, args.compare, watch_args))
            watched.append(run_once(python, args.calls, mode, library, args.pyscope, watch_args))
        base = statistics.median(plain)
        before, after = statistics.median(other), statistics.median(watched)
        cpu = [statistics.median(CPU.pop(binary, [0])) / args.calls * 1e6
               for binary in (args.compare, args.pyscope)]
        print("| %s | %s | %.3f s | %.3f s | %.1f us (%.1f) | %.3f s | %.1f us (%.1f) | %s |"
              % (version_of(python), label, base, before, (before - base) / args.calls * 1e6,
                 cpu[0], after, (after - base) / args.calls * 1e6, cpu[1], load()), flush=True)
        return
    plain = [run_once(python, args.calls, mode, library, args.pyscope, None)
             for _ in range(args.runs)]
    watched = [run_once(python, args.calls, mode, library, args.pyscope, watch_args)
               for _ in range(args.runs)]
    base, slow = statistics.median(plain), statistics.median(watched)
    per_call = (slow - base) / args.calls * 1e6
    print("| %s | %s | %.3f s | %.3f s | %.1fx | %.1f us |"
          % (version_of(python), label, base, slow, slow / base, per_call), flush=True)


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", action="append")
    parser.add_argument("--pyscope", default=os.path.join(HERE, "..", "pyscope"))
    parser.add_argument("--calls", type=int, default=10 ** 6)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--exact", action="store_true", help="3.11+: also time --exact")
    parser.add_argument("--native", action="store_true", help="also time a C function")
    parser.add_argument("--compare", help="another pyscope binary, timed in the same rounds")
    parser.add_argument("--others", action="store_true",
                        help="also time calls of another Python function while FUNC is watched")
    parser.add_argument("--generator", action="store_true",
                        help="also time a generator function resumed once per call")
    args = parser.parse_args()
    pythons = args.python or [os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3.12")]
    print("%d calls, median of %d runs each" % (args.calls, args.runs))
    if args.compare:
        print("per call: the watched run's extra time over the run alone; in brackets, "
              "pyscope's own CPU time (user + system) per call")
        print("| CPython | watched | alone | before | before: per call | after "
              "| after: per call | load |")
        print("|---|---|---|---|---|---|---|---|")
    else:
        print("| CPython | watched | alone | watched | slowdown | per call |")
        print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        library = None
        if args.native:
            library = os.path.join(tmp, "libwatchbench.so")
            subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", library,
                            os.path.join(HERE, "watch_native.c")], check=True)
        for python in pythons:
            minor = int(version_of(python).split(".")[1])
            no_dr = os.environ.get("PYSCOPE_WATCH_NO_DR") == "1"
            measure("Python function" + (" (no debug registers)" if no_dr else
                                         " (every call trapped)" if minor <= 10 else ""),
                    python, args, "python", None, ["--reentry", FUNC])
            if args.exact and minor >= 11:
                measure("Python function, --exact", python, args, "python", None,
                        ["--exact", "--reentry", FUNC])
            if args.others:
                measure("another Python function (FUNC not called)", python, args, "others",
                        None, ["--reentry", FUNC])
            if args.generator:
                measure("generator function, resumed", python, args, "generator", None,
                        ["--reentry", GEN_FUNC])
            if args.native:
                measure("C function (ctypes)", python, args, "native", library,
                        ["--reentry", "pyscope_bench_append"])


if __name__ == "__main__":
    main()
