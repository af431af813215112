"""A catastrophically backtracking regular expression holds the GIL: the re
engine never releases it, so every other thread starves.

Source: Python issue bpo-23689 / gh-67877 discussions of re's lack of
GIL release, the "ReDoS" entry of the OWASP wiki (`(a+)+$` on "aaa...ab"),
and Stack Overflow 8880540 ("Python regex hangs"). Reproduced from pyscope
issue 11: `why` said "not hung ... 1 running".

Three threads keep asking for the GIL; the "regex" thread matches
`(a+)+$` against 40 a's and a b (2**40 steps).

Senior engineer: gil_hog, certain: the regex thread has held the GIL
without a hand-off for as long as it has been watched, in re.match; the
three spinners starve waiting for it.
"""

import re
import threading

import _field

go = threading.Event()


def spin():
    n = 0
    while True:
        n += 1


def hog():
    go.wait()
    re.match(r"(a+)+$", "a" * 40 + "b")


def main():
    for i in range(3):
        threading.Thread(target=spin, name="spin-%d" % i, daemon=True).start()
    regex = threading.Thread(target=hog, name="regex", daemon=True)
    regex.start()
    _field.report_later(_field.expect("gil_hog", "certain", threads=["regex"],
                                      blocked=["spin-0", "spin-1", "spin-2"]),
                        settle=False, then=go.set,
                        before=_field.main_blocked_in("_wait_for_tstate_lock", "join"))
    regex.join()


if __name__ == "__main__":
    main()
