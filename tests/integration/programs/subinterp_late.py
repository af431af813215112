"""Target for an interpreter made while the process is being sampled: the
main thread reports, then waits for GO_FILE to appear; then a thread named
"subinterp" makes a subinterpreter and spins in it, in
spin_in_subinterpreter(), for 30 s. Just before, it writes its native id to
GO_FILE.started.

usage: python subinterp_late.py REPORT.json GO_FILE
"""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

try:
    import _interpreters as interpreters  # 3.13+
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.8-3.12

CODE = """
import time
def spin_in_subinterpreter():
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pass
spin_in_subinterpreter()
"""


def run_in_subinterpreter(go):
    with open(go + ".started", "w") as f:
        f.write("%d\n" % threading.get_native_id())
    interp = interpreters.create()
    run = getattr(interpreters, "run_string", None) or interpreters.exec
    run(interp, CODE)


def main():
    path, go = _target.report_path(), sys.argv[2]
    _target.write_report(path, _target.build_report("subinterp_late.py"))
    while not os.path.exists(go):
        time.sleep(0.01)
    threading.Thread(target=run_in_subinterpreter, args=(go,), name="subinterp",
                     daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
