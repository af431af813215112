"""Target: one pure-Python thread ("spinner") that never blocks, so it holds
the GIL all the time: nothing else in the process wants it (the main thread
sleeps). What an agent should report as ~100% holding the GIL.

usage: python agent_gil.py REPORT.json
"""

import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402


def churn(x):
    return (x * 1103515245 + 12345) & 0x7FFFFFFF


def spin_forever():
    x = 1
    while True:
        x = churn(x)


def main():
    path = _target.report_path()
    spinner = threading.Thread(target=spin_forever, name="spinner", daemon=True)
    spinner.start()
    _target.park(__file__, path, settle=False,
                 extra={"spinner": spinner.native_id, "functions": ["spin_forever", "churn"]})


if __name__ == "__main__":
    main()
