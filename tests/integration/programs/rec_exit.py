"""Target for the end conditions of `pyscope record`: two threads busy in
spin() for SECONDS of wall time, then the process exits with status CODE
(os._exit when HOW is "_exit"; killed by SIGTERM when HOW is "signal"; else
sys.exit through normal finalization).

usage: python rec_exit.py REPORT.json SECONDS CODE [HOW]
"""

import os
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def spin(deadline):
    x = 1
    while time.monotonic() < deadline:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main():
    path = _target.report_path()
    seconds = float(sys.argv[2])
    code = int(sys.argv[3])
    how = sys.argv[4] if len(sys.argv) > 4 else "exit"
    deadline = time.monotonic() + seconds
    worker = threading.Thread(target=spin, args=(deadline,), name="spinner")
    worker.start()
    _target.write_report(path, _target.build_report(
        __file__, extra={"seconds": seconds, "code": code, "exit": how}))
    spin(deadline)
    worker.join()
    if how == "_exit":
        os._exit(code)
    if how == "signal":
        os.kill(os.getpid(), signal.SIGTERM)
    sys.exit(code)


if __name__ == "__main__":
    main()
