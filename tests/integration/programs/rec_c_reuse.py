"""Target for C callables freed and their memory reused: every round calls
a poll object's poll() for 30 ms through a bound method made for the call
(f = p.poll), under via_poll(), then an epoll object's poll() for 60 ms the
same way, under via_epoll(). Each bound method is freed when its call
returns, and the next one, of the same size, usually takes its memory. A
sampler that names a callable by its address alone shows via_epoll() in
[C] select.poll.poll, or via_poll() in [C] select.epoll.poll.

usage: python rec_c_reuse.py REPORT.json
"""

import select
import threading

import _target


def via_poll(p):
    f = p.poll
    f(30)


def via_epoll(ep):
    f = ep.poll
    f(0.06)


def rounds():
    p = select.poll()
    ep = select.epoll()
    while True:
        via_poll(p)
        via_epoll(ep)


def main():
    path = _target.report_path()
    threading.Thread(target=rounds, name="reuser", daemon=True).start()
    _target.park(__file__, path, settle=False, extra={"thread": "reuser"})


if __name__ == "__main__":
    main()
