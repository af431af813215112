"""Target for a call site that calls C code alone, then C code that calls
back into Python: thread "caller" runs at_site(fn, arg), whose one line
fn(arg) calls time.sleep(0.02) three times, then a functools.partial of
sorted() whose key, spin_key(), spins 20 ms for each of two items. The
Python frames while in the partial are at_site() under spin_key(); a
sampler that kept at_site() as the top because it was there asleep would
show it innermost instead.

usage: python rec_same_site.py REPORT.json
"""

import functools
import threading
import time

import _target


def spin_key(x):
    until = time.perf_counter() + 0.02
    while time.perf_counter() < until:
        pass
    return x


def at_site(fn, arg):
    return fn(arg)


def rounds():
    sort_spin = functools.partial(sorted, key=spin_key)
    while True:
        for _ in range(3):
            at_site(time.sleep, 0.02)
        at_site(sort_spin, [2, 1])


def main():
    path = _target.report_path()
    threading.Thread(target=rounds, name="caller", daemon=True).start()
    _target.park(__file__, path, settle=False, extra={"thread": "caller"})


if __name__ == "__main__":
    main()
