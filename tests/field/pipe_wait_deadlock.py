"""subprocess: Popen.wait() on a child whose stdout is a pipe nobody reads.

Source: the documentation of Popen.wait ("This will deadlock when using
stdout=PIPE or stderr=PIPE and the child process generates enough output to
a pipe such that it blocks waiting for the OS pipe buffer to accept more
data. Use Popen.communicate() when using pipes to avoid that."), and the
Stack Overflow questions it answers (e.g. 2408650, "Python subprocess hangs
with wait()").

The child writes 1 MB to stdout; the parent calls wait() before reading
anything. The pipe's 64 kB buffer fills, the child blocks in write(), the
parent in wait4() for a child that can never exit.

Senior engineer: deadlock, certain, between the parent's MainThread
(waiting for the child to exit) and the child (blocked writing the stdout
pipe whose only reader is the parent, which never reads it).
"""

import subprocess
import sys

import _field


def main():
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdout.write('x' * 1000000); sys.stdout.flush()"],
        stdout=subprocess.PIPE)
    _field.report_later(_field.expect("deadlock", "certain", threads=["MainThread"]),
                        extra={"child": child.pid, "stdout_fd": child.stdout.fileno()},
                        before=lambda: (_field.blocked_writing(child.pid)(),
                                        _field.main_blocked_in("_try_wait")()))
    child.wait()


if __name__ == "__main__":
    main()
