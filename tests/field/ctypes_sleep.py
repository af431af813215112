"""A C function called through ctypes.PyDLL blocks while holding the GIL.

Source: the ctypes documentation ("PyDLL: ... the Python GIL is not
released during the function call") and the many C-extension reports of a
blocking call made without Py_BEGIN_ALLOW_THREADS (e.g. gh-81277 on
readline, psycopg2 issue 1286). Reproduced from pyscope issue 11.

The "blocker" thread calls libc's sleep(3600) through PyDLL; two threads
that want the GIL starve.

Senior engineer: gil_held_while_blocked, certain: blocker holds the GIL
while blocked in clock_nanosleep; the two others wait for the GIL.
"""

import ctypes
import threading

import _field

go = threading.Event()


def spin():
    n = 0
    while True:
        n += 1


def blocker():
    go.wait()
    ctypes.PyDLL(None).sleep(3600)


def main():
    for i in range(2):
        threading.Thread(target=spin, name="spin-%d" % i, daemon=True).start()
    b = threading.Thread(target=blocker, name="blocker", daemon=True)
    b.start()
    _field.report_later(_field.expect("gil_held_while_blocked", "certain", threads=["blocker"],
                                      blocked=["spin-0", "spin-1"]),
                        settle=False, then=go.set,
                        before=_field.main_blocked_in("_wait_for_tstate_lock", "join"))
    b.join()


if __name__ == "__main__":
    main()
