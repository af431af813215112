"""Target: a process whose GIL never changes hands while it waits: "hog"
spins in Python, holding the GIL, and nothing else asks for it ("mover" and
"sleeper" wait on events, the main thread sleeps), so the GIL's switch count
stands still and the agent leaves the waiting threads' thread states unread.
On SIGUSR1 the main thread's handler (which takes the GIL, a switch) lets
mover go on: it writes MOVED_FILE and spins too, from then on holding the
GIL or waiting for it, never idle. sleeper never moves.

usage: python agent_quiet.py REPORT.json MOVED_FILE
"""

import signal
import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402

go = threading.Event()
never = threading.Event()


def spin():
    x = 1
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def move(moved_file):
    go.wait()
    with open(moved_file, "w") as f:
        f.write("moved\n")
    spin()


def main():
    path = _target.report_path()
    moved_file = sys.argv[2]
    signal.signal(signal.SIGUSR1, lambda *_: go.set())
    threads = [threading.Thread(target=spin, name="hog", daemon=True),
               threading.Thread(target=move, args=(moved_file,), name="mover", daemon=True),
               threading.Thread(target=never.wait, name="sleeper", daemon=True)]
    for t in threads:
        t.start()
    _target.park(__file__, path, settle=False, extra={t.name: t.native_id for t in threads})


if __name__ == "__main__":
    main()
