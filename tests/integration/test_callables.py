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

import pytest

from conftest import HERE, run_pyscope
from test_record import pick_interp

NATIVE_SRC = HERE / "native"


@pytest.fixture(scope="session")
def hog_lib(tmp_path_factory):
    out = tmp_path_factory.mktemp("hog") / "libhog.so"
    proc = subprocess.run(["gcc", "-O1", "-g", "-shared", "-fPIC", "-o", str(out),
                           str(NATIVE_SRC / "hog.c")], stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr.decode()
    return out


def start_callables(start_program, interp, hog_lib):
    return start_program(interp, "c_callables.py", hog_lib)


def test_dump_names_the_c_callable(interp, start_program, hog_lib):
    target = start_callables(start_program, interp, hog_lib)
    main = next(t for t in target.report["threads"] if t["name"] == "MainThread")
    # time.sleep: clock_nanosleep (3.11+), select/pselect6 before.
    target.wait_in_syscall(main["native_id"], (230, 23, 270))
    expected = target.report["extra"]["callables"]
    result = run_pyscope(["dump", "--json", str(target.pid)])
    assert result.returncode == 0, result
    doc = json.loads(result.stdout)
    got = {t["name"]: t["c_callable"] for t in doc["threads"] if t["name"] in expected}
    # Between two matches, or waiting to take the GIL back from the spinner,
    # the regex thread is in no call: only the holder is inside match.
    regex = next(t for t in doc["threads"] if t["name"] == "regex")
    if regex["state"] != "holding_gil":
        del got["regex"], expected["regex"]
    assert got == expected

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


def leaf_shares(doc, thread_name):
    """{leaf function: share of the thread's samples}."""
    tid = [i for i, t in enumerate(doc["threads"]) if t["name"] == thread_name]
    assert tid, [t["name"] for t in doc["threads"]]
    counts = {}
    for thread, stack, _state, n in doc["samples"]:
        if thread == tid[0]:
            leaf = doc["frames"][doc["stacks"][stack][-1]]["function"]
            counts[leaf] = counts.get(leaf, 0) + n
    total = sum(counts.values())
    return {leaf: n / total for leaf, n in counts.items()}


def test_record_names_the_c_callable(interp, start_program, hog_lib, tmp_path):
    """record: each thread's samples end in the "[C] name" pseudo-frame of
    the call it sits in, and the GIL-hog report names the regex matcher."""
    target = start_callables(start_program, interp, hog_lib)
    expected = target.report["extra"]["callables"]
    out = tmp_path / "rec.json"
    result = run_pyscope(["record", "-p", str(target.pid), "-d", "2", "--idle", "-f", "json",
                          "-o", str(out)])
    assert result.returncode == 0, result
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    for name, callable_name in expected.items():
        shares = leaf_shares(doc, name)
        # The regex thread also waits for the GIL now and then, at its
        # call: the rest is the time between two matches.
        assert shares.get("[C] " + callable_name, 0) >= 0.8, (name, shares)
    hogs = result.stderr.split("GIL hogs", 1)
    assert len(hogs) == 2, result.stderr
    first = re.search(r"^\s+1\. .*\n\s+(.*)\n\s+(\S+)", hogs[1], re.M)
    assert first and first.group(1) == "[C] " + expected["regex"], hogs[1]
    assert first.group(2) == "regex_loop", hogs[1]


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
