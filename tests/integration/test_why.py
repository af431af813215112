"""Integration tests for `pyscope why` (and the "waiting_for" of `pyscope dump`).

Each programs/why_*.py target puts its threads into a known hang (or into
healthy work), and reports the ids of the objects involved and which thread
waits for what. The verdict, the findings and every waiting thread's
object, variable name, owner and socket must match exactly. Schemas:
docs/why.md and docs/json.md.
"""

import json
import re

import pytest

from conftest import proc_state

EXIT_OK, EXIT_USAGE = 0, 2

VERDICTS = {"not_hung", "idle", "unchecked", "deadlock", "gil_held_while_blocked",
            "lock_never_released", "queue_starved", "never_notified", "network_wait",
            "stopped", "gil_hog"}
WAIT_KINDS = {"gil", "lock", "notify", "join", "socket", "select", "sleep", "child", "io",
              "futex", "syscall"}


# --------------------------------------------------------------------------
# Helpers

def version_tuple(interp):
    return tuple(int(p) for p in re.match(r"(\d+)\.(\d+)", interp.version).groups())


def function_name(interp, qualname):
    """What pyscope reports for a function: co_qualname on 3.11+, co_name before."""
    return qualname if version_tuple(interp) >= (3, 11) else qualname.rsplit(".", 1)[-1]


def check_waiting_for(where, wait):
    if wait is None:
        return
    assert isinstance(wait, dict), where
    for key in ("kind", "description", "syscall", "forever", "timeout_seconds", "gil_holder",
                "object", "operation", "lock", "owner", "waiters", "queue_length", "join",
                "socket", "fds", "sleep_seconds", "child_pid", "io"):
        assert key in wait, "%s.waiting_for.%s missing: %r" % (where, key, sorted(wait))
    assert wait["kind"] in WAIT_KINDS, "%s: kind %r" % (where, wait["kind"])
    assert isinstance(wait["description"], str) and wait["description"]
    if wait["object"] is not None:
        for key in ("type", "address", "reference", "reference_function", "reference_frame"):
            assert key in wait["object"], "%s.waiting_for.object.%s missing" % (where, key)


def check_why_schema(doc, pid):
    for key in ("pyscope_version", "pid", "command", "executable", "python_version", "verdict",
                "hung", "grade", "summary", "progress", "signals", "findings", "gil", "threads"):
        assert key in doc, "top-level key %r missing: %s" % (key, sorted(doc))
    assert doc["pid"] == pid
    assert doc["verdict"] in VERDICTS, doc["verdict"]
    assert isinstance(doc["hung"], bool)
    assert isinstance(doc["summary"], str) and doc["summary"]
    for key in ("checked", "interval_ms", "progressing", "gil_switches", "cpu_ms",
                "threads_changed", "threads_started", "threads_exited", "threads_running"):
        assert key in doc["progress"], "progress.%s missing" % key
    for finding in doc["findings"]:
        for key in ("kind", "certain", "grade", "summary", "threads", "blocked_threads",
                "releasers", "object", "task", "child_pid"):
            assert key in finding, "finding.%s missing: %r" % (key, finding)
        assert finding["kind"] in VERDICTS
        assert finding["grade"] in ("certain", "probable")
        assert finding["certain"] is (finding["grade"] == "certain")
    if doc["findings"]:
        assert doc["verdict"] == doc["findings"][0]["kind"]
        assert doc["grade"] == doc["findings"][0]["grade"]
    else:
        assert doc["grade"] is None
    for index, thread in enumerate(doc["threads"]):
        where = "threads[%d]" % index
        for key in ("tid", "thread_id", "name", "state", "holds_gil", "syscall", "stuck",
                    "changed", "cpu_ms", "waiting_for", "frames", "frames_complete"):
            assert key in thread, "%s.%s missing: %s" % (where, key, sorted(thread))
        check_waiting_for(where, thread["waiting_for"])


def why_json(pyscope, target, *args):
    result = pyscope("why", "--json", *args, target.pid)
    assert result.returncode == EXIT_OK, "why failed: %r" % result
    try:
        doc = json.loads(result.stdout)
    except ValueError as e:
        pytest.fail("stdout is not one JSON document (%s): %r" % (e, result))
    check_why_schema(doc, target.pid)
    assert proc_state(target.pid) not in ("T", "t"), "target left stopped"
    assert target.alive(), "target died during why"
    return doc


def dump_json(pyscope, target):
    result = pyscope("dump", "--json", target.pid)
    assert result.returncode == EXIT_OK, "dump failed: %r" % result
    doc = json.loads(result.stdout)
    for index, thread in enumerate(doc["threads"]):
        assert "waiting_for" in thread, "dump threads[%d] has no waiting_for" % index
        check_waiting_for("threads[%d]" % index, thread["waiting_for"])
    return doc


def tids(target):
    """Thread name -> kernel tid, from the program's own report."""
    return {t["name"]: t["native_id"] for t in target.report["threads"]}


def by_name(doc, target):
    names = {t["native_id"]: t["name"] for t in target.report["threads"]}
    return {names[t["tid"]]: t for t in doc["threads"] if t["tid"] in names}


def finding_tids(finding, key="threads"):
    return sorted(t["tid"] for t in finding[key])


def explain(doc):
    lines = ["verdict %s: %s" % (doc["verdict"], doc["summary"])]
    for t in doc["threads"]:
        wait = t["waiting_for"]
        lines.append("  %s %r stuck=%s: %s" % (t["tid"], t["name"], t["stuck"],
                                              wait["description"] if wait else None))
    return "\n".join(lines)


def check_lock_wait(interp, thread, address, reference, qualname, lock_type):
    wait = thread["waiting_for"]
    assert wait is not None, "%r waits for nothing" % thread["name"]
    assert wait["kind"] == "lock", "%r: %r" % (thread["name"], wait)
    obj = wait["object"]
    assert obj["type"] == lock_type, "%r: %r" % (thread["name"], obj)
    assert obj["address"] == address, "%r: object %#x, expected %#x (%r)" % (
        thread["name"], obj["address"], address, wait["description"])
    assert obj["reference"] == reference, "%r: reference %r, expected %r" % (
        thread["name"], obj["reference"], reference)
    assert obj["reference_function"] == function_name(interp, qualname), (
        "%r: reference_function %r" % (thread["name"], obj["reference_function"]))
    assert wait["operation"] == "acquire"
    assert wait["forever"] is True
    assert wait["lock"]["address"] == address and wait["lock"]["locked"] is True
    assert wait["syscall"] == "futex"


# --------------------------------------------------------------------------
# Deadlocks

def test_rlock_deadlock(interp, start_program, pyscope):
    target = start_program(interp, "why_rlock_deadlock.py")
    target.wait_asleep()
    extra = target.report["extra"]
    tid = tids(target)
    doc = why_json(pyscope, target)
    threads = by_name(doc, target)
    assert doc["verdict"] == "deadlock", explain(doc)
    assert doc["hung"] is True
    deadlocks = [f for f in doc["findings"] if f["kind"] == "deadlock"]
    assert len(deadlocks) == 1, explain(doc)
    finding = deadlocks[0]
    assert finding["certain"] is True
    assert finding_tids(finding) == sorted([tid["worker-a"], tid["worker-b"]])
    assert finding_tids(finding, "blocked_threads") == [tid["joiner"]]
    for name, want in extra["waits"].items():
        thread = threads[name]
        check_lock_wait(interp, thread, want["lock"], "second", "worker", "RLock")
        owner = thread["waiting_for"]["owner"]
        assert owner["status"] == "alive" and owner["source"] == "recorded", owner
        assert owner["tid"] == tid[want["owner"]], owner
        assert owner["name"] == want["owner"]
        assert thread["waiting_for"]["waiters"] == 1
        assert thread["stuck"] is True
    joiner = threads["joiner"]["waiting_for"]
    assert joiner["kind"] == "join", joiner
    assert joiner["object"]["type"] == "Thread"
    assert joiner["object"]["address"] == extra["joiner"]["thread_object"]
    assert joiner["object"]["reference"] == "thread"
    assert joiner["object"]["reference_function"] == "joiner"
    assert joiner["join"]["tid"] == tid["worker-a"]
    assert joiner["forever"] is True
    assert threads["joiner"]["stuck"] is True
    assert threads["MainThread"]["stuck"] is False
    assert threads["MainThread"]["waiting_for"]["kind"] == "sleep"


def test_lock_deadlock(interp, start_program, pyscope):
    target = start_program(interp, "why_lock_deadlock.py")
    target.wait_asleep()
    tid = tids(target)
    waits = target.report["extra"]["waits"]
    doc = why_json(pyscope, target)
    threads = by_name(doc, target)
    assert doc["verdict"] == "deadlock", explain(doc)
    deadlocks = {tuple(finding_tids(f)): f for f in doc["findings"] if f["kind"] == "deadlock"}
    with_pair = tuple(sorted([tid["with-a"], tid["with-b"]]))
    acquire_pair = tuple(sorted([tid["acquire-a"], tid["acquire-b"]]))
    assert set(deadlocks) == {with_pair, acquire_pair}, explain(doc)
    # `with` blocks show who holds a Lock; explicit acquire() does not.
    assert deadlocks[with_pair]["certain"] is True
    assert deadlocks[acquire_pair]["certain"] is False
    for name, want in waits.items():
        qualname = "with_worker" if name.startswith("with") else "acquire_worker"
        thread = threads[name]
        check_lock_wait(interp, thread, want["lock"], "second", qualname, "Lock")
        owner = thread["waiting_for"]["owner"]
        if name.startswith("with"):
            assert owner["status"] == "alive" and owner["source"] == "with_block", owner
            assert owner["tid"] == tid[want["owner"]]
        else:
            assert owner["status"] == "unknown" and owner["tid"] is None, owner
        assert thread["stuck"] is True


# --------------------------------------------------------------------------
# A lock nobody will release, a starved queue, network waits

def test_rwlock_left_locked(interp, start_program, pyscope):
    target = start_program(interp, "why_rwlock.py")
    target.wait_asleep()
    extra = target.report["extra"]
    tid = tids(target)
    doc = why_json(pyscope, target)
    threads = by_name(doc, target)
    assert doc["verdict"] == "lock_never_released", explain(doc)
    finding = doc["findings"][0]
    assert finding["object"] == extra["lock"]
    frozen = extra["writers"] + [extra["reader"]]
    assert finding_tids(finding) == sorted(tid[name] for name in frozen)
    assert "buggy-writer" not in tid, "the buggy writer should have died"
    for name in frozen:
        qualname = "RWLock.acquire_read" if name == "reader" else "RWLock.acquire_write"
        thread = threads[name]
        check_lock_wait(interp, thread, extra["lock"], "self._write_lock", qualname, "Lock")
        wait = thread["waiting_for"]
        assert wait["owner"]["status"] == "unknown", wait["owner"]
        assert wait["waiters"] == len(frozen)
        assert thread["stuck"] is True
    assert len([f for f in doc["findings"] if f["kind"] == "deadlock"]) == 0


def test_rlock_owner_gone(interp, start_program, pyscope):
    target = start_program(interp, "why_orphan_rlock.py")
    target.wait_asleep()
    extra = target.report["extra"]
    tid = tids(target)
    doc = why_json(pyscope, target)
    threads = by_name(doc, target)
    assert doc["verdict"] == "lock_never_released", explain(doc)
    finding = doc["findings"][0]
    assert finding["object"] == extra["lock"]
    assert finding_tids(finding) == [tid["waiter"]]
    check_lock_wait(interp, threads["waiter"], extra["lock"], "lock", "wait_for", "RLock")
    owner = threads["waiter"]["waiting_for"]["owner"]
    assert owner == {"status": "gone", "source": "recorded", "tid": None,
                     "thread_id": extra["owner_ident"], "name": None}, owner


def test_gil_held_while_blocked(interp, start_program, pyscope):
    target = start_program(interp, "why_gil.py")
    tid = tids(target)
    target.wait_in_syscall(tid["gil-holder"], {34})  # pause
    spinners = sorted([tid["spinner-0"], tid["spinner-1"]])
    # A GIL waiter whose timed wait just expired is briefly on CPU: which
    # threads wait for the GIL is an instant's fact, the verdict is not.
    for attempt in range(5):
        doc = why_json(pyscope, target)
        assert doc["verdict"] == "gil_held_while_blocked", explain(doc)
        finding = doc["findings"][0]
        assert finding_tids(finding) == [tid["gil-holder"]]
        blocked = finding_tids(finding, "blocked_threads")
        assert blocked and set(blocked) <= set(spinners), explain(doc)
        if blocked == spinners:
            break
    assert blocked == spinners, explain(doc)
    threads = by_name(doc, target)
    holder = threads["gil-holder"]
    assert holder["holds_gil"] is True and holder["syscall"] == "pause"
    assert doc["gil"]["holder_tid"] == tid["gil-holder"]
    seen_waiting = 0
    for name in ("spinner-0", "spinner-1"):
        wait = threads[name]["waiting_for"]
        if wait is None:  # on CPU between two timed waits for the GIL
            assert threads[name]["state"] == "running", threads[name]
            continue
        assert wait["kind"] == "gil", wait
        assert wait["gil_holder"]["tid"] == tid["gil-holder"]
        seen_waiting += 1
    assert seen_waiting >= 1, explain(doc)
    assert doc["progress"]["gil_switches"] == 0


def test_queue_starved(interp, start_program, pyscope):
    target = start_program(interp, "why_queue.py")
    target.wait_asleep()
    extra = target.report["extra"]
    tid = tids(target)
    doc = why_json(pyscope, target)
    threads = by_name(doc, target)
    assert doc["verdict"] == "queue_starved", explain(doc)
    finding = doc["findings"][0]
    assert finding["object"] == extra["queue"]
    assert finding_tids(finding) == [tid["consumer"]]
    wait = threads["consumer"]["waiting_for"]
    assert wait["kind"] == "notify", wait
    assert wait["object"]["type"] == "Queue"
    assert wait["object"]["address"] == extra["queue"]
    assert wait["object"]["reference"] == "q"
    assert wait["object"]["reference_function"] == "careful_consumer"
    assert wait["operation"] == "get"
    assert wait["queue_length"] == 0
    assert wait["forever"] is True
    assert wait["waiters"] == 1
    assert threads["consumer"]["stuck"] is True
    assert threads["MainThread"]["stuck"] is False


def test_network_wait(interp, start_program, pyscope):
    target = start_program(interp, "why_http.py")
    target.wait_asleep()
    extra = target.report["extra"]
    tid = tids(target)
    workers = extra["workers"]
    assert len(workers) == 4, "the program found %d stuck workers" % len(workers)
    doc = why_json(pyscope, target)
    threads = by_name(doc, target)
    assert doc["verdict"] == "network_wait", explain(doc)
    finding = doc["findings"][0]
    assert finding_tids(finding) == sorted(tid[name] for name in workers)
    for name, want in workers.items():
        wait = threads[name]["waiting_for"]
        assert wait["kind"] == "socket", wait
        sock = wait["socket"]
        assert sock["protocol"] == "tcp"
        assert sock["local"] == want["local"], sock
        assert sock["remote"] == extra["server"], sock
        assert sock["state"] == "ESTABLISHED"
        assert sock["fd"] == want["fd"]
        assert sock["object"] == want["object"]
        assert sock["reference"] == "self._sock"
        assert sock["reference_function"] == want["function"]
        assert wait["forever"] is True, "no timeout was set: %r" % wait
        assert wait["syscall"] in ("recvfrom", "read", "recvmsg")
    server = threads["server"]["waiting_for"]
    assert server["kind"] == "socket" and server["socket"]["state"] == "LISTEN", server
    assert server["socket"]["local"] == extra["server"]


# --------------------------------------------------------------------------
# Not hung, idle

def test_busy_not_hung(interp, start_program, pyscope):
    target = start_program(interp, "why_busy.py")
    for _ in range(3):
        doc = why_json(pyscope, target)
        assert doc["verdict"] == "not_hung", explain(doc)
        assert doc["hung"] is False
        assert doc["findings"] == []
        assert doc["progress"]["checked"] is True and doc["progress"]["progressing"] is True
        assert not any(t["stuck"] for t in doc["threads"])


def test_blocking_lock_probably_hung(interp, start_program, pyscope):
    """blocking.py waits on a lock never released, a socket and a sleep. Only
    the main thread, which only sleeps, could still release the lock: the
    lock waiter is probably hung (issue 11's graded verdicts), the rest is
    idle."""
    target = start_program(interp, "blocking.py")
    target.wait_asleep()
    tid = tids(target)
    doc = why_json(pyscope, target)
    threads = by_name(doc, target)
    assert doc["verdict"] == "lock_never_released", explain(doc)
    assert doc["grade"] == "probable"
    finding = doc["findings"][0]
    assert finding["grade"] == "probable" and finding["certain"] is False
    assert finding_tids(finding) == [tid["lock-waiter"]]
    assert finding_tids(finding, "releasers") == [tid["MainThread"]]
    assert threads["MainThread"]["liveness"]["reason"] == "only sleeps"
    assert [name for name, t in threads.items() if t["stuck"]] == ["lock-waiter"]
    assert doc["progress"]["progressing"] is False
    lock = threads["lock-waiter"]["waiting_for"]
    assert lock["kind"] == "lock" and lock["object"]["type"] == "Lock"
    assert lock["object"]["reference"] == "lock"
    assert lock["object"]["reference_function"] == "lock_waiter"
    assert lock["owner"]["status"] == "unknown"
    reader = threads["socket-reader"]["waiting_for"]
    assert reader["kind"] == "socket" and reader["socket"]["protocol"] == "unix"
    assert reader["socket"]["fd"] == target.report["extra"]["sockets"][0]
    assert reader["socket"]["reference"] == "sock"
    assert reader["forever"] is True
    assert threads["sleeper"]["waiting_for"]["kind"] == "sleep"
    assert 0 < threads["sleeper"]["waiting_for"]["sleep_seconds"] <= 3600


def test_other_waits(interp, start_program, pyscope):
    """select, epoll, poll, a child, sleep and threading waits, in dump."""
    target = start_program(interp, "why_waits.py")
    target.wait_asleep()
    extra = target.report["extra"]
    threads = by_name(dump_json(pyscope, target), target)
    wait = {name: t["waiting_for"] for name, t in threads.items()}

    select_wait = wait["selecter"]
    assert select_wait["kind"] == "select", select_wait
    assert select_wait["syscall"] in ("select", "pselect6")
    assert [f["fd"] for f in select_wait["fds"]] == [extra["pipe_read"], extra["select_socket"]]
    assert select_wait["fds"][0]["description"].startswith("pipe:[")
    assert select_wait["fds"][1]["description"].startswith("socket unix")
    assert select_wait["forever"] is True

    epoll_wait = wait["epoller"]
    assert epoll_wait["kind"] == "select" and epoll_wait["syscall"].startswith("epoll"), epoll_wait
    assert [f["fd"] for f in epoll_wait["fds"]] == [extra["epoll_socket"]]
    assert epoll_wait["forever"] is True

    poll_wait = wait["poller"]
    assert poll_wait["kind"] == "socket" and poll_wait["syscall"] in ("poll", "ppoll"), poll_wait
    assert poll_wait["socket"]["fd"] == extra["poll_socket"]
    assert poll_wait["socket"]["reference"] == "sock"
    assert poll_wait["forever"] is False and poll_wait["timeout_seconds"] == 3600

    child = wait["child-waiter"]
    assert child["kind"] == "child" and child["child_pid"] == extra["child"], child
    assert "(sleep)" in child["description"]

    pipe = wait["pipe-reader"]
    assert pipe["kind"] == "io" and pipe["syscall"] == "read", pipe
    assert pipe["io"]["fd"] == extra["quiet_read"] and pipe["io"]["target"].startswith("pipe:[")
    assert pipe["io"]["uninterruptible"] is False

    assert wait["sleeper"]["kind"] == "sleep"
    assert 3000 < wait["sleeper"]["sleep_seconds"] <= 3600

    for name, kind, operation, key, reference in (
            ("semaphore-waiter", "Semaphore", "acquire", "semaphore", "sem"),
            ("event-waiter", "Event", "wait", "event", "event"),
            ("condition-waiter", "Condition", "wait", "condition", "cond")):
        w = wait[name]
        assert w["kind"] == "notify", w
        assert w["object"]["type"] == kind and w["operation"] == operation, w
        assert w["object"]["address"] == extra[key]
        assert w["object"]["reference"] == reference
    assert wait["event-waiter"]["forever"] is False
    assert wait["event-waiter"]["timeout_seconds"] == 3600
    assert wait["semaphore-waiter"]["forever"] is True
    # The semaphore and condition waiters have no timeout and only the
    # sleeping main thread can reach their objects.
    doc = why_json(pyscope, target)
    assert doc["verdict"] == "never_notified" and doc["grade"] == "probable", explain(doc)
    stuck = sorted(t["tid"] for t in doc["threads"] if t["stuck"])
    assert stuck == sorted([tids(target)["semaphore-waiter"], tids(target)["condition-waiter"]])


def test_idle_pool_is_not_hung(interp, start_program, pyscope):
    """Workers of a module-level executor wait on its SimpleQueue: the main
    thread reaches the executor through a global, so it can still feed them."""
    target = start_program(interp, "why_pool_idle.py")
    target.wait_asleep()
    extra = target.report["extra"]
    doc = why_json(pyscope, target)
    threads = by_name(doc, target)
    assert doc["verdict"] == "idle", explain(doc)
    assert len(extra["workers"]) == 3
    for name in extra["workers"]:
        wait = threads[name]["waiting_for"]
        assert wait["kind"] == "notify", wait
        assert wait["object"]["type"] == "SimpleQueue" and wait["operation"] == "get"
        assert wait["object"]["address"] == extra["work_queue"]
        assert wait["object"]["reference"] == "work_queue"
        assert wait["object"]["reference_function"] == "_worker"
        assert wait["waiters"] == 3
        assert threads[name]["stuck"] is False


@pytest.mark.parametrize("handler", [False, True], ids=["no-handler", "sigterm-handler"])
def test_main_thread_event_wait(interp, start_program, pyscope, handler):
    """A main thread waiting on an Event nothing references is stuck, unless
    a signal handler (which Python runs in the main thread) could set it."""
    args = ["handler"] if handler else []
    target = start_program(interp, "why_signal_wait.py", *args)
    target.wait_asleep()
    doc = why_json(pyscope, target)
    main = by_name(doc, target)["MainThread"]
    wait = main["waiting_for"]
    assert wait["kind"] == "notify" and wait["object"]["type"] == "Event", wait
    assert wait["object"]["address"] == target.report["extra"]["event"]
    assert wait["object"]["reference"] == "stop"
    if handler:
        assert doc["verdict"] == "idle", explain(doc)
        assert main["stuck"] is False
    else:
        assert doc["verdict"] == "never_notified", explain(doc)
        assert main["stuck"] is True
        assert finding_tids(doc["findings"][0]) == [target.pid]


def test_interval_zero(interp, start_program, pyscope):
    target = start_program(interp, "why_rlock_deadlock.py")
    target.wait_asleep()
    doc = why_json(pyscope, target, "--interval", "0")
    assert doc["progress"]["checked"] is False
    assert doc["verdict"] == "deadlock", explain(doc)
    assert all(t["changed"] is None for t in doc["threads"])


# --------------------------------------------------------------------------
# dump shows the same waits

def test_dump_waiting_for(interp, start_program, pyscope):
    target = start_program(interp, "why_rwlock.py")
    target.wait_asleep()
    extra = target.report["extra"]
    doc = dump_json(pyscope, target)
    threads = by_name(doc, target)
    for name in extra["writers"]:
        check_lock_wait(interp, threads[name], extra["lock"], "self._write_lock",
                        "RWLock.acquire_write", "Lock")
    assert threads["MainThread"]["waiting_for"]["kind"] == "sleep"
    text = pyscope("dump", target.pid)
    assert text.returncode == EXIT_OK
    lines = [line for line in text.stdout.splitlines() if "waiting for:" in line]
    assert len(lines) == len(extra["writers"]) + 2, text.stdout
    assert sum("self._write_lock" in line and "%#x" % extra["lock"] in line for line in lines) == 4


def test_text_output(interp, start_program, pyscope):
    target = start_program(interp, "why_rlock_deadlock.py")
    target.wait_asleep()
    result = pyscope("why", target.pid)
    assert result.returncode == EXIT_OK, repr(result)
    out = result.stdout
    assert "Verdict: deadlock" in out, out
    assert "[stuck]" in out
    assert out.count("waiting for:") == len(target.report["threads"]), out


def test_why_usage_errors(pyscope):
    for args in (["why"], ["why", "x"], ["why", "--interval", "-1", "1"],
                 ["why", "--interval", "abc", "1"], ["why", "--nope", "1"],
                 ["why", "--interval", "2x", "1"], ["why", "--interval", "-1s", "1"],
                 ["why", "--interval", "61s", "1"], ["why", "--interval", "s", "1"]):
        result = pyscope(*args)
        assert result.returncode == EXIT_USAGE, "%s: %r" % (args, result)
        assert result.stderr.strip()


@pytest.mark.representative
@pytest.mark.parametrize("interval, ms", [("300ms", 300), ("0.25s", 250), ("200", 200)])
def test_interval_durations(interp, start_program, pyscope, interval, ms):
    """--interval takes a duration; the report says how long pyscope watched."""
    target = start_program(interp, "why_rlock_deadlock.py")
    target.wait_asleep()
    doc = why_json(pyscope, target, "--interval", interval)
    assert doc["progress"]["interval_ms"] == ms
    assert ms <= doc["progress"]["watched_ms"] < ms + 5000, doc["progress"]
    text = pyscope("why", "--interval", interval, target.pid)
    assert re.search(r"^Watched   \d+ ms, from the first snapshot", text.stdout, re.M), text.stdout


@pytest.mark.representative
def test_exits_during_interval(interp, spawn, pyscope):
    """A process that exits while pyscope waits between the snapshots gets
    one line on stderr and exit status 7, never a verdict."""
    # It outlives the first snapshot by far (a loaded machine took 0.7 s
    # over it, and the process was gone before it: no such process).
    proc = spawn([interp.path, "-c", "import time; print('ready', flush=True); time.sleep(1.5)"],
                 ready_line="ready")
    result = pyscope("why", "--interval", "3s", proc.pid)
    assert result.returncode == 7, repr(result)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "exited during the 3000 ms interval" in lines[0], result.stderr


def test_signal_table(interp, spawn, pyscope):
    """Only signals with a Python-level handler can run code in the main
    thread: read from the signal module's table (not found in Debian's
    stripped 3.11, where SigCgt minus SIGINT and glibc's 32/33 stands in)."""
    code = ("import signal, threading, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: None)\n"
            "signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
            "signal.signal(signal.SIGUSR2, signal.SIG_DFL)\n"
            "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    proc = spawn([interp.path, "-c", code], ready_line="ready")
    result = pyscope("why", "--json", "--interval", "0", proc.pid)
    assert result.returncode == EXIT_OK, repr(result)
    signals = json.loads(result.stdout)["signals"]
    assert signals["python_handlers"] == ["SIGTERM"], signals
    assert signals["table_read"] is (interp.id != "debian-3.11"), signals
