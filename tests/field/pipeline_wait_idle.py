"""subprocess: a two-stage pipeline whose parent waits for the first stage
while the second, slow to start, has not read yet.

Source: the subprocess documentation's "Replacing shell pipeline" recipe
(p1 = Popen(..., stdout=PIPE); p2 = Popen(..., stdin=p1.stdout)); the
parent here keeps its own copy of p1.stdout, as many programs do when they
skip the recipe's p1.stdout.close(). The first stage fills the pipe and
blocks in write() until the second stage starts reading (it sleeps first,
like a consumer waiting for a resource).

Senior engineer: idle, not a deadlock: the first stage waits for the second,
another process that is alive and holds the pipe's read end; nothing in the
parent has to read it.
"""

import subprocess
import sys

import _field


def main():
    first = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdout.write('x' * 1000000); sys.stdout.flush()"],
        stdout=subprocess.PIPE)
    second = subprocess.Popen(["sh", "-c", "sleep 600; cat > /dev/null"], stdin=first.stdout)
    _field.report_later(_field.expect("idle", None), extra={"first": first.pid, "second": second.pid},
                        before=lambda: (_field.blocked_writing(first.pid)(),
                                        _field.main_blocked_in("_try_wait")()))
    first.wait()
    second.wait()


if __name__ == "__main__":
    main()
