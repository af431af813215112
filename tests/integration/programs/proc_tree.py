"""Target: a process tree as multiprocessing programs make them. The parent
(parked) has a fork child (os.fork, busy) that forked a grandchild (busy),
and a spawn child (multiprocessing's "spawn" start method: a new
interpreter exec'd, busy). Each busy process spins in Python holding its own
GIL about half of the time, so per-process GIL figures differ from any
average.

extra: {"fork_child": PID, "grandchild": PID, "spawn_child": PID}

usage: python proc_tree.py REPORT.json
"""

import multiprocessing
import os
import sys
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def spin_half():
    while True:
        end = time.monotonic() + 0.02
        while time.monotonic() < end:
            pass
        time.sleep(0.02)


def spawned_main(ready):
    # Runs in the new interpreter: the exec has happened by now, so the
    # parent's report never names a child still between fork and exec
    # (multiprocessing's start() returns before the child execs).
    ready.set()
    spin_half()


def fork_child(write_end):
    grandchild = os.fork()
    if grandchild == 0:
        spin_half()
    os.write(write_end, b"%d\n" % grandchild)
    spin_half()


def main():
    path = _target.report_path()
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        fork_child(write_end)
    os.close(write_end)
    grandchild = int(os.read(read_end, 64).split()[0])
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    spawned = ctx.Process(target=spawned_main, args=(ready,), daemon=True)
    spawned.start()
    if not ready.wait(60):
        sys.exit("the spawn child never started")
    _target.park(__file__, path, extra={"fork_child": child, "grandchild": grandchild,
                                        "spawn_child": spawned.pid}, settle=False)


if __name__ == "__main__":
    main()
