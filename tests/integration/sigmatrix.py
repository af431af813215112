"""The signal matrix of issue 13: one trial sends one signal to a pyscope
command that changes its target (or holds it under ptrace), at a random
moment, and then checks the target from the outside:

  survived   it is alive after pyscope is gone, does its work to the end and
             exits with the status it would have had (0; 1 for the uncaught
             exception that run --record-last's program ends with), seen by
             us as its parent or, for `run`'s program, by programs/reaper.py
  unchanged  every executable file mapping, read through /proc/PID/mem,
             equals the file's bytes (no int3 left, nothing else written)
  running    none of its threads is in a stop (t or T) once pyscope is gone
  same       it saw no signal (for `run`, whose program gets the signals
             pyscope is sent: exactly that one, SIGKILL excepted) and kept
             working (its appends went on after pyscope had gone)

Used by test_signals.py (a few trials per cell) and by
bench/signal_matrix.py (the full matrix, printed). The target is
programs/sig_target.py."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import HERE, PROGRAMS, stat_state, target_env

NATIVE = HERE / "native"

MODES = ("watch-python", "watch-native", "dump-pause", "dump-native", "run", "run-record-last",
         "record")
SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGPIPE", "SIGUSR1", "SIGALRM", "SIGKILL")
CHECKS = ("survived", "unchanged", "running", "same")
PY_FUNC = "reentry_pool.py:Pool._append_to_free_list"
C_FUNC = "native:pyscope_pool_append"
READY_TIMEOUT = 30.0
EXIT_TIMEOUT = 30.0


def build_library(directory):
    """libreentry.so (native/reentry_lib.c), for the ctypes pool."""
    out = Path(directory) / "libreentry.so"
    if not out.exists():
        subprocess.run(["gcc", "-O0", "-g", "-shared", "-fPIC", "-o", str(out),
                        str(NATIVE / "reentry_lib.c")], check=True)
    return out


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def wait_for(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    return None


# Where debug registers never trap, run --record-last stops at the
# exception printer with the kernel's uprobes: an int3 the kernel keeps in
# the code while run records, and takes out when it ends.
PRINTER_ENTRIES = ("PyErr_Print", "PyErr_PrintEx", "_PyErr_Print")


def entry_offsets(path, names):
    """File offsets of the dynamic symbols names in the ELF file path."""
    try:
        syms = subprocess.run(["readelf", "-W", "--dyn-syms", path], capture_output=True,
                              text=True, timeout=30).stdout
        phdrs = subprocess.run(["readelf", "-W", "-l", path], capture_output=True, text=True,
                               timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    loads = []
    for line in phdrs.splitlines():
        parts = line.split()
        if parts and parts[0] == "LOAD":
            loads.append((int(parts[1], 16), int(parts[2], 16), int(parts[4], 16)))
    offsets = set()
    for line in syms.splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[7].split("@")[0] in names and int(parts[1], 16):
            value = int(parts[1], 16)
            for offset, vaddr, filesz in loads:
                if vaddr <= value < vaddr + filesz:
                    offsets.add(value - vaddr + offset)
    return offsets


def code_differences(pid, allowed_int3=()):
    """Executable file mappings whose live bytes differ from the file's:
    a list of 'path+0xOFFSET', empty when all match. The names in
    allowed_int3 may each hold one int3 at their entry."""
    diffs = []
    with open("/proc/%d/maps" % pid) as maps:
        lines = maps.read().splitlines()
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        for line in lines:
            parts = line.split()
            if len(parts) < 6 or "x" not in parts[1] or not parts[5].startswith("/"):
                continue
            if line.endswith("(deleted)"):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            offset = int(parts[2], 16)
            mem.seek(start)
            live = mem.read(end - start)
            with open(parts[5], "rb") as f:
                f.seek(offset)
                disk = f.read(end - start)
            if len(live) < len(disk):
                raise OSError("/proc/%d/mem: short read (the process is going)" % pid)
            live = live[:len(disk)]
            if live != disk:
                allowed = entry_offsets(parts[5], allowed_int3) if allowed_int3 else set()
                wrong = [i for base in range(0, len(live), 4096)
                         if live[base:base + 4096] != disk[base:base + 4096]
                         for i in range(base, min(base + 4096, len(live)))
                         if live[i] != disk[i] and
                         not (live[i] == 0xCC and offset + i in allowed)]
                if wrong:
                    diffs.append("%s+0x%x" % (parts[5], offset + wrong[0]))
    return diffs


def stopped_threads(pid):
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return []
    return [int(tid) for tid in tids
            if stat_state("/proc/%d/task/%s/stat" % (pid, tid)) in ("t", "T")]


def traced_threads(pid):
    """Threads of pid that a tracer still holds (TracerPid in their status)."""
    held = []
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return []
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                tracer = next((line.split()[1] for line in f if line.startswith("TracerPid:")), "0")
        except OSError:
            continue
        if tracer != "0":
            held.append(int(tid))
    return held


def signal_masks(pid):
    """Each thread's pending, blocked and caught signal masks (and the
    process's shared pending set), for the note of a signal that the target
    never handled: pending, blocked or delivered tell different stories."""
    parts = []
    try:
        with open("/proc/%d/status" % pid) as f:
            shared = next((line.split()[1] for line in f if line.startswith("ShdPnd:")), "?")
        parts.append("ShdPnd %s" % shared)
        for tid in sorted(os.listdir("/proc/%d/task" % pid), key=int):
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            parts.append("%s %s SigPnd %s SigBlk %s SigCgt %s"
                         % (tid, fields.get("State", "?").strip().split()[0],
                            fields.get("SigPnd", "?").strip(),
                            fields.get("SigBlk", "?").strip(),
                            fields.get("SigCgt", "?").strip()))
    except (OSError, ValueError):
        parts.append("(gone)")
    return "; ".join(parts)


def alive(pid):
    return stat_state("/proc/%d/stat" % pid) not in (None, "Z", "X")


def killpg(proc):
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


class Trial:
    """One signal sent to one pyscope command; the outcome in .result."""

    def __init__(self, pyscope, interp, mode, signame, workdir, library, rng, index=0):
        self.pyscope = str(pyscope)
        self.interp = str(interp)
        self.mode = mode
        self.signame = signame
        self.signo = getattr(signal, signame)
        self.dir = Path(workdir)
        self.library = library
        self.rng = rng
        self.stem = "%s-%s-%d" % (mode, signame, index)
        self.report = self.dir / (self.stem + ".json")
        self.result = {"survived": False, "unchanged": False, "running": False, "same": False,
                       "landed": False, "detail": []}
        self.procs = []

    def note(self, text):
        self.result["detail"].append(text)

    def popen(self, argv, name, **kwargs):
        err = open(self.dir / ("%s.%s.stderr" % (self.stem, name)), "wb")
        proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                                stdout=kwargs.pop("stdout", subprocess.DEVNULL), stderr=err,
                                cwd=str(self.dir), env=target_env(), start_new_session=True,
                                **kwargs)
        err.close()
        self.procs.append(proc)
        return proc

    def stderr_of(self, name):
        try:
            return (self.dir / ("%s.%s.stderr" % (self.stem, name))).read_text(errors="replace")
        except OSError:
            return ""

    def target_args(self):
        args = [PROGRAMS / "sig_target.py", self.report]
        if self.mode == "watch-native":
            args += ["ctypes", self.library]
        else:
            args += ["python"]
        if self.mode == "run-record-last":
            args.append("--raise")
        return args

    def pyscope_args(self, pid):
        out = self.dir / (self.stem + ".out")
        if self.mode == "watch-python":
            return ["watch", "--reentry", PY_FUNC, "--all", "-o", out, "-p", pid]
        if self.mode == "watch-native":
            return ["watch", "--reentry", C_FUNC, "--all", "-o", out, "-p", pid]
        if self.mode == "dump-pause":
            return ["dump", "--pause", "--locals", pid]
        if self.mode == "dump-native":
            return ["dump", "--native", pid]
        if self.mode == "record":
            return ["record", "-p", pid, "-d", "3", "-q", "-f", "json", "-o", out]
        raise ValueError(self.mode)

    def delay(self):
        # dump is over in 20-50 ms (startup included), --native takes longer
        # to unwind: aim inside it
        if self.mode == "dump-pause":
            return self.rng.uniform(0.0, 0.02)
        if self.mode == "dump-native":
            return self.rng.uniform(0.0, 0.04)
        return self.rng.uniform(0.0, 0.8)

    def running_report(self):
        doc = read_json(self.report)
        return doc if doc and doc.get("extra", {}).get("phase") == "running" else None

    def done_report(self):
        doc = read_json(self.report)
        return doc if doc and doc.get("extra", {}).get("phase") == "done" else None

    def progress(self, pid):
        """The target's CPU time (utime + stime): a working target's grows."""
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            return None

    def check_target(self, pid):
        """Checks while the target still runs, after pyscope is gone (or,
        for run, while pyscope still runs it)."""
        time.sleep(0.05)
        if not alive(pid):
            self.note("target %d is gone" % pid)
            return False
        stopped = wait_for(lambda: not stopped_threads(pid) or None, 1.0)
        if stopped is None:
            self.note("threads left stopped: %s" % stopped_threads(pid))
        else:
            self.result["running"] = True
        # A uprobe's int3 goes when the kernel frees its perf event, which
        # can trail the close by a moment (once seen under ASan on a loaded
        # run): looked at again for up to a second before it counts.
        allowed = PRINTER_ENTRIES if self.mode == "run-record-last" else ()
        deadline = time.monotonic() + 1.0
        while True:
            try:
                diffs = code_differences(pid, allowed)
            except OSError as e:        # it died meanwhile
                self.note("target %d is gone (%s)" % (pid, e))
                return False
            if not diffs or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if diffs:
            self.note("code changed at %s" % ", ".join(diffs[:4]))
        else:
            self.result["unchanged"] = True
        # CPU time counts in 10 ms ticks: on a busy machine a working target
        # may take a while to earn the next one; a stopped one never does.
        before = self.progress(pid)
        after = wait_for(lambda: (self.progress(pid) or 0) > (before or 0), 3.0)
        if before is None or not after:
            self.note("target made no progress in 3 s (cpu ticks %s -> %s)"
                      % (before, self.progress(pid)))
            return False
        return True

    def finish_target(self):
        Path(str(self.report) + ".stop").write_text("")
        return wait_for(self.done_report, EXIT_TIMEOUT)

    def judge_done(self, done, expected_signals, progressed, masks=None, stderr_name="target"):
        if done is None:
            self.note("the target did not finish its work")
            return
        seen = done["extra"]["signals"]
        if seen != expected_signals:
            self.note("the target saw signals %s, expected %s (its signal masks after "
                      "the signal: %s; stderr: %r)"
                      % (seen, expected_signals, masks, self.stderr_of(stderr_name)[-600:]))
        elif progressed:
            self.result["same"] = True

    def run(self):
        try:
            if self.mode.startswith("run"):
                self.run_program_mode()
            else:
                self.run_pid_mode()
        finally:
            for proc in self.procs:
                killpg(proc)
        return self.result

    def send(self, proc):
        self.result["landed"] = proc.poll() is None
        try:
            os.kill(proc.pid, self.signo)
        except ProcessLookupError:
            self.result["landed"] = False

    def run_pid_mode(self):
        target = self.popen([self.interp] + self.target_args(), "target")
        if not wait_for(self.running_report, READY_TIMEOUT):
            self.note("target did not start: %s" % self.stderr_of("target")[-500:])
            return
        tool = self.popen([self.pyscope] + self.pyscope_args(target.pid), "pyscope")
        time.sleep(self.delay())
        self.send(tool)
        try:
            tool.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.note("pyscope did not exit after %s" % self.signame)
            killpg(tool)
        # After a kill -9 of watch its tracer, a process of its own, lets the
        # target go: pyscope is gone when no thread is traced any more.
        if wait_for(lambda: not traced_threads(target.pid) or None, EXIT_TIMEOUT) is None:
            self.note("threads still traced %.0f s after pyscope ended: %s"
                      % (EXIT_TIMEOUT, traced_threads(target.pid)))
        progressed = self.check_target(target.pid)
        masks = signal_masks(target.pid)
        done = self.finish_target()
        try:
            status = target.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            status = None
        if status == 0 and done is not None:
            self.result["survived"] = True
        else:
            self.note("target ended with status %s: %s" % (status,
                                                          self.stderr_of("target")[-300:]))
        self.judge_done(done, [], progressed, masks)

    def run_program_mode(self):
        status_file = self.dir / (self.stem + ".reaped")
        argv = [sys.executable, PROGRAMS / "reaper.py", status_file, self.pyscope, "run"]
        if self.mode == "run-record-last":
            argv += ["--record-last", "2s", "-o", self.dir / (self.stem + ".trace.json")]
        argv += ["--", self.interp] + self.target_args()
        reaper = self.popen(argv, "pyscope")

        def started():
            try:
                first = status_file.read_text().splitlines()[0]
            except (OSError, IndexError):
                return None
            return json.loads(first)["started"]

        tool_pid = wait_for(started, READY_TIMEOUT)
        running = wait_for(self.running_report, READY_TIMEOUT)
        if not tool_pid or not running:
            self.note("program did not start: %s" % self.stderr_of("pyscope")[-500:])
            return
        pid = running["pid"]
        time.sleep(self.delay())
        self.result["landed"] = alive(tool_pid)
        try:
            os.kill(tool_pid, self.signo)
        except ProcessLookupError:
            self.result["landed"] = False
            self.note("pyscope %d was gone before the signal: %s"
                      % (tool_pid, self.stderr_of("pyscope")[-400:]))
        if self.signo == signal.SIGKILL:
            wait_for(lambda: not alive(tool_pid) or None, EXIT_TIMEOUT)
        progressed = self.check_target(pid)
        masks = signal_masks(pid)
        done = self.finish_target()
        try:
            reaper.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.note("pyscope or its program did not exit")
        statuses = {}
        for line in status_file.read_text().splitlines()[1:]:
            doc = json.loads(line)
            statuses[doc["pid"]] = doc["status"]
        expected = 1 if self.mode == "run-record-last" else 0
        if pid not in statuses and self.signo != signal.SIGKILL:
            # pyscope waited for its program and passed its status on
            statuses[pid] = statuses.get(tool_pid)
        if statuses.get(pid) == expected and done is not None:
            self.result["survived"] = True
        else:
            self.note("program ended with status %s (expected %d): %s"
                      % (statuses.get(pid), expected, self.stderr_of("pyscope")[-400:]))
        tool_expected = -9 if self.signo == signal.SIGKILL else expected
        if statuses.get(tool_pid) != tool_expected:
            self.note("pyscope ended with status %s, expected %d"
                      % (statuses.get(tool_pid), tool_expected))
            self.result["survived"] = False
        forwarded = [] if self.signo == signal.SIGKILL else [self.signame]
        self.judge_done(done, forwarded, progressed, masks, "pyscope")


def trial(pyscope, interp, mode, signame, workdir, library, seed, index=0):
    return Trial(pyscope, interp, mode, signame, workdir, library, random.Random(seed),
                 index).run()


def cell_ok(result):
    return all(result[c] for c in CHECKS)
