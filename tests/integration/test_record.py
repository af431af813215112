"""Integration tests for `pyscope record` and `pyscope top`, against live
CPython processes (issue #3).

Targets are programs/rec_*.py (plus the GIL workloads of
../shared/tools/gil_workloads for the ground-truth comparison). The JSON
format of a recording is docs/record-json.md. See README.md here.
"""

import collections
import concurrent.futures
import gzip
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import PROGRAMS, PYSCOPE, REPO, discovery, target_env

STATES = ("holding_gil", "waiting_gil", "running", "idle", "unknown")
META_COUNTERS = ("passes", "passes_failed", "stacks_sampled", "stacks_torn",
                 "gil_busy_passes", "gc_passes", "gc_collections")
# Seconds a record run may take beyond its --duration before it counts as
# hung: attaching, writing, an ASan build, a busy machine.
RECORD_SLACK = 30.0

CONSUMERS = REPO / "tests" / "consumers"
NODE_MODULES = REPO / "build" / "consumers" / "npm" / "node_modules"
SHARED_TOOLS = REPO.parent / "shared" / "tools"
GIL_TRUTH = SHARED_TOOLS / "gil_truth.sh"
GIL_WORKLOADS = SHARED_TOOLS / "gil_workloads"


# --------------------------------------------------------------------------
# Helpers

def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_record(doc):
    """Every field of docs/record-json.md with its type, every cross-table
    reference in range, and the counters consistent with each other."""
    assert isinstance(doc, dict), "top level is not an object"
    assert doc.get("format") == "pyscope-record", doc.get("format")
    assert doc.get("format_version") == 1, doc.get("format_version")
    for key in ("meta", "filters", "frames", "stacks", "threads", "samples", "timeline",
                "summary"):
        assert key in doc, "key %r missing; keys: %s" % (key, sorted(doc))
    meta = doc["meta"]
    for key in ("pyscope_version", "command", "python_version"):
        assert isinstance(meta.get(key), str), "meta.%s: %r" % (key, meta.get(key))
    assert is_number(meta.get("period_ns")) and meta["period_ns"] >= 0, meta.get("period_ns")
    for key in ("pid", "start_unix_ns", "duration_ns") + META_COUNTERS:
        assert is_int(meta.get(key)) and meta[key] >= 0, "meta.%s: %r" % (key, meta.get(key))
    assert is_number(meta.get("rate_hz")), "meta.rate_hz: %r" % meta.get("rate_hz")
    assert meta["passes_failed"] <= meta["passes"], meta
    assert meta["stacks_torn"] <= meta["stacks_sampled"], meta
    assert meta["gil_busy_passes"] <= meta["passes"], meta
    assert meta["gc_passes"] <= meta["passes"], meta
    if meta["stacks_torn"]:
        assert meta["passes_failed"] > 0, "torn stacks but no failed pass: %s" % meta
    filters = doc["filters"]
    assert isinstance(filters.get("idle"), bool) and isinstance(filters.get("gil_only"), bool), filters

    frames, stacks, threads = doc["frames"], doc["stacks"], doc["threads"]
    for i, frame in enumerate(frames):
        assert isinstance(frame.get("function"), str), "frames[%d]: %r" % (i, frame)
        assert isinstance(frame.get("file"), str), "frames[%d]: %r" % (i, frame)
        assert frame.get("line") is None or is_int(frame["line"]), "frames[%d]: %r" % (i, frame)
        assert isinstance(frame.get("synthetic"), bool), "frames[%d]: %r" % (i, frame)
    for i, stack in enumerate(stacks):
        assert isinstance(stack, list), "stacks[%d]: %r" % (i, stack)
        for f in stack:
            assert is_int(f) and 0 <= f < len(frames), "stacks[%d] names frame %r" % (i, f)
    for i, t in enumerate(threads):
        where = "threads[%d]" % i
        for key in ("pid", "tid", "samples", "gc_samples", "first_ns", "last_ns"):
            assert is_int(t.get(key)), "%s.%s: %r" % (where, key, t.get(key))
        assert isinstance(t.get("name"), str), where
        assert set(t["state_samples"]) == set(STATES), "%s.state_samples: %r" % (where, t)
        assert set(t["state_pct"]) == set(STATES), "%s.state_pct: %r" % (where, t)
        assert sum(t["state_samples"].values()) == t["samples"], "%s: states do not add up" % where
        assert t["gc_samples"] <= t["samples"], where
        assert t["first_ns"] <= t["last_ns"], where
        if t["samples"]:
            assert abs(sum(t["state_pct"].values()) - 100) < 0.1, "%s.state_pct: %r" % (where, t)
    per_thread = [0] * len(threads)
    for entry in doc["samples"]:
        assert isinstance(entry, list) and len(entry) == 4, "samples entry %r" % (entry,)
        thread, stack, state, count = entry
        assert is_int(thread) and 0 <= thread < len(threads), "samples entry %r" % (entry,)
        assert is_int(stack) and 0 <= stack < len(stacks), "samples entry %r" % (entry,)
        assert state in STATES, "samples entry %r" % (entry,)
        assert is_int(count) and count > 0, "samples entry %r" % (entry,)
        assert threads[thread]["state_samples"][state] >= count, "samples entry %r" % (entry,)
        per_thread[thread] += count
        if filters["gil_only"]:
            assert state == "holding_gil", "--gil kept %r" % (entry,)
        elif not filters["idle"]:
            assert state != "idle", "idle sample kept without --idle: %r" % (entry,)
    for i, t in enumerate(threads):
        assert per_thread[i] <= t["samples"], "threads[%d]: more samples than counted" % i
    last_start = {}
    slack = 2 * max(meta["period_ns"], 1) + 1000000000
    for seg in doc["timeline"]:
        assert isinstance(seg, list) and len(seg) == 7, "timeline entry %r" % (seg,)
        thread, stack, state, gc, start, end, syscall = seg
        assert is_int(thread) and 0 <= thread < len(threads), "timeline entry %r" % (seg,)
        assert is_int(stack) and 0 <= stack < len(stacks), "timeline entry %r" % (seg,)
        assert state in STATES and isinstance(gc, bool), "timeline entry %r" % (seg,)
        assert is_int(start) and is_int(end) and 0 <= start <= end, "timeline entry %r" % (seg,)
        assert end <= meta["duration_ns"] + slack, "timeline entry after the end: %r" % (seg,)
        assert syscall is None or isinstance(syscall, str), "timeline entry %r" % (seg,)
        if state != "idle":
            assert syscall is None, "syscall on a %s segment: %r" % (state, seg)
        assert start >= last_start.get(thread, 0), "timeline goes back for thread %d" % thread
        last_start[thread] = start
    summary = doc["summary"]
    for key in ("threads", "gil_utilisation_pct", "gc", "sampling", "gil_hogs", "gil_hog_stacks"):
        assert key in summary, "summary.%s missing: %s" % (key, sorted(summary))
    assert len(summary["threads"]) == len(threads)
    for row in summary["threads"]:
        for key in ("holding_gil_pct", "waiting_gil_pct", "running_pct", "idle_pct",
                    "unknown_pct", "gc_pct"):
            assert is_number(row.get(key)), "summary.threads: %r" % row
    assert is_number(summary["gc"].get("passes_pct")) and is_int(summary["gc"].get("collections"))
    assert summary["gc"]["collections"] == meta["gc_collections"]
    assert summary["sampling"]["passes"] == meta["passes"]
    assert summary["sampling"]["stacks_torn"] == meta["stacks_torn"]
    for hog in summary["gil_hogs"]:
        assert is_int(hog["stack"]) and 0 <= hog["stack"] < len(stacks), "gil_hogs: %r" % hog
        assert hog["native_samples"] <= hog["samples"], "gil_hogs: %r" % hog
    return doc


def load_record(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data.endswith(b"\n"), "%s does not end with a newline: written whole?" % path
    try:
        doc = json.loads(data.decode("utf-8"))
    except ValueError as e:
        pytest.fail("%s is not one JSON document (%s); %d bytes, ends %r"
                    % (path, e, len(data), data[-200:]))
    return check_record(doc)


def thread_named(doc, name):
    """Index of the one thread called name."""
    found = [i for i, t in enumerate(doc["threads"]) if t["name"] == name]
    assert len(found) == 1, "thread %r: %d matches among %s" % (
        name, len(found), [(t["tid"], t["name"]) for t in doc["threads"]])
    return found[0]


def thread_with_tid(doc, tid):
    found = [i for i, t in enumerate(doc["threads"]) if t["tid"] == tid]
    assert len(found) == 1, "tid %d: %d matches among %s" % (
        tid, len(found), [(t["tid"], t["name"]) for t in doc["threads"]])
    return found[0]


def stack_functions(doc, stack):
    return [doc["frames"][f]["function"] for f in doc["stacks"][stack]]


def samples_of(doc, thread):
    """[(functions outermost first, state, count)] of one thread."""
    return [(stack_functions(doc, s), state, n) for t, s, state, n in doc["samples"]
            if t == thread]


def record(pyscope, out, *args, duration, fmt="json", expect=0):
    """pyscope record -d duration -f fmt -q -o out ARGS...; returns the Result."""
    result = pyscope("record", "-d", duration, "-f", fmt, "-q", "-o", out, *args,
                     timeout=duration + RECORD_SLACK)
    if expect is not None:
        assert result.returncode == expect, "%r" % result
    return result


def record_pid(pyscope, tmp_path, pid, *options, duration=2, name="rec"):
    """Records pid in the json format and returns the checked document."""
    out = tmp_path / (name + ".json")
    record(pyscope, out, "-p", pid, *options, duration=duration)
    doc = load_record(out)
    assert doc["meta"]["pid"] == pid
    return doc


def at_once(*calls):
    """Runs the calls (functions of no argument, such as recordings of one
    target with different options) side by side and returns their results
    in order: recordings never stop their target, so several can watch the
    same seconds of it."""
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        return [f.result() for f in [pool.submit(call) for call in calls]]


def pick_interp(*preferred):
    """The first supported interpreter whose id starts with one of
    preferred, else the first one found: for checks that one interpreter
    is enough for, spread over versions."""
    supported = discovery().supported
    if not supported:
        pytest.skip("no supported interpreter found")
    chosen = supported[0]
    for want in preferred:
        match = [i for i in supported if i.id == want or i.id.startswith(want + ".")
                 or i.id.startswith(want)]
        if match:
            chosen = match[0]
            break
    discovery().used.add(chosen.id)
    return chosen


@pytest.fixture
def launch(tmp_path):
    """launch(argv, env=None, stdout=PIPE) -> Popen in its own process
    group (so that a signal can go to pyscope alone or to the group), with
    stderr in a file; the group is killed at teardown."""
    procs = []

    def start(argv, env=None, stdout=subprocess.PIPE, cwd=None):
        err = open(tmp_path / ("launch-%d.stderr" % len(procs)), "w+b")
        proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                                stdout=stdout, stderr=err, env=env,
                                cwd=str(cwd or tmp_path), start_new_session=True)
        proc.stderr_file = err
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        proc.stderr_file.close()


def stderr_of(proc):
    proc.stderr_file.seek(0)
    return proc.stderr_file.read().decode(errors="replace")


def finish(proc, timeout, what):
    """Waits for proc; fails the test (after killing it) on a hang."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("%s did not end within %.0f s; stderr:\n%s" % (what, timeout, stderr_of(proc)))
    assert proc.returncode >= 0 or proc.returncode in (-signal.SIGINT,), (
        "%s died by signal %d; stderr:\n%s" % (what, -proc.returncode, stderr_of(proc)))
    return out


def wait_for_file(path, proc, timeout):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            pytest.fail("%s exited (%s) before writing %s:\n%s"
                        % (proc.args[0], proc.returncode, path, stderr_of(proc)))
        if time.monotonic() > deadline:
            pytest.fail("%s not written within %.0f s" % (path, timeout))
        time.sleep(0.05)


def program(name):
    return str(PROGRAMS / name)


# --------------------------------------------------------------------------
# A.1 Known time split

def realized_split(log_path, start, end):
    """What rec_split.py logged it really did between two time.monotonic()
    readings: (the share of seventy() in the time spent in the two
    functions, the share of wall time spent outside both), or None."""
    seventy = thirty = wall = inside = 0.0
    previous = None
    with open(log_path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 3:
                continue
            stamp, a, b = (float(p) for p in parts)
            if start <= stamp <= end:
                seventy += a
                thirty += b
                if previous is not None:    # the first period in has no start stamp
                    wall += stamp - previous
                    inside += a + b
            previous = stamp
    if not seventy + thirty or not wall:
        return None
    return 100.0 * seventy / (seventy + thirty), max(0.0, 100.0 * (1 - inside / wall))


@pytest.mark.serial
def test_time_split(interp, start_program, pyscope, tmp_path):
    """rec_split.py's thread spends 70% of its time in seventy() and 30% in
    thirty(): recorded at 200 Hz for 3 s, seventy()'s share of the samples in
    either function is within 3 points of 70. On a machine so short of CPU
    that the thread itself missed its split by more than 1.5 points (it logs
    what it did), within 3 points of what it did instead. The samples in
    neither (the loop itself, its log write, which a busy disk can stall) are
    within 5 points of the wall-time share the program logs for them."""
    target = start_program(interp, "rec_split.py")
    before = time.monotonic()
    doc = record_pid(pyscope, tmp_path, target.pid, "-r", "200", duration=3)
    realized = realized_split(str(target.report_path) + ".log", before, time.monotonic())
    thread = thread_named(doc, "splitter")
    samples = samples_of(doc, thread)
    total = sum(n for _, _, n in samples)
    # A loaded machine delays passes; half the requested rate still gives
    # shares accurate to well under a point of sampling error.
    assert total >= 300 // 2, "only %d samples of the splitter at 200 Hz over 3 s" % total
    seventy = sum(n for functions, _, n in samples if "seventy" in functions)
    thirty = sum(n for functions, _, n in samples if "thirty" in functions)
    share = 100.0 * seventy / (seventy + thirty)
    other = 100.0 * (total - seventy - thirty) / total
    did, did_other = realized if realized else (None, None)
    print("%s: seventy %.1f%% of %d samples in the two functions, %.1f%% in neither; "
          "the program did %s / 30, %s in neither"
          % (interp.id, share, seventy + thirty, other,
             "?" if did is None else "%.1f" % did,
             "?" if did_other is None else "%.1f%%" % did_other))
    expected = 70.0
    if did is not None and abs(did - 70) > 1.5:
        expected = did
    within = abs(share - expected) <= 3
    if not within and os.getloadavg()[0] > 2 * (os.cpu_count() or 1):
        pytest.skip("machine too loaded to time a 70/30 split (load average %.1f): %.1f"
                    % (os.getloadavg()[0], share))
    assert within, (
        "seventy() has %.1f%% of the samples in either function, expected %.1f within 3 points "
        "(%d samples; the program's own split: %s)" % (share, expected, total, did))
    if did_other is not None:
        assert abs(other - did_other) <= 5, (
            "%.1f%% of the samples in neither function; the program spent %.1f%% there: %s"
            % (other, did_other, [(f, n) for f, _, n in samples
                                  if "seventy" not in f and "thirty" not in f]))
    assert doc["threads"][thread]["state_pct"]["holding_gil"] > 90


# --------------------------------------------------------------------------
# A.2 GIL states against the uprobe ground truth

TRUTH_INTERPS = ("3.11.7", "3.12.1")
TRUTH_SECONDS = 6          # gil_truth.sh -d
TRUTH_RECORD_SECONDS = 4.5 # pyscope -d, started once perf records
# pyscope's share of a state is a proportion estimated from n samples: its
# standard error is sqrt(p(1-p)/n). Three of them, plus a point for the two
# tools' windows not being the same seconds of a steady workload.
TRUTH_SIGMAS = 3.0
TRUTH_WINDOW_POINTS = 1.0
# A thread that spent more than this share of the recording runnable but
# not running (its schedstat run delay) was preempted by other work: its
# waiting and running cannot be told apart by any sampler, so the
# comparison would measure the machine, not pyscope.
TRUTH_MAX_RUN_DELAY = 0.15
TRUTH_WORKLOADS = {
    # name: (script, environment, roles whose rows are compared)
    "a": ("a_two_cpu_threads.py", {"GILWL_SCALE": "100"}, ("py-loop-1", "py-loop-2")),
    "b32": ("b_gil_releasing_native.py", {"GILWL_CHUNK_MB": "32", "GILWL_SECONDS": "300"},
            ("sha256-1", "sha256-2")),
    "c": ("c_native_holds_gil.py", {"GILWL_CALLS": "400", "GILWL_SCALE": "400"},
          ("py-loop-1", "py-loop-2", "native-holder")),
}
# Threads not compared that never park (b's main runs a Python loop
# throughout): waiting for them to go quiet would only time out.
NEVER_PARKED = {"b32": ("main",)}
# Workloads whose compared threads always want the GIL (the "contention"
# one included): one of them holds it but while it changes hands.
HOLDING_ALWAYS = ("a", "c", "contention")
# Pyscope's share held by those threads, summed, may fall this much below
# the truth's: about 2.5 standard errors of a share near 99% in 900 passes.
HANDOVER_POINTS = 1.0
# Run beside a CPU hog by test_gil_states_under_cpu_contention only.
CONTENTION_WORKLOAD = (PROGRAMS / "gil_four.py", {},
                       ("py-loop-1", "py-loop-2", "py-loop-3", "py-loop-4"))


def truth_skip_reason(interp):
    if interp.id not in TRUTH_INTERPS:
        return ("ground truth only on pyenv %s (gil_truth.sh needs take_gil/drop_gil symbols)"
                % " and ".join(TRUTH_INTERPS))
    if not GIL_TRUTH.exists():
        return "%s not found" % GIL_TRUTH
    if os.geteuid() != 0:
        return "gil_truth.sh needs root (uprobes)"
    if not shutil.which("perf"):
        return "perf not installed (apt-get install linux-perf)"
    return None


def read_labels(path):
    roles = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split(None, 1)
                if len(parts) == 2 and parts[0].isdigit():
                    roles[parts[1].strip()] = int(parts[0])
    except OSError:
        pass
    return roles


def expectations(workload, role, row):
    """The workload's absolute expectation for pyscope's row, as a list of
    failures (empty when met)."""
    hold, wait, run = row["holding_gil"], row["waiting_gil"], row["running"]
    problems = []
    if workload == "a" and not (40 <= hold <= 60 and 40 <= wait <= 60):
        problems.append("%s: expected ~50%% holding / ~50%% waiting, got %.1f/%.1f"
                        % (role, hold, wait))
    if workload == "c" and role.startswith("py-loop") and wait <= 90:
        problems.append("%s: expected > 90%% waiting behind the native call, got %.1f"
                        % (role, wait))
    if workload == "c" and role == "native-holder" and hold <= 85:
        problems.append("%s: expected > 85%% holding, got %.1f" % (role, hold))
    if workload == "b32" and run <= 50:
        problems.append("%s: expected mostly running without the GIL, got %.1f%% running"
                        % (role, run))
    return problems


def truth_tolerance(share, samples):
    """Points of disagreement allowed for a share (in %) of samples."""
    p = min(max(share / 100.0, 0.0), 1.0)
    return TRUTH_SIGMAS * 100.0 * math.sqrt(p * (1 - p) / max(samples, 1)) + TRUTH_WINDOW_POINTS


def schedstat(pid, tid):
    """(ns on CPU, ns runnable but waiting for a CPU) of one thread, or None."""
    try:
        with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
            on_cpu, run_delay = f.read().split()[:2]
        return int(on_cpu), int(run_delay)
    except (OSError, ValueError):
        return None


def remove_stale_probes():
    """gil_truth.sh names its uprobes gilt<its pid> and removes them when it
    ends; one that was killed leaves them in the kernel, where their return
    probes' names clash with the next run's. Remove those of dead runs."""
    try:
        with open("/sys/kernel/tracing/uprobe_events") as f:
            groups = {m.group(1) for m in re.finditer(r"^[pr]:gilt(\d+)/", f.read(), re.M)}
    except OSError:
        return
    for pid in groups:
        if not os.path.exists("/proc/%s" % pid):
            subprocess.run(["perf", "probe", "-q", "-d", "gilt%s:*" % pid],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


def voluntary_switches(pid, tid):
    try:
        with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def wait_parked(pid, tid, quiet=0.3, timeout=10.0):
    """Wait until thread tid has gone `quiet` seconds without waking (a
    waiter for the GIL wakes every 5 ms; one blocked in join() never does).
    Gives up silently at the timeout: the comparison then says what it saw."""
    deadline = time.monotonic() + timeout
    last, since = voluntary_switches(pid, tid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = voluntary_switches(pid, tid)
        if now is None:
            return
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


def truth_attempt(interp, workload, launch, pyscope, workdir, tolerance=None, rate="200"):
    """One run of a workload under gil_truth.sh and pyscope at once.
    Returns (problems, table, preempted, untrusted): problems empty when
    everything agrees (within tolerance(share, samples) points, by default
    truth_tolerance); preempted lists the threads that other work kept off
    the CPUs; untrusted what makes the ground truth itself wrong (perf
    records lost, two threads holding the GIL at once by its account)."""
    tolerance = tolerance or truth_tolerance
    script, knobs, roles = TRUTH_WORKLOADS.get(workload) or CONTENTION_WORKLOAD
    remove_stale_probes()
    workdir.mkdir()
    labels = workdir / "labels.txt"
    env = target_env()
    env.update(knobs)
    env["GIL_TRUTH_LABELS"] = str(labels)
    target = launch([interp.path, GIL_WORKLOADS / script], env=env,
                    stdout=subprocess.DEVNULL, cwd=GIL_WORKLOADS)
    deadline = time.monotonic() + 30
    while not all(r in read_labels(labels) for r in roles + ("main",)):
        if target.poll() is not None:
            pytest.fail("workload %s exited (%s): %s" % (script, target.returncode, stderr_of(target)))
        if time.monotonic() > deadline:
            pytest.fail("workload %s threads not started in 30 s: %s" % (script, read_labels(labels)))
        time.sleep(0.05)
    time.sleep(0.5)     # past thread start-up
    tid_roles = {tid: role for role, tid in read_labels(labels).items()}
    # A thread that is not compared by role (main, in join()) must be parked
    # before the truth starts: Thread.start() returns only once main has the
    # GIL again, which the workloads' holders can keep for a second. Caught
    # in that wait, the truth's window opened on it (main "waiting 6%") while
    # pyscope's, which starts later, did not.
    for tid, role in tid_roles.items():
        if role not in roles and role not in NEVER_PARKED.get(workload, ()):
            wait_parked(target.pid, tid)
    out = workdir / "truth"
    truth = launch(["bash", GIL_TRUTH, "-q", "-T", "-o", out, "-p", target.pid,
                    "-d", TRUTH_SECONDS], stdout=subprocess.DEVNULL)
    # probes.list is written once the probes are in, just before perf starts.
    deadline = time.monotonic() + 60
    while not (out / "probes.list").exists():
        if truth.poll() is not None:
            pytest.fail("gil_truth.sh failed (%s):\n%s" % (truth.returncode, stderr_of(truth)))
        if time.monotonic() > deadline:
            pytest.fail("gil_truth.sh set no probes within 60 s:\n%s" % stderr_of(truth))
        time.sleep(0.05)
    time.sleep(0.8)     # perf record's own start-up
    rec = workdir / "pyscope.json"
    before = {tid: schedstat(target.pid, tid) for tid in tid_roles}
    started = time.monotonic()
    record(pyscope, rec, "-p", target.pid, "-r", rate, duration=TRUTH_RECORD_SECONDS)
    wall_ns = (time.monotonic() - started) * 1e9
    preempted = []
    for tid, role in tid_roles.items():
        after = schedstat(target.pid, tid)
        if role in roles and before[tid] and after:
            delay = (after[1] - before[tid][1]) / wall_ns
            if delay > TRUTH_MAX_RUN_DELAY:
                preempted.append("%s (tid %d) runnable but off CPU %.0f%% of the recording"
                                 % (role, tid, 100 * delay))
    finish(truth, 120, "gil_truth.sh")
    if truth.returncode != 0 or not (out / "result.json").exists():
        pytest.fail("gil_truth.sh exit %s:\n%s" % (truth.returncode, stderr_of(truth)))
    os.killpg(target.pid, signal.SIGKILL)
    with open(out / "result.json") as f:
        result = json.load(f)
    doc = load_record(rec)
    load = (out / "load.txt").read_text().strip() if (out / "load.txt").exists() else "?"

    problems, untrusted = [], []
    if result.get("lost"):
        untrusted.append("it lost %s perf records" % result["lost"])
    for pid, proc in result.get("process", {}).items():
        if proc.get("hold_overlap_ns", 0) > 1000000:
            untrusted.append("by its account two threads held the GIL at once for %.1f ms "
                             "(a drop_gil it did not see)" % (proc["hold_overlap_ns"] / 1e6))
    truth_rows = {t["tid"]: t for t in result["threads"] if t["pid"] == target.pid}
    table = ["%s %s, %s; pyscope/truth in %%" % (interp.id, workload, load),
             "%-14s %7s %-13s %-13s %-13s" % ("role", "tid", "holding", "waiting", "running")]
    for i, t in enumerate(doc["threads"]):
        role = tid_roles.get(t["tid"])
        truth_row = truth_rows.get(t["tid"])
        if role is None or truth_row is None:
            continue
        ours, pct = t["state_pct"], truth_row["pct"]
        pairs = {"holding": (ours["holding_gil"], pct["hold"]),
                 "waiting": (ours["waiting_gil"], pct["wait"] + pct["drop"]),
                 "running": (ours["running"], pct["nogil_run"])}
        table.append("%-14s %7d %-13s %-13s %-13s" % (
            role, t["tid"], *("%5.1f/%5.1f" % pairs[k] for k in ("holding", "waiting", "running"))))
        for name, (a, b) in pairs.items():
            allowed = tolerance(a, t["samples"])
            if abs(a - b) > allowed:
                problems.append("%s (tid %d): %s %.1f%% vs ground truth %.1f%% (allowed %.1f "
                                "points for %d samples)" % (role, t["tid"], name, a, b, allowed,
                                                            t["samples"]))
        if role in roles:
            problems.extend(expectations(workload, role, ours))
    # Where the compared threads always want the GIL, it is free only while
    # it changes hands: pyscope must not find it free more often than the
    # truth found the hand-overs to last. Passes meet a hand-over more often
    # than chance (the timer interrupt that wakes pyscope can start one), and
    # counting those as waiting lost 7 points of holding on one CI run.
    if workload in HOLDING_ALWAYS:
        ours_sum = sum(t["state_pct"]["holding_gil"] for t in doc["threads"]
                       if tid_roles.get(t["tid"]) in roles)
        truth_sum = sum(r["pct"]["hold"] for tid, r in truth_rows.items()
                        if tid_roles.get(tid) in roles)
        table.append("holding, all compared threads: %.1f/%.1f" % (ours_sum, truth_sum))
        if ours_sum < truth_sum - HANDOVER_POINTS:
            problems.append("the compared threads held the GIL %.1f%% of the time by the "
                            "truth, %.1f%% by pyscope (allowed %.1f points less)"
                            % (truth_sum, ours_sum, HANDOVER_POINTS))
    compared = {tid_roles[t["tid"]] for t in doc["threads"]
                if t["tid"] in tid_roles and t["tid"] in truth_rows}
    missing = [r for r in roles if r not in compared]
    if missing:
        problems.append("threads %s missing from pyscope or the ground truth" % missing)
    return problems, "\n".join(table), preempted, untrusted


def skip_untrusted(untrusted, table, load_note):
    """Compared with a ground truth that is wrong, pyscope's figures mean
    nothing either way: said, with the load measured, instead of judged."""
    if untrusted:
        pytest.skip("the ground truth (gil_truth.sh) cannot be trusted on this run: %s (%s)\n%s"
                    % ("; ".join(untrusted), load_note, table))


@pytest.mark.serial
@pytest.mark.parametrize("workload", sorted(TRUTH_WORKLOADS))
def test_gil_states_vs_truth(interp, workload, launch, pyscope, tmp_path):
    """pyscope's holding/waiting/running per thread agree with gil_truth.sh's
    HOLD / WAIT+DROP / NOGIL_RUN, measured at the same time on the same
    process, within three standard errors of pyscope's sampled shares. A
    run in which other work kept the workload's threads off the CPUs is
    reported with its measured run delay instead of being compared."""
    reason = truth_skip_reason(interp)
    if reason:
        pytest.skip(reason)
    problems, table, preempted, untrusted = truth_attempt(interp, workload, launch, pyscope,
                                                          tmp_path / "run")
    print(table)
    skip_untrusted(untrusted, table, table.splitlines()[0])
    if problems and preempted:
        pytest.skip("other work kept the workload off the CPUs, so waiting and running cannot "
                    "be told apart: %s\n%s\n%s" % ("; ".join(preempted), table, "\n".join(
                        "  PROBLEM " + p for p in problems)))
    assert not problems, "%s\n%s" % (table, "\n".join("  PROBLEM " + p for p in problems))


@pytest.mark.serial
def test_gil_states_under_cpu_contention(interp, launch, pyscope, tmp_path):
    """Issue 19 item 7: four pure-Python threads contending for the GIL
    beside a CPU hog, on a machine with fewer cores than runnable threads.
    A waiter is often runnable or on a CPU between the futex wake-up and
    taking the GIL; its innermost frame is then in no call, so pyscope
    counts it waiting. Its holding/waiting/running agree with
    gil_truth.sh's, measured at the same time, within 5 points. At 2000 Hz,
    above the rates at which the sampler also looks twice at a thread on a
    CPU without the GIL (which hid most of the error), so the frame alone
    must tell."""
    reason = truth_skip_reason(interp)
    if reason:
        pytest.skip(reason)
    hog = launch(["/usr/bin/python3", "-c", "while True: pass"], stdout=subprocess.DEVNULL)
    problems, table, _, untrusted = truth_attempt(interp, "contention", launch, pyscope,
                                                  tmp_path / "run",
                                                  tolerance=lambda share, samples: 5.0, rate="2000")
    assert hog.poll() is None, "the CPU hog exited"
    print(table)
    skip_untrusted(untrusted, table, table.splitlines()[0])
    assert not problems, "%s\n%s" % (table, "\n".join("  PROBLEM " + p for p in problems))


# --------------------------------------------------------------------------
# A.3 Garbage collection

def test_gc(interp, start_program, pyscope, tmp_path):
    """A thread running gc.collect() on a big cycle graph shows a <GC> leaf
    frame, the summary reports time in GC and collections, and no other
    thread is charged with the GC."""
    target = start_program(interp, "rec_gc.py")
    doc = record_pid(pyscope, tmp_path, target.pid, "-r", "200", duration=3)
    collector = thread_named(doc, "collector")
    gc_leaf = [(functions, n) for functions, state, n in samples_of(doc, collector)
               if functions and functions[-1] == "<GC>"]
    assert gc_leaf, "no <GC> leaf on the collector: %s" % samples_of(doc, collector)[:5]
    for functions, _ in gc_leaf:
        assert "collect_forever" in functions, "<GC> under %s" % functions
    gc_frames = [f for f in doc["frames"] if f["function"] == "<GC>"]
    assert len(gc_frames) == 1 and gc_frames[0]["synthetic"], gc_frames
    summary = doc["summary"]
    assert summary["gc"]["passes_pct"] > 10, summary["gc"]
    assert summary["gc"]["collections"] > 0, summary["gc"]
    assert doc["meta"]["gc_passes"] > 0
    row = summary["threads"][collector]
    assert row["gc_pct"] > 10, row
    assert doc["threads"][collector]["gc_samples"] > 0
    for i, t in enumerate(doc["threads"]):
        if i != collector:
            assert t["gc_samples"] == 0, "GC charged to %r: %r" % (t["name"], t)


# --------------------------------------------------------------------------
# A.4 Output formats

COLLAPSED_LINE = re.compile(r"^(?P<stack>\S.*) (?P<count>[1-9][0-9]*)$")


def parse_collapsed(text):
    """{tuple of frames: count} from `a;b;c N` lines; the file must end
    with a newline (written whole)."""
    assert text, "empty collapsed output"
    assert text.endswith("\n"), "collapsed output does not end with a newline: %r" % text[-200:]
    stacks = {}
    for number, line in enumerate(text.splitlines(), 1):
        m = COLLAPSED_LINE.match(line)
        assert m, "line %d is not 'a;b;c N': %r" % (number, line[:300])
        frames = tuple(m.group("stack").split(";"))
        assert all(frames), "line %d has an empty frame: %r" % (number, line[:300])
        stacks[frames] = stacks.get(frames, 0) + int(m.group("count"))
    return stacks


def frame_function(label):
    """'crunch (/path/rec_mixed.py:20)' -> 'crunch'."""
    return label.split(" (", 1)[0]


def check_speedscope(doc):
    assert doc.get("$schema") == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert frames and all(isinstance(f.get("name"), str) for f in frames)
    assert doc["profiles"], "no profiles"
    for profile in doc["profiles"]:
        assert profile["type"] == "sampled", profile["type"]
        assert len(profile["samples"]) == len(profile["weights"]), profile["name"]
        for stack in profile["samples"]:
            assert all(is_int(i) and 0 <= i < len(frames) for i in stack), profile["name"]
    return {f["name"] for f in frames}


def protobuf_fields(data):
    """[(field number, wire type, value)] of one protobuf message; fails
    unless the whole buffer parses."""
    fields, pos = [], 0

    def varint():
        nonlocal pos
        value, shift = 0, 0
        while True:
            assert pos < len(data), "varint runs past the end"
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            assert shift < 64, "varint too long"

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        assert number > 0, "field number 0 at byte %d" % pos
        if wire == 0:
            value = varint()
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            length = varint()
            value, pos = data[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            pytest.fail("wire type %d at byte %d" % (wire, pos))
        assert pos <= len(data), "field %d runs past the end" % number
        fields.append((number, wire, value))
    return fields


def check_pprof(data):
    """profile.proto, gzipped: whole, parses, has samples and a string table
    starting with ''. Returns the string table."""
    assert data[:2] == b"\x1f\x8b", "not gzip"
    raw = gzip.decompress(data)   # raises on a truncated stream
    fields = protobuf_fields(raw)
    strings = [v.decode("utf-8") for n, w, v in fields if n == 6 and w == 2]
    assert strings and strings[0] == "", "string_table must start with ''"
    assert any(n == 1 for n, _, _ in fields), "no sample_type"
    samples = [v for n, w, v in fields if n == 2 and w == 2]
    assert samples, "no samples"
    for sample in samples:
        protobuf_fields(sample)
    return strings


def check_chrome(path):
    checker = subprocess.run([sys.executable, str(CONSUMERS / "check_chrome_trace.py"),
                              "--pyscope", str(path)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=120)
    out = checker.stdout.decode(errors="replace")
    assert checker.returncode == 0, "check_chrome_trace.py:\n%s" % out
    with open(path, encoding="utf-8") as f:
        return json.load(f)


FORMAT_INTERPS = {
    "flamegraph": ("3.8", "3.9"),
    "speedscope": ("3.10", "3.9"),
    "chrome": ("debian-3.14", "3.13"),
    "pprof": ("debian-3.15", "3.12"),
    "json": ("3.11", "debian-3.11"),
}


@pytest.mark.parametrize("fmt", sorted(FORMAT_INTERPS))
def test_format_file(fmt, start_program, pyscope, tmp_path):
    """Each format written whole and valid, with the target's functions."""
    interp = pick_interp(*FORMAT_INTERPS[fmt])
    target = start_program(interp, "rec_mixed.py")
    out = tmp_path / ("profile." + fmt)
    record(pyscope, out, "-p", target.pid, "--idle", duration=2, fmt=fmt)
    if fmt == "flamegraph":
        stacks = parse_collapsed(out.read_text(encoding="utf-8"))
        # The innermost Python frame: snooze's leaf is "[C] time.sleep".
        leaves = {frame_function([f for f in s if not f.startswith("[C] ")][-1])
                  for s in stacks}
        assert {"crunch", "snooze"} <= leaves, leaves
        assert any(len(s) >= 2 and frame_function(s[-2]) == "snooze" and s[-1] == "[C] time.sleep"
                   for s in stacks), sorted(stacks)[:5]
    elif fmt == "speedscope":
        with open(out, encoding="utf-8") as f:
            names = check_speedscope(json.load(f))
        assert "crunch" in {frame_function(n) for n in names}, sorted(names)[:20]
    elif fmt == "chrome":
        trace = check_chrome(out)
        names = {e.get("name") for e in trace["traceEvents"]}
        assert any(n and n.startswith("crunch") for n in names), sorted(filter(None, names))[:20]
    elif fmt == "pprof":
        strings = check_pprof(out.read_bytes())
        assert "crunch" in strings, strings[:30]
    else:
        doc = load_record(out)
        assert doc["filters"]["idle"] is True


def test_json_every_interpreter(interp, start_program, pyscope, tmp_path):
    """json on every interpreter, written to stdout with -o -: the document
    alone on stdout, the summary on stderr; thread names and tids match the
    program's own report."""
    target = start_program(interp, "rec_mixed.py")
    result = pyscope("record", "-p", target.pid, "-d", 1.5, "-f", "json", "-q", "-o", "-",
                     timeout=1.5 + RECORD_SLACK)
    assert result.returncode == 0, "%r" % result
    assert result.stdout.endswith("\n")
    doc = check_record(json.loads(result.stdout))
    assert "Thread" in result.stderr and "Holding" in result.stderr, result.stderr
    assert doc["meta"]["python_version"] == target.report["python_version"]
    named = {t["name"]: t["tid"] for t in doc["threads"]}
    for t in target.report["threads"]:
        assert named.get(t["name"]) == t["native_id"], (t, named)
    crunch = samples_of(doc, thread_named(doc, "crunch-1"))
    assert any(functions[-1:] == ["crunch"] for functions, _, _ in crunch), crunch[:5]


def test_interpreter_made_while_recording(interp, start_program, pyscope, tmp_path):
    """subinterp_late.py's thread "subinterp" makes a subinterpreter 1.5 s
    into a 4 s recording at 100 Hz, and spins in it from then on: the
    thread must be sampled spinning soon after it appears (about 250 passes
    are left; 100 is the bound). It has a thread
    state in each interpreter: it is one thread, with one sample a pass,
    the one of the state holding a GIL, named as threading named it (before
    3.11 the two states' shared pthread_t once left it without a tid, and
    unsampled; from 3.11 each state made a sample of its own)."""
    go = tmp_path / "go"
    target = start_program(interp, "subinterp_late.py", go)
    out = tmp_path / "sub.collapsed"
    rec = concurrent.futures.ThreadPoolExecutor(1).submit(
        record, pyscope, out, "-p", target.pid, "-r", "100", "--threads", "--idle", duration=4,
        fmt="flamegraph")
    time.sleep(1.5)
    go.write_text("")
    result = rec.result()
    started = tmp_path / "go.started"
    assert started.exists(), target.stderr()
    tid = int(started.read_text())
    stacks = parse_collapsed(out.read_text(encoding="utf-8"))
    by_thread = collections.Counter()
    spinning = collections.Counter()
    for s, n in stacks.items():
        by_thread[s[0]] += n
        if any(frame_function(f) == "spin_in_subinterpreter" for f in s):
            spinning[s[0]] += n
    label = 'thread %d "subinterp"' % tid
    assert list(spinning) == [label], (spinning, by_thread)
    assert spinning[label] >= 100, (spinning, by_thread)
    main = 'thread %d "MainThread"' % target.pid
    # One sample a pass for each thread: the main thread, idle, is in
    # every pass; "subinterp" in the last 2.5 s of them (both its states:
    # about 500).
    assert by_thread[label] <= by_thread[main], (by_thread, result.stderr)
    assert set(by_thread) == {label, main}, by_thread


def test_flamegraph_to_stdout(start_program, pyscope):
    interp = pick_interp("3.12", "3.11")
    target = start_program(interp, "rec_mixed.py")
    result = pyscope("record", "-p", target.pid, "-d", 1.5, "-q", "-o", "-",
                     timeout=1.5 + RECORD_SLACK)
    assert result.returncode == 0, "%r" % result
    stacks = parse_collapsed(result.stdout)
    assert any(frame_function(s[-1]) == "crunch" for s in stacks)


# The real consumers of tests/consumers (`make consumers-deps` installs them).

def test_consumer_pprof(start_program, pyscope, tmp_path):
    if not shutil.which("go"):
        pytest.skip("go not installed: `make consumers-deps` (golang-go) for go tool pprof")
    interp = pick_interp("3.12", "3.11")
    target = start_program(interp, "rec_mixed.py")
    out = tmp_path / "profile.pb.gz"
    record(pyscope, out, "-p", target.pid, "--idle", duration=2, fmt="pprof")
    env = dict(os.environ)
    env.setdefault("HOME", str(tmp_path))
    check = subprocess.run(["sh", str(CONSUMERS / "check_pprof.sh"), str(out), "crunch", "snooze"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=300)
    text = check.stdout.decode(errors="replace")
    print(text)
    assert check.returncode == 0, text


def test_consumer_speedscope(start_program, pyscope, tmp_path):
    if not shutil.which("node"):
        pytest.skip("node not installed: `make consumers-deps` (nodejs npm)")
    if not (NODE_MODULES / "speedscope" / "package.json").exists() or \
            not (NODE_MODULES / "ajv" / "package.json").exists():
        pytest.skip("speedscope/ajv not under %s: run `make consumers-deps`" % NODE_MODULES)
    interp = pick_interp("3.13", "3.12")
    target = start_program(interp, "rec_mixed.py")
    outs = []
    for options in ([], ["--idle", "--threads"]):
        out = tmp_path / ("profile%d.speedscope.json" % len(outs))
        record(pyscope, out, "-p", target.pid, *options, duration=1.5, fmt="speedscope")
        outs.append(str(out))
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES))
    check = subprocess.run(["node", str(CONSUMERS / "speedscope_import.js")] + outs,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=120)
    text = check.stdout.decode(errors="replace")
    print(text)
    assert check.returncode == 0, text


def test_consumer_chrome(start_program, pyscope, tmp_path):
    """The chrome trace checker on a recording with idle threads and a
    thread changing stacks all the time (many B/E events)."""
    interp = pick_interp("3.9", "3.10")
    target = start_program(interp, "rec_churn.py", 2)
    out = tmp_path / "trace.json"
    record(pyscope, out, "-p", target.pid, "--idle", "-r", "500", duration=1.5, fmt="chrome")
    check_chrome(out)


SVG_NS = "{http://www.w3.org/2000/svg}"
SVG_TITLE = re.compile(r"^(?P<label>.*) \((?P<n>\d+) samples?, (?P<pct>[\d.]+)%\)$")


def svg_boxes(path):
    """The flame graph's boxes, parsed strictly as XML: label, samples, and
    the rect's geometry."""
    import xml.etree.ElementTree as ET
    root = ET.parse(str(path)).getroot()
    boxes = []
    for g in root.iter(SVG_NS + "g"):
        m = SVG_TITLE.match(g.find(SVG_NS + "title").text)
        assert m, g.find(SVG_NS + "title").text
        rect = g.find(SVG_NS + "rect")
        boxes.append({"label": m.group("label"), "samples": int(m.group("n")),
                      "x": float(rect.get("x")), "y": float(rect.get("y")),
                      "w": float(rect.get("width"))})
    return boxes


def test_consumer_svg(start_program, pyscope, tmp_path):
    """py-spy's `record -o profile.svg` (no -f): an SVG flame graph, well
    formed; every box as wide as its samples, inside its caller's box, with
    the callers' samples covering the callees'; snooze under [C] time.sleep;
    and Chromium draws it, each box where the file puts it."""
    interp = pick_interp("3.12", "3.11")
    target = start_program(interp, "rec_mixed.py")
    out = tmp_path / "profile.svg"
    result = pyscope("record", "-p", target.pid, "--idle", "-d", 2, "-q", "-o", out,
                     timeout=2 + RECORD_SLACK)
    assert result.returncode == 0, "%r" % result
    assert "wrote %s (svg)" % out in result.stderr, result.stderr
    boxes = svg_boxes(out)
    (root,) = [b for b in boxes if b["label"] == "all"]
    scale = root["w"] / root["samples"]
    by_row = {}
    for b in boxes:
        assert abs(b["w"] - b["samples"] * scale) < 0.01, b
        by_row.setdefault(b["y"], []).append(b)
    rows = sorted(by_row, reverse=True)            # the root's row is the lowest
    assert by_row[rows[0]] == [root]
    for below, above in zip(rows, rows[1:]):
        for b in by_row[above]:
            callers = [c for c in by_row[below]
                       if c["x"] - 0.01 <= b["x"] and b["x"] + b["w"] <= c["x"] + c["w"] + 0.01]
            assert len(callers) == 1, (b, by_row[below])
        for c in by_row[below]:
            inside = [b["samples"] for b in by_row[above]
                      if c["x"] - 0.01 <= b["x"] and b["x"] + b["w"] <= c["x"] + c["w"] + 0.01]
            assert sum(inside) <= c["samples"], (c, inside)
    functions = {frame_function(b["label"]) for b in boxes}
    assert {"crunch", "snooze", "[C] time.sleep"} <= functions, sorted(functions)
    sleeps = [b for b in boxes if b["label"] == "[C] time.sleep"]
    snoozes = [b for b in boxes if frame_function(b["label"]) == "snooze"]
    assert any(abs(s["x"] - z["x"]) < 0.01 and s["y"] < z["y"] for s in sleeps for z in snoozes)

    import chromium
    binary, reason = chromium.find_chromium()
    if not binary:
        pytest.fail(reason)
    with chromium.Browser(binary, width=1300, height=900) as browser:
        page = browser.page()
        page.set_viewport(1300, 900)
        page.open(out.as_uri(), "document.querySelectorAll('g rect').length > 0", timeout=60)
        drawn = page.evaluate("JSON.stringify(Array.from(document.querySelectorAll('g')).map("
                              "g => { const r = g.querySelector('rect').getBoundingClientRect();"
                              " return [g.querySelector('title').textContent, r.x, r.width]; }))")
        page.close()
    drawn = json.loads(drawn)
    assert len(drawn) == len(boxes)
    for (title, x, width), b in zip(drawn, boxes):
        assert SVG_TITLE.match(title).group("label") == b["label"]
        assert abs(x - b["x"]) < 0.5 and abs(width - b["w"]) < 0.5, (title, x, width, b)


# --------------------------------------------------------------------------
# A.5 End conditions

@pytest.mark.representative
def test_sigint_writes_output(interp, start_program, launch, tmp_path):
    """SIGINT to pyscope (no --duration): a whole, valid recording, exit 0,
    the target untouched."""
    target = start_program(interp, "rec_mixed.py")
    out = tmp_path / "rec.json"
    proc = launch([PYSCOPE, "record", "-p", target.pid, "-f", "json", "-q", "-o", out])
    time.sleep(2.0)
    assert proc.poll() is None, "pyscope ended by itself: %s" % stderr_of(proc)
    proc.send_signal(signal.SIGINT)
    finish(proc, RECORD_SLACK, "pyscope record after SIGINT")
    assert proc.returncode == 0, stderr_of(proc)
    doc = load_record(out)
    assert doc["meta"]["passes"] >= 50, doc["meta"]
    assert 1.0e9 < doc["meta"]["duration_ns"] < 2.0e9 + RECORD_SLACK * 1e9
    assert target.alive()


def test_ctrl_c_with_command(launch, tmp_path):
    """Ctrl-C in a terminal reaches the whole foreground group: pyscope and
    the command it started. The recording is written whole and the exit
    status is the command's (Python dies of SIGINT: 128+2)."""
    interp = pick_interp("3.12", "3.11")
    out = tmp_path / "rec.json"
    proc = launch([PYSCOPE, "record", "-f", "json", "-q", "-o", out, "--",
                   interp.path, program("rec_mixed.py"), tmp_path / "report.json"])
    wait_for_file(tmp_path / "report.json", proc, 30)
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)
    finish(proc, RECORD_SLACK, "pyscope record -- cmd after Ctrl-C")
    assert proc.returncode == 128 + signal.SIGINT, (proc.returncode, stderr_of(proc))
    doc = load_record(out)
    assert doc["meta"]["passes"] > 0


def wait_for_record(path, proc, timeout):
    """Polls until path holds a whole recording; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path, "rb") as f:
                data = f.read()
            if data.endswith(b"\n"):
                return check_record(json.loads(data.decode("utf-8")))
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            pytest.fail("no whole recording in %s within %.0f s (pyscope %s); stderr:\n%s"
                        % (path, timeout, "running" if proc.poll() is None else
                           "exited %s" % proc.returncode, stderr_of(proc)))
        time.sleep(0.05)


def test_stop_with_command_still_running(launch, tmp_path):
    """A stop that reaches pyscope alone (kill -INT, kill -TERM) while the
    command it started keeps running: the recording is written at once;
    pyscope then waits for the command. The same signal sent to pyscope
    again is passed on to the command, and pyscope exits with its status."""
    interp = pick_interp("3.12", "3.11")
    for sig in (signal.SIGINT, signal.SIGTERM):
        out = tmp_path / ("rec-%d.json" % sig)
        report = tmp_path / ("report-%d.json" % sig)
        proc = launch([PYSCOPE, "record", "-f", "json", "-q", "-o", out, "--",
                       interp.path, program("rec_mixed.py"), report])
        wait_for_file(report, proc, 30)
        time.sleep(1.0)
        proc.send_signal(sig)
        doc = wait_for_record(out, proc, 15)
        assert doc["meta"]["pid"] != proc.pid and doc["meta"]["passes"] > 0
        time.sleep(0.5)
        assert proc.poll() is None, "pyscope did not wait for its command (exit %s)" % proc.returncode
        assert os.path.exists("/proc/%d" % doc["meta"]["pid"]), "the command got the first signal"
        proc.send_signal(sig)
        finish(proc, RECORD_SLACK, "pyscope record after passing %s on" % sig.name)
        assert proc.returncode == 128 + sig, (sig.name, proc.returncode, stderr_of(proc))


@pytest.mark.representative
def test_duration_stops_on_time(interp, start_program, pyscope, tmp_path):
    """-d 2: the recording covers 2 s (within one period and a little) and
    pyscope is done soon after."""
    target = start_program(interp, "rec_mixed.py")
    out = tmp_path / "rec.json"
    result = record(pyscope, out, "-p", target.pid, duration=2)
    doc = load_record(out)
    duration = doc["meta"]["duration_ns"] / 1e9
    assert 2.0 <= duration < 2.5, "recorded for %.3f s with -d 2" % duration
    assert result.elapsed < 2 + 15, "pyscope took %.1f s with -d 2" % result.elapsed
    assert 100 <= doc["meta"]["passes"] <= 201, doc["meta"]   # late passes are skipped


def test_duration_with_command(launch, tmp_path):
    """-d 1 -- COMMAND that runs for longer: the recording is written after
    about 1 s, not when the command ends; the command's status is passed
    on once it exits."""
    interp = pick_interp("3.12", "3.11")
    out = tmp_path / "rec.json"
    started = time.monotonic()
    proc = launch([PYSCOPE, "record", "-d", 1, "-f", "json", "-q", "-o", out, "--",
                   interp.path, program("rec_exit.py"), tmp_path / "report.json", 5, 5])
    doc = wait_for_record(out, proc, 10)
    written = time.monotonic() - started
    assert proc.poll() is None or written < 5, "recording only written once the command ended"
    assert 1.0 <= doc["meta"]["duration_ns"] / 1e9 < 1.5, doc["meta"]
    finish(proc, 5 + RECORD_SLACK, "pyscope waiting for its command")
    assert proc.returncode == 5, (proc.returncode, stderr_of(proc))


@pytest.mark.representative
@pytest.mark.parametrize("how", ["exit", "_exit"])
def test_command_exits_during_recording(interp, pyscope, tmp_path, how):
    """-- python rec_exit.py that exits after 1.5 s, by finalization or
    os._exit: recording ends with it, valid, with the command's status."""
    out = tmp_path / "rec.json"
    result = record(pyscope, out, "--", interp.path, program("rec_exit.py"),
                    tmp_path / "report.json", 1.5, 3, how, duration=60, expect=None)
    assert result.returncode == 3, "%r" % result
    assert result.elapsed < 30, "pyscope ran %.1f s for a 1.5 s command" % result.elapsed
    doc = load_record(out)
    assert doc["meta"]["duration_ns"] < 30e9
    spinner = samples_of(doc, thread_named(doc, "spinner"))
    assert any(functions[-1:] == ["spin"] for functions, _, _ in spinner), spinner[:5]


@pytest.mark.representative
def test_process_exits_during_recording(interp, start_program, pyscope, tmp_path):
    """-p PID of a process that exits 1.5 s later: recording ends with it,
    valid, exit 0."""
    target = start_program(interp, "rec_exit.py", 1.5, 0)
    reaper = threading.Thread(target=target.proc.wait, daemon=True)
    reaper.start()      # as its parent would, so that it does not stay a zombie
    out = tmp_path / "rec.json"
    result = record(pyscope, out, "-p", target.pid, duration=60)
    assert result.elapsed < 30, "pyscope ran %.1f s for a 1.5 s process" % result.elapsed
    doc = load_record(out)
    assert doc["meta"]["passes"] > 0
    spinner = samples_of(doc, thread_named(doc, "spinner"))
    assert any(functions[-1:] == ["spin"] for functions, _, _ in spinner), spinner[:5]


@pytest.mark.parametrize("how,code,expected", [
    ("exit", 0, 0), ("exit", 42, 42), ("_exit", 7, 7), ("signal", 0, 128 + signal.SIGTERM)])
def test_command_exit_status(pyscope, tmp_path, how, code, expected):
    """-- COMMAND: pyscope exits with the command's status (128+N when a
    signal killed it)."""
    interp = pick_interp("3.12", "3.11")
    out = tmp_path / "rec.json"
    result = record(pyscope, out, "--", interp.path, program("rec_exit.py"),
                    tmp_path / "report.json", 0.5, code, how, duration=60, expect=None)
    assert result.returncode == expected, "%r" % result
    load_record(out)


# --------------------------------------------------------------------------
# A.6 Filters

def test_idle_and_gil_filters(interp, start_program, pyscope, tmp_path):
    """Without --idle a sleeping thread has no samples; with --idle it has
    idle ones in snooze(). --gil keeps only the holder's samples. The
    threads table is never filtered."""
    target = start_program(interp, "rec_mixed.py")
    plain, idle, gil = at_once(
        lambda: record_pid(pyscope, tmp_path, target.pid, duration=1.5, name="plain"),
        lambda: record_pid(pyscope, tmp_path, target.pid, "--idle", duration=1.5, name="idle"),
        lambda: record_pid(pyscope, tmp_path, target.pid, "--gil", duration=1.5, name="gil"))

    sleeper = thread_named(plain, "sleeper")
    assert plain["threads"][sleeper]["state_samples"]["idle"] > 0
    assert samples_of(plain, sleeper) == [], samples_of(plain, sleeper)
    assert not plain["filters"]["idle"] and idle["filters"]["idle"]
    sleeping = samples_of(idle, thread_named(idle, "sleeper"))
    assert sleeping and all(state == "idle" for _, state, _ in sleeping), sleeping
    assert any("snooze" in functions for functions, _, _ in sleeping), sleeping

    states = {state for _, _, state, _ in plain["samples"]}
    assert "waiting_gil" in states, "two crunchers but no waiting sample: %s" % states
    assert gil["filters"]["gil_only"] is True
    assert {state for _, _, state, _ in gil["samples"]} == {"holding_gil"}
    for name in ("crunch-1", "crunch-2"):
        held = samples_of(gil, thread_named(gil, name))
        assert any(functions[-1:] == ["crunch"] for functions, _, _ in held), (name, held)
    assert samples_of(gil, thread_named(gil, "sleeper")) == []


def test_thread_roots(interp, start_program, pyscope, tmp_path):
    """--threads: every collapsed stack starts at its thread; without it
    none does."""
    target = start_program(interp, "rec_mixed.py")
    tids = {t["native_id"]: t["name"] for t in target.report["threads"]}
    plain_out, roots_out = tmp_path / "plain.txt", tmp_path / "roots.txt"
    at_once(lambda: record(pyscope, plain_out, "-p", target.pid, "--idle", duration=1.5,
                           fmt="flamegraph"),
            lambda: record(pyscope, roots_out, "-p", target.pid, "--idle", "--threads",
                           duration=1.5, fmt="flamegraph"))
    plain = parse_collapsed(plain_out.read_text(encoding="utf-8"))
    roots = parse_collapsed(roots_out.read_text(encoding="utf-8"))
    assert not any(s[0].startswith("thread ") for s in plain), list(plain)[:3]
    seen = set()
    for stack in roots:
        m = re.fullmatch(r'thread (\d+) "(.*)"', stack[0])
        assert m, "stack not rooted at a thread: %r" % (stack,)
        tid = int(m.group(1))
        assert tids.get(tid) == m.group(2), "root %r; the program's threads: %s" % (stack[0], tids)
        seen.add(m.group(2))
        assert len(stack) > 1
    assert {"crunch-1", "crunch-2", "sleeper", "MainThread"} <= seen, seen


@pytest.mark.representative
def test_subprocesses(interp, start_program, pyscope, tmp_path):
    """--subprocesses also samples a Pool's two workers (their pids appear,
    busy in burn()); without it only the parent is sampled."""
    target = start_program(interp, "rec_pool.py")
    workers = target.report["extra"]["worker_pids"]
    assert len(workers) == 2, target.report["extra"]
    alone, doc = at_once(
        lambda: record_pid(pyscope, tmp_path, target.pid, duration=1.5, name="alone"),
        lambda: record_pid(pyscope, tmp_path, target.pid, "--subprocesses", duration=3,
                           name="all"))
    assert {t["pid"] for t in alone["threads"]} == {target.pid}
    pids = {t["pid"] for t in doc["threads"]}
    assert set(workers) <= pids, "workers %s not among sampled pids %s (start method %s)" % (
        workers, sorted(pids), target.report["extra"]["start_method"])
    for pid in workers:
        burning = [functions for i, t in enumerate(doc["threads"]) if t["pid"] == pid
                   for functions, _, _ in samples_of(doc, i)]
        assert any("burn" in functions for functions in burning), (pid, burning[:3])


# --------------------------------------------------------------------------
# A.7 top

@pytest.mark.representative
def test_top(interp, start_program, launch):
    """pyscope top -p PID, stdout to a pipe, for 2.5 s then SIGINT: the
    thread table with the program's thread names and a function of it;
    exit 0."""
    target = start_program(interp, "rec_mixed.py")
    proc = launch([PYSCOPE, "top", "-p", target.pid])
    time.sleep(2.5)
    assert proc.poll() is None, "top ended by itself: %s" % stderr_of(proc)
    proc.send_signal(signal.SIGINT)
    out = finish(proc, RECORD_SLACK, "pyscope top after SIGINT").decode("utf-8", "replace")
    assert proc.returncode == 0, (proc.returncode, stderr_of(proc))
    assert "\033[" not in out, "terminal escapes written to a pipe"
    assert re.search(r"^\s*TID\s+THREAD\s+%GIL", out, re.M), out[:2000]
    for name in ("crunch-1", "crunch-2"):
        assert re.search(r"^\s*\d+\s+%s\s" % re.escape(name), out, re.M), (name, out[:2000])
    assert re.search(r"%\s+crunch \(.*rec_mixed\.py\)$", out, re.M), out[:2000]
    assert "pyscope top  process %d" % target.pid in out


# --------------------------------------------------------------------------
# A.8 Torn stacks

def program_code_lines(interp, files):
    """{file: {function: set of lines}} for every code object compiled from
    each file by the target's own interpreter, named as pyscope names them
    (co_qualname on 3.11+, co_name before)."""
    script = r"""
import dis, json, sys
def walk(code, out):
    name = getattr(code, "co_qualname", code.co_name)
    lines = out.setdefault(name, set())
    lines.add(code.co_firstlineno)
    lines.update(l for _, l in dis.findlinestarts(code) if l is not None)
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            walk(const, out)
result = {}
for path in json.load(sys.stdin):
    try:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec")
    except (OSError, SyntaxError) as e:
        result[path] = str(e)
        continue
    out = {}
    walk(code, out)
    result[path] = {k: sorted(v) for k, v in out.items()}
json.dump(result, sys.stdout)
"""
    out = subprocess.run([interp.path, "-c", script], input=json.dumps(sorted(files)).encode(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=target_env(),
                         timeout=120)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return json.loads(out.stdout)


# Outermost frames of a whole stack: the main script, or a thread's start.
ENTRY_FUNCTIONS = ("<module>", "_bootstrap", "Thread._bootstrap")
# Share of stacks that may be wrong without being counted torn (see below).
RARE = 0.005


def test_torn_stacks(interp, start_program, pyscope, tmp_path):
    """Stacks that change all the time, sampled flat out: torn or unreadable
    reads are counted in meta, and no frame is ever made up: every frame is
    a function of the file named, at one of its lines. Partial stacks not
    counted torn, and impossible call chains, stay under 0.5%."""
    target = start_program(interp, "rec_churn.py", 4)
    doc = record_pid(pyscope, tmp_path, target.pid, "-r", "max", "--idle", duration=3)
    meta = doc["meta"]
    frames = doc["frames"]
    files = {f["file"] for f in frames if not f["synthetic"]}
    known = program_code_lines(interp, files)
    for f in frames:
        if f["synthetic"]:
            # "[C] name": the C callable the innermost frame calls (issue 19).
            assert f["function"] in ("<GC>", "<unreadable code>") or \
                f["function"].startswith("[C] "), f
            continue
        functions = known.get(f["file"])
        assert isinstance(functions, dict), "frame in a file that is not there: %r (%s)" % (
            f, functions)
        assert f["function"] in functions, "function not in %s: %r" % (f["file"], f)
        if f["line"] is not None:
            assert f["line"] in functions[f["function"]], "line not in %s: %r" % (f["function"], f)
    # A torn walk keeps the frames it could read, innermost first: a stack
    # that does not start at a thread's entry is a partial one. A stack read
    # while it changes can also come back partial, or spliced (3.11+: churn ->
    # Random.randint -> descend, from a data-stack slot reused between two
    # calls), through links that all look valid: pyscope does not stop the
    # thread, and cannot tell. Those must stay rare.
    incomplete = spliced = 0
    for thread, stack, state, count in doc["samples"]:
        functions = [f for f in stack_functions(doc, stack)
                     if f != "<GC>" and not f.startswith("[C] ")]
        leaves = [f for f in stack_functions(doc, stack) if f.startswith("[C] ")]
        assert leaves == [f for f in stack_functions(doc, stack)[-2:]
                          if f.startswith("[C] ")], stack_functions(doc, stack)
        whole = bool(functions) and functions[0] in ENTRY_FUNCTIONS
        if not whole or "<unreadable code>" in functions:
            incomplete += count
        if "descend" in functions:
            first = functions.index("descend")
            if set(functions[first:]) != {"descend"} or (
                    whole and functions[first - 1] != "churn"):
                spliced += count
    sampled = meta["stacks_sampled"]
    uncounted = max(0, incomplete - meta["stacks_torn"])
    print("%s: %d partial or unreadable stacks (%d more than counted torn), %d spliced"
          % (interp.id, incomplete, uncounted, spliced))
    assert uncounted <= RARE * sampled, (
        "%d samples of partial or unreadable stacks, only %d stacks counted torn (of %d)"
        % (incomplete, meta["stacks_torn"], sampled))
    assert spliced <= RARE * sampled, "%d spliced stacks of %d" % (spliced, sampled)
    print("%s: %d passes, %d failed; %d stacks, %d torn (%.2f%%)" % (
        interp.id, meta["passes"], meta["passes_failed"], meta["stacks_sampled"],
        meta["stacks_torn"], 100.0 * meta["stacks_torn"] / max(meta["stacks_sampled"], 1)))
    assert meta["passes"] > 300, meta
    assert meta["stacks_sampled"] >= 4 * meta["passes"] * 0.9, meta


# --------------------------------------------------------------------------
# Names of code objects whose memory was reused

def test_sampled_stacks_are_stacks_the_threads_were_in(interp, start_program, pyscope, tmp_path):
    """Two call_cycle.py threads take turns at the GIL, each alternating
    spin() under through_python() and through_c() in sorted(). Of their
    samples at 200 Hz for 3 s: spin() never under through_c() (a frame
    returned from, walked from a top frame read after the copy of the
    stack), and through_python() innermost (where it is for an instant) in
    at most 2%. The sampler checks the walks of only the threads that can
    have taken the GIL while it read them: both take turns here. One such
    sample in a run is let pass. With the top read again and every walked
    frame checked, 3.11.7 beside 4 busy loops gave none in 35,860 samples
    over 30 runs; a check of the top frame alone gave 10 in 35,856 (twice in
    one run in CI), the unchecked walks of before 5-20%."""
    target = start_program(interp, "call_cycle.py", 2)
    doc = record_pid(pyscope, tmp_path, target.pid, "-r", "200", duration=3)
    for name in target.report["extra"]["threads"]:
        thread = thread_named(doc, name)
        shapes, wrong, total = {}, [], 0
        for t, stack, state, count in doc["samples"]:
            if t != thread:
                continue
            names = [doc["frames"][f]["function"] for f in doc["stacks"][stack]]
            names = [n for n in names if not n.startswith("[C] ")]
            if "cycle" not in names:
                continue
            shape = tuple(names[names.index("cycle"):])
            total += count
            shapes[shape] = shapes.get(shape, 0) + count
            if shape not in (("cycle", "through_python", "spin"), ("cycle", "through_c"),
                             ("cycle", "through_python"), ("cycle",)):
                wrong.append((shape, count))
        assert sum(n for _, n in wrong) <= 1, "%s: stacks it was never in: %s" % (name, wrong)
        assert shapes.get(("cycle", "through_python"), 0) <= total * 0.02, (name, shapes)
        assert shapes.get(("cycle", "through_python", "spin"), 0) > 0, (name, shapes)
        assert shapes.get(("cycle", "through_c"), 0) > 0, (name, shapes)


def test_code_object_reuse(interp, start_program, pyscope, tmp_path):
    """rec_reuse.py frees a function's code object and compiles another at
    the same address, over and over: every frame is named after the code
    object running at the time, never after the one freed before it."""
    target = start_program(interp, "rec_reuse.py")
    doc = record_pid(pyscope, tmp_path, target.pid, "-r", "200", duration=3)
    thread = thread_named(doc, "reuser")
    stale, seen = [], {"decoy": 0, "target": 0}
    for t, stack, state, count in doc["samples"]:
        if t != thread:
            continue
        frames = [doc["frames"][f] for f in doc["stacks"][stack]]
        for caller, callee in zip(frames, frames[1:]):
            if caller["function"] == "run_decoy" and callee["file"] == "<decoy>":
                seen["decoy"] += count
            if caller["function"] == "run_target" and callee["file"] == "<real>":
                seen["target"] += count
            if (caller["function"], callee["file"]) in (("run_target", "<decoy>"),
                                                        ("run_decoy", "<real>")):
                stale.append(([(f["function"], f["file"]) for f in frames[-3:]], count))
    assert not stale, "frames named after a freed code object: %d samples, e.g. %s" % (
        sum(n for _, n in stale), stale[:3])
    assert seen["decoy"] > 0 and seen["target"] > 0, seen


def test_c_callable_reuse(interp, start_program, pyscope, tmp_path):
    """rec_c_reuse.py calls poll.poll and epoll.poll in turn, each through
    a bound method made for the call and freed after it, so that the next
    one often takes its address: the [C] frame under each Python function
    is the callable it called. The object is named from its memory after
    the stack was copied, so a sample taken just as the thread moved from
    one call to the next can be named after the next (1 in about 600 in a
    few runs): 1% is let pass; by address alone it was over half."""
    target = start_program(interp, "rec_c_reuse.py")
    doc = record_pid(pyscope, tmp_path, target.pid, "-r", "200", "--idle", duration=3)
    thread = thread_named(doc, "reuser")
    expect = {"via_poll": "[C] select.poll.poll", "via_epoll": "[C] select.epoll.poll"}
    wrong, seen = [], {"via_poll": 0, "via_epoll": 0}
    for t, stack, state, count in doc["samples"]:
        if t != thread:
            continue
        functions = stack_functions(doc, stack)
        if len(functions) < 2 or functions[-2] not in expect or not functions[-1].startswith("[C] "):
            continue
        if functions[-1] == expect[functions[-2]]:
            seen[functions[-2]] += count
        else:
            wrong.append((functions[-2:], count))
    n_wrong = sum(n for _, n in wrong)
    assert n_wrong <= max(2, (n_wrong + sum(seen.values())) // 100), \
        "a C callable named after the one freed before it: %d samples, e.g. %s" % (n_wrong, wrong[:3])
    assert seen["via_poll"] > 0 and seen["via_epoll"] > 0, seen


def test_same_call_site_calling_back(interp, start_program, pyscope, tmp_path):
    """rec_same_site.py's at_site() sleeps at its one call, then calls
    through it a partial of sorted() whose key spins: a thread found asleep
    at a call is not taken to be there still once it has called back into
    Python from the same call. at_site() innermost without [C] time.sleep
    is only the moments around the key's calls."""
    target = start_program(interp, "rec_same_site.py")
    # Above 1000 Hz the walks reuse what the last one read (as the agent's do).
    doc = record_pid(pyscope, tmp_path, target.pid, "-r", "2000", "--idle", duration=3)
    thread = thread_named(doc, "caller")
    kinds = collections.Counter()
    for functions, state, count in samples_of(doc, thread):
        python = [f for f in functions if not f.startswith("[C] ")]
        if "at_site" not in python:
            continue
        if python[-1] == "spin_key":
            kinds["spin_key"] += count
        elif python[-1] == "at_site" and functions[-1] == "[C] time.sleep":
            kinds["sleep"] += count
        else:
            kinds["other: " + " > ".join(functions[-2:])] += count
    total = sum(kinds.values())
    other = total - kinds["spin_key"] - kinds["sleep"]
    assert kinds["spin_key"] > 0 and kinds["sleep"] > 0, kinds
    assert other <= max(2, total // 50), kinds
