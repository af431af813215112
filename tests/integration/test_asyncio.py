"""asyncio tasks in `pyscope dump`: every pending task of each event loop,
its await chain innermost first, the task or gather it awaits, and the loop's
thread; compared with what asyncio reports about itself
(programs/asyncio_tasks.py), live and from a core, on every interpreter. On
Debian's 3.14 the task tree is also compared with `python3.14 -m asyncio
pstree` on the same process."""

import json
import re
import subprocess
import time

import pytest

from conftest import run_pyscope
from test_cores import core_of, dump_json, strict_object


def truth_loops(target):
    return {l["loop"]: l for l in target.report["extra"]["loops"]}


def chain(links):
    return [(c["function"], c["file"], c["line"]) for c in links]


def cyclic(tasks):
    """Tasks that reach themselves through the tasks they await."""
    edges = {t["address"]: t["awaits_task"] for t in tasks}
    out = set()
    for start in edges:
        at = edges[start]
        for _ in range(len(edges)):
            if at is None or at == start:
                break
            at = edges.get(at)
        if at == start:
            out.add(start)
    return out


def check_tasks(doc, target, in_selector="selector"):
    """in_selector: what a running loop's "in" says of a loop asleep in its
    selector, as the program's are (null for uvloop: no _run_once frame)."""
    truth = truth_loops(target)
    loops = {l["address"]: l for l in doc["asyncio"]["loops"]}
    assert doc["asyncio"]["error"] is None
    assert set(loops) == set(truth)
    for addr, want in truth.items():
        got = loops[addr]
        assert got["tid"] == want["tid"]
        assert got["tasks_not_shown"] == 0
        assert got["in"] == (in_selector if want["tid"] else None)
        assert got["callback"] is None
        tasks = {t["address"]: t for t in got["tasks"]}
        assert set(tasks) == {t["address"] for t in want["tasks"]}
        for w in want["tasks"]:
            t = tasks[w["address"]]
            assert t["name"] == w["name"]
            assert t["state"] == "pending"
            assert t["chain_complete"]
            assert chain(t["chain"]) == chain(w["chain"]), w["name"]
            # Task.get_stack(): the outermost coroutine's frame
            assert chain(t["chain"][-1:]) == chain(w["stack"]), w["name"]
            if w["awaits_task"]:
                assert t["awaiting"]["address"] == w["awaits_task"]
            assert sorted(t["awaits_tasks"]) == w["awaits_tasks"], w["name"]
            assert t["in_cycle"] == (w["address"] in cyclic(want["tasks"])), w["name"]
            assert bool(t["awaiting"] and t["awaiting"]["unreachable"]) == w["orphan"], w["name"]
    return loops


def kinds(doc):
    """What each task of the main loop awaits, by the coroutine it runs."""
    out = {}
    for loop in doc["asyncio"]["loops"]:
        for t in loop["tasks"]:
            outer = t["chain"][-1]["function"]
            out.setdefault(outer, set()).add(t["awaiting"]["description"]
                                             if t["awaiting"] else None)
    return out


def check_offsets(interp, doc, target):
    """3.14+: the offsets checked against the _asyncio module's own, in the
    AsyncioDebug section of the file that holds it."""
    if tuple(int(x) for x in interp.version.split(".")[:2]) >= (3, 14):
        assert doc["asyncio"]["offsets"] == "checked against the AsyncioDebug section of %s" % (
            target.report["extra"]["asyncio_file"])
    else:
        assert doc["asyncio"]["offsets"] is None


def test_dump_tasks_live(interp, start_program):
    target = start_program(interp, "asyncio_tasks.py")
    before = time.monotonic()
    doc = dump_json(target.pid)
    after = time.monotonic()
    check_tasks(doc, target)
    check_offsets(interp, doc, target)
    # asyncio.sleep: the time left on its timer (the loops' clock is
    # time.monotonic), one decimal.
    sleeping = 0
    for want in (t for l in target.report["extra"]["loops"] for t in l["tasks"]):
        got = [t for l in doc["asyncio"]["loops"] for t in l["tasks"]
               if t["address"] == want["address"]][0]
        if want["sleep_due"] is None:
            assert "s left" not in (got["awaiting"] or {}).get("description", "")
            continue
        sleeping += 1
        left = float(re.search(r", (-?[0-9.]+) s left$", got["awaiting"]["description"]).group(1))
        assert want["sleep_due"] - after - 0.05 <= left <= want["sleep_due"] - before + 0.05
    assert sleeping >= 6
    k = kinds(doc)
    assert k["getter"] == {"Queue.get (_asyncio.Future), 0 items queued"}
    assert k["event_waiter"] == {"Event.wait (_asyncio.Future)"}
    # The program holds the lock (main_loop acquired it); asyncio keeps no owner.
    assert k["lock_waiter"] == {"Lock.acquire (_asyncio.Future), held (asyncio locks record no owner)"}
    assert {re.sub(r", [0-9.]+ s left$", "", d) for d in k["sleeper"]} == {
        "asyncio.sleep (_asyncio.Future)"}
    assert k["future_waiter"] == {"_asyncio.Future"}
    assert k["gatherer"] == {"gather of 2"}
    assert k["parent"] == {'Task "inner"'}
    assert len(k["await_peer"]) == 2 and all(d.startswith('Task "') for d in k["await_peer"])
    # The task made to await a future nobody else holds, and only it.
    orphans = [t["name"] for l in doc["asyncio"]["loops"] for t in l["tasks"]
               if t["awaiting"] and t["awaiting"]["unreachable"]]
    truth = [t["name"] for l in target.report["extra"]["loops"] for t in l["tasks"]
             if t["orphan"]]
    assert orphans == truth == ["orphan"]
    cycle = [t for l in doc["asyncio"]["loops"] for t in l["tasks"] if t["in_cycle"]]
    assert sorted(t["chain"][-1]["function"] for t in cycle) == ["await_peer"] * 2


def skip_unless_uvloop(interp):
    """Debian's python3-uvloop, on the one interpreter it is built for."""
    if interp.id != "debian-3.11":
        pytest.skip("python3-uvloop is built for Debian's /usr/bin/python3.11")
    probe = subprocess.run([interp.path, "-c", "import uvloop"], stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        pytest.skip("python3-uvloop is not installed")


def test_dump_tasks_uvloop(interp, start_program):
    """Debian's python3-uvloop: tasks are the same _asyncio.Task objects,
    run by a loop written in C."""
    skip_unless_uvloop(interp)
    target = start_program(interp, "asyncio_tasks.py", "uvloop")
    doc = dump_json(target.pid)
    check_tasks(doc, target)      # in uvloop's run_until_complete, no frame above it
    k = kinds(doc)
    assert k["getter"] == {"Queue.get (_asyncio.Future), 0 items queued"}
    assert k["sleeper"] == {"asyncio.sleep (_asyncio.Future)"}


@pytest.mark.parametrize("mode", ["pytask", "nocext"])
def test_dump_pure_python_tasks(interp, start_program, tmp_path, mode):
    """asyncio's pure-Python Task: made by each loop's task factory
    (pytask: the Futures stay the C ones), or everywhere because _asyncio
    cannot be imported (nocext: Futures and the running loop are Python's
    too, and a Future's __await__ is a link of each chain). Every task is
    found, with its chain, what it awaits, the task tree and the orphaned
    Future, as asyncio reports them; the loops' threads too. nocext, also
    from a core."""
    target = start_program(interp, "asyncio_tasks.py", mode)
    truth = [t for l in target.report["extra"]["loops"] for t in l["tasks"]]
    assert truth and all(t["pure"] for t in truth)
    docs = [dump_json(target.pid)]
    if mode == "nocext":
        docs.append(dump_json("--core", core_of(interp, target, tmp_path)))
    for doc in docs:
        check_tasks(doc, target)
        shown = {t["address"]: t for l in doc["asyncio"]["loops"] for t in l["tasks"]}
        for want in truth:
            got = shown[want["address"]]["awaiting"]["description"]
            outer = want["chain"][-1]["function"]
            if outer.endswith("getter"):
                assert got == "Queue.get (%s), 0 items queued" % want["waiter_type"], got
            elif outer.endswith("event_waiter"):
                assert got == "Event.wait (%s)" % want["waiter_type"], got
            elif outer.endswith("gatherer"):
                assert got == "gather of 2", got
            elif want["awaits_task"]:
                assert got.startswith('Task "'), got
            elif want["sleep_due"] is not None:
                assert got.startswith("asyncio.sleep (%s)" % want["waiter_type"]), got
        # The Future future_waiter awaits: main_loop's local keeps it.
        [main] = [t["name"] for t in truth if t["chain"][-1]["function"].endswith("main_loop")]
        [held] = [shown[t["address"]]["awaiting"] for t in truth if not t["orphan"] and
                  t["chain"][-1]["function"].endswith("future_waiter")]
        assert held["description"] == held["object"]["type"]
        assert held["held_by"].startswith(
            "held by task \"%s\" (local 'future' in main_loop(), " % main), held


def test_dump_more_tasks_than_the_walk_reads(interp, start_program):
    """A loop with more tasks than the walk reads (asyncio_many.py: 100,050
    pending tasks and main, as asyncio.all_tasks() counts them): dump reads
    its bound's worth and says so, shows --max-tasks of them in detail and
    counts the rest: "... and N more"."""
    target = start_program(interp, "asyncio_many.py", "100050")
    extra = target.report["extra"]
    assert extra["tasks"] == 100051
    doc = dump_json(target.pid)
    walk_max = doc["asyncio"]["walk_max"]
    assert doc["asyncio"]["truncated"] is True and walk_max < extra["tasks"]
    [loop] = doc["asyncio"]["loops"]
    assert loop["tid"] == extra["loop_tid"]
    assert (len(loop["tasks"]), loop["tasks_not_shown"]) == (1000, walk_max - 1000)
    text = run_pyscope(["dump", "--max-tasks", "7", str(target.pid)], timeout=30).stdout
    assert "asyncio loop 0x%x: %d tasks read, and more than the walk reads\n" % (
        loop["address"], walk_max) in text
    assert len(re.findall(r"\n      Task \"", text)) == 7
    assert "\n      ... and %d more tasks not shown (--max-tasks)\n" % (walk_max - 7) in text
    assert "\nasyncio: more tasks than the walk reads (%d): the rest were not read\n" % (
        walk_max) in text


def test_dump_tasks_options(interp, start_program):
    target = start_program(interp, "asyncio_tasks.py")
    doc = dump_json("--tasks=none", target.pid)
    assert "asyncio" not in doc
    doc = dump_json("--max-tasks", "1", target.pid)
    total = sum(len(l["tasks"]) for l in target.report["extra"]["loops"])
    shown = sum(len(l["tasks"]) for l in doc["asyncio"]["loops"])
    hidden = sum(l["tasks_not_shown"] for l in doc["asyncio"]["loops"])
    assert shown == len(doc["asyncio"]["loops"]) == 2
    assert shown + hidden == total


def test_dump_tasks_core(interp, start_program, tmp_path):
    target = start_program(interp, "asyncio_tasks.py")
    core = core_of(interp, target, tmp_path)
    doc = dump_json("--core", core)
    check_tasks(doc, target)
    check_offsets(interp, doc, target)


@pytest.mark.parametrize("mode", ["task", "callback"])
def test_dump_callback_running_time(interp, start_program, tmp_path, mode):
    """A loop blocked inside one callback (a task step, or a plain callback
    queued second in its iteration): dump says which callback of the
    iteration it is and how long it has run, from the _run_once frame's
    end_time, which the program reads from the same frame (exactly), and
    the clock pyscope read between the two bounds taken around the dump.
    The first callback of an iteration is timed exactly; a later one only
    at most (the ones before it ran in the same time). From a core: when
    the loop left its selector, and no running time (no clock to compare)."""
    target = start_program(interp, "asyncio_blocked.py", *(["callback"] if mode == "callback" else []))
    extra = target.report["extra"]
    run_once = extra["run_once"]
    before = time.monotonic()
    doc = dump_json(target.pid)
    after = time.monotonic()
    [loop] = [l for l in doc["asyncio"]["loops"] if l["tid"] == extra["loop_tid"]]
    assert loop["in"] == "callback"
    cb = loop["callback"]
    assert cb["function"] == ("blocking_callback" if mode == "callback" else "blocker")
    assert (cb["index"], cb["of"]) == (run_once["index"], run_once["of"])
    assert (cb["index"], cb["of"]) == ((2, 2) if mode == "callback" else (1, 1))
    assert cb["exact"] == (mode == "task")
    assert cb["left_selector_at"] == run_once["end_time"]
    assert before - run_once["end_time"] <= cb["running_s"] <= after - run_once["end_time"]
    text = run_pyscope(["dump", str(target.pid)], timeout=30).stdout
    if mode == "task":
        assert re.search(r'\n    in callback 1 of 1 of its iteration, a step of task "%s": running '
                         r'for [0-9.]+ s\n' % extra["blocker"], text), text
    else:
        assert re.search(r"\n    in callback 2 of 2 of its iteration, blocking_callback: running "
                         r"for at most [0-9.]+ s \(the loop left its selector then", text), text
    core = dump_json("--core", core_of(interp, target, tmp_path))
    [loop] = [l for l in core["asyncio"]["loops"] if l["tid"] == extra["loop_tid"]]
    assert loop["callback"]["left_selector_at"] == run_once["end_time"]
    assert loop["callback"]["running_s"] is None
    assert (loop["callback"]["index"], loop["callback"]["of"]) == (run_once["index"], run_once["of"])


@pytest.mark.parametrize("eager", [False, True], ids=["scheduled", "eager"])
def test_dump_blocked_loop_tasks(interp, start_program, tmp_path, eager):
    """A loop blocked by a coroutine calling time.sleep(2) (eager: stuck in
    its first step, inside create_task, 3.12+): every task of the loop as
    asyncio reports it, its name, chain, Task.get_stack() and the tasks it
    awaits, the blocker running at its time.sleep line; live and from a
    core."""
    if eager and tuple(int(x) for x in interp.version.split(".")[:2]) < (3, 12):
        pytest.skip("asyncio.eager_task_factory is new in 3.12")
    target = start_program(interp, "asyncio_blocked.py", *(["eager"] if eager else []))
    extra = target.report["extra"]
    live = dump_json(target.pid)
    for doc in (live, dump_json("--core", core_of(interp, target, tmp_path))):
        [loop] = [l for l in doc["asyncio"]["loops"] if l["address"] == extra["loop"]]
        assert loop["tid"] == extra["loop_tid"]
        shown = {t["address"]: t for t in loop["tasks"]}
        assert set(shown) == {t["address"] for t in extra["tasks"]}
        for w in extra["tasks"]:
            t = shown[w["address"]]
            assert t["name"] == w["name"] and t["chain_complete"], (t, w)
            assert chain(t["chain"]) == chain(w["chain"]), w["name"]
            assert chain(t["chain"][-1:]) == chain(w["stack"][-1:]), w["name"]
            assert sorted(t["awaits_tasks"]) == w["awaits_tasks"], w["name"]
            assert t["running"] == (w["address"] == extra["blocker_address"]), w["name"]


def test_task_tree_matches_pstree(interp, start_program):
    """CPython 3.14's own reader of the same process: the same tasks
    awaiting the same tasks (its 3.14.10 shows only the main thread's)."""
    if interp.id != "debian-3.14":
        pytest.skip("python -m asyncio ps reads 3.14 targets only, and 3.15's differs")
    target = start_program(interp, "asyncio_tasks.py")
    main_tid = target.pid
    doc = dump_json(target.pid)
    ps = subprocess.run([interp.path, "-m", "asyncio", "ps", str(target.pid)],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                        universal_newlines=True)
    assert ps.returncode == 0, ps.stderr
    lines = ps.stdout.splitlines()
    header = lines[0]
    cols = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
    theirs, stacks = {}, {}
    for line in lines[2:]:
        if not line.strip():
            continue
        # A long stack runs over into the next columns: it ends at the first
        # run of blanks.
        tokens = line.split()
        task, awaiter = int(tokens[1], 16), int(tokens[-1], 16)
        theirs.setdefault(task, set())
        stacks[task] = re.match(r"(.*?)(\s{2,}|$)", line[cols[3]:]).group(1).split(" -> ")
        if awaiter:
            theirs.setdefault(awaiter, set()).add(task)
    [loop] = [l for l in doc["asyncio"]["loops"] if l["tid"] == main_tid]
    ours = {t["address"]: set(t["awaits_tasks"]) for t in loop["tasks"]}
    assert set(theirs) == set(ours)
    assert theirs == ours
    for t in loop["tasks"]:
        assert [c["function"] for c in t["chain"]] == stacks[t["address"]]


def parse_pstree(text):
    """`python -m asyncio pstree`'s tree: {task name: {"frames": [(function,
    file, line)] outermost first, "parent": the task it is drawn under}}."""
    tasks, stack = {}, []
    for line in text.splitlines():
        m = re.match(r"^((?:\u2502   |    )*)(?:\u2514\u2500\u2500 |\u251c\u2500\u2500 )(.*)$", line)
        assert m, line
        depth, body = len(m.group(1)) // 4, m.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        owner = next((name for _, name in reversed(stack) if name), None)
        if body.startswith("(T) "):
            tasks[body[4:]] = {"frames": [], "parent": owner}
            stack.append((depth, body[4:]))
        else:
            function, where = body.strip().rsplit(" ", 1)
            file, lineno = where.rsplit(":", 1)
            tasks[owner]["frames"].append((function, file, int(lineno)))
            stack.append((depth, None))
    return tasks


def test_task_tree_matches_pstree_of_every_await(interp, start_program):
    """CPython 3.14's own tree of the same process, `python3.14 -m asyncio
    pstree`, on asyncio_waits.py (every kind of await, nested gathers and
    asyncio.wait's tasks, no cycle, which pstree refuses): the same tasks,
    each with the same coroutine stack, under the same awaiting task."""
    if interp.id != "debian-3.14":
        pytest.skip("python -m asyncio pstree reads 3.14 targets only, and 3.15's differs")
    target = start_program(interp, "asyncio_waits.py")
    doc = dump_json(target.pid)
    tree = subprocess.run([interp.path, "-m", "asyncio", "pstree", str(target.pid)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                          universal_newlines=True)
    assert tree.returncode == 0, tree.stderr
    theirs = parse_pstree(tree.stdout)
    [loop] = [l for l in doc["asyncio"]["loops"] if l["tid"] == target.report["extra"]["loop_tid"]]
    names = {t["address"]: t["name"] for t in loop["tasks"]}
    parents = {}
    for t in loop["tasks"]:
        for child in t["awaits_tasks"]:
            parents[names[child]] = t["name"]
    ours = {t["name"]: {"frames": chain(reversed(t["chain"])), "parent": parents.get(t["name"])}
            for t in loop["tasks"]}
    assert len(ours) == len(loop["tasks"])       # names are unique in the program
    assert ours == theirs


def why_json(*args):
    result = run_pyscope(["why", "--json"] + [str(a) for a in args], timeout=30)
    assert result.returncode == 0, result
    return json.loads(result.stdout, object_pairs_hook=strict_object)


@pytest.mark.parametrize("eager", [False, True], ids=["scheduled", "eager"])
def test_why_loop_blocked(interp, start_program, eager):
    """A coroutine that calls time.sleep(2) in a loop keeps its event loop
    from its selector: why names the loop's thread and the task. Eager
    (3.12+): the task blocks in its first step, inside create_task."""
    if eager and tuple(int(x) for x in interp.version.split(".")[:2]) < (3, 12):
        pytest.skip("asyncio.eager_task_factory is new in 3.12")
    target = start_program(interp, "asyncio_blocked.py", *(["eager"] if eager else []))
    extra = target.report["extra"]
    before = time.monotonic()
    doc = why_json(target.pid)
    after = time.monotonic()
    assert doc["verdict"] == "loop_blocked", doc["summary"]
    [f] = [f for f in doc["findings"] if f["kind"] == "loop_blocked"]
    assert f["object"] == extra["blocker_address"]
    assert [t["tid"] for t in f["threads"]] == [extra["loop_tid"]]
    assert 'task "%s"' % extra["blocker"] in f["summary"]
    assert "its %d other tasks cannot run" % extra["other_tasks"] in f["summary"]
    check_running(f["summary"], extra["run_once"], before, after)


def test_why_loop_blocked_by_a_cpu_bound_step(interp, start_program):
    """asyncio_blocked.py cpu: a coroutine computes without awaiting, so
    the loop stays inside its one step and its other tasks never run. The
    thread's stack differs at every look (it is somewhere in checksum), and
    why once took that for progress: "not hung" in 3 of 10 looks. asyncio's
    own clock (the time the iteration left its selector, the same in both
    snapshots) says it is one step: loop_blocked, every time."""
    target = start_program(interp, "asyncio_blocked.py", "cpu")
    extra = target.report["extra"]
    for _ in range(5):
        doc = why_json(target.pid)
        assert doc["verdict"] == "loop_blocked", doc["summary"]
        [f] = [f for f in doc["findings"] if f["kind"] == "loop_blocked"]
        assert f["object"] == extra["blocker_address"]
        assert [t["tid"] for t in f["threads"]] == [extra["loop_tid"]]
        assert 'task "%s"' % extra["blocker"] in f["summary"]


def test_why_loop_threshold(interp, start_program):
    """--loop-threshold: the loop of asyncio_blocked.py has been inside the
    blocker's step for as long as its _run_once frame's end_time says (the
    program reads it): with a threshold of 60 s, no loop_blocked finding;
    once the step has run over a second, a 1 s threshold is met although the
    snapshots are only 150 ms apart (asyncio's clock times the first
    callback of an iteration exactly)."""
    target = start_program(interp, "asyncio_blocked.py")
    extra = target.report["extra"]
    doc = why_json("--loop-threshold", "60s", target.pid)
    assert all(f["kind"] != "loop_blocked" for f in doc["findings"]), doc["findings"]
    while time.monotonic() < extra["run_once"]["end_time"] + 1.2:
        time.sleep(0.1)
    doc = why_json("--loop-threshold", "1s", "--interval", "150ms", target.pid)
    assert doc["verdict"] == "loop_blocked", doc["summary"]
    [f] = [f for f in doc["findings"] if f["kind"] == "loop_blocked"]
    assert f["object"] == extra["blocker_address"]
    assert 'has been inside one step of task "%s" for at least 150 ms' % extra["blocker"] in (
        f["summary"]), f["summary"]


@pytest.mark.parametrize("mode", ["task", "callback"])
def test_why_loop_blocked_uvloop(interp, start_program, mode):
    """The same blocking task, and the same blocking call_soon callback,
    under Debian's python3-uvloop, which has no _run_once to time them by:
    a task step is the task the loop's thread runs in both snapshots; a
    callback is the frame above the one calling uvloop's
    run_until_complete. dump says the loop is in that callback."""
    skip_unless_uvloop(interp)
    target = start_program(interp, "asyncio_blocked.py",
                           *(["callback"] if mode == "callback" else []), "uvloop")
    extra = target.report["extra"]
    assert extra["run_once"] == {}
    doc = why_json(target.pid)
    assert doc["verdict"] == "loop_blocked", doc["summary"]
    [f] = [f for f in doc["findings"] if f["kind"] == "loop_blocked"]
    assert [t["tid"] for t in f["threads"]] == [extra["loop_tid"]]
    if mode == "task":
        assert f["object"] == extra["blocker_address"]
        assert ('has been inside one step of task "%s" for at least' % extra["blocker"]
                in f["summary"]), f["summary"]
        assert "its %d other tasks cannot run" % extra["other_tasks"] in f["summary"]
    else:
        assert "inside one callback, %s, for at least" % extra["callback"] in f["summary"]
        assert "its %d tasks cannot run" % extra["tasks"] in f["summary"]
    [loop] = [l for l in dump_json(target.pid)["asyncio"]["loops"]
              if l["tid"] == extra["loop_tid"]]
    assert loop["in"] == "callback"
    assert loop["callback"]["function"] == (extra["callback"] if mode == "callback"
                                            else extra["blocker"])
    assert loop["callback"]["running_s"] is None and loop["callback"]["index"] is None


def check_running(summary, run_once, before, after):
    """The time the callback has run, as asyncio's _run_once frame (which
    the program read too) dates it, at the second snapshot: between the
    bounds taken around why, to the printed millisecond."""
    m = re.search(r"; it has run for (at most )?([0-9.]+) s \(callback (\d+) of (\d+) of its "
                  r"loop iteration\)", summary)
    assert m, summary
    assert (int(m.group(3)), int(m.group(4))) == (run_once["index"], run_once["of"])
    assert bool(m.group(1)) == (run_once["index"] > 1)
    ran = float(m.group(2))
    assert before - run_once["end_time"] - 0.0005 <= ran <= after - run_once["end_time"] + 0.0005


def test_why_loop_blocked_by_a_callback(interp, start_program):
    """A plain callback (loop.call_soon) that calls time.sleep(2) in a loop
    runs in no task step, yet keeps the loop from its selector just the
    same: why names the loop's thread and the callback's function, and
    counts the tasks that cannot run."""
    target = start_program(interp, "asyncio_blocked.py", "callback")
    extra = target.report["extra"]
    before = time.monotonic()
    doc = why_json(target.pid)
    after = time.monotonic()
    assert doc["verdict"] == "loop_blocked", doc["summary"]
    [f] = [f for f in doc["findings"] if f["kind"] == "loop_blocked"]
    assert [t["tid"] for t in f["threads"]] == [extra["loop_tid"]]
    assert "inside one callback, %s, for at least" % extra["callback"] in f["summary"]
    assert "its %d tasks cannot run" % extra["tasks"] in f["summary"]
    check_running(f["summary"], extra["run_once"], before, after)


def test_why_task_awaiting_an_orphaned_future(interp, start_program, tmp_path):
    """A task suspended on a Future that nothing else refers to (gc's
    referrers, as the program reports it) can never be woken: why says so,
    names the task and its loop's thread, and makes it the verdict, since
    nothing else in the program is stuck; tasks whose Future someone holds
    get no such finding. The same from a core of the process."""
    target = start_program(interp, "asyncio_tasks.py")
    loops = target.report["extra"]["loops"]
    orphans = {t["address"]: (t["name"], l["tid"]) for l in loops for t in l["tasks"] if t["orphan"]}
    assert orphans, "the program made no orphaned Future"
    live = why_json(target.pid)
    for doc in (live, why_json("--core", core_of(interp, target, tmp_path))):
        found = {f["task"]: f for f in doc["findings"]
                 if f["kind"] == "never_notified" and f["task"] is not None}
        assert set(found) == set(orphans), doc["findings"]
        for address, (name, tid) in orphans.items():
            f = found[address]
            assert 'task "%s" awaits a Future' % name in f["summary"]
            assert "nothing can ever complete it" in f["summary"]
            assert [t["tid"] for t in f["threads"]] == [tid]
        assert doc["verdict"] == "never_notified", doc["summary"]


def test_why_idle_loops_not_blocked(interp, start_program):
    """Loops asleep in their selectors block nothing."""
    target = start_program(interp, "asyncio_tasks.py")
    doc = why_json(target.pid)
    assert all(f["kind"] != "loop_blocked" for f in doc["findings"])
    assert doc["verdict"] != "loop_blocked"


def test_dump_unretrieved_exceptions(interp, start_program):
    """A done task whose exception nobody retrieved (what asyncio logs as
    "Task exception was never retrieved" once it is collected) is shown,
    with the exception's type, beside the pending tasks; done tasks whose
    exception was retrieved, or that returned, are not. Truth: each task's
    own _log_traceback. From 3.14 a done task leaves the per-thread lists
    that pyscope reads: the program keeps them in a local of its main task,
    where the walk from the roots finds them, and dump says that only such
    finished tasks can be seen."""
    target = start_program(interp, "asyncio_unretrieved.py")
    extra = target.report["extra"]
    doc = dump_json(target.pid)
    reachable = tuple(int(x) for x in interp.version.split(".")[:2]) >= (3, 14)
    assert doc["asyncio"]["finished_tasks"] == ("reachable" if reachable else "all")
    assert doc["asyncio"]["finished_tasks_walk_partial"] is False
    [loop] = [l for l in doc["asyncio"]["loops"] if l["tid"] == extra["loop_tid"]]
    shown = {t["address"]: t for t in loop["tasks"]}
    for want in extra["tasks"]:
        if not want["done"]:
            assert shown[want["address"]]["exception_never_retrieved"] is None
        elif want["log_traceback"]:
            t = shown[want["address"]]
            assert t["name"] == want["name"] and t["state"] == "finished"
            assert t["exception_never_retrieved"] == want["exception"]
        else:
            assert want["address"] not in shown, want
    assert any(t["log_traceback"] for t in extra["tasks"])
    text = run_pyscope(["dump", target.pid])
    assert 'Task "failed"' in text.stdout and "with ValueError, never retrieved" in text.stdout
    assert ("this Python keeps finished tasks on no list: those shown were reached from "
            "__main__'s globals" in text.stdout) == reachable
    # --tasks=all: the done tasks the program still holds are shown too,
    # finished, whatever became of their result.
    doc = dump_json("--tasks=all", target.pid)
    assert doc["asyncio"]["tasks"] == "all"
    [loop] = [l for l in doc["asyncio"]["loops"] if l["tid"] == extra["loop_tid"]]
    shown = {t["address"]: t for t in loop["tasks"]}
    for want in extra["tasks"]:
        assert want["address"] in shown, (want, sorted(shown))
        t = shown[want["address"]]
        assert t["name"] == want["name"]
        assert (t["state"] == "finished") == want["done"], (t["state"], want)


def expected_awaiting(w, names, extra):
    """What dump says a task of asyncio_waits.py awaits, from what the
    program knows of it, with each time left (or due, from a core) as
    {when}: (text, the loop-clock time it counts down to, or None)."""
    inner = [c for c in w["chain"] if "/asyncio/" in c["file"]]
    fn = inner[0]["function"].rsplit(".", 1)[-1] if inner else None
    due = None
    if w["awaits_task"]:
        text = 'Task "%s"' % names[w["awaits_task"]]
    elif w["gather"] is not None:
        text = "gather of %d" % w["gather"]
    elif w["primitive"]:
        text = "%s (%s)" % (w["primitive"], w["waiter_type"])
    elif w["wait"]:
        text = "asyncio.wait (%s) of %d, %s" % (w["waiter_type"], w["wait"][0], w["wait"][1])
    elif fn == "sleep":
        text, due = "asyncio.sleep (%s){left}" % w["waiter_type"], w["sleep_due"]
    elif fn == "wait_for":
        text = "asyncio.wait_for (%s)" % w["waiter_type"]
    elif fn == "_wait" and inner[0]["file"].endswith("base_subprocess.py"):
        text = "subprocess wait (%s)" % w["waiter_type"]
    else:
        raise AssertionError("no rule for %r" % w)
    if w["queue"]:
        text += ", %d items queued of maxsize %d" % tuple(w["queue"])
    if w["holders"]:
        text += ", held by task%s %s (inside %s async with)" % (
            "s" if len(w["holders"]) > 1 else "", ", ".join('"%s"' % h for h in w["holders"]),
            "their" if len(w["holders"]) > 1 else "its")
    if w["role"] in ("reader", "server_reader"):
        peer, local, fd = ((extra["peer"], extra["local"], extra["fd"]) if w["role"] == "reader"
                           else (extra["local"], extra["peer"], extra["server_fd"]))
        text += ", reading from %s (socket fd %d, local %s)%s" % (
            peer, fd, local, "" if w["deadline"] else ", no timeout")
    if w["role"] == "child":
        text += ", subprocess pid %d" % extra["child_pid"]
    if w["deadline"] is not None:
        assert due is None
        text += ", %s{in}" % ("wait_for times out" if any(
            c["function"].endswith("wait_for") for c in w["chain"]) else "times out")
        due = w["deadline"]
    return text, due


def check_await_kinds(doc, extra, before=None, after=None):
    """dump against asyncio_waits.py's own view: every task of its loop,
    its name, chain, Task.get_stack(), the tasks it awaits and what it
    awaits, in full; live (before/after: time.monotonic() around the dump)
    or from a core."""
    [loop] = [l for l in doc["asyncio"]["loops"] if l["address"] == extra["loop"]]
    assert loop["tid"] == extra["loop_tid"] and loop["tasks_not_shown"] == 0
    shown = {t["address"]: t for t in loop["tasks"]}
    truth = {t["address"]: t for t in extra["tasks"]}
    assert set(shown) == set(truth)
    names = {a: t["name"] for a, t in truth.items()}
    roles = {w["role"] for w in truth.values()}
    assert {"timed", "child", "reader", "server_reader", "lock_waiter", "cond_waiter",
            "sem_waiter", "nested", "wait_any", "wait_all", "putter"} <= roles
    for w in truth.values():
        t = shown[w["address"]]
        assert (t["name"], t["state"], t["chain_complete"]) == (w["name"], "pending", True)
        assert chain(t["chain"]) == chain(w["chain"]), w["name"]
        assert chain(t["chain"][-1:]) == chain(w["stack"]), w["name"]
        assert sorted(t["awaits_tasks"]) == w["awaits_tasks"], w["name"]
        assert not t["awaiting"]["unreachable"], w["name"]
        text, due = expected_awaiting(w, names, extra)
        got = t["awaiting"]["description"]
        # Holders in the order of the tasks listed; the program's in its own.
        m = re.search(r"held by tasks (.*) \(inside", got)
        if m:
            got = got.replace(m.group(1), ", ".join(sorted(m.group(1).split(", "))))
        if due is None:
            assert got == text, (w["name"], got, text)
            continue
        if before is None:      # a core: the loop's clock, no time left
            want = text.format(left=", due at %.3f s of the loop's clock" % due,
                               **{"in": " at %.3f s of the loop's clock" % due})
            assert got == want, (w["name"], got, want)
            continue
        pattern = re.escape(text).replace(re.escape("{left}"), ", (-?[0-9.]+) s left").replace(
            re.escape("{in}"), " in (-?[0-9.]+) s")
        m = re.fullmatch(pattern, got)
        assert m, (w["name"], got, text)
        assert due - after - 0.05 <= float(m.group(1)) <= due - before + 0.05, (w["name"], got)


def test_dump_await_kinds(interp, start_program, tmp_path):
    """Every kind of await, as asyncio_waits.py knows it: a stream read's
    peer, its socket and that no timeout bounds it; a subprocess wait's pid;
    a lock's and a semaphore's holders (inside their async with); a
    Condition, a full Queue's put, nested gathers, asyncio.wait (its tasks,
    until which ends, its timeout), wait_for and asyncio.timeout() (the time
    left on the program's own deadline), the chains and tasks awaited; live,
    then from a core (the deadlines in the loop's clock)."""
    target = start_program(interp, "asyncio_waits.py")
    extra = target.report["extra"]
    before = time.monotonic()
    doc = dump_json(target.pid)
    after = time.monotonic()
    check_await_kinds(doc, extra, before, after)
    check_await_kinds(dump_json("--core", core_of(interp, target, tmp_path)), extra)


def test_why_stream_read_without_timeout(interp, start_program):
    """A task reading a stream with no timeout, on a connection it opened to
    a server that accepted and never writes, still on the same read in the
    second snapshot: why's network_wait finding names the task, its loop's
    thread and the peer, probable (the peer may still answer), and makes it
    the verdict, since the rest of the program only waits on timers. The
    server's own handler, reading the connection it accepted, is a server
    waiting for its client: no finding."""
    target = start_program(interp, "asyncio_waits.py")
    extra = target.report["extra"]
    doc = why_json(target.pid)
    found = [f for f in doc["findings"] if f["kind"] == "network_wait" and f["task"] is not None]
    [reader] = [t["address"] for t in extra["tasks"] if t["role"] == "reader"]
    assert [f["task"] for f in found] == [reader], doc["findings"]
    [f] = found
    assert f["grade"] == "probable"
    assert [t["tid"] for t in f["threads"]] == [extra["loop_tid"]]
    assert ('task "reader" of the asyncio loop of thread %d' % extra["loop_tid"]) in f["summary"]
    assert "waits for a reply from %s on a connection it opened, with no timeout" % (
        extra["peer"]) in f["summary"]
    assert (doc["verdict"], doc["grade"]) == ("network_wait", "probable"), doc["summary"]



def test_why_asyncio_lock_order_deadlock(interp, start_program, tmp_path):
    """Two tasks that took two asyncio locks in opposite orders, each inside
    `async with`, each waiting for the lock the other holds: why names the
    cycle, which task waits for which lock held by which, as a certain
    deadlock and the verdict; the same from a core."""
    target = start_program(interp, "asyncio_lock_cycle.py")
    extra = target.report["extra"]
    tasks, locks = extra["tasks"], extra["locks"]
    for doc in (why_json(target.pid), why_json("--core", core_of(interp, target, tmp_path))):
        found = [f for f in doc["findings"] if f["kind"] == "deadlock" and f["task"] is not None]
        assert len(found) == 1, doc["findings"]
        [f] = found
        assert f["task"] in tasks.values()
        assert [t["tid"] for t in f["threads"]] == [extra["loop_tid"]]
        assert "2 asyncio tasks wait for each other for ever" in f["summary"]
        assert 'task "first" waits for Lock 0x%x, held by task "second"' % locks["lock_b"] in (
            f["summary"]), f["summary"]
        assert 'task "second" waits for Lock 0x%x, held by task "first"' % locks["lock_a"] in (
            f["summary"]), f["summary"]
        assert (doc["verdict"], doc["grade"]) == ("deadlock", "certain"), doc["summary"]


def test_why_waits_nothing_can_end(interp, start_program, tmp_path):
    """A consumer whose producer died, a task waiting for an Event it made
    itself, a Condition only its waiter refers to, a Semaphore whose permit
    a dead task took: each waits for what nothing else in the program can
    reach (gc's referrers, as the program reports them, but the dead tasks'
    traceback frames, which never run again). why: a certain never_notified
    finding for each, naming the task, the object and what would have ended
    the wait, and the verdict; dump marks each wait. The controls, a queue
    main holds, an Event a timer will set, an Event only its waiter refers
    to but waited for with a timeout: nothing. Live and from a core."""
    target = start_program(interp, "asyncio_orphans.py")
    extra = target.report["extra"]
    tasks = extra["tasks"]
    stuck = {"consumer": "put an item into it", "waiter": "set it",
             "cond_waiter": "notify it", "sem_waiter": "release it"}
    for role in stuck:
        assert tasks[role]["outside"] == [], (role, tasks[role])
    assert tasks["fed"]["outside"] and tasks["timer_waiter"]["outside"]
    live = [why_json(target.pid), dump_json(target.pid)]
    core = core_of(interp, target, tmp_path)
    for doc in (live[0], why_json("--core", core)):
        found = {f["task"]: f for f in doc["findings"]
                 if f["kind"] == "never_notified" and f["task"] is not None}
        assert set(found) == {tasks[r]["address"] for r in stuck}, doc["findings"]
        for role, ender in stuck.items():
            t = tasks[role]
            f = found[t["address"]]
            assert f["object"] == t["object"] and f["certain"], f
            article = "an" if t["type"][0] in "AEIOU" else "a"
            assert f["summary"].startswith(
                'task "%s" waits in %s on %s %s (0x%x) that nothing else refers to, so nothing '
                "can ever %s (it is in " % (role, t["method"], article, t["type"], t["object"],
                                            ender)), f["summary"]
        assert (doc["verdict"], doc["grade"]) == ("never_notified", "certain"), doc["summary"]
    for doc in (live[1], dump_json("--core", core)):
        shown = {t["address"]: t for l in doc["asyncio"]["loops"] for t in l["tasks"]}
        for role, t in tasks.items():
            awaiting = shown[t["address"]]["awaiting"]
            assert awaiting["unreachable"] == (role in stuck), (role, awaiting)
            if role in stuck:
                assert awaiting["object"] == {"address": t["object"], "type": t["type"]}


def test_why_asyncio_wait_cycles(interp, start_program, tmp_path):
    """Tasks waiting in a cycle, each for what only the next can do: a lock
    it holds, an Event or a Queue nothing but the next task refers to
    (gc's referrers, as the program reports them), or the next task itself.
    why: one certain deadlock finding per cycle, each wait of it in words,
    and the verdict; none for the pair whose Event main keeps too. Live
    and from a core."""
    target = start_program(interp, "asyncio_wait_cycles.py")
    extra = target.report["extra"]
    objects = extra["objects"]
    assert extra["outside"]["event"] == [] and extra["outside"]["queue"] == []
    assert extra["outside"]["event_2"] == ["list"]
    cycles = [
        {'task "a" waits in Event.wait on an Event (0x%x) that only task "b" refers to'
         % objects["event"], 'task "b" waits for Lock 0x%x, held by task "a"' % objects["lock"]},
        {'task "z" waits in Queue.get on a Queue (0x%x) that only task "x" refers to'
         % objects["queue"], 'task "x" waits for Lock 0x%x, held by task "y"' % objects["lock_1"],
         'task "y" awaits task "z"'},
        {'task "peer_1" awaits task "peer_2"', 'task "peer_2" awaits task "peer_1"'},
    ]
    for doc in (why_json(target.pid), why_json("--core", core_of(interp, target, tmp_path))):
        found = [f for f in doc["findings"] if f["kind"] == "deadlock"]
        got = []
        for f in found:
            head, _, edges = f["summary"].partition(": ")
            assert head == "%d asyncio tasks wait for each other for ever on the loop of " \
                "thread %d \"MainThread\"" % (len(edges.split("; ")), extra["loop_tid"]), f
            got.append(set(edges.split("; ")))
            assert [t["tid"] for t in f["threads"]] == [extra["loop_tid"]]
        assert sorted(map(sorted, got)) == sorted(map(sorted, cycles)), found
        assert (doc["verdict"], doc["grade"]) == ("deadlock", "certain"), doc["summary"]


def test_dump_future_holders(interp, start_program, tmp_path):
    """Who else holds the plain Future a task awaits: another task's local,
    a thread's local, a call_later handle, a global of __main__; a holder
    pyscope does not look into (a functools.partial) is counted, never
    named.
    Live, then from a core (where the timer's due time is in the loop's
    clock)."""
    target = start_program(interp, "asyncio_future_holders.py")
    before = time.monotonic()
    doc = dump_json(target.pid)
    after = time.monotonic()
    extra = target.report["extra"]
    held = check_future_holders(interp, doc, extra)
    m = re.fullmatch(r"scheduled callback _asyncio\.Future\.(\w+) in (-?[0-9.]+) s",
                     held["by_timer"]["held_by"])
    assert m and m.group(1) == extra["timer"]["callback"], held["by_timer"]["held_by"]
    due = extra["timer"]["due"]
    assert due - after - 0.05 <= float(m.group(2)) <= due - before + 0.05
    core = dump_json("--core", core_of(interp, target, tmp_path))
    held = check_future_holders(interp, core, extra)
    assert held["by_timer"]["held_by"] == (
        "scheduled callback _asyncio.Future.%s at %.3f s of the loop's clock" % (
            extra["timer"]["callback"], due))


def check_future_holders(interp, doc, extra):
    by_addr = {t["address"]: t for l in doc["asyncio"]["loops"] for t in l["tasks"]}
    held = {name: by_addr[t["address"]]["awaiting"] for name, t in extra["tasks"].items()}
    for name, awaiting in held.items():
        assert awaiting["description"] == "_asyncio.Future", name
        assert not awaiting["unreachable"], name
    r = extra["resolver"]
    assert held["by_task"]["held_by"] == 'held by task "resolver" (local \'fut\' in %s(), %s:%d)' % (
        r["function"], r["file"], r["line"])
    t = extra["thread"]
    assert held["by_thread"]["held_by"] == "held by thread %d (local 'fut' in %s(), %s:%d)" % (
        t["tid"], t["function"], t["file"], t["line"])
    assert held["by_global"]["held_by"] == "held by global 'HELD' of __main__"
    # The task's own share is known (the value stacks' live depth: the
    # stack pointer from 3.11, a suspended frame's f_stacktop or
    # f_stackdepth before): what KEPT's list does not account for is counted.
    kept = "held by KEPT[0] (the list in global 'KEPT' of __main__)"
    n = extra["partial_refs"] - 1
    count = "; %d reference%s unaccounted for" % (n, "" if n == 1 else "s")
    assert held["by_partial"]["held_by"] == kept + count, held["by_partial"]
    return held


def test_dump_future_holders_in_objects(interp, start_program, tmp_path):
    """An RPC client whose replies never come keeps each request's Future in
    RpcClient._pending[request_id]; a pool parks waiters in a deque of a
    global; a supervisor keeps Futures in a dict of lists; a call_soon
    callback would complete one if the loop (blocked) ran. dump names each
    holder by its path from a variable the program reaches it from, and
    counts nothing as unaccounted (gc finds no other referrer). Live, then
    from a core."""
    target = start_program(interp, "asyncio_rpc_client.py")
    extra = target.report["extra"]
    for name, referrers in extra["referrers"].items():
        assert len(referrers) == 1, (name, referrers)    # the holder named, nothing else
    for doc in (dump_json(target.pid), dump_json("--core", core_of(interp, target, tmp_path))):
        by_addr = {t["address"]: t for l in doc["asyncio"]["loops"] for t in l["tasks"]}
        for name, truth in extra["held"].items():
            awaiting = by_addr[truth["address"]]["awaiting"]
            assert awaiting["description"] == "_asyncio.Future", name
            assert not awaiting["unreachable"], name
            roots = []
            for r in truth["roots"]:
                if r["who"] is None:
                    roots.append("global '%s' of __main__" % r["var"])
                else:
                    roots.append("local '%s' of %s in %s(), %s:%d" % (
                        r["var"], r["who"], r["function"], r["file"], r["line"]))
            expected = ["held by %s (%s in %s)" % (truth["holder"], truth["via"], root)
                        for root in roots]
            assert awaiting["held_by"] in expected, (name, awaiting["held_by"], expected)
        soon = by_addr[extra["call_soon"]["address"]]["awaiting"]
        assert soon["held_by"] == "scheduled callback _asyncio.Future.%s, ready to run" % (
            extra["call_soon"]["callback"]), soon
