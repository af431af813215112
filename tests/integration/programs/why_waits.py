"""Target: one thread in each kind of blocking call that is not a lock:
select on a pipe and a socket, epoll, poll with a timeout, waiting for a
child process, time.sleep, a read from a pipe, and three threading waits (Semaphore, Event
with a timeout, Condition). The main thread keeps everything alive, so
nothing is stuck for good.

usage: python why_waits.py REPORT.json
"""

import os
import select
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def selecter(pipe_read, sock):
    select.select([pipe_read, sock], [], [])


def epoller(sock):
    watcher = select.epoll()
    watcher.register(sock.fileno(), select.EPOLLIN)
    watcher.poll()


def poller(sock):
    watcher = select.poll()
    watcher.register(sock, select.POLLIN)
    watcher.poll(3600 * 1000)


def child_waiter(child):
    child.wait()


def pipe_reader(fd):
    os.read(fd, 1)


def sleeper():
    time.sleep(3600)


def semaphore_waiter(sem):
    sem.acquire()


def event_waiter(event):
    event.wait(3600)


def condition_waiter(cond):
    with cond:
        cond.wait()


def main():
    path = _target.report_path()
    pipe_read, pipe_write = os.pipe()
    quiet_read, quiet_write = os.pipe()
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    e, f = socket.socketpair()
    child = subprocess.Popen(["sleep", "3600"])
    sem, event, cond = threading.Semaphore(0), threading.Event(), threading.Condition()
    threads = (("selecter", selecter, (pipe_read, a)), ("epoller", epoller, (c,)),
               ("poller", poller, (e,)), ("child-waiter", child_waiter, (child,)),
               ("sleeper", sleeper, ()), ("pipe-reader", pipe_reader, (quiet_read,)), ("semaphore-waiter", semaphore_waiter, (sem,)),
               ("event-waiter", event_waiter, (event,)),
               ("condition-waiter", condition_waiter, (cond,)))
    for name, target, args in threads:
        threading.Thread(target=target, args=args, name=name, daemon=True).start()
    extra = {"pipe_read": pipe_read, "quiet_read": quiet_read, "select_socket": a.fileno(), "epoll_socket": c.fileno(),
             "poll_socket": e.fileno(), "child": child.pid, "semaphore": id(sem),
             "event": id(event), "condition": id(cond)}
    try:
        _target.park(__file__, path, extra=extra)
    finally:
        child.kill()


if __name__ == "__main__":
    main()
