"""Target for `pyscope record` filters and formats: two CPU-bound threads
that pass the GIL back and forth ("crunch-1", "crunch-2", in crunch()), one
thread asleep in time.sleep inside snooze() ("sleeper"), and the main thread
parked in time.sleep.

usage: python rec_mixed.py REPORT.json
"""

import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def crunch():
    x = 1
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def snooze():
    while True:
        time.sleep(3600)


def main():
    path = _target.report_path()
    for name in ("crunch-1", "crunch-2"):
        threading.Thread(target=crunch, name=name, daemon=True).start()
    threading.Thread(target=snooze, name="sleeper", daemon=True).start()
    _target.park(__file__, path, settle=False,
                 extra={"cpu_threads": ["crunch-1", "crunch-2"], "cpu_function": "crunch",
                        "idle_thread": "sleeper", "idle_function": "snooze"})


if __name__ == "__main__":
    main()
