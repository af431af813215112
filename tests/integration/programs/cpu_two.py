"""Target: two CPU-bound pure-Python threads. At any moment one of them
holds the GIL and the other waits for it. The main thread sleeps.

usage: python cpu_two.py REPORT.json
"""

import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402


def step(x):
    return (x * 1103515245 + 12345) & 0x7FFFFFFF


def spin():
    x = 1
    while True:
        x = step(x)


def main():
    path = _target.report_path()
    names = ["cpu-1", "cpu-2"]
    for name in names:
        threading.Thread(target=spin, name=name, daemon=True).start()
    # The workers never block, so their reported frames are just a sample.
    _target.park(__file__, path, settle=False,
                 extra={"cpu_threads": names, "spin_function": "spin",
                        "step_function": "step"})


if __name__ == "__main__":
    main()
