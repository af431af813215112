"""Target: one thread 1000 Python frames deep, asleep at the bottom.

usage: python deep.py REPORT.json
"""

import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

DEPTH = 1000


def dive(remaining):
    if remaining > 1:
        return dive(remaining - 1)
    while True:
        time.sleep(3600)


def main():
    path = _target.report_path()
    sys.setrecursionlimit(DEPTH + 500)
    # 3.8-3.10 use C stack for every Python call; leave plenty of room.
    threading.stack_size(64 * 1024 * 1024)
    thread = threading.Thread(target=dive, args=(DEPTH,), name="deep-diver",
                              daemon=True)
    thread.start()
    _target.park(__file__, path, extra={"depth": DEPTH, "deep_thread": thread.name})


if __name__ == "__main__":
    main()
