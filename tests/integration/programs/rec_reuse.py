"""Target for code objects freed and their memory reused: every round
compiles a function decoy() (file "<decoy>"), runs it for 30 ms, and drops
it; then compiles target() (file "<real>"), same body and size, so that its
code object often lands where decoy's was, and runs it for 60 ms. A sampler
that keeps what it read about a code object by address alone goes on naming
target's frames "decoy (<decoy>)". decoy runs under run_decoy(), target under
run_target(): a <decoy> frame on top of run_target() is a stale name.

usage: python rec_reuse.py REPORT.json
"""

import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

BODY = """def {name}(seconds):
    until = perf_counter() + seconds
    x = 0
    while perf_counter() < until:
        x += 1
    return x
"""


def compiled(name, filename):
    namespace = {"perf_counter": time.perf_counter}
    exec(compile(BODY.format(name=name), filename, "exec"), namespace)
    return namespace[name]


def run_decoy():
    compiled("decoy", "<decoy>")(0.03)


def run_target():
    compiled("target", "<real>")(0.06)


def rounds():
    while True:
        run_decoy()
        run_target()


def main():
    path = _target.report_path()
    threading.Thread(target=rounds, name="reuser", daemon=True).start()
    _target.park(__file__, path, settle=False, extra={"thread": "reuser"})


if __name__ == "__main__":
    main()
