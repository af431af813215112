"""Issue #19 item 4: the C callable a Python frame is calling, named from
its value stack without --native: a builtin method (re.Pattern.match), a
method descriptor (_thread.lock.acquire), a builtin function (time.sleep),
a C type (list) and a ctypes function pointer named by the ELF symbol of
its library (checksum_blocks). The program names each callable itself, as
Python does; pyscope must show the same in dump's text and JSON."""

import gzip
import json
import re
import subprocess
import types
from pathlib import Path

import pytest

from conftest import HERE, run_pyscope
from test_native_sampling import expect_merge, top_line_matching
from test_record import pick_interp

NATIVE_SRC = HERE / "native"


@pytest.fixture(scope="session")
def hog_lib(tmp_path_factory):
    out = tmp_path_factory.mktemp("hog") / "libhog.so"
    proc = subprocess.run(["gcc", "-O1", "-g", "-shared", "-fPIC", "-o", str(out),
                           str(NATIVE_SRC / "hog.c")], stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr.decode()
    return out


def start_callables(start_program, interp, hog_lib, *args):
    return start_program(interp, "c_callables.py", hog_lib, *args)


def wait_main_asleep(target):
    """Past writing its report (os.replace must take the GIL back from the
    regex thread, which holds it for whole matches): in time.sleep, i.e.
    clock_nanosleep (3.11+) or select/pselect6 before."""
    main = next(t for t in target.report["threads"] if t["name"] == "MainThread")
    target.wait_in_syscall(main["native_id"], (230, 23, 270))


def test_dump_names_the_c_callable(interp, start_program, hog_lib):
    target = start_callables(start_program, interp, hog_lib)
    wait_main_asleep(target)
    expected = target.report["extra"]["callables"]
    # The regex thread alone changes call while the others sit still: it
    # leaves match every few tenths of a second, hands the GIL to the
    # spinner and takes it back at its loop's line, in no call. A dump
    # reads the GIL's holder and the thread's frames some milliseconds
    # apart (more under ASan), so one look may see the holder between two
    # matches. Each look must name match or nothing for it, never anything
    # else; and among five looks, one that finds it holding the GIL must
    # name match (it holds the GIL in match for most of its time).
    others = {name: c for name, c in expected.items() if name != "regex"}
    seen = []
    for _ in range(5):
        result = run_pyscope(["dump", "--json", str(target.pid)])
        assert result.returncode == 0, result
        doc = json.loads(result.stdout)
        got = {t["name"]: t["c_callable"] for t in doc["threads"] if t["name"] in others}
        assert got == others
        regex = next(t for t in doc["threads"] if t["name"] == "regex")
        assert regex["c_callable"] in (None, expected["regex"]), regex
        seen.append((regex["state"], regex["c_callable"]))
        if seen[-1] == ("holding_gil", expected["regex"]):
            break
    assert seen[-1] == ("holding_gil", expected["regex"]), seen

    text = run_pyscope(["dump", str(target.pid)])
    assert text.returncode == 0, text
    for name, callable_name in expected.items():
        if name == "regex":
            continue
        block = re.search(r'^Thread \d+ "%s".*?\n((?:    .*\n)+)' % name, text.stdout, re.M)
        assert block, text.stdout
        lines = [line for line in block.group(1).splitlines()
                 if not line.startswith("    waiting for:")]
        assert lines[0] == "    \u2192 [C] " + callable_name, block.group(1)


def leaf_shares(doc, thread_name, state=None):
    """{leaf function: share of the thread's samples (in that state)}."""
    tid = [i for i, t in enumerate(doc["threads"]) if t["name"] == thread_name]
    assert tid, [t["name"] for t in doc["threads"]]
    counts = {}
    for thread, stack, sample_state, n in doc["samples"]:
        if thread == tid[0] and state in (None, sample_state):
            leaf = doc["frames"][doc["stacks"][stack][-1]]["function"]
            counts[leaf] = counts.get(leaf, 0) + n
    total = sum(counts.values())
    return {leaf: n / total for leaf, n in counts.items()}


def record_callables(start_program, interp, hog_lib, tmp_path, *options):
    """The program, and record's 2 s of it with options, as JSON."""
    target = start_callables(start_program, interp, hog_lib)
    wait_main_asleep(target)
    out = tmp_path / "rec.json"
    result = run_pyscope(["record", "-p", str(target.pid), "-d", "2", *options, "-f", "json",
                          "-o", str(out)])
    assert result.returncode == 0, result
    with open(out, encoding="utf-8") as f:
        return target, result, json.load(f)


def test_record_names_the_c_callable(interp, start_program, hog_lib, tmp_path):
    """record: each thread's samples end in the "[C] name" pseudo-frame of
    the call it sits in, and the GIL-hog report names the regex matcher."""
    target, result, doc = record_callables(start_program, interp, hog_lib, tmp_path, "--idle")
    expected = target.report["extra"]["callables"]
    for name, callable_name in expected.items():
        if name == "regex":
            # Between two matches it hands the GIL to the spinner and waits
            # to take it back, at its loop's line, in no call: for as long
            # as the spinner's switch interval, or longer when the CPUs are
            # busy. What it does holding the GIL is match.
            state = doc["threads"][[t["name"] for t in doc["threads"]].index(name)]
            assert state["state_pct"]["holding_gil"] >= 30, state
            shares = leaf_shares(doc, name, "holding_gil")
            assert shares.get("[C] " + callable_name, 0) >= 0.95, (name, shares)
            continue
        shares = leaf_shares(doc, name)
        assert shares.get("[C] " + callable_name, 0) >= 0.8, (name, shares)
    hogs = result.stderr.split("GIL hogs", 1)
    assert len(hogs) == 2, result.stderr
    first = re.search(r"^\s+1\. .*\n\s+(.*)\n\s+(\S+)", hogs[1], re.M)
    assert first and first.group(1) == "[C] " + expected["regex"], hogs[1]
    assert first.group(2) == "regex_loop", hogs[1]


REGEX_CALL_LINE = next(n for n, text in enumerate(
    (HERE / "programs" / "c_callables.py").read_text().splitlines(), 1)
    if text.strip() == "PATTERN.match(TEXT)")


def test_top_names_the_c_callable(interp, start_program, hog_lib):
    """top: the callable is the leaf row of the function table, its own
    time, named as Python names it, with no source file to show: the
    regex thread's re.Pattern.match holds most of its samples."""
    target = start_callables(start_program, interp, hog_lib)
    wait_main_asleep(target)
    expected = target.report["extra"]["callables"]
    row = re.compile(r"^ +([\d.]+)% +([\d.]+)%  \[C\] " + re.escape(expected["regex"]) + "$")

    def wanted(line):
        m = row.match(line)
        # Its own time is its total: nothing is called from a leaf. The
        # regex thread is one of six, holding the GIL most of the time.
        return m and float(m.group(1)) >= 10 and m.group(1) == m.group(2)
    found, seen = top_line_matching(["-p", str(target.pid)], wanted)
    assert found, "\n".join(seen[-40:])


def test_record_native_names_the_regex_matcher(interp, start_program, hog_lib, tmp_path):
    """record --native: the C function holding the GIL in the regex thread
    is the interpreter's matcher (sre_ucs1_match; on Debian's LTO build
    sre_ucs1_match.lto_priv.0), in the interpreter's own file, called from
    regex_loop at its line. Debian's stripped 3.13+ builds have no symbol
    for it: the report says why it names none, rather than naming a wrong
    one (the C runtime's, or an unnamed frame of the interpreter)."""
    _, result, doc = record_callables(start_program, interp, hog_lib, tmp_path, "--native")
    c_hogs = doc["summary"]["gil_hog_c_functions"]
    if not expect_merge(interp.id):
        assert c_hogs == [], c_hogs
        assert "C functions holding the GIL (--native): none named. In " in result.stderr, \
            result.stderr
        return
    assert c_hogs, result.stderr
    top = c_hogs[0]
    binary = Path(interp.path).resolve()
    library = [m for m in Path(binary).parent.parent.glob("lib/libpython3*.so.1.0")]
    module = library[0].name if library else binary.name
    assert re.fullmatch(r"sre_ucs1_match(\.lto_priv\.\d+)?", top["function"]), c_hogs
    assert top["module"] == module, (top, module)
    assert top["python_caller"].startswith("regex_loop ("), top
    assert top["python_caller"].endswith(":%d)" % REGEX_CALL_LINE), top
    # The regex thread holds the GIL most of the recording, but a pass
    # names a C function only when a native sample of it merged with the
    # Python stack, and how many do depends on how often the thread got a
    # CPU (on a loaded machine, a quarter of the passes where 55-60% is
    # usual here): the matcher must be most of what was named, in a
    # share no stray sample reaches.
    named = sum(h["passes_pct"] for h in c_hogs)
    assert top["passes_pct"] >= 10 and top["passes_pct"] >= named / 2, c_hogs
    assert re.search(r"\[C\] sre_ucs1_match\S* \(%s\) \S+:\d+\n\s+called from regex_loop \("
                     % re.escape(module), result.stderr), result.stderr


@pytest.mark.parametrize("fmt", ["flamegraph", "speedscope", "chrome", "pprof"])
def test_every_format_carries_the_c_callable(fmt, start_program, hog_lib, tmp_path):
    interp = pick_interp("3.12", "3.11")
    target = start_callables(start_program, interp, hog_lib)
    out = tmp_path / ("rec." + fmt)
    result = run_pyscope(["record", "-p", str(target.pid), "-d", "1", "--idle", "-f", fmt,
                          "-o", str(out)])
    assert result.returncode == 0, result
    data = out.read_bytes()
    if fmt == "pprof":
        data = gzip.decompress(data)
    for name in ("[C] re.Pattern.match", "[C] checksum_blocks (libhog.so)", "[C] list"):
        assert name.encode() in data, (fmt, name)


# --------------------------------------------------------------------------
# Item 6: dump --native keeps the interpreter frames that explain a state

HOG_SLEEP_LINE = next(n for n, text in enumerate(
    (NATIVE_SRC / "hog.c").read_text().splitlines(), 1) if "sleep-here" in text)
DEBUG_BUILDS = [Path("/root/.cache/debian-python/%s-dbg/root/usr/bin/python%sd" % (v, v))
                for v in ("3.14", "3.15")]


def native_frames(doc, name):
    thread = next(t for t in doc["threads"] if t["name"] == name)
    assert thread["native"], thread
    return thread, thread["native"]["frames"]


def check_state_frames(doc, named):
    """The frames of the interpreter that explain each thread's state are
    shown; only the eval loop's plumbing is hidden."""
    for t in doc["threads"]:
        if t["native"]:
            shown = [f["symbol"] for f in t["native"]["frames"] if not f["internal"]]
            assert not any(s and s.startswith("_PyEval_EvalFrameDefault") for s in shown), shown
    _, frames = native_frames(doc, "ctypes")
    hog = [f for f in frames if f["symbol"] == "checksum_blocks"]
    assert hog and hog[0]["file"].endswith("hog.c") and hog[0]["line"] == HOG_SLEEP_LINE, frames
    if not named:
        return
    shown = {f["symbol"] for f in frames if not f["internal"]}
    assert "_ctypes_callproc" in shown, frames
    regex, frames = native_frames(doc, "regex")
    if regex["state"] == "holding_gil":
        # Inside the matcher, or caught between two matches in the pattern
        # method's own clean-up (3.15-dbg under ASan: _sre_SRE_Pattern_
        # prefixmatch_impl -> state_fini -> data_stack_dealloc -> PyMem_Free):
        # either way the regex module's C frames are shown, named.
        shown = [f["symbol"] or "" for f in frames if not f["internal"]]
        assert any(s.startswith(("sre_ucs1_match", "_sre_SRE_Pattern_")) for s in shown), shown
    spinner, frames = native_frames(doc, "spinner")
    if spinner["state"] == "waiting_gil":
        # In take_gil, or caught in the hand-off just before it: the eval
        # breaker's drop_gil, waking the waiter it yields to (a loaded CI
        # caught _Py_HandlePending -> drop_gil -> __lll_lock_wake).
        shown = {f["symbol"] for f in frames if not f["internal"]}
        assert "take_gil" in shown or "drop_gil" in shown, frames


def test_dump_native_keeps_state_frames(interp, start_program, hog_lib):
    target = start_callables(start_program, interp, hog_lib)
    result = run_pyscope(["dump", "--native", "--json", str(target.pid)])
    assert result.returncode == 0, result
    # Named: pyenv's builds (symbols for static functions); Debian's are stripped.
    check_state_frames(json.loads(result.stdout), not interp.id.startswith("debian-"))
    every = run_pyscope(["dump", "--native-all", str(target.pid)])
    assert every.returncode == 0, every
    text = run_pyscope(["dump", "--native", str(target.pid)])
    if not interp.id.startswith("debian-"):
        assert "_PyEval_EvalFrameDefault" in every.stdout
        assert "_PyEval_EvalFrameDefault" not in text.stdout


@pytest.mark.parametrize("path", DEBUG_BUILDS, ids=["3.14-dbg", "3.15-dbg"])
def test_dump_native_debug_builds(path, start_program, hog_lib):
    """Debian's 3.14/3.15 debug builds have full symbols: their merge rules
    interleave the stacks, and the state frames are named."""
    if not path.exists():
        pytest.skip("%s not installed (shared/tools/debian-python.sh %s-dbg)"
                    % (path, path.name[6:10]))
    interp = types.SimpleNamespace(path=str(path), id=path.name)
    target = start_callables(start_program, interp, hog_lib, 18)
    result = run_pyscope(["dump", "--native", "--json", str(target.pid)])
    assert result.returncode == 0, result
    doc = json.loads(result.stdout)
    for t in doc["threads"]:
        assert t["native"]["merged"], (t["name"], t["native"].get("error"))
    check_state_frames(doc, True)
