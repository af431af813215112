"""A program that execs another interpreter in place (issue 13.5): the first
stage spins in before_exec() until the file REPORT.go exists (the test
makes it once pyscope samples: a loaded machine may take seconds to start
pyscope) and 0.5 s more, then os.execv's the interpreter named in argv[2]
on this same file; the second stage spins in after_exec() and exits. Each
stage appends its own pid, version and executable to the report (argv[1],
one JSON line per stage).

usage: exec_other.py REPORT OTHER_PYTHON [after]
"""

import json
import os
import platform
import sys
import time


def report(path, stage):
    with open(path, "a") as f:
        f.write(json.dumps({"stage": stage, "pid": os.getpid(),
                            "python_version": platform.python_version(),
                            "executable": os.path.realpath(sys.executable)}) + "\n")


def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def before_exec(path, other):
    deadline = time.monotonic() + 60
    while not os.path.exists(path + ".go") and time.monotonic() < deadline:
        spin(0.01)
    spin(0.5)
    report(path, "exec")
    os.execv(other, [other, os.path.abspath(__file__), path, other, "after"])


def after_exec(path):
    report(path, "after")
    spin(1.5)


def main():
    path, other = sys.argv[1], sys.argv[2]
    if sys.argv[3:] == ["after"]:
        after_exec(path)
        return
    report(path, "before")
    print("ready", flush=True)
    before_exec(path, other)


if __name__ == "__main__":
    main()
