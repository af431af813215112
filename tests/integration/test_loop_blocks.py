"""record's summary: the loop-blocking episodes. programs/loop_blocks.py
blocks its event loop from a coroutine with time.sleep(0.3) three times and
with time.sleep(0.02) (under why's 100 ms threshold) eight times, and writes
down when each long block began and how long it measured; record's JSON
summary must count exactly the long ones, measure the longest within the
recording's own sampling interval, and name the coroutine at the sleep's
line. A loop that only idles has no episode."""

import json
import signal
import time

import pytest

from conftest import PROGRAMS, PYSCOPE
from test_record import launch  # noqa: F401 (a fixture)
from test_record import RECORD_SLACK, finish, load_record, record, stderr_of, thread_named
from test_record import wait_for_file
from test_asyncio import skip_unless_uvloop

# An upper bound: the recording is stopped with SIGINT once the program has
# written its truth, so that a test takes as long as its blocks.
DURATION = 30


def record_blocks(launch, tmp_path, target, *options):
    """(the recording's process, its JSON, the program's truth) of a record
    from before loop_blocks.py starts blocking until it is done."""
    proc, out = start_recording(launch, tmp_path, target, *options)
    truth_path = str(target.report_path) + ".blocks"
    open(str(target.report_path) + ".go", "w").close()
    wait_for_file(truth_path, target.proc, DURATION)
    proc.send_signal(signal.SIGINT)
    finish(proc, RECORD_SLACK, "record")
    with open(truth_path) as f:
        truth = json.load(f)
    return proc, load_record(out), truth


def start_recording(launch, tmp_path, target, *options):
    """record in the background, once it says it is sampling."""
    out = tmp_path / "blocks.json"
    proc = launch([PYSCOPE, "record", "-p", target.pid, "-d", DURATION, "-f", "json", "-o", out,
                   *options])
    deadline = time.monotonic() + RECORD_SLACK
    while "sampling process" not in stderr_of(proc):
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail("record did not start sampling:\n%s" % stderr_of(proc))
        time.sleep(0.02)
    return proc, out


@pytest.mark.serial
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("mode", ["plain", "async"])
def test_record_loop_blocks(interp, mode, loop, start_program, launch, tmp_path):
    """Under load the sampler may fall behind: the tolerance comes from the
    recording's own mean interval between passes. An episode is off the
    truth by less than the interval around its ends, and one interval of a
    starved sampler (ASan, a busy machine) was seen at 3.6 times the mean:
    four mean intervals. A 20 ms block only counts if a pass came 80 ms
    late. Under Debian's python3-uvloop, whose loop has no _run_once, its
    thread waits with the frame that called run_until_complete innermost and
    runs its callbacks above that frame."""
    if loop == "uvloop":
        skip_unless_uvloop(interp)
    target = start_program(interp, "loop_blocks.py", *([loop] if loop == "uvloop" else []))
    options = ["--async"] if mode == "async" else []
    proc, doc, truth = record_blocks(launch, tmp_path, target, *options)
    start = doc["meta"]["start_unix_ns"] / 1e9
    end = start + doc["meta"]["duration_ns"] / 1e9
    inside = [b for b in truth["long"] if b["start_unix"] >= start
              and b["start_unix"] + b["seconds"] <= end]
    assert len(inside) == 3, "the recording (%.3f-%.3f) missed some of %r" % (start, end, truth)
    blocked = doc["summary"]["loop_blocked"]
    assert blocked["threshold_ms"] == 100
    interval_s = doc["summary"]["sampling"]["mean_interval_ns"] / 1e9
    tolerance = 4 * interval_s
    assert blocked["episodes"] == 3, "%r, interval %.1f ms" % (blocked, interval_s * 1e3)
    longest_truth = max(b["seconds"] for b in inside)
    assert blocked["longest_ns"] == blocked["longest"][0]["duration_ns"]
    assert abs(blocked["longest_ns"] / 1e9 - longest_truth) <= tolerance, (
        blocked["longest_ns"], longest_truth, tolerance)
    loop = thread_named(doc, target.report["extra"]["thread"])
    sleep_frame = "%s (%s:%d)" % (truth["function"], PROGRAMS / "loop_blocks.py", truth["line"])
    assert len(blocked["longest"]) == 3
    for episode in blocked["longest"]:
        assert episode["thread"] == loop and not episode["at_edge"], episode
        seconds = episode["duration_ns"] / 1e9
        assert any(abs(seconds - b["seconds"]) <= tolerance for b in inside), (episode, inside)
        frames = episode["frames"]
        assert sleep_frame in frames, (sleep_frame, frames)
        if mode == "async":
            assert frames[frames.index(sleep_frame) + 1] == "<task blocker>", frames
        else:
            assert not any(f.startswith("<task ") for f in frames), frames
    # The text summary says the same.
    text = stderr_of(proc)
    assert "Loop blocked: 3 episodes" in text, text
    assert sleep_frame in text, text


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_record_loop_idle(interp, loop, start_program, pyscope, tmp_path):
    """A loop waking every 10 ms for a timer spends microseconds in each
    step: no episode; its thread was sampled in the selector."""
    if loop == "uvloop":
        skip_unless_uvloop(interp)
    target = start_program(interp, "loop_blocks.py", *([loop] if loop == "uvloop" else []))
    out = tmp_path / "idle.json"
    record(pyscope, out, "-p", target.pid, duration=1)
    doc = load_record(out)
    blocked = doc["summary"]["loop_blocked"]
    assert blocked == {"threshold_ms": 100, "episodes": 0, "longest_ns": 0, "longest": []}, blocked
    loop = thread_named(doc, target.report["extra"]["thread"])
    assert doc["threads"][loop]["samples"] > 10


def test_record_loop_threshold(interp, start_program, launch, tmp_path):
    """--loop-threshold 1s: the same three 300 ms blocks of loop_blocks.py,
    recorded in full, are no episode."""
    target = start_program(interp, "loop_blocks.py")
    proc, doc, truth = record_blocks(launch, tmp_path, target, "--loop-threshold", "1s")
    start = doc["meta"]["start_unix_ns"] / 1e9
    assert all(b["start_unix"] >= start for b in truth["long"]) and len(truth["long"]) == 3
    blocked = doc["summary"]["loop_blocked"]
    assert blocked == {"threshold_ms": 1000, "episodes": 0, "longest_ns": 0, "longest": []}, blocked
    assert "Loop blocked: no episode" in stderr_of(proc)
