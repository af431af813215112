"""subprocess: reading the child's stdout while its stderr pipe is full.

Source: the subprocess documentation's warning ("Use communicate() rather
than .stdin.write, .stdout.read or .stderr.read to avoid deadlocks due to
any of the other OS pipe buffers filling up and blocking the child
process"), and Python issue bpo-1606 / Stack Overflow 1180606.

The child writes 200 kB to stderr before anything to stdout; the parent
reads stdout. The child blocks in write() on the full stderr pipe, the
parent in read() on stdout.

Senior engineer: deadlock, certain, between the parent's MainThread
(reading the child's stdout) and the child process (blocked writing the
stderr pipe that nobody reads).
"""

import subprocess
import sys

import _field


def main():
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stderr.write('x' * 200000); print('done')"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _field.report_later(_field.expect("deadlock", "certain", threads=["MainThread"]),
                        extra={"child": child.pid,
                               "stdout_fd": child.stdout.fileno(),
                               "stderr_fd": child.stderr.fileno()},
                        before=_field.blocked_writing(child.pid))
    child.stdout.read()
    child.wait()


if __name__ == "__main__":
    main()
