"""A process left stopped: `kill -STOP PID`, a shell's Ctrl-Z, or a debugger
that attached and never continued (gdb's `attach` without `detach`).

Source: signal(7) (SIGSTOP, SIGTSTP), ptrace(2) ("the tracee is stopped"),
and the py-spy / pystack FAQ entries on processes that look hung because a
debugger left them stopped. Reproduced from pyscope issue 11, where `dump`
said "running, holds the GIL" and `why` "not_hung: made progress".

The program itself is healthy: a worker computes in a loop, the main thread
joins it. The test stops it (SIGSTOP, or a ptrace attach) after the report.

Senior engineer: stopped, certain: every thread is stopped by a signal (or
by its tracer); resume with `kill -CONT PID` (or detach the debugger).
"""

import threading

import _field


def compute(stop):
    total = 0
    while not stop.is_set():
        total += sum(range(1000))


def main():
    stop = threading.Event()
    worker = threading.Thread(target=compute, args=(stop,), name="compute")
    worker.start()
    _field.report_later(_field.expect("stopped", "certain", threads=["MainThread", "compute"],
                                      stuck=[]),
                        settle=False)
    worker.join()


if __name__ == "__main__":
    main()
