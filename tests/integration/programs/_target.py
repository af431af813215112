"""Helpers shared by the target programs of the integration tests.

A target program puts its threads into a known state, then writes a JSON
report describing itself, as Python sees it, to the path given in argv[1], and
stays in that state until it is killed. The report is what `pyscope dump`
output is compared with:

    {
      "program": "blocking.py",
      "pid": 1234,
      "python_version": "3.12.1",           # platform.python_version()
      "executable": "/usr/bin/python3.12",  # sys.executable
      "main_ident": 1403...,                # threading.main_thread().ident
      "threads": [
        {"name": "MainThread", "ident": 1403..., "native_id": 1234,
         "daemon": false,
         "frames": [{"function": "park", "file": ".../_target.py", "line": 97},
                    ...]}                   # innermost first
      ],
      "extra": {...}                        # program specific
    }

Frames of the other threads come from sys._current_frames(). The reporting
(main) thread cannot see itself blocked, so `park` reports its own stack with
the innermost frame's line replaced by the line of the blocking call it is
about to make (found through the "# park-here" marker, not hard-coded).

Runs unchanged on CPython 3.8 to 3.15 (and must not use anything newer).
"""

import json
import os
import platform
import sys
import threading
import time

PARK_MARKER = "# park-here"


def function_name(code):
    """The name pyscope reports: co_qualname on 3.11+, co_name before."""
    return getattr(code, "co_qualname", code.co_name)


def describe(frame):
    """A frame chain as a list of {function, file, line}, innermost first."""
    frames = []
    while frame is not None:
        code = frame.f_code
        frames.append({"function": function_name(code),
                       "file": code.co_filename,
                       "line": frame.f_lineno})
        frame = frame.f_back
    return frames


def marker_line(func, marker):
    """Line number of the one line of func's source ending with `marker`."""
    code = func.__code__
    with open(code.co_filename, encoding="utf-8") as f:
        lines = f.read().splitlines()
    found = [number for number, text in enumerate(lines, 1)
             if number >= code.co_firstlineno and text.rstrip().endswith(marker)]
    if not found:
        raise RuntimeError("marker %r not found after line %d of %s"
                           % (marker, code.co_firstlineno, code.co_filename))
    return found[0]


def task_state(native_id):
    """Kernel state letter of one of our threads (R, S, D, ...), or None.
    A thread just started may be listed before it knows its native id: not
    settled yet (None)."""
    if native_id is None:
        return None
    try:
        with open("/proc/self/task/%d/stat" % native_id, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain ") ".
    return stat[stat.rfind(b")") + 2:][:1].decode("ascii", "replace")


def wait_settled(timeout=15.0, interval=0.02, rounds=3):
    """Wait until every other thread is asleep in the kernel and its Python
    stack has stayed the same for `rounds` consecutive snapshots.

    Each snapshot is taken after sleeping, i.e. with the GIL released, so a
    thread that was merely waiting for the GIL gets to run in between and
    would change its stack."""
    me = threading.get_ident()
    deadline = time.monotonic() + timeout
    previous = None
    stable = 0
    while True:
        others = [t for t in threading.enumerate() if t.ident != me]
        current = sys._current_frames()
        snapshot = {t.ident: describe(current.get(t.ident)) for t in others}
        del current
        asleep = all(task_state(t.native_id) in ("S", "D") for t in others)
        stable = stable + 1 if (asleep and snapshot == previous) else 0
        if stable >= rounds:
            return
        if time.monotonic() > deadline:
            states = {t.name: task_state(t.native_id) for t in others}
            raise RuntimeError("threads did not settle within %.0fs: %r"
                               % (timeout, states))
        previous = snapshot
        time.sleep(interval)


def build_report(program, main_frames=None, extra=None):
    """Describe all threads as Python sees them right now.

    main_frames, if given, replaces the calling thread's own stack."""
    me = threading.current_thread()
    current = sys._current_frames()
    threads = []
    for t in threading.enumerate():
        if t is me and main_frames is not None:
            frames = main_frames
        elif t is me:
            frames = describe(sys._getframe(1))
        else:
            frames = describe(current.get(t.ident))
        threads.append({"name": t.name,
                        "ident": t.ident,
                        "native_id": getattr(t, "native_id", None),
                        "daemon": t.daemon,
                        "frames": frames})
    del current
    return {"program": os.path.basename(program),
            "pid": os.getpid(),
            "python_version": platform.python_version(),
            "executable": sys.executable,
            "main_ident": threading.main_thread().ident,
            "threads": threads,
            "extra": extra or {}}


def write_report(path, report):
    """Write atomically, so that a reader never sees a partial file."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, ensure_ascii=False, indent=1)
    os.replace(tmp, path)


def park(program, report_path, extra=None, settle=True):
    """Report, then block the calling thread forever in time.sleep.

    With settle=True, first wait until all other threads are blocked with a
    stable stack, so their reported frames are the ones pyscope will see."""
    if settle:
        wait_settled()
    frames = describe(sys._getframe())
    frames[0]["line"] = marker_line(park, PARK_MARKER)
    write_report(report_path, build_report(program, frames, extra))
    while True:
        time.sleep(3600)  # park-here


def report_path():
    if len(sys.argv) < 2:
        sys.exit("usage: %s REPORT.json" % os.path.basename(sys.argv[0]))
    return sys.argv[1]
