"""Integration tests for `pyscope dump --locals` and `--print EXPR` on every
interpreter: the reprs must equal Python's own repr() for simple values, and
follow the documented bounds (docs/native.md) for the rest."""

import json
import re

import pytest

from conftest import run_pyscope, strict_json


def handler_frame(doc):
    [thread] = [t for t in doc["threads"] if t["name"] == "handler"]
    frame = thread["frames"][0]
    assert frame["function"] in ("handle", "Server.handle"), thread["frames"]
    return frame


@pytest.mark.parametrize("pause", [False, True], ids=["live", "pause"])
def test_locals_match_repr(interp, start_program, pause):
    target = start_program(interp, "locals_values.py")
    extra = target.report["extra"]
    args = ["dump", "--json", "--locals"] + (["--pause"] if pause else []) + [target.pid]
    result = run_pyscope(args)
    assert result.returncode == 0, result
    doc = json.loads(result.stdout)
    frame = handler_frame(doc)
    got = {local["name"]: local for local in frame["locals"]}
    for name, want in extra["expected"].items():
        assert name in got, "local %r missing; have %s" % (name, sorted(got))
        assert got[name]["repr"] == want, name
    for name, want in extra["special"].items():
        assert got[name]["repr"] == want, name
    for name, kind in extra["kinds"].items():
        assert got[name]["kind"] == kind, name
    assert got["self"]["type"] == "Server"
    assert got["self"]["address"] == extra["self_id"]
    # Declaration order: arguments first, as the code object lists them.
    names = [local["name"] for local in frame["locals"]]
    assert names[:2] == ["self", "request"]
    # Frames without --locals have no "locals" key.
    plain = json.loads(run_pyscope(["dump", "--json", target.pid]).stdout)
    assert "locals" not in handler_frame(plain)


def test_locals_text(interp, start_program):
    target = start_program(interp, "locals_values.py")
    result = run_pyscope(["dump", "--locals", target.pid])
    assert result.returncode == 0, result
    assert "        small = 42\n" in result.stdout
    assert "        captured = 'in a cell'\n" in result.stdout
    assert "        cycle = [[...]]\n" in result.stdout


def test_print_paths(interp, start_program):
    target = start_program(interp, "locals_values.py")
    cases = {"self.pool.free_lists": "[3, 1, 2]", "args[0]": "10", "args[-1]": "'x'",
             "options['verbose']": "True", "self.pool.name": "'pool-\u03b1'",
             "mapping['b'][1]": "2", "small": "42"}
    for expr, want in cases.items():
        result = run_pyscope(["dump", "--json", "--print", expr, target.pid])
        assert result.returncode == 0, result
        doc = json.loads(result.stdout)
        assert doc["print"]["expression"] == expr
        hits = [r for r in doc["print"]["results"] if r["repr"] is not None]
        assert len(hits) == 1, (expr, doc["print"])
        thread = doc["threads"][hits[0]["thread_index"]]
        assert thread["name"] == "handler" and hits[0]["frame_index"] == 0
        assert hits[0]["tid"] == thread["tid"]
        assert hits[0]["repr"] == want, expr
    # Failures say why, in the frame where the root name was found.
    doc = json.loads(run_pyscope(["dump", "--json", "--print", "self.nope", target.pid]).stdout)
    first = doc["print"]["results"][0]
    assert first["repr"] is None and "nope" in first["error"]
    doc = json.loads(run_pyscope(["dump", "--json", "--print", "args[7]", target.pid]).stdout)
    assert "out of range" in doc["print"]["results"][0]["error"]
    text = run_pyscope(["dump", "--print", "no_such_name", target.pid]).stdout
    assert "not found" in text


def test_print_usage_errors(pyscope):
    for expr in ("", "1abc", "a..b", "a[", "a[x]", "a['k'"):
        result = pyscope("dump", "--print", expr, "1")
        assert result.returncode == 2, (expr, result)
        assert "--print" in result.stderr




def holder_frame(doc):
    [thread] = [t for t in doc["threads"] if t["name"] == "holder"]
    frame = thread["frames"][0]
    assert frame["function"] in ("hold", "Node.hold"), thread["frames"]
    return frame


def test_big_values_odd_strings_instances(interp, start_program):
    """A 5,000,000-character str shows its start and length (and is not read
    whole), a lone surrogate is escaped as repr() escapes it, and instances
    show their first attributes, depth-limited, in JSON and text."""
    target = start_program(interp, "locals_big.py")
    expected = target.report["extra"]["expected"]
    result = run_pyscope(["dump", "--json", "--locals", "-v", target.pid])
    assert result.returncode == 0, result
    got = {local["name"]: local["repr"] for local in holder_frame(strict_json(result.stdout))["locals"]}
    for name, want in expected.items():
        assert got.get(name) == want, name
    # Reading the strings whole would move more than 8 MB.
    [read] = re.findall(r"\((\d+) reads, (\d+) bytes", result.stderr)
    assert int(read[1]) < 5000000, result.stderr
    text = run_pyscope(["dump", "--locals", target.pid]).stdout
    for name, want in expected.items():
        assert "        %s = %s\n" % (name, want) in text, name


def test_print_errors_reported_once(interp, start_program):
    """`self` is a Node in one frame and a Tree or threading object in the
    others: the value is printed for that frame, and each distinct failure
    once, naming the frames it applies to, instead of a line per frame."""
    target = start_program(interp, "locals_big.py")
    doc = strict_json(run_pyscope(["dump", "--json", "--print", "self.depth", target.pid]).stdout)
    results = doc["print"]["results"]
    hits = [r for r in results if r["repr"] is not None]
    assert [h["repr"] for h in hits] == [str(target.report["extra"]["self_depth"])]
    failures = {}
    for r in results:
        if r["repr"] is None:
            failures.setdefault(r["error"], []).append(r)
    assert len(failures) >= 2 and len(results) - len(hits) > len(failures), results
    text = run_pyscope(["dump", "--print", "self.depth", target.pid]).stdout
    section = text[text.index("--print self.depth"):].splitlines()[1:]
    assert len(section) == 1 + len(failures), section
    assert section[0].endswith(": 500") and "hold (" in section[0]
    for error, frames in failures.items():
        [line] = [l for l in section if l.strip().startswith("<" + error + ">")]
        n = len(frames)
        assert " in %d other frame%s:" % (n, "" if n == 1 else "s") in line, line
