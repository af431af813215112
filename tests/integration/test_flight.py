"""Integration tests for the flight recorder, `pyscope run --record-last`, on
every interpreter: programs/flight_fail.py fails after a random delay (an
uncaught exception, a non-zero exit, a NULL dereference through ctypes) or is
sent SIGUSR2, and the recording written then (chrome and json formats) must
cover the last WINDOW seconds up to the failure, hold every thread with its
GIL states, and end with the failing thread's last stack."""

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import PROGRAMS, PYSCOPE, discovery, run_pyscope, target_env
from test_native import callthrough_lib  # noqa: F401  (a fixture)

PROGRAM = PROGRAMS / "flight_fail.py"
WINDOW_S = 1.0
# The program runs longer than the window before failing, so the window is
# full; how long exactly is random.
DELAY_RANGE = (1.3, 2.0)
# Between the program's last word (failing_at) and the moment pyscope stops
# it: a few ms, but this machine is shared and busy.
END_SLACK_S = 1.5
# The first pass in the window comes one period (10 ms) after its start, or
# later when the machine is busy; at an exit, the last one that finds the
# threads comes a little before the end.
PASS_SLACK_NS = 300_000_000
NOTE = re.compile(r"pyscope: flight recording of the ([\d.]+) s before (.+?) \((\S+) to (\S+), "
                  r"(\d+) passes, (\d+) threads?(?:; [^)]*)?\) written to (.+) \((\w+)\)")
RAISE_LINE = next(n for n, text in enumerate(PROGRAM.read_text().splitlines(), 1)
                  if text.endswith("# raise-here"))
GIL_TID_OFFSET = 0x40000000


class StallMeter:
    """How long this machine kept a ready process off the CPU while pyscope
    ran: the worst lateness of a thread here waking every 10 ms, as
    pyscope's recorder wakes between passes. A recorder kept off the CPU as
    long takes no pass meanwhile, at the window's start too; the tests
    allow for what was measured, and say so."""

    def __enter__(self):
        self.worst_ns = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            before = time.monotonic_ns()
            time.sleep(0.01)
            self.worst_ns = max(self.worst_ns, time.monotonic_ns() - before - 10_000_000)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


class Recording:
    """What the tests compare, read from either format: meta, thread names
    and their sampled states, and each thread's stacks over time."""

    def __init__(self, meta):
        self.meta = meta
        self.names = {}          # tid -> name
        self.states = {}         # tid -> set of states seen
        self.stacks = {}         # tid -> [(start_ns, [function, ...] outermost first)]
        self.first_ns = None
        self.last_ns = 0

    def tid_named(self, name):
        found = [tid for tid, n in self.names.items() if n == name]
        assert found, "no thread %r in %r" % (name, self.names)
        return found[0]

    def last_stack(self, name):
        stacks = [s for _, s in sorted(self.stacks.get(self.tid_named(name), []),
                                       key=lambda item: item[0])]
        assert stacks, "no stacks for %r" % name
        return stacks[-1]

    def all_functions(self, name):
        return {f for _, s in self.stacks.get(self.tid_named(name), []) for f in s}

    def span(self, start_ns, end_ns):
        self.first_ns = start_ns if self.first_ns is None else min(self.first_ns, start_ns)
        self.last_ns = max(self.last_ns, end_ns)


def read_json_recording(path):
    doc = json.loads(path.read_text())
    assert doc["format"] == "pyscope-record"
    rec = Recording(doc["meta"])
    for t in doc["threads"]:
        rec.names[t["tid"]] = t["name"]
        rec.states[t["tid"]] = {s for s, n in t["state_samples"].items() if n}
    for thread, stack, state, gc, start, end, syscall in doc["timeline"]:
        tid = doc["threads"][thread]["tid"]
        functions = [doc["frames"][f]["function"] for f in doc["stacks"][stack]]
        rec.stacks.setdefault(tid, []).append((start, functions))
        rec.span(start, end)
    return rec


def read_chrome_recording(path):
    doc = json.loads(path.read_text())
    proc = subprocess.run(["python3", str(Path(__file__).parent.parent / "consumers" /
                                          "check_chrome_trace.py"), str(path), "--pyscope"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.returncode == 0, proc.stdout.decode()
    rec = Recording(doc["pyscope"]["meta"])
    open_frames = {}
    for e in doc["traceEvents"]:
        tid = e.get("tid")
        if e["ph"] == "M" and e["name"] == "thread_name" and tid < GIL_TID_OFFSET:
            rec.names[tid] = e["args"]["name"]
        elif e["ph"] == "X" and e.get("cat") == "gil":
            rec.states.setdefault(tid - GIL_TID_OFFSET, set()).add(e["args"]["state"])
            ts = int(round(e["ts"] * 1000))
            rec.span(ts, ts + int(round(e["dur"] * 1000)))
        elif e["ph"] == "B":
            stack = open_frames.setdefault(tid, [])
            stack.append(e["name"])
            rec.stacks.setdefault(tid, []).append((int(round(e["ts"] * 1000)), list(stack)))
        elif e["ph"] == "E":
            open_frames[tid].pop()
    return rec


def read_recording(path, fmt):
    return read_chrome_recording(path) if fmt == "chrome" else read_json_recording(path)


def run_flight(interp, tmp_path, mode, fmt, *extra):
    report = tmp_path / "report.json"
    out = tmp_path / ("flight." + ("trace.json" if fmt == "chrome" else "json"))
    delay = round(random.uniform(*DELAY_RANGE), 2)
    args = ["run", "--record-last", "%gs" % WINDOW_S, "-f", fmt, "-o", out, "--",
            interp.path, PROGRAM, report, mode, delay] + list(extra)
    with StallMeter() as stall:
        result = run_pyscope(args, timeout=60)
    result.stall_ns = stall.worst_ns
    doc = json.loads(report.read_text())
    return result, doc, out


def check_window(stderr, rec, fmt, out, end_unix, note_index=None, stall_ns=0):
    """The note, and a full window that ends at end_unix (give or take).
    note_index picks one of several notes; by default there must be one.
    stall_ns: the StallMeter's figure for the run."""
    notes = NOTE.findall(stderr)
    if note_index is None:
        assert len(notes) == 1, stderr
        note_index = 0
    seconds, _, _, _, passes, threads, path, written_fmt = notes[note_index]
    assert path == str(out) and written_fmt == fmt
    meta = rec.meta
    assert abs(meta["duration_ns"] - WINDOW_S * 1e9) < 1e6, meta
    assert float(seconds) == pytest.approx(WINDOW_S, abs=0.05)
    assert int(passes) == meta["passes"] and meta["passes"] > 0
    window_end = (meta["start_unix_ns"] + meta["duration_ns"]) / 1e9
    assert -0.05 <= window_end - end_unix <= END_SLACK_S, (window_end, end_unix, stderr)
    # The timeline covers [end - WINDOW, end]: from the first pass in the
    # window to its end (or, at an exit, to the last pass that still found
    # the threads).
    slack = PASS_SLACK_NS + stall_ns
    assert rec.first_ns is not None and rec.first_ns <= slack, (
        "first pass %.0f ms into the window; allowed %.0f ms (the machine kept a ready "
        "process off the CPU for up to %.0f ms meanwhile)" % (
            (rec.first_ns or 0) / 1e6, slack / 1e6, stall_ns / 1e6))
    assert meta["duration_ns"] - slack <= rec.last_ns <= meta["duration_ns"], \
        (rec.last_ns, meta, stall_ns)
    assert int(threads) == len(rec.names) >= 3, rec.names


def check_threads(rec):
    assert {"MainThread", "cruncher", "sleeper"} <= set(rec.names.values()), rec.names
    cruncher = rec.states[rec.tid_named("cruncher")]
    assert cruncher & {"holding_gil", "waiting_gil", "running"}, cruncher
    assert "idle" in rec.states[rec.tid_named("sleeper")], rec.states
    assert "sleep_forever" in rec.last_stack("sleeper")


@pytest.fixture
def fmt(interp):
    """The recording's format: Chrome trace and record JSON on alternate
    interpreters (in discovery order, so an old and a new version each get
    both whichever interpreters are selected). The writers do not depend on
    the interpreter; what does, the stacks in the ring, is read either way."""
    ids = [i.id for i in discovery().supported]
    return ("chrome", "json")[ids.index(interp.id) % 2]


def test_uncaught_exception(interp, tmp_path, fmt):
    result, report, out = run_flight(interp, tmp_path, "exception", fmt)
    assert result.returncode == 1, result
    rec = read_recording(out, fmt)
    check_window(result.stderr, rec, fmt, out, report["failing_at"],
                 stall_ns=result.stall_ns)
    check_threads(rec)
    assert "the uncaught RuntimeError in thread %d" % report["threads"]["MainThread"] \
        in result.stderr
    # The recording ends with the traceback as the main thread's stack.
    last = rec.last_stack("MainThread")
    assert last[-3:] == ["main", "fail_exception", "<uncaught RuntimeError>"], last
    assert "countdown" in rec.all_functions("MainThread")
    # The traceback, with each frame's locals, before Python prints its own.
    text = result.stderr
    mine = text.index("pyscope: uncaught RuntimeError in thread %d \"MainThread\""
                      % report["threads"]["MainThread"])
    assert 'File "%s", line %d, in fail_exception\n' % (PROGRAM, RAISE_LINE) in text[mine:]
    assert "      token = 'abc'\n      attempts = 21\n      limit = 42\n" in text[mine:]
    assert "\nRuntimeError: gave up after 42 attempts\n" in text[mine:]
    assert text.index("Traceback (most recent call last):", mine) < text.rindex(
        "Traceback (most recent call last):")


def test_nonzero_exit(interp, tmp_path, fmt):
    result, report, out = run_flight(interp, tmp_path, "exit", fmt)
    assert result.returncode == 3, result
    assert "pyscope: uncaught" not in result.stderr
    rec = read_recording(out, fmt)
    check_window(result.stderr, rec, fmt, out, report["failing_at"],
                 stall_ns=result.stall_ns)
    assert "the exit with status 3" in result.stderr
    check_threads(rec)
    # The main thread waited in countdown, then wrote its report and exited
    # (finalization, e.g. threading._shutdown, may be sampled after that).
    in_main = [s for _, s in sorted(rec.stacks[rec.tid_named("MainThread")],
                                    key=lambda item: item[0]) if "main" in s]
    # Not counting the "[C] time.sleep" leaf of the call it is in.
    in_main = [[f for f in s if not f.startswith("[C] ")] for s in in_main]
    # The last one is in main itself or in one of the calls main makes at its
    # end, however deep inside it (json.dump's encoder under write_report
    # was caught once on 3.11.7).
    assert in_main, rec.stacks
    last = in_main[-1]
    below_main = last[last.index("main") + 1:]
    assert not below_main or below_main[0] in ("countdown", "write_report", "fail_exit"), \
        in_main[-3:]
    assert "countdown" in rec.all_functions("MainThread")


def test_crash(interp, tmp_path, fmt, callthrough_lib):  # noqa: F811
    result, report, out = run_flight(interp, tmp_path, "crash", fmt, callthrough_lib)
    assert result.returncode == 128 + signal.SIGSEGV, result
    assert "SIGSEGV: NULL pointer dereference" in result.stderr   # run's crash report
    rec = read_recording(out, fmt)
    check_window(result.stderr, rec, fmt, out, report["failing_at"],
                 stall_ns=result.stall_ns)
    assert re.search(r"the SIGSEGV in thread \d+", result.stderr)
    check_threads(rec)
    last = rec.last_stack("crasher")
    # Sampled in fail_crash, or already in the ctypes call that crashes.
    assert last[-1] == "fail_crash" or last[-2:] == [
        "fail_crash", "[C] pyscope_crash_read (libcallthrough.so)"], last


@pytest.mark.representative
def test_dump_on_signal(interp, tmp_path, fmt):
    report = tmp_path / "report.json"
    out = tmp_path / ("flight." + ("trace.json" if fmt == "chrome" else "json"))
    delay = round(random.uniform(*DELAY_RANGE), 2)
    proc = subprocess.Popen([str(PYSCOPE), "run", "--record-last", "%gs" % WINDOW_S, "-f", fmt,
                             "--dump-on", "SIGUSR2", "-o", str(out), "--", interp.path,
                             str(PROGRAM), str(report), "signal", "0", "", str(2 * delay + 3)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=target_env(), start_new_session=True)
    with StallMeter() as stall:
        try:
            deadline = time.monotonic() + 30
            while not report.exists():
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.02)
            pid = json.loads(report.read_text())["pid"]
            # To the program itself, then to pyscope, which passes it on; each
            # recording is moved aside once written.
            sent = []
            for to in (pid, proc.pid):
                time.sleep(delay)
                sent.append(time.time())
                os.kill(to, signal.SIGUSR2)
                while not out.exists():
                    assert time.monotonic() < deadline and proc.poll() is None
                    time.sleep(0.02)
                os.rename(out, "%s.%d" % (out, len(sent)))
            # Both recordings are in: the program may end (HOLD is only its bound).
            open(str(report) + ".done", "w").close()
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    stderr = stderr.decode(errors="replace")
    assert proc.returncode == 0, stderr
    assert json.loads(report.read_text())["usr2_seen"] == [], "the program saw SIGUSR2"
    assert stderr.count("before SIGUSR2") == 2, stderr
    assert "no flight recording written" not in stderr
    for i, when in enumerate(sent):
        rec = read_recording(Path("%s.%d" % (out, i + 1)), fmt)
        check_window(stderr, rec, fmt, out, when, note_index=i, stall_ns=stall.worst_ns)
        check_threads(rec)
        assert "countdown" in rec.last_stack("MainThread"), rec.last_stack("MainThread")


def test_not_python_and_clean_exit(interp, tmp_path):
    out = tmp_path / "never.json"
    result = run_pyscope(["run", "--record-last", "5s", "-o", out, "--", "/bin/sh", "-c",
                          "exit 4"])
    assert result.returncode == 4
    assert "pyscope: no flight recording before the exit with status 4:" in result.stderr
    assert not out.exists()
    started = time.monotonic()
    result = run_pyscope(["run", "--record-last", "5s", "-o", out, "--", interp.path, "-c",
                          "print('ok')"])
    took = time.monotonic() - started
    assert result.returncode == 0 and result.stdout == "ok\n"
    assert "no flight recording written" in result.stderr and not out.exists()
    # The program is let go at its exec at once, not once pyscope stops
    # trying to attach every 10 ms (its first 3 s): it took 3.2 s.
    assert took < 2.0, "run --record-last of a program that exits at once took %.2f s" % took


def test_usage_errors(pyscope_binary):
    for args, message in [(["--record-last", "soon"], "--record-last takes a duration"),
                          (["--record-last", "5s", "-f", "png"], "unknown format 'png'"),
                          (["--record-last", "5s", "-r", "0"], "--rate takes"),
                          (["--record-last", "5s", "--dump-on", "SIGKILL"], "--dump-on takes"),
                          (["--dump-on", "USR2"], "go with --record-last"),
                          (["--record-last", "5s", "-o", "-"], "cannot go to stdout")]:
        result = run_pyscope(["run"] + args + ["--", "true"])
        assert result.returncode == 2 and message in result.stderr, (args, result)
