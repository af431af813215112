"""Target whose thread list reads as a cycle, as a reader sees it when a
thread exits and a new thread state takes its memory while the list is being
followed: three sleeping threads, and the last thread state's `next` is made
to point back at the head (through ctypes, with the public C API to find the
thread states; `next` is the second pointer of PyThreadState in 3.8-3.15).

Nothing in the parked process walks the list again (no thread starts or
exits, nothing calls sys._current_frames); it is killed, never left to exit.

usage: python thread_cycle.py REPORT.json
"""

import ctypes
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def sleeper():
    while True:
        time.sleep(3600)


def main():
    path = _target.report_path()
    for index in range(3):
        threading.Thread(target=sleeper, name="sleeper-%d" % index, daemon=True).start()
    _target.wait_settled()
    api = ctypes.pythonapi
    for name in ("PyInterpreterState_Head", "PyInterpreterState_ThreadHead",
                 "PyThreadState_Next"):
        getattr(api, name).restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
    api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
    head = api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Head())
    states = [head]
    while True:
        nxt = api.PyThreadState_Next(states[-1])
        if not nxt:
            break
        states.append(nxt)
    # The report is taken before the cycle exists: building it walks the list.
    report = _target.build_report(__file__, extra={"thread_states": len(states)})
    frames = _target.describe(sys._getframe())
    frames[0]["line"] = _target.marker_line(main, "# cycle-park")
    report["threads"] = [dict(t, frames=frames) if t["ident"] == threading.get_ident() else t
                         for t in report["threads"]]
    ctypes.c_void_p.from_address(states[-1] + ctypes.sizeof(ctypes.c_void_p)).value = head
    _target.write_report(path, report)
    while True:
        time.sleep(3600)  # cycle-park


if __name__ == "__main__":
    main()
