"""`pyscope top` in a real terminal (a tmux pane): with 101 threads it fits
a 40-row pane, keeps its header, lists the busy threads first and folds the
idle ones into one line that says what they wait in; after a resize it fits
the new size."""

import shlex
import subprocess
import time

import pytest

from conftest import PYSCOPE


class Pane:
    def __init__(self, tmp_path, command, width, height):
        self.socket = str(tmp_path / "tmux.sock")
        self.tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-s", "top", command)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-S", self.socket] + list(args), check=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=10).stdout.decode()

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "top").split("\n")

    def close(self):
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=10)


def wait_for(pane, predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        lines = pane.screen()
        if predicate(lines):
            return lines
        if time.monotonic() > deadline:
            pytest.fail("top never showed what was expected; last screen:\n" + "\n".join(lines))
        time.sleep(0.2)


@pytest.mark.representative
def test_top_fits_a_small_terminal_with_101_threads(interp, start_program, tmp_path):
    target = start_program(interp, "busy_pool.py")
    extra = target.report["extra"]
    assert extra["threads"] == 101
    # The main thread is parked in _target.park (time.sleep) once it reported.
    idle = dict(extra["idle"], park=1)
    n_idle = sum(idle.values())
    groups = sorted(idle.items(), key=lambda kv: (-kv[1], kv[0]))
    fold = "%d idle threads: %s" % (n_idle, ", ".join("%d %s" % (n, name) for name, n in groups))
    pane = Pane(tmp_path, "%s top -p %d" % (shlex.quote(str(PYSCOPE)), target.pid), 120, 40)
    try:
        lines = wait_for(pane, lambda ls: any(l.strip() == fold for l in ls))
        assert len(lines) >= 40
        assert lines[0].startswith("pyscope top  process %d  " % target.pid), lines
        assert "samples/s" in lines[1] and "GIL busy" in lines[1]
        [title] = [i for i, l in enumerate(lines) if l.split()[:2] == ["TID", "THREAD"]]
        busy_tids = {str(t) for t in extra["busy"]}
        # Busy threads first, right under the title, then the fold line.
        rows = lines[title + 1:title + 4]
        assert {r.split()[0] for r in rows[:2]} == busy_tids, lines
        assert rows[2].strip() == fold, lines
        assert "%OWN" in "\n".join(lines[title:])
        assert all(len(l) <= 120 for l in lines)
        # The bottom row stays empty so that the pane never scrolls.
        assert lines[39] == ""
        pane.tmux("resize-window", "-t", "top", "-x", "70", "-y", "16")
        # The first screen at the new size may be captured while top redraws
        # it: wait for one whole frame of it.
        small = wait_for(pane, lambda ls: len(ls) >= 16 and ls[0].startswith("pyscope top")
                         and len(ls[0]) == 70 and ls[0].endswith("\u2026")
                         and any(l.strip().startswith("%d idle threads: " % n_idle) for l in ls)
                         and sum(1 for l in ls if l.split()[:1] and l.split()[0] in busy_tids) == 2,
                         timeout=10)
        assert all(len(l) <= 70 for l in small)
        assert small[15] == "", small
        assert any(l.strip().startswith("%d idle threads: " % n_idle) for l in small), small
        assert sum(1 for l in small if l.split()[:1] and l.split()[0] in busy_tids) == 2, small
    finally:
        pane.close()
