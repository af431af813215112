"""-s/--subprocesses on a process tree made the way multiprocessing programs
make them (tests/integration/programs/proc_tree.py): a fork child with a fork
grandchild, and a spawn child. dump and why show every Python process with
its role; record and top give each process its own rate and GIL figures,
never an average across processes that each have their own GIL."""

import json
import shlex

import pytest

from conftest import PYSCOPE, run_pyscope
from test_top import Pane, wait_for


def strict_json(text):
    def pairs(items):
        keys = [k for k, _ in items]
        assert len(keys) == len(set(keys)), "duplicate keys in %s" % keys
        return dict(items)
    return json.loads(text, object_pairs_hook=pairs)


def expected_tree(target):
    extra = target.report["extra"]
    return {target.pid: (0, "parent"),
            extra["fork_child"]: (target.pid, "fork child"),
            extra["grandchild"]: (extra["fork_child"], "fork grandchild"),
            extra["spawn_child"]: (target.pid, "exec child")}


def check_envelope(doc, tree):
    got = {p["pid"]: p for p in doc["processes"]}
    for pid, (ppid, role) in tree.items():
        assert pid in got, (pid, sorted(got))
        assert got[pid]["role"] == role and got[pid]["exit_status"] == 0, got[pid]
        if ppid:
            assert got[pid]["ppid"] == ppid, got[pid]
    return got


def test_dump_and_why_cover_the_tree(interp, start_program):
    target = start_program(interp, "proc_tree.py")
    tree = expected_tree(target)
    got = check_envelope(strict_json(run_pyscope(["dump", "-s", "--json", target.pid]).stdout),
                         tree)
    for pid in tree:
        assert got[pid]["report"]["pid"] == pid
        assert got[pid]["report"]["threads"], got[pid]
    text = run_pyscope(["dump", "--subprocesses", target.pid])
    assert text.returncode == 0, text
    assert "=== process %d: parent ===\n" % target.pid in text.stdout
    for pid, (ppid, role) in tree.items():
        if ppid:
            assert "=== process %d: %s of %d ===\n" % (pid, role, ppid) in text.stdout
    why = run_pyscope(["why", "-s", "--json", "-i", "0", target.pid])
    assert why.returncode == 0, why
    got = check_envelope(strict_json(why.stdout), tree)
    for pid in tree:
        assert got[pid]["report"] is not None


@pytest.mark.representative
def test_record_and_top_per_process(interp, start_program, tmp_path):
    target = start_program(interp, "proc_tree.py")
    tree = expected_tree(target)
    out = tmp_path / "rec.json"
    result = run_pyscope(["record", "-s", "-q", "-d", "1.5", "-f", "json", "-o", out,
                          "-p", target.pid])
    assert result.returncode == 0, result
    summary = strict_json(out.read_text())["summary"]
    procs = {p["pid"]: p for p in summary["processes"]}
    for pid, (ppid, role) in tree.items():
        assert procs[pid]["role"] == role, procs.get(pid)
        # Each process is sampled at the requested rate at most: never the
        # sum over the processes.
        assert 0 < procs[pid]["rate_hz_achieved"] <= 110, procs[pid]
    # The parent is parked; the others spin half of the time in Python.
    assert procs[target.pid]["gil_utilisation_pct"] < 5, procs[target.pid]
    for pid in tree:
        if pid != target.pid:
            assert procs[pid]["gil_utilisation_pct"] > 10, procs[pid]
    for pid, (_, role) in tree.items():
        assert any(l.split()[:1] == [str(pid)] and role in l
                   for l in result.stderr.splitlines()), result.stderr

    pane = Pane(tmp_path, "%s top -s -p %d" % (shlex.quote(str(PYSCOPE)), target.pid), 160, 40)
    try:
        def shows_all(lines):
            rows = [l.split() for l in lines]
            return all(any(r[:1] == [str(pid)] and role in l for r, l in zip(rows, lines))
                       for pid, (_, role) in tree.items())
        lines = wait_for(pane, shows_all)
        assert lines[0].startswith("pyscope top  ")
        title = [l for l in lines if l.split()[:3] == ["PID", "TID", "THREAD"]]
        assert title, lines
        assert not any("GIL busy" in l and "%" in l for l in lines[:2]), lines
    finally:
        pane.close()
