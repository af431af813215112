"""The full signal matrix of issue 13, by hand: for every mode (watch on a
Python and on a C function, dump --pause, dump --native, run, run
--record-last, record) and every signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT,
SIGPIPE, SIGUSR1, SIGALRM, SIGKILL), TRIALS trials at random moments on each
interpreter; prints per cell how many targets passed all four checks of
tests/integration/sigmatrix.py (survived, code unchanged, not left stopped,
saw no difference), and the failures with their details.

usage: /usr/bin/python3 bench/signal_matrix.py [--trials 10] [--pyscope ./pyscope]
           [--interp PATH]... [--modes m1,m2] [--signals S1,S2] [--seed N]
The suite (tests/integration/test_signals.py) runs 1 trial per cell."""

import argparse
import collections
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import sigmatrix  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--pyscope", default=str(ROOT / "pyscope"))
    ap.add_argument("--interp", action="append")
    ap.add_argument("--modes", default=",".join(sigmatrix.MODES))
    ap.add_argument("--signals", default=",".join(sigmatrix.SIGNALS))
    ap.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "little"))
    args = ap.parse_args()
    interps = args.interp or ["/root/.pyenv/versions/3.12.1/bin/python3"]
    modes = args.modes.split(",")
    signals = args.signals.split(",")
    print("seed %d, %d trials per cell, pyscope %s" % (args.seed, args.trials, args.pyscope))
    failures = []
    with tempfile.TemporaryDirectory(prefix="pyscope-sigmatrix-") as work:
        library = sigmatrix.build_library(work)
        for interp in interps:
            counts = collections.defaultdict(lambda: [0, 0, 0])
            for mode in modes:
                for signame in signals:
                    for i in range(args.trials):
                        seed = hash((args.seed, interp, mode, signame, i)) & 0xffffffff
                        r = sigmatrix.trial(args.pyscope, interp, mode, signame, work, library,
                                            seed, i)
                        cell = counts[(mode, signame)]
                        cell[0] += sigmatrix.cell_ok(r)
                        cell[1] += 1
                        cell[2] += r["landed"]
                        if not sigmatrix.cell_ok(r):
                            failures.append((interp, mode, signame, r))
                            print("    trial %d failed: %s" % (i, "; ".join(r["detail"])),
                                  flush=True)
                    c = counts[(mode, signame)]
                    print("  %s %-15s %-8s %d/%d ok (%d landed while pyscope ran)"
                          % (Path(interp).name, mode, signame, c[0], c[1], c[2]), flush=True)
            print("\n%s: targets that survived unchanged, not stopped, seeing no difference "
                  "(ok/trials)" % interp)
            print("%-16s" % "" + "".join("%9s" % s for s in signals))
            for mode in modes:
                print("%-16s" % mode + "".join("%9s" % ("%d/%d" % tuple(counts[(mode, s)][:2]))
                                               for s in signals))
    if failures:
        print("\nfailures:")
        for interp, mode, signame, r in failures:
            bad = [c for c in sigmatrix.CHECKS if not r[c]]
            print("  %s %s %s: failed %s; %s" % (Path(interp).name, mode, signame,
                                                 ",".join(bad), "; ".join(r["detail"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
