"""Target of the signal matrix (test_signals.py): the re-entering pool of
reentry_pool.py kept busy, so that whatever pyscope has planted in it
(int3s, watchpoints, a breakpoint on PyErr_Print) is being hit when pyscope
receives a signal, plus an idle thread for pause and watch to handle.

usage: python sig_target.py REPORT.json MODE [LIBRARY] [--raise] [--seconds N]
  MODE python or ctypes, as in reentry_pool.py.
It records every signal it receives (SIGINT, SIGTERM, SIGHUP, SIGQUIT,
SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM) instead of dying of it, writes
REPORT.json once running (see _target.py; extra.phase "running"), works until
REPORT.json.stop exists (or N seconds, default 60), then writes REPORT.json
again with extra.phase "done", the signals seen in order and the number of
appends, and exits 0, or with --raise ends with an uncaught RuntimeError
(what `run --record-last` puts its PyErr_Print breakpoint for): status 1.
"""

import os
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402
import reentry_pool  # noqa: E402

RECORDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGPIPE", "SIGUSR1", "SIGUSR2",
            "SIGALRM")
seen = []


def note(signo, frame):
    seen.append(signal.Signals(signo).name)


def main():
    path = _target.report_path()
    mode = sys.argv[2]
    library = sys.argv[3] if len(sys.argv) > 3 and not sys.argv[3].startswith("--") else None
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 60
    for name in RECORDED:
        signal.signal(getattr(signal, name), note)
    pool = reentry_pool.Pool()
    if mode != "python":
        pool.native_append = reentry_pool.native_append_for(mode, library, pool)
    reentry_pool.gc.set_threshold(20, 2, 2)
    idle = threading.Event()
    waiter = threading.Thread(target=idle.wait, name="idle", daemon=True)
    waiter.start()
    stop_file = path + ".stop"
    _target.write_report(path, _target.build_report(__file__, extra={"phase": "running"}))
    reentry_pool.work(pool, False, stop_file, time.monotonic() + seconds, 7)
    idle.set()
    waiter.join()
    _target.write_report(path, {"pid": os.getpid(), "extra": {
        "phase": "done", "signals": seen, "appends": pool.appends,
        "reentries": pool.reentries}})
    if "--raise" in sys.argv:
        raise RuntimeError("the end")


if __name__ == "__main__":
    main()
