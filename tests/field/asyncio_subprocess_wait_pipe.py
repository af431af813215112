"""asyncio: Process.wait() on a child whose stdout is a pipe nobody reads.

Source: the asyncio documentation of Process.wait(): "This method can
deadlock when using stdout=PIPE or stderr=PIPE and the child process
generates so much output that it blocks waiting for the OS pipe buffer to
accept more data. Use the communicate() method when using pipes to avoid
this condition." pipe_wait_deadlock.py is the same with subprocess.Popen.

The child writes 1 MB to stdout; the parent awaits proc.wait() without
reading it. asyncio reads the pipe into the process's StreamReader until
that holds twice its limit (128 KiB), then stops reading; the pipe's 64 KiB
fill, the child blocks in write(), and the task waits for an exit that
cannot come.

Senior engineer: deadlock with the child, certain: the main task awaits
the child's exit while the child is blocked writing to the stdout pipe this
process holds and no longer reads. The loop's thread is free (it sleeps in
its selector); the task is stuck, not the thread. Up to 3.11 asyncio
waits for the child's exit in a thread of its own ("waitpid-N", or
"asyncio-waitpid-N": the ThreadedChildWatcher): there that thread is the
one blocked for good, in waitpid() for a child that cannot exit, and the
loop's thread, with nothing left that could wake it, is stuck behind it.
"""

import asyncio
import sys
import threading

import _field

CHILD = "import sys; sys.stdout.write('x' * 1000000); sys.stdout.flush()"


async def main():
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", CHILD,
                                                stdout=asyncio.subprocess.PIPE)
    waiter = [t.name for t in threading.enumerate() if "waitpid-" in t.name]
    expect = (_field.expect("deadlock", "certain", threads=waiter, stuck=waiter + ["MainThread"])
              if waiter else _field.expect("deadlock", "certain", threads=["MainThread"], stuck=[]))
    _field.report_later(expect, extra={"child": proc.pid},
                        before=_field.blocked_writing(proc.pid))
    await proc.wait()      # never reads proc.stdout


if __name__ == "__main__":
    asyncio.run(main())
