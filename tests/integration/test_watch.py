"""Integration tests for `pyscope watch --reentry` (issue #5, part 2), on
every interpreter conftest finds.

The target is programs/reentry_pool.py: a pool whose append allocates, so
that the collector runs and a finalizer frees into the same pool, re-entering
the append on the same thread. The append is Python (watched by qualified
name), or C: native/reentry_ext.c built against the interpreter's headers, or
native/reentry_lib.c loaded with ctypes (the only C way on Debian 3.13-3.15,
which ship no headers), watched by its symbol pyscope_pool_append.

Besides the reports, the tests check that watching leaves nothing behind:
after pyscope exits (max hits, Ctrl-C, --stop and SIGCONT) the code at every
breakpoint address equals the file's bytes and the program finishes its work
and exits 0."""

import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import HERE, PROGRAMS, PYSCOPE, proc_state_task, run_pyscope
from test_native import compile_c, expect_merge, interp_include

NATIVE_SRC = HERE / "native"
# What watch says where the machine's debug registers never trap (some
# hypervisors, this project's CI among them), or with PYSCOPE_WATCH_NO_DR=1.
NO_DR = "debug registers never trap"
PY_FUNC = "reentry_pool.py:Pool._append_to_free_list"
C_FUNC = "pyscope_pool_append"
WATCH_TIMEOUT = 90
DEBIAN_DBG = Path("/usr/lib/debug/.build-id")


def python_name(interp, qualname):
    """The function name pyscope shows: co_qualname on 3.11+, co_name before."""
    major, minor = (int(p) for p in interp.version.split(".")[:2])
    return qualname if (major, minor) >= (3, 11) else qualname.rsplit(".", 1)[-1]


def named_gc_frames(interp):
    """Where the collector's static functions have names: pyenv builds, and
    Debian's 3.11 with python3.11-dbg. Debian 3.13-3.15 are stripped."""
    if not interp.id.startswith("debian-"):
        return True
    return interp.id == "debian-3.11" and DEBIAN_DBG.is_dir()


@pytest.fixture(scope="session")
def reentry_lib(tmp_path_factory):
    out = tmp_path_factory.mktemp("reentry") / "libreentry.so"
    compile_c(["-O0", "-g", "-shared", "-fPIC", "-o", str(out), str(NATIVE_SRC / "reentry_lib.c")])
    return out


@pytest.fixture
def reentry_ext(interp, tmp_path):
    """Directory holding pyscope_reentry.so for interp, or None (no headers)."""
    include = interp_include(interp)
    if include is None:
        return None
    compile_c(["-O0", "-g", "-shared", "-fPIC", "-I", include, "-o",
               str(tmp_path / "pyscope_reentry.so"), str(NATIVE_SRC / "reentry_ext.c")])
    return tmp_path


def start_pool(start_program, interp, mode="python", library=None, calm=False, extra=()):
    args = [mode]
    if library is not None:
        args.append(library)
    if calm:
        args.append("--calm")
    return start_program(interp, "reentry_pool.py", *(args + list(extra)))


def finish_target(target):
    """Ask the program to stop; it must finish its work and exit 0."""
    Path(str(target.report_path) + ".stop").write_text("")
    try:
        target.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the program did not finish after watch; stderr:\n%s" % target.stderr())
    assert target.proc.returncode == 0, (target.proc.returncode, target.stderr())


def code_matches_file(pid, addr, length=16):
    """The bytes at addr in the live process equal the mapped file's bytes."""
    with open("/proc/%d/maps" % pid) as maps:
        for line in maps:
            parts = line.split()
            start, end = (int(x, 16) for x in parts[0].split("-"))
            if start <= addr < end and len(parts) >= 6 and parts[5].startswith("/"):
                offset = int(parts[2], 16) + addr - start
                path = parts[5]
                break
        else:
            pytest.fail("0x%x is not in a file mapping of %d" % (addr, pid))
    with open("/proc/%d/mem" % pid, "rb") as mem:
        mem.seek(addr)
        live = mem.read(length)
    with open(path, "rb") as f:
        f.seek(offset)
        disk = f.read(length)
    return live == disk


def check_code_restored(pid, stderr):
    found = re.findall(r"watching native function .* at 0x([0-9a-f]+)", stderr)
    found += re.findall(r"breakpoint at _PyEval_EvalFrameDefault \(0x([0-9a-f]+)\)", stderr)
    for addr in found:
        assert code_matches_file(pid, int(addr, 16)), "0x%s still patched" % addr
    return len(found)


def watch(args, timeout=WATCH_TIMEOUT):
    return run_pyscope(["watch"] + [str(a) for a in args], timeout=timeout)


def read_reports(path):
    lines = [line for line in Path(path).read_text().splitlines() if line.strip()]
    return [json.loads(line) for line in lines]


def reentering_thread(doc):
    tid = doc["reentry"]["tid"]
    found = [t for t in doc["threads"] if t["tid"] == tid]
    assert found, "re-entering thread %d not among %s" % (tid, [t["tid"] for t in doc["threads"]])
    return found[0]


def marked(doc, thread, role=None):
    """The marked frames as (kind, name, role, category)."""
    out = []
    for m in doc["reentry"]["frames"]:
        if role and m["role"] != role:
            continue
        if m["kind"] == "python":
            name = thread["frames"][m["index"]]["function"]
        else:
            name = thread["native"]["frames"][m["index"]]["symbol"]
        out.append((m["kind"], name, m["role"], m["category"]))
    return out


# --------------------------------------------------------------------------
# The pool in Python

def test_python_pool_reentry(interp, start_program, tmp_path):
    target = start_pool(start_program, interp)
    out = tmp_path / "reports.jsonl"
    result = watch(["-v", "--json", "-o", out, "--reentry", PY_FUNC, "-p", target.pid])
    assert result.returncode == 0, result
    assert "re-entry #1 of Pool._append_to_free_list" in result.stderr, result
    [doc] = read_reports(out)
    re_ = doc["reentry"]
    assert re_["kind"] == "python" and re_["hit"] == 1
    assert re_["function"].startswith("Pool._append_to_free_list (reentry_pool.py:")
    main = reentering_thread(doc)
    assert main["tid"] == target.pid
    name = python_name(interp, "Pool._append_to_free_list")
    functions = [f["function"] for f in main["frames"]]
    # Both activations, the new one on top, with the finalizer between.
    assert functions[0] == name and functions.count(name) >= 2, functions
    outer = functions.index(name, 1)
    assert python_name(interp, "Block.__del__") in functions[1:outer], functions
    inner_marks = marked(doc, main, "inner")
    outer_marks = marked(doc, main, "outer")
    assert inner_marks == [("python", name, "inner", None)], inner_marks
    assert outer_marks == [("python", name, "outer", None)], outer_marks
    between = marked(doc, main, "between")
    assert ("python", python_name(interp, "Block.__del__"), "between", "finalizer") in between
    assert re_["finalizer"] is True
    # The collector is running: its flag always, its frames where named.
    assert re_["gc_collecting"] is True
    assert doc["gc"]["collecting"] is True
    if named_gc_frames(interp):
        assert re_["gc_frames"] is True, between
        assert any(kind == "native" and cat == "gc" for kind, _, _, cat in between), between
        if expect_merge(interp):
            assert main["native"]["merged"], main["native"]["error"]
            assert re_["note"] is None
    else:
        assert "could not be placed" in re_["note"]
    # Nothing left behind: the code is the file's, and the work goes on.
    assert target.alive()
    check_code_restored(target.pid, result.stderr)
    finish_target(target)


def test_threads_started_while_watching(interp, start_program, tmp_path):
    """The work runs in threads that start after pyscope attached: they must
    be followed (and get the watchpoints); the report names the worker."""
    target = start_pool(start_program, interp, extra=["--threads", "3", "--delay", "3"])
    out = tmp_path / "reports.jsonl"
    result = watch(["--json", "-o", out, "--all", "--max-hits", 2, "--reentry", PY_FUNC,
                    "-p", target.pid])
    assert result.returncode == 0, result
    docs = read_reports(out)
    assert len(docs) == 2
    name = python_name(interp, "Pool._append_to_free_list")
    for doc in docs:
        thread = reentering_thread(doc)
        assert thread["name"].startswith("worker-"), thread["name"]
        assert thread["tid"] != target.pid
        functions = [f["function"] for f in thread["frames"]]
        assert functions[0] == name and functions.count(name) >= 2, functions
        assert len(doc["threads"]) >= 2          # main and the workers started so far
    check_code_restored(target.pid, result.stderr)
    finish_target(target)


def test_text_report(interp, start_program):
    target = start_pool(start_program, interp)
    result = watch(["--reentry", PY_FUNC, "-p", target.pid])
    assert result.returncode == 0, result
    text = result.stdout
    name = python_name(interp, "Pool._append_to_free_list")
    assert re.search(r"^Re-entry #1: Pool\._append_to_free_list \(reentry_pool\.py:\d+\) entered "
                     r"again in thread %d \"MainThread\"" % target.pid, text, re.M), text
    assert "  GC in progress: yes" in text
    assert re.search(r"^  > %s \(.*reentry_pool\.py:\d+\)  <- entered again here$"
                     % re.escape(name), text, re.M), text
    assert re.search(r"^  > %s \(.*\)  <- the activation already running$" % re.escape(name),
                     text, re.M), text
    assert re.search(r"^  \| %s \(.*\)  \[finalizer\]$"
                     % re.escape(python_name(interp, "Block.__del__")), text, re.M), text
    if named_gc_frames(interp) and expect_merge(interp):
        # The collector's frames are shown with their source line where
        # the interpreter has line tables (issue 19: not hidden plumbing).
        assert re.search(r"^  \| \[C\] \S+\+0x[0-9a-f]+ \(.*\)( \S+:\d+)?  \[GC\]$", text,
                         re.M), text
    finish_target(target)


# --------------------------------------------------------------------------
# The pool's append in C

@pytest.mark.parametrize("mode", ["ext", "ctypes"])
def test_native_pool_reentry(interp, start_program, reentry_ext, reentry_lib, tmp_path, mode):
    if mode == "ext" and reentry_ext is None:
        pytest.skip("no Python.h for %s (the ctypes mode covers it)" % interp.id)
    target = start_pool(start_program, interp, mode, reentry_ext if mode == "ext" else reentry_lib)
    out = tmp_path / "reports.jsonl"
    result = watch(["--json", "-o", out, "--reentry", C_FUNC, "-p", target.pid])
    assert result.returncode == 0, result
    assert "watching native function pyscope_pool_append" in result.stderr, result
    [doc] = read_reports(out)
    re_ = doc["reentry"]
    assert re_["kind"] == "native"
    main = reentering_thread(doc)
    native = main["native"]
    symbols = [f["symbol"] for f in native["frames"]]
    # The new activation is stopped at the function's first instruction
    # (an int3), or right after it (a uprobe: the kernel runs it).
    after = re.search(r"a thread is stopped after the first instruction, at \+0x([0-9a-f]+)\)",
                      result.stderr)
    entry = int(after.group(1), 16) if after else 0
    assert symbols[0] == C_FUNC and native["frames"][0]["offset"] == entry, symbols[:3]
    assert symbols.count(C_FUNC) >= 2, symbols
    inner = marked(doc, main, "inner")
    outer = marked(doc, main, "outer")
    assert inner == [("native", C_FUNC, "inner", None)], inner
    assert outer == [("native", C_FUNC, "outer", None)], outer
    assert re_["gc_collecting"] is True
    between = marked(doc, main, "between")
    if native["merged"]:
        names = [name for _, name, _, _ in between]
        assert python_name(interp, "Block.__del__") in names, between
        assert re_["finalizer"] is True
        if named_gc_frames(interp):
            assert re_["gc_frames"] is True, between
    else:
        # Stripped interpreter: the C frames between are there, unnamed
        # where the binary has no symbol; the Python ones cannot be placed.
        assert not expect_merge(interp), native["error"]
        assert between, native["frames"]
        assert "Python frames could not be placed" in re_["note"]
        functions = [f["function"] for f in main["frames"]]
        assert python_name(interp, "Block.__del__") in functions, functions
    assert target.alive()
    assert check_code_restored(target.pid, result.stderr) >= 1
    finish_target(target)


# --------------------------------------------------------------------------
# Leaving nothing behind

def test_ctrl_c_removes_everything(interp, start_program, reentry_lib):
    """Watch a Python and a C function that are called all the time but
    never re-entered, then interrupt pyscope."""
    target = start_pool(start_program, interp, "ctypes", reentry_lib, calm=True)
    proc = subprocess.Popen([str(PYSCOPE), "watch", "-v", "--reentry", PY_FUNC,
                             "--reentry", C_FUNC, "-p", str(target.pid)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        stderr = b""
        # Wait until both are watched (stderr stays open while it runs).
        os.set_blocking(proc.stderr.fileno(), False)
        while time.monotonic() < deadline:
            chunk = proc.stderr.read() or b""
            stderr += chunk
            text = stderr.decode(errors="replace")
            if "watching Python function" in text and "watching native function" in text:
                break
            assert proc.poll() is None, text
            time.sleep(0.05)
        else:
            pytest.fail("pyscope did not start watching: %s" % stderr.decode(errors="replace"))
        time.sleep(1.0)           # let it handle traps for a while
        proc.send_signal(signal.SIGINT)
        os.set_blocking(proc.stderr.fileno(), True)
        out, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = (stderr + rest).decode(errors="replace")
    assert proc.returncode == 0, text
    assert "0 re-entries reported; breakpoints removed, process %d continues" % target.pid in text
    assert out == b""
    assert check_code_restored(target.pid, text) >= 1
    assert proc_state_task(target.pid, target.pid) in ("R", "S", "D"), "left stopped"
    finish_target(target)


def test_max_hits_all(interp, start_program, tmp_path):
    target = start_pool(start_program, interp)
    out = tmp_path / "reports.jsonl"
    result = watch(["--json", "-o", out, "--all", "--max-hits", 3, "--reentry", PY_FUNC,
                    "-p", target.pid])
    assert result.returncode == 0, result
    docs = read_reports(out)
    assert [d["reentry"]["hit"] for d in docs] == [1, 2, 3]
    assert "3 re-entries reported" in result.stderr
    check_code_restored(target.pid, result.stderr)
    finish_target(target)


# --------------------------------------------------------------------------
# --stop and --core

def test_stop_leaves_process_stopped(interp, start_program):
    target = start_pool(start_program, interp)
    result = watch(["--stop", "--reentry", PY_FUNC, "-p", target.pid])
    assert result.returncode == 0, result
    assert "resume it with: kill -CONT %d" % target.pid in result.stderr
    tids = [int(t) for t in os.listdir("/proc/%d/task" % target.pid)]
    assert all(proc_state_task(target.pid, tid) == "t" or proc_state_task(target.pid, tid) == "T"
               for tid in tids), [proc_state_task(target.pid, tid) for tid in tids]
    # Another tool can look at the moment of the re-entry.
    doc = json.loads(run_pyscope(["dump", "--json", "--locals", target.pid]).stdout)
    main = [t for t in doc["threads"] if t["tid"] == target.pid][0]
    name = python_name(interp, "Pool._append_to_free_list")
    functions = [f["function"] for f in main["frames"]]
    assert functions[0] == name and functions.count(name) >= 2, functions
    locals_ = {l["name"]: l["repr"] for l in main["frames"][0]["locals"]}
    assert "size" in locals_ and "self" in locals_, locals_
    assert doc["gc"]["collecting"] is True
    os.kill(target.pid, signal.SIGCONT)
    finish_target(target)


def test_core_at_reentry(interp, start_program, tmp_path):
    target = start_pool(start_program, interp)
    core = tmp_path / "reentry.core"
    result = watch(["--core", core, "--reentry", PY_FUNC, "-p", target.pid])
    assert result.returncode == 0, result
    assert "core written to %s" % core in result.stderr
    doc = json.loads(run_pyscope(["dump", "--json", "--core", core]).stdout)
    assert doc["signal"] is None
    main = [t for t in doc["threads"] if t["tid"] == target.pid][0]
    name = python_name(interp, "Pool._append_to_free_list")
    functions = [f["function"] for f in main["frames"]]
    assert functions[0] == name and functions.count(name) >= 2, functions
    assert python_name(interp, "Block.__del__") in functions
    finish_target(target)


# --------------------------------------------------------------------------
# Starting the program, recursion, errors

def test_program_mode(interp, tmp_path):
    out = tmp_path / "reports.jsonl"
    result = watch(["--json", "-o", out, "--reentry", PY_FUNC, "--", interp.path,
                    PROGRAMS / "reentry_pool.py", tmp_path / "r.json", "python", "--seconds", "1.5"])
    assert result.returncode == 0, result           # the program's own status
    assert "started %s as process" % interp.path in result.stderr
    assert "done " in result.stdout                 # it finished its work
    [doc] = read_reports(out)
    assert doc["reentry"]["kind"] == "python"
    status = watch(["--reentry", "never_defined", "--", interp.path, "-c",
                    "import sys, time; time.sleep(0.5); sys.exit(3)"])
    assert status.returncode == 3, status
    assert "never_defined not found yet" in status.stderr


@pytest.mark.parametrize("mode", ["python", "ctypes"])
def test_forked_children_unaffected(interp, tmp_path, reentry_lib, mode):
    """Children the watched program forks (os.fork) and spawns (posix_spawn,
    a vfork-style clone) run the same re-entering pool untraced: each must
    end with status 0 (a breakpoint of the parent's would kill it with
    SIGTRAP), and the parent is still watched after them."""
    truth = tmp_path / "truth.json"
    out = tmp_path / "r.jsonl"
    func = PY_FUNC if mode == "python" else "native:" + C_FUNC
    result = watch(["--json", "-o", out, "--reentry", func, "--", interp.path,
                    PROGRAMS / "fork_watch.py", truth, mode, reentry_lib])
    assert result.returncode == 0, result
    got = json.loads(truth.read_text())
    assert got["fork"] == 0 and got["spawn"] == 0, got
    assert got["parent_reentries"] > 0, got
    [doc] = read_reports(out)
    assert doc["reentry"]["tid"] == doc["pid"], doc["reentry"]
    assert doc["reentry"]["kind"] == ("python" if mode == "python" else "native")


RECURSION = """
import time
def walk(n):
    if n:
        walk(n - 1)
end = time.monotonic() + 0.5
walk(3)  # once at least: a loaded machine can pause the program past end
while time.monotonic() < end:
    walk(3)
"""


def test_python_recursion(interp, tmp_path):
    """Plain Python-to-Python recursion: always seen up to 3.10; on 3.11+
    only with --exact (no C frame lies between the activations)."""
    major, minor = (int(p) for p in interp.version.split(".")[:2])
    args = ["--json", "-o", tmp_path / "r.jsonl", "--reentry", "walk", "--", interp.path,
            "-c", RECURSION]
    result = watch(args)
    assert result.returncode == 0, result
    if (major, minor) <= (3, 10) or NO_DR in result.stderr:
        # Where debug registers never trap, every frame start is a
        # breakpoint: 3.11+ see these without --exact too.
        assert len(read_reports(tmp_path / "r.jsonl")) == 1
    else:
        assert read_reports(tmp_path / "r.jsonl") == [], "3.11+ default should not trap these"
        exact = watch(["--exact"] + args)
        assert exact.returncode == 0, exact
        [doc] = read_reports(tmp_path / "r.jsonl")
        functions = [f["function"] for f in reentering_thread(doc)["frames"]]
        assert functions[:2] == ["walk", "walk"], functions


EVERY_CALL = """
import json, sys
made = 0
def recount(n):
    global made
    if n:
        made += 1
        recount(n - 1)
for i in range(20):
    recount(1)
with open(sys.argv[1], "w") as f:
    json.dump({"reentries": made}, f)
"""


def test_every_reentry_counted_once(interp, tmp_path):
    """A function that re-enters itself at each of its first 20 calls, from
    its very first: each re-entry is one report, however the interpreter
    rewrites the code meanwhile (3.8-3.10 count the first entries in the
    watched field, 3.11 quickens the bytecode whose first unit is watched at
    the 8th call, 3.12+ instrument it)."""
    truth = tmp_path / "truth.json"
    out = tmp_path / "r.jsonl"
    result = watch(["--exact", "--all", "--json", "-o", out, "--reentry", "recount", "--",
                    interp.path, "-c", EVERY_CALL, truth])
    assert result.returncode == 0, result
    made = json.loads(truth.read_text())["reentries"]
    assert made == 20
    docs = read_reports(out)
    assert [d["reentry"]["hit"] for d in docs] == list(range(1, made + 1)), result.stderr
    for doc in docs:
        functions = [f["function"] for f in reentering_thread(doc)["frames"]]
        assert functions[:2] == ["recount", "recount"], functions


# The program counts its own calls: of work (FUNC), of other (every call of
# work makes one), and the re-entries of work, which a finalizer run by the
# collector makes at every 1000th call.
COUNTED_CALLS = """
import gc, json, sys
counts = {"work": 0, "other": 0, "reentries": 0}
depth = 0

class Finalized:
    def __init__(self):
        self.me = self

    def __del__(self):
        work(False)

def other(n):
    counts["other"] += 1
    return n

def work(collect):
    global depth
    counts["work"] += 1
    depth += 1
    if depth > 1:
        counts["reentries"] += 1
    try:
        if collect:
            Finalized()
            gc.collect()
        return other(depth)
    finally:
        depth -= 1

gc.disable()
for i in range(3000):
    work(i % 1000 == 999)
with open(sys.argv[1], "w") as f:
    json.dump(counts, f)
"""
FILTER_LINE = re.compile(r"the kernel filter ran at (\d+) breakpoint hits and stopped the thread at "
                         r"(\d+): (\d+) where a watched function was running further down, "
                         r"(\d+) for code not searched yet, (\d+) where it could not tell, "
                         r"(\d+) while pyscope needed them all")
HANDLED_LINE = re.compile(r"handled (\d+) C-to-Python entries, \d+ watchpoint traps, (\d+) "
                          r"frame-start breakpoints")


@pytest.mark.parametrize("kernel_filter", [True, False], ids=["filtered", "unfiltered"])
def test_frame_starts_filtered_in_the_kernel(interp, tmp_path, kernel_filter):
    """Without debug registers every Python frame start is a breakpoint; the
    eBPF filter lets a thread stop only where FUNC starts while it is
    already running further down (and, until FUNC is found, at code not
    searched yet). Checked against the program's own counts: every frame
    start ran the filter, the thread stopped exactly at the re-entries, and
    each was reported; forced unfiltered (PYSCOPE_WATCH_NO_FILTER=1), every
    frame start stops and the same re-entries are reported."""
    truth, out = tmp_path / "truth.json", tmp_path / "r.jsonl"
    env = ["env", "-u", "PYSCOPE_WATCH_NO_FILTER", "PYSCOPE_WATCH_NO_DR=1"] + (
        [] if kernel_filter else ["PYSCOPE_WATCH_NO_FILTER=1"])
    result = run_pyscope(["watch", "-v", "--all", "--json", "-o", out, "--reentry", "work",
                          "--", interp.path, "-c", COUNTED_CALLS, truth], prefix=env,
                         timeout=WATCH_TIMEOUT)
    assert result.returncode == 0, result
    facts = json.loads(truth.read_text())
    assert facts["reentries"] == 3 and facts["work"] == 3003, facts
    docs = read_reports(out)
    assert len(docs) == facts["reentries"], result.stderr
    for doc in docs:
        functions = [f["function"] for f in reentering_thread(doc)["frames"]]
        outer = functions.index("work", 1)
        assert functions[0] == "work", functions
        assert python_name(interp, "Finalized.__del__") in functions[1:outer], functions
    handled = HANDLED_LINE.search(result.stderr)
    stops = int(handled.group(1)) + int(handled.group(2))
    counted = FILTER_LINE.search(result.stderr)
    if kernel_filter:
        assert "filtered in the kernel by an eBPF program" in result.stderr, result.stderr
        runs, stopped, again, unseen, undecided, every = (int(g) for g in counted.groups())
        assert runs >= facts["work"] + facts["other"], (facts, counted.group(0))
        assert again == facts["reentries"] and undecided == 0 and every == 0, counted.group(0)
        assert stopped == again + unseen and stops == stopped, (counted.group(0),
                                                                handled.group(0))
        assert unseen < facts["work"], counted.group(0)
    else:
        assert "not filtered in the kernel: PYSCOPE_WATCH_NO_FILTER=1" in result.stderr
        assert counted is None
        assert stops >= facts["work"] + facts["other"], (facts, handled.group(0))


def test_usage_errors(tmp_path, pyscope):
    assert pyscope("watch", "-p", "1").returncode == 2
    assert pyscope("watch", "--reentry", "f").returncode == 2
    assert pyscope("watch", "--reentry", "f", "-p", "1", "--", "true").returncode == 2
    assert pyscope("watch", "--reentry", "f", "--max-hits", "0", "-p", "1").returncode == 2
    assert pyscope("watch", "--reentry", "py:", "-p", "1").returncode == 2
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        result = pyscope("watch", "--reentry", "pool.py:Pool.f", "-p", sleeper.pid)
        assert result.returncode == 5, result       # not a Python process
        assert sleeper.poll() is None               # and left running
    finally:
        sleeper.kill()
        sleeper.wait()


# --------------------------------------------------------------------------
# issue #12: from the program's first instruction, names as users type them

EARLY = PROGRAMS / "early_pool.py"


def def_line(name, after=""):
    """The line of `def name(` in early_pool.py (the first after `after`)."""
    lines = EARLY.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if after in line) if after else 0
    return next(i + 1 for i, line in enumerate(lines[start:], start)
                if line.strip().startswith(("def %s(" % name, "async def %s(" % name)))


def watch_early(interp, tmp_path, func, mode, *extra):
    """`watch --reentry func -- python early_pool.py`: the program's truth,
    pyscope's result and its reports."""
    truth = tmp_path / "truth.json"
    out = tmp_path / "reports.jsonl"
    result = watch(["--json", "--locals", "-o", out] + list(extra) + ["--reentry", func, "--",
                   interp.path, EARLY, truth, mode])
    facts = json.loads(truth.read_text()) if truth.exists() else None
    return facts, result, read_reports(out) if out.exists() else []


def check_first_reentry(interp, facts, result, docs, qualname, line):
    """pyscope reported the program's first re-entry, which the program saw
    too (and died of, exit 3, which pyscope passes on)."""
    assert result.returncode == 3, result
    assert facts["corrupted"] and facts["first_reentry"], facts
    assert "re-entry #1 of %s (early_pool.py:%d)" % (qualname, line) in result.stderr, result
    [doc] = docs
    re_ = doc["reentry"]
    assert re_["function"] == "%s (early_pool.py:%d)" % (qualname, line)
    frames = reentering_thread(doc)["frames"]
    name = python_name(interp, qualname)
    functions = [f["function"] for f in frames]
    assert functions[0] == name and functions.count(name) >= 2, functions
    outer = functions.index(name, 1)
    assert python_name(interp, "Block.__del__") in functions[1:outer], functions
    # The running activation's body (insert) numbered itself when it began:
    # the program's first re-entry happened inside that very activation.
    assert functions[outer - 1] == "insert", functions
    number = [v for v in frames[outer - 1]["locals"] if v["name"] == "number"]
    assert number and number[0]["repr"] == str(facts["first_reentry"]["outer_append"]), \
        (number, facts)


@pytest.mark.parametrize("func", ["_append_to_free_list", "Pool._append_to_free_list",
                                  "early_pool.py:Pool._append_to_free_list"])
def test_reentry_from_the_start(interp, tmp_path, func):
    """The pool re-enters its append moments after start and then dies of
    it: with `-- PROGRAM` that first re-entry is reported, whatever form of
    the name is given (a bare name matches the method)."""
    facts, result, docs = watch_early(interp, tmp_path, func, "method")
    check_first_reentry(interp, facts, result, docs, "Pool._append_to_free_list",
                        def_line("_append_to_free_list", "class Pool"))
    if func == "_append_to_free_list":
        # Every definition of that name is watched, and listed.
        assert "_append_to_free_list matches 4 functions" in result.stderr, result
        for qualname, after in [("GeneratorPool._append_to_free_list", "class GeneratorPool"),
                                ("CoroutinePool._append_to_free_list", "class CoroutinePool"),
                                ("make_pool.<locals>._append_to_free_list", "def make_pool")]:
            assert "watching Python function %s (early_pool.py:%d)" % (
                qualname, def_line("_append_to_free_list", after)) in result.stderr, result


def test_reentry_nested_function(interp, tmp_path):
    """A function defined inside another (its code object is a constant of
    make_pool's; the function object exists only once make_pool ran)."""
    facts, result, docs = watch_early(interp, tmp_path, "make_pool.<locals>._append_to_free_list",
                                      "nested")
    check_first_reentry(interp, facts, result, docs, "make_pool.<locals>._append_to_free_list",
                        def_line("_append_to_free_list", "def make_pool"))


@pytest.mark.parametrize("mode,cls", [("generator", "GeneratorPool"),
                                      ("coroutine", "CoroutinePool"),
                                      ("iterate", "IterPool"),
                                      ("await", "AwaitPool")])
def test_reentry_generator_resumed(interp, tmp_path, mode, cls):
    """A generator (or coroutine) of FUNC running while the finalizer
    resumes another one: with send() (from C), or from Python, by a for
    loop stepping it or a serving coroutine's await (3.12+ resume those
    inside the interpreter loop, with no C frame in between). Resuming
    creates no frame and takes no reference to the code, and is still
    seen."""
    qualname = cls + "._append_to_free_list"
    facts, result, docs = watch_early(interp, tmp_path, qualname, mode)
    check_first_reentry(interp, facts, result, docs, qualname,
                        def_line("_append_to_free_list", "class " + cls))


def test_generator_created_is_no_reentry(interp, tmp_path):
    """A generator of FUNC created while one of FUNC's runs, and never
    started, runs none of FUNC's body: no re-entry (its creation does push
    a frame of FUNC for a moment on 3.11+, which runs RETURN_GENERATOR)."""
    truth = tmp_path / "truth.json"
    result = watch(["--reentry", "GeneratorPool._append_to_free_list", "--", interp.path, EARLY,
                    truth, "spare", "--seconds", "1.5"], timeout=60)
    assert truth.exists(), "the program wrote no truth: watch exited %s\n%s\n%s" % (
        result.returncode, result.stdout[-2000:], result.stderr[-3000:])
    facts = json.loads(truth.read_text())
    assert facts["reentries"] == 0 and not facts["corrupted"] and facts["spares"] > 0, facts
    assert result.returncode == 0, result
    assert "exited; 0 re-entries reported" in result.stderr, result


def test_never_found(interp, tmp_path):
    """A name the program never defines: said so at the end, with the
    closest names, and the exit status is not the program's 0."""
    truth = tmp_path / "truth.json"
    result = watch(["--reentry", "Pool._append_to_freelist", "--", interp.path, EARLY, truth,
                    "calm", "--seconds", "3.5"], timeout=60)
    facts = json.loads(truth.read_text())
    assert facts["corrupted"] is False and facts["reentries"] == 0, facts
    assert result.returncode == 1, result
    label = "Pool._append_to_free_list (early_pool.py:%d)" % def_line("_append_to_free_list",
                                                                     "class Pool")
    assert "Pool._append_to_freelist not found yet; did you mean %s" % label in result.stderr, \
        result
    assert "Pool._append_to_freelist was never found" in result.stderr, result
    assert "re-entries reported" not in result.stderr, result


def test_attach_before_nested_function_exists(interp, spawn, tmp_path):
    """-p PID: a nested function whose function object does not exist yet
    at attach (only its code, a constant of make_pool's) is watched from
    the moment pyscope says so, and its first re-entry is reported."""
    truth, go, out = tmp_path / "truth.json", tmp_path / "go", tmp_path / "reports.jsonl"
    target = spawn([interp.path, str(EARLY), str(truth), "nested", "--start-after", str(go)],
                   ready_line="ready")
    watcher = subprocess.Popen([PYSCOPE, "watch", "--json", "--locals", "-o", str(out),
                                "--reentry", "_append_to_free_list", "-p", str(target.pid)],
                               stderr=subprocess.PIPE, text=True)
    qualname = "make_pool.<locals>._append_to_free_list"
    line = def_line("_append_to_free_list", "def make_pool")
    try:
        seen = ""
        while "watching Python function %s (early_pool.py:%d)" % (qualname, line) not in seen:
            text = watcher.stderr.readline()
            assert text, "pyscope ended before watching the nested function: " + seen
            seen += text
        go.write_text("")
        rest = watcher.communicate(timeout=WATCH_TIMEOUT)[1]
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert watcher.returncode == 0, seen + rest
    assert target.wait(timeout=60) == 3
    from conftest import Result
    result = Result([], 3, "", seen + rest, 0)
    check_first_reentry(interp, json.loads(truth.read_text()), result, read_reports(out),
                        qualname, line)


# --------------------------------------------------------------------------
# Another user's process (issue 13, item 8)

DEBIAN_311 = Path("/usr/bin/python3.11")


@pytest.mark.skipif(os.geteuid() != 0 or not DEBIAN_311.exists() or not shutil.which("setpriv"),
                    reason="needs root (to run as two other users), setpriv and Debian's python3.11")
def test_other_users_process():
    """pyscope as `nobody` with CAP_SYS_PTRACE watches a process of `daemon`:
    that process's /proc/PID/mem is daemon's file, which CAP_SYS_PTRACE does
    not open. With CAP_SYS_ADMIN too, uprobes and perf-event watchpoints
    need no write at all; with CAP_SYS_PTRACE alone, the int3 on the eval
    loop cannot go in, which pyscope says, and it watches every call with
    the perf watchpoint instead. Both catch the re-entry, and the process
    finishes its work."""
    work = Path(tempfile.mkdtemp(prefix="pyscope-uid-"))
    try:
        for name in ("reentry_pool.py", "_target.py"):
            shutil.copy(PROGRAMS / name, work / name)
        shutil.copy(PYSCOPE, work / "pyscope")
        os.chmod(work, 0o755)
        os.chown(work, pwd.getpwnam("daemon").pw_uid, -1)   # its report is written there
        for f in work.iterdir():
            os.chmod(f, 0o755)
        report = work / "r.json"
        target = subprocess.Popen(["setpriv", "--reuid=daemon", "--regid=daemon", "--clear-groups",
                                   str(DEBIAN_311), str(work / "reentry_pool.py"), str(report),
                                   "python", "--seconds", "60"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=work)
        try:
            deadline = time.monotonic() + 30
            while not report.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert report.exists(), target.stderr.read1().decode() if target.poll() else ""
            runs = {}
            for caps in ("+sys_ptrace,+sys_admin", "+sys_ptrace"):
                runs[caps] = subprocess.run(
                    ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                     "--inh-caps=" + caps, "--ambient-caps=" + caps, str(work / "pyscope"),
                     "watch", "--reentry", PY_FUNC, "-p", str(target.pid)],
                    capture_output=True, text=True, timeout=WATCH_TIMEOUT, env=dict(os.environ))
            full, ptrace_only = runs["+sys_ptrace,+sys_admin"], runs["+sys_ptrace"]
            assert full.returncode == 0, full
            assert "breakpoints are uprobes and perf-event watchpoints" in full.stderr, full.stderr
            assert "re-entry #1 of Pool._append_to_free_list" in full.stderr, full.stderr
            assert "cannot write a breakpoint into process %d: its /proc/%d/mem belongs to " \
                   "another user" % (target.pid, target.pid) in ptrace_only.stderr
            if NO_DR in full.stderr:
                # Neither a debug register nor a breakpoint: nothing can be
                # seen, which is said, with a failing status.
                assert ptrace_only.returncode != 0, ptrace_only
                assert "re-entries of Python functions cannot be seen here" in ptrace_only.stderr
                assert "nothing was watched" in ptrace_only.stderr
            else:
                assert ptrace_only.returncode == 0, ptrace_only
                assert "watching every call instead" in ptrace_only.stderr
                assert "re-entry #1 of Pool._append_to_free_list" in ptrace_only.stderr
            assert target.poll() is None
            (work / "r.json.stop").write_text("")
            out, err = target.communicate(timeout=30)
            assert target.returncode == 0, err
            assert b"done " in out
        finally:
            if target.poll() is None:
                target.kill()
                target.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
