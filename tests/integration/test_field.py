"""The field corpus (tests/field/): hang programs reproducing public bug
reports, each with the verdict a senior engineer gives it, written in the
program before the analysis. `pyscope why` must agree: verdict, grade, the
threads its first finding blames and those stuck behind them, the objects
at fault, and which threads are stuck.
"""

import ctypes
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import READY_TIMEOUT, Target, proc_state, proc_state_task, target_env

FIELD = Path(__file__).resolve().parent.parent / "field"
PROGRAMS = sorted(p.stem for p in FIELD.glob("[!_]*.py"))
HANG_VERDICTS = {"deadlock", "gil_held_while_blocked", "gil_hog", "lock_never_released",
                 "queue_starved", "never_notified", "network_wait"}
GIL_PROGRAMS = {"gil_regex": "regex", "ctypes_sleep": "blocker"}


@pytest.fixture
def start_field(tmp_path):
    targets = []

    def start(interp, program):
        started = time.time()
        report_path = tmp_path / (program + ".json")
        stderr_path = tmp_path / (program + ".stderr")
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen([interp.path, str(FIELD / (program + ".py")), str(report_path)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err, cwd=str(tmp_path), env=target_env(),
                                    start_new_session=True)
        target = Target(proc, program, report_path, stderr_path)
        target.started = started
        targets.append(target)
        target.wait_ready()
        target.reported = os.stat(str(report_path)).st_mtime
        return target

    yield start
    for target in targets:
        target.kill()


def wait_gone(pid, tid, timeout=READY_TIMEOUT):
    deadline = time.monotonic() + timeout
    while tid and os.path.exists("/proc/%d/task/%d" % (pid, tid)):
        if time.monotonic() > deadline:
            pytest.fail("reporter thread %d of %d did not exit" % (tid, pid))
        time.sleep(0.01)


def wait_states(pid, tids, states, timeout=READY_TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        now = {tid: proc_state_task(pid, tid) for tid in tids}
        if all(s in states for s in now.values()):
            return
        if time.monotonic() > deadline:
            pytest.fail("threads of %d not in %r: %r" % (pid, states, now))
        time.sleep(0.01)


def cpu_ns(pid, tid):
    with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
        return int(f.read().split()[0])


def settle(target, program):
    """Wait until the program is in the state its expectation describes."""
    report = target.report
    pid = report["pid"]
    wait_gone(pid, report["extra"].get("reporter"))
    tids = {t["name"]: t["native_id"] for t in report["threads"]}
    if program in GIL_PROGRAMS:
        holder = tids[GIL_PROGRAMS[program]]
        if program == "ctypes_sleep":
            target.wait_in_syscall(holder, {35, 230})       # nanosleep, clock_nanosleep
        else:
            start = cpu_ns(pid, holder)                     # the regex is running
            deadline = time.monotonic() + READY_TIMEOUT
            while cpu_ns(pid, holder) - start < 50_000_000:
                assert time.monotonic() < deadline, "the regex never ran"
                time.sleep(0.01)
    elif program != "stopped":
        wait_states(pid, tids.values(), ("S", "D"))


class Child:
    """The forked child of fork_held_lock: diagnosed instead of the parent."""

    def __init__(self, pid, report):
        self.pid = pid
        self.report = report


def tid_names(report):
    return {t["native_id"]: t["name"] for t in report["threads"]}


def first_finding_objects(finding, threads):
    """Addresses a finding is about: its root object and what its threads wait on."""
    found = {finding["object"]} if finding["object"] else set()
    for t in threads:
        if t["tid"] in {x["tid"] for x in finding["threads"]} and t["waiting_for"]:
            w = t["waiting_for"]
            if w["object"]:
                found.add(w["object"]["address"])
            if w["lock"]:
                found.add(w["lock"]["address"])
    return found


def check(doc, report):
    want = report["extra"]["expect"]
    names = tid_names(report)
    lines = ["verdict %s grade %s: %s" % (doc["verdict"], doc.get("grade"), doc["summary"])]
    for t in doc["threads"]:
        w = t["waiting_for"]
        lines.append("  %s stuck=%s: %s" % (names.get(t["tid"], t["tid"]), t["stuck"],
                                            w["description"] if w else None))
    explain = "\n".join(lines)
    assert doc["verdict"] == want["verdict"], explain
    assert doc.get("grade") == want["grade"], explain
    assert doc["hung"] is (want["verdict"] in HANG_VERDICTS or want["verdict"] == "stopped"), explain
    if want["verdict"] in HANG_VERDICTS or want["verdict"] == "stopped":
        finding = doc["findings"][0]
        assert finding["grade"] == want["grade"], explain
        assert sorted(names.get(t["tid"], "?") for t in finding["threads"]) == want["threads"], explain
        assert sorted(names.get(t["tid"], "?") for t in finding["blocked_threads"]) == want["blocked"], explain
        objects = report["extra"]["objects"]
        for key in want["objects"]:
            assert objects[key] in first_finding_objects(finding, doc["threads"]), (
                "%s (%#x) not blamed\n%s" % (key, objects[key], explain))
        child = report["extra"].get("child")
        if child:
            assert "child process %d" % child in finding["summary"], explain
        hint = report["extra"].get("hint")
        if hint:
            assert hint in finding["summary"], explain
        # Stuck because the child it waits for is: named in the JSON too.
        assert finding["child_pid"] == (child if report["extra"].get("child_stuck") else None), \
            explain
    else:
        assert doc["findings"] == [], explain
    stuck = sorted(names[t["tid"]] for t in doc["threads"] if t["stuck"] and t["tid"] in names)
    assert stuck == want["stuck"], explain
    owner_state = report["extra"].get("owner_state")
    if owner_state:
        for t in doc["threads"]:
            if t["stuck"] and t["waiting_for"]["kind"] == "notify":
                attrs = t["waiting_for"]["owner_state"]["attributes"]
                assert {k: attrs.get(k) for k in owner_state} == \
                    {k: repr(v) for k, v in owner_state.items()}, attrs


def check_durations(doc, target, asked, answered):
    """A stuck thread has waited since before the report was written (its
    stack had settled) and not longer than the program has run."""
    names = tid_names(target.report)
    for t in doc["threads"]:
        wait = t["waiting_for"]
        if not t["stuck"] or t["tid"] not in names or not wait or wait["kind"] in ("gil", "sleep"):
            continue
        seconds = wait["waiting_seconds"]
        assert seconds is not None, wait
        if wait["waiting_at_least"]:
            assert seconds == doc["progress"]["interval_ms"] / 1000, wait
            continue
        # The scheduler's per-CPU clocks differ by up to a few tenths of a second.
        assert asked - target.reported - 0.5 <= seconds <= answered - target.started + 0.5, (
            "%s waited %.3f s; reported %.3f s and started %.3f s before the answer"
            % (names[t["tid"]], seconds, answered - target.reported, answered - target.started))


def hung(start_field, interp, program):
    """program started and brought to the state its expectation describes:
    (target, the process to diagnose: the target or the child it names)."""
    target = start_field(interp, program)
    report = target.report
    subject = target if report["pid"] == target.pid else Child(report["pid"], report)
    settle(target, program)
    if program == "stopped":
        os.kill(subject.pid, signal.SIGSTOP)
        wait_states(subject.pid, tid_names(report), ("T",))
    return target, subject


@pytest.mark.parametrize("program", PROGRAMS)
def test_field(interp, program, start_field, pyscope):
    target, subject = hung(start_field, interp, program)
    report = target.report
    asked = time.time()
    result = pyscope("why", "--json", subject.pid)
    answered = time.time()
    assert result.returncode == 0, repr(result)
    doc = json.loads(result.stdout)
    check(doc, report)
    if subject is target:
        check_durations(doc, target, asked, answered)
    if program == "stopped":
        assert proc_state(subject.pid) == "T"


def test_stopped_by_tracer(interp, start_field, pyscope):
    """A debugger attached and left the process stopped (gdb attaches every
    thread; here without detaching): stopped by its tracer, which is named."""
    target = start_field(interp, "stopped")
    pid = target.pid
    wait_gone(pid, target.report["extra"]["reporter"])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    PTRACE_ATTACH, PTRACE_DETACH, WALL = 16, 17, 0x40000000
    attached = []
    try:
        for tid in tid_names(target.report):
            if libc.ptrace(PTRACE_ATTACH, tid, None, None) != 0:
                pytest.skip("ptrace attach not permitted: errno %d" % ctypes.get_errno())
            attached.append(tid)
            os.waitpid(tid, WALL)
        wait_states(pid, attached, ("t",))
        result = pyscope("why", "--json", pid)
        assert result.returncode == 0, repr(result)
        doc = json.loads(result.stdout)
        assert doc["verdict"] == "stopped" and doc["grade"] == "certain", doc["summary"]
        assert "tracer, process %d" % os.getpid() in doc["summary"], doc["summary"]
        main = [t for t in doc["threads"] if t["tid"] == pid][0]
        assert main["stopped"]["by"] == "tracer" and main["stopped"]["tracer_pid"] == os.getpid()
        text = pyscope("dump", pid)
        assert text.returncode == 0, repr(text)
        assert "stopped by its tracer, process %d" % os.getpid() in text.stdout, text.stdout
        assert "running, holds the GIL" not in text.stdout, text.stdout
    finally:
        for tid in attached:
            libc.ptrace(PTRACE_DETACH, tid, None, None)


def test_stopped_dump_text(interp, start_field, pyscope):
    """dump says how to resume a process stopped by SIGSTOP."""
    target = start_field(interp, "stopped")
    wait_gone(target.pid, target.report["extra"]["reporter"])
    os.kill(target.pid, signal.SIGSTOP)
    wait_states(target.pid, tid_names(target.report), ("T",))
    text = pyscope("dump", target.pid)
    assert text.returncode == 0, repr(text)
    assert "resume it with kill -CONT %d" % target.pid in text.stdout, text.stdout
    assert text.stdout.count("stopped by a signal") == len(target.report["threads"]), text.stdout
    assert "holds the GIL" not in text.stdout, text.stdout
    doc = json.loads(pyscope("why", "--json", target.pid).stdout)
    assert doc["threads"][0]["stopped"]["resume"] == "kill -CONT %d" % target.pid


def test_rate_limiter_progress_is_its_tasks(interp, start_field, pyscope):
    """asyncio_rate_limiter.py once its reporter thread has gone: the loop's
    thread is back in the same select at both snapshots, so what shows
    progress is a request task that was served (it awaits a new Future).
    `why` must count it, every time, and must not
    count the refiller re-arming its sleep as progress of its own."""
    target = start_field(interp, "asyncio_rate_limiter")
    pid = target.report["pid"]
    settle(target, "asyncio_rate_limiter")
    for _ in range(3):
        doc = json.loads(pyscope("why", "--json", pid).stdout)
        progress = doc["progress"]
        assert doc["verdict"] == "not_hung", doc["summary"]
        assert progress["threads_changed"] == 0, progress
        assert progress["tasks_moved"] >= 1, progress
    leak = start_field(interp, "asyncio_semaphore_leak")
    settle(leak, "asyncio_semaphore_leak")
    # Every look, even one whose snapshot caught the loop's thread in the
    # heartbeat's step (a loaded machine can run it late): why looks again
    # once the loop is back in its selector.
    for _ in range(3):
        doc = json.loads(pyscope("why", "--json", leak.report["pid"]).stdout)
        assert doc["progress"]["tasks_moved"] == 0, doc["progress"]
        assert (doc["verdict"], doc["grade"]) == ("never_notified", "probable"), doc["summary"]
