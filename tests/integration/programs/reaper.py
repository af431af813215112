"""Runs a command as a child subreaper (PR_SET_CHILD_SUBREAPER), so that the
processes it starts stay our descendants when it dies: `pyscope run`'s
program, orphaned by a SIGKILL of pyscope, is reaped here and its exit
status known. Writes to STATUS_FILE one JSON line {"started": PID} for the
command, then one per process reaped, {"pid", "status"} (a negative status:
killed by that signal); exits when none are left. The command's output goes
to our standard error.

usage: python reaper.py STATUS_FILE COMMAND [ARGS...]
"""

import ctypes
import json
import os
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36


def main():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("reaper: prctl: %s" % os.strerror(ctypes.get_errno()))
    out = open(sys.argv[1], "w", buffering=1)
    child = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=sys.stderr)
    print(json.dumps({"started": child.pid}), file=out)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"pid": pid, "status": code}), file=out)


if __name__ == "__main__":
    main()
