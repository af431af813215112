"""Integration tests for issue #7: `dump --native`, threads Python does not
know, `pyscope run` on a crash, and `dump --core` (cores written by run, by
gdb's gcore and by the kernel), on every interpreter.

The C code under test is compiled here: native/nativeext.c against each
interpreter's headers (pyenv include/pythonX.Y, Debian /usr/include/python3.11)
and native/callthrough.c as a plain library loaded with ctypes (every
interpreter; the only way for Debian 3.13-3.15, which ship no headers)."""

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sysconfig
import time
from pathlib import Path

import pytest

from conftest import HERE, PROGRAMS, run_pyscope, target_env

NATIVE_SRC = HERE / "native"
CRASH_LINE = next(n for n, text in enumerate(
    (PROGRAMS / "native_crash.py").read_text().splitlines(), 1) if text.endswith("# crash-line"))
C_CRASH_LINE = next(n for n, text in enumerate(
    (NATIVE_SRC / "callthrough.c").read_text().splitlines(), 1) if "crash-here" in text)
DEBIAN_DBG_FILE = "/usr/lib/debug/.build-id"


def compile_c(args):
    proc = subprocess.run(["gcc"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        pytest.fail("gcc %s failed:\n%s" % (" ".join(args), proc.stderr.decode()))


@pytest.fixture(scope="session")
def callthrough_lib(tmp_path_factory):
    out = tmp_path_factory.mktemp("native") / "libcallthrough.so"
    compile_c(["-O0", "-g", "-shared", "-fPIC", "-pthread", "-o", str(out),
               str(NATIVE_SRC / "callthrough.c")])
    return out


def interp_include(interp):
    """The directory holding Python.h for interp, or None."""
    code = "import sysconfig; print(sysconfig.get_paths()['include'])"
    out = subprocess.run([interp.path, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=target_env())
    include = out.stdout.decode().strip()
    return include if include and os.path.exists(os.path.join(include, "Python.h")) else None


@pytest.fixture
def native_ext(interp, tmp_path):
    """Directory holding pyscope_nativeext.so built for interp, or None."""
    include = interp_include(interp)
    if include is None:
        return None
    compile_c(["-O0", "-g", "-shared", "-fPIC", "-I", include, "-o",
               str(tmp_path / "pyscope_nativeext.so"), str(NATIVE_SRC / "nativeext.c")])
    return tmp_path


def dump_json(*args):
    result = run_pyscope(["dump", "--json"] + [str(a) for a in args])
    assert result.returncode == 0, result
    return json.loads(result.stdout)


def thread_named(doc, name):
    found = [t for t in doc["threads"] if t["name"] == name]
    assert found, "no thread %r in %s" % (name, [t["name"] for t in doc["threads"]])
    return found[0]


def merged_sequence(thread):
    """The merged stack as ("py", function) / ("c", symbol) tuples."""
    native = thread["native"]
    seq = []
    for entry in native["merged_order"]:
        if entry["kind"] == "python":
            seq.append(("py", thread["frames"][entry["index"]]["function"]))
        else:
            seq.append(("c", native["frames"][entry["index"]]["symbol"]))
    return seq


def check_between(thread, symbol):
    """symbol is a C frame between inner (above) and its Python caller
    (below: outer, or the ctypes wrapper), or the stacks were honestly left
    unmerged with both halves intact."""
    functions = [f["function"] for f in thread["frames"]]
    assert functions[0] == "inner" and "outer" in functions, functions
    native = thread["native"]
    assert native is not None
    symbols = [f["symbol"] for f in native["frames"]]
    assert symbol in symbols, symbols
    if not native["merged"]:
        assert "not merged" in native["error"]
        return False
    seq = merged_sequence(thread)
    pos_inner = seq.index(("py", "inner"))
    pos_c = seq.index(("c", symbol))
    pos_outer = seq.index(("py", functions[1]))
    assert pos_inner < pos_c < pos_outer, seq
    # Every Python frame appears exactly once, in order.
    assert [name for kind, name in seq if kind == "py"] == functions
    return True


def start_native_calls(start_program, interp, mode, lib_dir, callthrough_lib):
    library = lib_dir if mode == "ext" else callthrough_lib
    return start_program(interp, "native_calls.py", mode, library, callthrough_lib)


def expect_merge(interp):
    """Where merging must work: symbols for _PyEval_EvalFrameDefault cover
    the whole loop (pyenv builds; Debian 3.11). Debian 3.13+ are stripped
    and split the loop into unnamed parts: there it must refuse instead."""
    return not interp.id.startswith("debian-3.1") or interp.id == "debian-3.11"


@pytest.mark.parametrize("mode", ["ext", "ctypes"])
def test_native_frames_between_python_frames(interp, start_program, native_ext,
                                             callthrough_lib, mode):
    if mode == "ext" and native_ext is None:
        pytest.skip("no Python.h for %s (ctypes mode covers it)" % interp.id)
    target = start_native_calls(start_program, interp, mode, native_ext, callthrough_lib)
    doc = dump_json("--native", target.pid)
    assert doc["paused"] is True
    caller = thread_named(doc, "caller")
    symbol = "nativeext_call" if mode == "ext" else "pyscope_call_through"
    merged = check_between(caller, symbol)
    if expect_merge(interp):
        assert merged, caller["native"]["error"]
    frame = next(f for f in caller["native"]["frames"] if f["symbol"] == symbol)
    assert frame["file"] and frame["file"].endswith(".c") and frame["line"] > 0
    assert frame["internal"] is False
    # Interpreter frames are marked and hidden from the text output.
    text = run_pyscope(["dump", "--native", target.pid]).stdout
    assert "[C] %s+0x" % symbol in text
    if merged:
        assert "_PyEval_EvalFrameDefault" not in text
        full = run_pyscope(["dump", "--native-all", target.pid]).stdout
        assert "_PyEval_EvalFrameDefault" in full
    # The plain dump is unchanged by the native machinery.
    plain = dump_json(target.pid)
    assert [f["function"] for f in thread_named(plain, "caller")["frames"]] == \
        [f["function"] for f in caller["frames"]]
    assert "native" not in thread_named(plain, "caller")


def test_threads_python_does_not_know(interp, start_program, callthrough_lib):
    target = start_native_calls(start_program, interp, "ctypes", None, callthrough_lib)
    doc = dump_json(target.pid)
    idle = [t for t in doc["other_threads"] if t["name"] == "pyscope-idle"]
    assert len(idle) == 1, doc["other_threads"]
    assert idle[0]["state"] == "idle" and idle[0]["syscall"] == "pause", idle
    python_tids = {t["tid"] for t in doc["threads"]}
    assert idle[0]["tid"] not in python_tids
    doc = dump_json("--native", target.pid)
    idle = [t for t in doc["other_threads"] if t["name"] == "pyscope-idle"][0]
    symbols = [f["symbol"] for f in idle["native"]["frames"]]
    assert "idle_main" in symbols, symbols
    text = run_pyscope(["dump", target.pid]).stdout
    assert "Threads without a Python thread state:" in text
    assert re.search(r'Thread %d "pyscope-idle"  idle \(pause\)' % idle["tid"], text), text


# --------------------------------------------------------------------------
# Crashes: pyscope run, and the cores it writes

def run_crash(interp, callthrough_lib, tmp_path, json_output=False):
    cores = tmp_path / "cores"
    cores.mkdir(exist_ok=True)
    report = tmp_path / ("crash.json" if json_output else "crash.txt")
    args = ["run", "--core-dir", cores, "--output", report]
    if json_output:
        args.append("--json")
    args += ["--", interp.path, PROGRAMS / "native_crash.py", callthrough_lib]
    result = run_pyscope(args, timeout=60)
    return result, report, cores


def check_crash_report(doc, interp, from_core):
    assert doc["signal"]["name"] == "SIGSEGV"
    assert doc["signal"]["cause"] == "NULL pointer dereference at 0x0"
    parser = thread_named(doc, "parser")
    assert parser["crashed"] is True
    assert doc["signal"]["tid"] == parser["tid"]
    functions = [f["function"] for f in parser["frames"]]
    assert functions[0] == "parse", functions
    assert parser["frames"][0]["line"] == CRASH_LINE
    locals_ = {l["name"]: l["repr"] for l in parser["frames"][0]["locals"]}
    assert locals_["secret"] == "{'token': [1, 2, 3]}"
    assert locals_["data"] == "b'payload'"
    assert locals_["count"] == "7"
    native = parser["native"]
    top = native["frames"][0]
    assert top["symbol"] == "pyscope_crash_read", native["frames"][:3]
    assert top["file"].endswith("callthrough.c") and top["line"] == C_CRASH_LINE
    if native["merged"]:
        seq = merged_sequence(parser)
        assert seq.index(("c", "pyscope_crash_read")) < seq.index(("py", "parse"))
    else:
        assert not expect_merge(interp), native["error"]


def test_run_crash_report_and_core(interp, callthrough_lib, tmp_path):
    result, report, cores = run_crash(interp, callthrough_lib, tmp_path, json_output=True)
    assert result.returncode == 128 + signal.SIGSEGV, result
    doc = json.loads(report.read_text())
    check_crash_report(doc, interp, from_core=False)
    # Only the crashing thread's locals are read.
    main = thread_named(doc, "MainThread")
    assert all(f.get("locals") is None for f in main["frames"])
    [core] = list(cores.iterdir())
    assert "core written to %s" % core in result.stderr
    doc = dump_json("--core", core, "--native", "--locals")
    assert doc["core"]["path"] == str(core)
    check_crash_report(doc, interp, from_core=True)


def test_run_text_output(interp, callthrough_lib, tmp_path):
    result, report, _ = run_crash(interp, callthrough_lib, tmp_path)
    assert result.returncode == 128 + signal.SIGSEGV, result
    text = report.read_text()
    assert re.search(r"SIGSEGV: NULL pointer dereference at 0x0 in thread \d+ 'parser'", text)
    assert re.search(r"\[C\] pyscope_crash_read\+0x[0-9a-f]+ \(libcallthrough.so\) "
                     r".*callthrough.c:%d" % C_CRASH_LINE, text), text
    assert "native_crash.py:%d)" % CRASH_LINE in text
    assert "        secret = {'token': [1, 2, 3]}" in text


def test_run_passes_exit_status_and_signals(interp, tmp_path):
    result = run_pyscope(["run", "--", interp.path, "-c", "import sys; sys.exit(7)"])
    assert result.returncode == 7, result
    result = run_pyscope(["run", "--", interp.path, "-c", "print('hi')"])
    assert result.returncode == 0 and result.stdout == "hi\n"
    # SIGINT sent to pyscope reaches the program as KeyboardInterrupt.
    proc = subprocess.Popen([str(Path(os.environ.get("PYSCOPE") or HERE.parent.parent / "pyscope")),
                             "run", "--", interp.path, "-c",
                             "import time\nprint('ready', flush=True)\n"
                             "try:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n"
                             "    print('interrupted', flush=True)\n    raise SystemExit(3)\n"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert b"interrupted" in out, (out, err)
    assert proc.returncode == 3
    result = run_pyscope(["run", "--", str(tmp_path / "no-such-program")])
    assert result.returncode == 127 and "cannot run" in result.stderr


def test_run_abort(interp, tmp_path):
    result = run_pyscope(["run", "--output", tmp_path / "r.txt", "--", interp.path, "-c",
                          "import os\ndef doomed():\n    os.abort()\ndoomed()\n"], timeout=60)
    assert result.returncode == 128 + signal.SIGABRT, result
    text = (tmp_path / "r.txt").read_text()
    assert "SIGABRT: abort() or raise() in the process" in text
    assert "doomed (<string>:3)" in text


# --------------------------------------------------------------------------
# Cores from gdb's gcore and from the kernel

def gcore(pid, out_prefix):
    if shutil.which("gcore") is None:
        pytest.skip("gcore (gdb) not installed")
    proc = subprocess.run(["gcore", "-o", str(out_prefix), str(pid)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=120)
    path = Path("%s.%d" % (out_prefix, pid))
    if proc.returncode != 0 or not path.exists():
        pytest.fail("gcore failed: %s" % proc.stderr.decode()[-2000:])
    return path


def uses_own_glibc(interp):
    """The Debian 3.13+ builds run with the newer glibc of their own root."""
    return interp.id in ("debian-3.13", "debian-3.14", "debian-3.15")


def python_stacks(doc):
    return {t["tid"]: [(f["function"], f["line"]) for f in t["frames"]] for t in doc["threads"]}


def test_gcore_matches_live(interp, start_program, callthrough_lib, tmp_path):
    target = start_native_calls(start_program, interp, "ctypes", None, callthrough_lib)
    live = dump_json("--native", target.pid)
    core = gcore(target.pid, tmp_path / "gc")
    doc = dump_json("--core", core, "--native")
    assert doc["signal"] is None
    assert doc["pid"] == target.pid
    got, want = python_stacks(doc), python_stacks(live)
    assert got.keys() == want.keys()
    for tid in want:
        if uses_own_glibc(interp):
            # gdb 13's gcore wrote zeros for the top pages of these threads'
            # stacks (checked against /proc/PID/mem), where 3.13+ keep the
            # entry frame of a C->Python call: the walk may end early there,
            # but what it shows must be the start of the real stack.
            assert got[tid] == want[tid][:len(got[tid])] and got[tid], (got[tid], want[tid])
        else:
            assert got[tid] == want[tid]
    assert {t["name"] for t in doc["threads"]} == {t["name"] for t in live["threads"]}
    if not uses_own_glibc(interp):
        check_between(thread_named(doc, "caller"), "pyscope_call_through")
    assert [t["tid"] for t in doc["other_threads"]] == [t["tid"] for t in live["other_threads"]]
    text = run_pyscope(["dump", "--core", core]).stdout
    assert "no fatal signal recorded" in text


def kernel_core_pattern():
    try:
        pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    except OSError:
        return None
    return pattern if pattern and not pattern.startswith("|") and "/" not in pattern else None


def test_kernel_core(interp, callthrough_lib, tmp_path):
    pattern = kernel_core_pattern()
    if pattern is None:
        pytest.skip("core_pattern does not write a core file into the working directory")

    def allow_core():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    proc = subprocess.run([interp.path, str(PROGRAMS / "native_crash.py"), str(callthrough_lib)],
                          cwd=str(tmp_path), preexec_fn=allow_core, env=target_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert proc.returncode == -signal.SIGSEGV
    cores = [p for p in tmp_path.iterdir() if p.name.startswith("core")]
    if not cores:
        pytest.skip("the kernel wrote no core (pattern %r)" % pattern)
    doc = dump_json("--core", cores[0], "--native", "--locals")
    check_crash_report(doc, interp, from_core=True)


# --------------------------------------------------------------------------
# Debian's python3.11 with and without python3.11-dbg

def test_debian_dbg_symbols(interp, start_program, callthrough_lib, tmp_path):
    if interp.id != "debian-3.11":
        pytest.skip("Debian python3.11 only")
    if not os.path.isdir(DEBIAN_DBG_FILE):
        pytest.skip("python3.11-dbg not installed (make deps installs it)")
    target = start_native_calls(start_program, interp, "ctypes", None, callthrough_lib)
    with_dbg = dump_json("--native-all", target.pid)
    frames = thread_named(with_dbg, "caller")["native"]["frames"]
    evals = [f for f in frames if f["eval"]]
    assert evals and all(f["file"] and f["file"].endswith("ceval.c") for f in evals), evals
    # Static functions are named only with the debug file's symbol table.
    names = {f["symbol"] for f in frames if f["internal"]}
    empty = tmp_path / "no-debug"
    empty.mkdir()
    env_before = os.environ.get("PYSCOPE_DEBUGINFO_PATH")
    os.environ["PYSCOPE_DEBUGINFO_PATH"] = str(empty)
    try:
        without = dump_json("--native-all", target.pid)
    finally:
        if env_before is None:
            del os.environ["PYSCOPE_DEBUGINFO_PATH"]
        else:
            os.environ["PYSCOPE_DEBUGINFO_PATH"] = env_before
    caller = thread_named(without, "caller")
    frames = caller["native"]["frames"]
    assert all(f["file"] is None for f in frames if f["internal"]), frames
    # Exported symbols are still there, so merging still works.
    assert caller["native"]["merged"], caller["native"]["error"]
    assert {f["symbol"] for f in frames if f["internal"]} != names


# --------------------------------------------------------------------------
# Bad core files: clear messages, never a crash

def test_bad_core_files(tmp_path, pyscope):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    text = tmp_path / "text"
    text.write_text("hello, not a core\n" * 10)
    cases = [(empty, "too short"), (text, "not an ELF core file"),
             (Path("/bin/ls"), "not a core file"),
             (tmp_path / "missing", "cannot open core file")]
    for path, fragment in cases:
        result = pyscope("dump", "--core", path)
        assert result.returncode != 0, result
        assert fragment in result.stderr, (path, result.stderr)
        assert "Traceback" not in result.stderr


def test_truncated_and_missing_files(interp, callthrough_lib, tmp_path, pyscope):
    result, _, cores = run_crash(interp, callthrough_lib, tmp_path)
    [core] = list(cores.iterdir())
    data = core.read_bytes()
    for size in (64, 200, 4096, len(data) // 3, len(data) - 4096):
        cut = tmp_path / ("cut-%d" % size)
        cut.write_bytes(data[:size])
        result = pyscope("dump", "--core", cut, "--native", "--locals")
        assert result.returncode in (0, 1, 2, 5), result
        if result.returncode:
            assert result.stderr.startswith("pyscope: "), result.stderr
    # The interpreter binary moved: the message names it and the option.
    if interp.id.startswith("debian-"):
        return   # a copy of Debian's interpreter elsewhere does not find its stdlib
    moved = tmp_path / "moved"
    moved.mkdir()
    exe = Path(os.path.realpath(interp.path))
    copy = moved / exe.name
    shutil.copy(exe, copy)
    result = run_pyscope(["run", "--core-dir", cores, "--", copy, PROGRAMS / "native_crash.py",
                          callthrough_lib], timeout=60)
    assert result.returncode == 128 + signal.SIGSEGV, result
    core = max(cores.iterdir(), key=lambda p: p.stat().st_mtime)
    copy.unlink()
    result = pyscope("dump", "--core", core)
    if result.returncode == 0:
        # A shared build: CPython lives in libpython, which is still there.
        assert "CPython" in result.stdout
    else:
        assert str(copy) in result.stderr and "--exe" in result.stderr, result.stderr
        fixed = pyscope("dump", "--core", core, "--exe", exe)
        assert fixed.returncode == 0, fixed
        assert thread_named(json.loads(pyscope("dump", "--json", "--core", core, "--exe",
                                               exe).stdout), "parser")["crashed"]
