"""Helpers for the field corpus: hang programs reproducing public bug reports
and documented pitfalls (see README.md here).

Each program states, before any analysis is run, what a senior engineer
reading the bug report concludes: the verdict, its grade, the threads to
blame, the threads stuck behind them and the objects at fault. The program
writes that expectation, with the ids of its objects and its threads, into
the usual ready report (tests/integration/programs/_target.py) and then
hangs for real.

The report is written by a short-lived "field-reporter" thread once every
other thread is asleep with a stable stack, so that the main thread can be
part of the hang (a join, a get). The reporter leaves itself out of the
report and exits; the test waits for it to be gone.
"""

import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration", "programs"))
import _target  # noqa: E402

REPORTER = "field-reporter"


def quiet_excepthook():
    """Threads that die of the bug the program reproduces: keep stderr clean."""
    threading.excepthook = lambda args: None


def write(expect, objects=None, extra=None):
    """Write the report now, from the calling thread (a process whose only
    thread is about to block)."""
    report = _target.build_report(sys.argv[0], extra=dict(extra or {}))
    me = threading.current_thread().name
    for t in report["threads"]:
        if t["name"] == me:
            # In a forked child, threading's cached native_id is still the
            # parent's (3.8-3.12): ask the kernel.
            t["native_id"] = threading.get_native_id()
    report["extra"].update({"expect": expect, "objects": objects or {},
                            "reporter": None})
    _target.write_report(_target.report_path(), report)


def main_blocked_in(*functions):
    """A `before` for report_later: wait until the main thread sleeps in the
    kernel inside one of these functions (when the other threads never
    settle, as GIL spinners do)."""
    def wait():
        main = threading.main_thread()
        while True:
            frame = sys._current_frames().get(main.ident)
            name = frame.f_code.co_name if frame is not None else None
            del frame
            if name in functions and _target.task_state(main.native_id) in ("S", "D"):
                return
            threading.Event().wait(0.005)
    return wait


def blocked_in_syscall(pid, number):
    """A `before` for report_later: wait until a thread of process pid
    sleeps in the system call of this (x86-64) number."""
    def in_it(tid):
        try:
            with open("/proc/%d/task/%s/syscall" % (pid, tid)) as f:
                return f.read().split()[0] == str(number)
        except (OSError, IndexError):
            return False

    def wait():
        while True:
            try:
                tids = os.listdir("/proc/%d/task" % pid)
            except OSError:
                tids = []
            if any(in_it(tid) for tid in tids):
                return
            threading.Event().wait(0.005)
    return wait


def blocked_writing(pid):
    """Process pid sleeps in write() (its pipe is full)."""
    return blocked_in_syscall(pid, 1)


def report_later(expect, objects=None, extra=None, settle=True, then=None, before=None):
    """Start the reporter: it waits until the other threads settle (unless
    settle is False), writes the report (expect may be a function returning
    the expectation, called then), calls then() and exits."""
    def run():
        if settle:
            _target.wait_settled()
        if before is not None:
            before()
        want = expect() if callable(expect) else expect
        report = _target.build_report(sys.argv[0], extra=dict(extra or {}))
        report["threads"] = [t for t in report["threads"] if t["name"] != REPORTER]
        report["extra"].update({"expect": want, "objects": objects or {},
                                "reporter": threading.get_native_id()
                                if hasattr(threading, "get_native_id") else None})
        _target.write_report(_target.report_path(), report)
        if then is not None:
            then()

    thread = threading.Thread(target=run, name=REPORTER, daemon=True)
    thread.start()
    return thread


def expect(verdict, grade, threads=(), blocked=(), objects=(), stuck=None):
    """The expectation: verdict and grade of `pyscope why`, the names of the
    threads its first finding blames, of the threads stuck behind them, the
    keys (into the report's "objects") of the objects at fault, and the
    names of every thread that is stuck (default: threads + blocked)."""
    return {"verdict": verdict, "grade": grade, "threads": sorted(threads),
            "blocked": sorted(blocked), "objects": sorted(objects),
            "stuck": sorted(stuck if stuck is not None else list(threads) + list(blocked))}
