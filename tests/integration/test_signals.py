"""The signal matrix of issue 13 (item 2): every command that changes its
target or holds it under ptrace (watch on a Python and on a C function,
dump --pause, dump --native, run, run --record-last) and record, sent each of
SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGALRM and SIGKILL at a
random moment. The target must survive with its code bytes unchanged
(compared with the files through /proc/PID/mem), never be left stopped and
see no difference (sigmatrix.py has the checks). One trial per cell, watch's
cells on two interpreters and the others' on one of the two in turn, at a
new random moment each run, keeps it fast;
bench/signal_matrix.py runs the full matrix, many trials a cell.

watch killed with SIGKILL: the process killed is watch's guard; its tracer,
a child in a process group of its own, is told by the kernel
(PR_SET_PDEATHSIG), stops watching and lets the target go, so the trial
waits until no thread of the target is traced (watch/guard.c).

Also: a broken pipe on watch's report stream (`watch --all ... | head`)."""

import hashlib
import os
import random
import signal
import subprocess
import time

import pytest

import sigmatrix
from conftest import PYSCOPE, discovery

# 3.10: Python functions watched by debug registers alone, shared libpython;
# Debian's 3.14: static and stripped, with the int3 on the eval loop (3.11+).
SUITE_INTERPS = ("3.10.13", "debian-3.14")
# One trial a cell (the seed differs every run); the ASan pass runs the same
# cells on its own interpreters, to check pyscope's own cleanup.
TRIALS = 1
SEED = int.from_bytes(os.urandom(4), "little")
# Which interpreter takes which cell must be the same in every xdist worker
# (each collects the tests itself): from the run's id that xdist gives them
# all, else from this process's seed.
_RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID")
ROTATION = (int(hashlib.sha256(_RUN_ID.encode()).hexdigest(), 16) if _RUN_ID else SEED) % 2


def suite_interps():
    """SUITE_INTERPS where they were selected; otherwise (PYSCOPE_INTERPRETERS
    chose others, as the ASan pass does) the oldest and the newest selected."""
    supported = discovery().supported
    chosen = [i for i in supported if i.id in SUITE_INTERPS]
    if not chosen and supported:
        chosen = [supported[0]] + ([supported[-1]] if len(supported) > 1 else [])
    return chosen


@pytest.fixture(params=suite_interps(), ids=lambda i: i.id)
def sig_interp(request):
    discovery().used.add(request.param.id)
    return request.param


@pytest.fixture(scope="session")
def library(tmp_path_factory):
    return sigmatrix.build_library(tmp_path_factory.mktemp("sigmatrix"))


def matrix_cells():
    """watch's two modes on both interpreters (debug registers alone on one,
    the int3 on the eval loop on the other); every other mode, which
    does the same on both, on one of them per cell, alternating, and which
    one turns with the seed: each run covers half the pairs, a new half
    each time, in two fifths of the time."""
    interps = suite_interps()
    cells = []
    for m, mode in enumerate(sigmatrix.MODES):
        for k, sig in enumerate(sigmatrix.SIGNALS):
            if mode.startswith("watch-") or len(interps) < 2:
                cells += [(i, mode, sig) for i in interps]
            else:
                cells.append((interps[(m + k + ROTATION) % 2], mode, sig))
    return cells


CELLS = matrix_cells()


@pytest.mark.parametrize("interp_,mode,signame", CELLS,
                         ids=["%s-%s-%s" % (i.id, mode, sig) for i, mode, sig in CELLS])
def test_signal_leaves_target_unchanged(interp_, mode, signame, tmp_path, library):
    discovery().used.add(interp_.id)
    sig_interp = interp_
    failures = []
    for index in range(TRIALS):
        seed = hash((SEED, sig_interp.id, mode, signame, index)) & 0xffffffff
        result = sigmatrix.trial(PYSCOPE, sig_interp.path, mode, signame, tmp_path, library,
                                 seed, index)
        if not sigmatrix.cell_ok(result):
            failures.append("trial %d (seed %d, signal %s pyscope): failed %s: %s"
                            % (index, seed, "reached" if result["landed"] else "after",
                               [c for c in sigmatrix.CHECKS if not result[c]],
                               "; ".join(result["detail"])))
    assert not failures, "\n".join(failures)


def started_target(t, interp):
    target = t.popen([interp.path] + t.target_args(), "target")
    assert sigmatrix.wait_for(t.running_report, sigmatrix.READY_TIMEOUT), t.stderr_of("target")
    return target


def exit_status(tool, why):
    try:
        return tool.wait(timeout=sigmatrix.EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(why)


def finishes_untouched(t, target):
    """Once pyscope is gone: no thread stopped, the code as in its files,
    working on, and at the end exit 0 having seen no signal."""
    assert t.check_target(target.pid), t.result["detail"]
    done = t.finish_target()
    assert target.wait(timeout=sigmatrix.EXIT_TIMEOUT) == 0, t.stderr_of("target")
    assert done["extra"]["signals"] == []


def test_watch_report_stream_closed(sig_interp, tmp_path):
    """`watch --all ... | head`: the reader goes away; pyscope stops
    watching, removes every breakpoint, says why and exits 1."""
    t = sigmatrix.Trial(PYSCOPE, sig_interp.path, "watch-python", "SIGPIPE", tmp_path, None,
                        random.Random(SEED))
    try:
        target = started_target(t, sig_interp)
        tool = t.popen([PYSCOPE, "watch", "--reentry", sigmatrix.PY_FUNC, "--all", "-p",
                        target.pid], "pyscope", stdout=subprocess.PIPE)
        first = tool.stdout.read(200)
        assert first, "no report before the pipe closed: %s" % t.stderr_of("pyscope")
        tool.stdout.close()
        status = exit_status(tool, "pyscope kept watching with its report stream closed")
        stderr = t.stderr_of("pyscope")
        assert status == 1, (status, stderr)
        assert "cannot write the report (standard output closed); stopped watching" in stderr
        assert "breakpoints removed, process %d continues" % target.pid in stderr
        finishes_untouched(t, target)
    finally:
        for proc in t.procs:
            sigmatrix.killpg(proc)


def test_signal_ignored_at_start_stays_ignored(sig_interp, tmp_path):
    """A shell without job control starts a background command with SIGINT
    ignored (and nohup, SIGHUP): pyscope keeps it ignored for the whole run.
    It used to lose such a signal while starting up but take it as a stop
    once watching, so whether `kill -INT` stopped it depended on the moment
    (the suite's matrix, run from such a shell, hung there for 30 s and the
    target then died of SIGTRAP). Sent once right after exec and once while
    watching, it must change nothing; SIGTERM then ends watching cleanly."""
    t = sigmatrix.Trial(PYSCOPE, sig_interp.path, "watch-python", "SIGINT", tmp_path, None,
                        random.Random(SEED))

    def ignore_sigint():
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    try:
        target = started_target(t, sig_interp)
        tool = t.popen([PYSCOPE] + t.pyscope_args(target.pid), "pyscope",
                       preexec_fn=ignore_sigint)
        os.kill(tool.pid, signal.SIGINT)
        assert sigmatrix.wait_for(lambda: "watching Python function" in t.stderr_of("pyscope"),
                                  sigmatrix.READY_TIMEOUT), t.stderr_of("pyscope")
        time.sleep(0.2)
        os.kill(tool.pid, signal.SIGINT)
        time.sleep(1.0)
        assert tool.poll() is None, "pyscope took an ignored SIGINT: %s" % t.stderr_of("pyscope")
        tool.send_signal(signal.SIGTERM)
        status = exit_status(tool, "pyscope did not exit after SIGTERM")
        stderr = t.stderr_of("pyscope")
        assert status == 0, (status, stderr)
        assert "breakpoints removed, process %d continues" % target.pid in stderr, stderr
        finishes_untouched(t, target)
    finally:
        for proc in t.procs:
            sigmatrix.killpg(proc)
