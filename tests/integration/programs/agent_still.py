"""Target: a process that does nothing for long stretches, the agent's
common case: "napper" waits on an event and "reader" on another, the main
thread sleeps. On SIGUSR1 the main thread's handler lets napper go: it runs
burst() for BURST seconds of wall time, then writes to DONE_FILE its own CPU
seconds for the burst (time.thread_time) and the wall seconds from the
handler's wake-up to the end of the burst (the only time napper can have
been anything but idle: on a busy host it may wait for a CPU before and
within the burst), and waits again.

usage: python agent_still.py REPORT.json DONE_FILE [BURST]
"""

import signal
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

go = threading.Event()
never = threading.Event()
woken_at = [0.0]


def burst(seconds):
    x, end = 1, time.monotonic() + seconds
    while time.monotonic() < end:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def report_burst(done_file, seconds):
    """The burst, then its CPU and wall seconds into done_file."""
    cpu = time.thread_time()
    burst(seconds)
    cpu = time.thread_time() - cpu
    wall = time.monotonic() - woken_at[0]
    with open(done_file, "w") as f:
        f.write("%.6f %.6f\n" % (cpu, wall))


def nap(done_file, seconds):
    while True:
        go.wait()
        go.clear()
        report_burst(done_file, seconds)


def wake_on_sigusr1():
    def wake(*_):
        woken_at[0] = time.monotonic()
        go.set()

    signal.signal(signal.SIGUSR1, wake)


def main():
    path = _target.report_path()
    done_file = sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 1.5
    wake_on_sigusr1()
    threads = [threading.Thread(target=nap, args=(done_file, seconds), name="napper",
                                daemon=True),
               threading.Thread(target=never.wait, name="reader", daemon=True)]
    for t in threads:
        t.start()
    _target.park(__file__, path, extra={t.name: t.native_id for t in threads})


if __name__ == "__main__":
    main()
