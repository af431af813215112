"""Target: one thread in time.sleep, one in Lock.acquire on a lock that is
never released, one in socket.recv on a socketpair that never gets data.

usage: python blocking.py REPORT.json
"""

import socket
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


def sleeper():
    while True:
        time.sleep(3600)


def lock_waiter(lock):
    lock.acquire()


def socket_reader(sock):
    sock.recv(1)


def main():
    path = _target.report_path()
    held = threading.Lock()
    held.acquire()
    # Keep both ends referenced for the life of the process: closing the
    # peer would make recv return.
    reader_end, writer_end = socket.socketpair()
    roles = {"sleeper": "sleep", "lock-waiter": "lock", "socket-reader": "socket"}
    threading.Thread(target=sleeper, name="sleeper", daemon=True).start()
    threading.Thread(target=lock_waiter, args=(held,), name="lock-waiter",
                     daemon=True).start()
    threading.Thread(target=socket_reader, args=(reader_end,),
                     name="socket-reader", daemon=True).start()
    _target.park(__file__, path, extra={"roles": roles,
                                        "sockets": [reader_end.fileno(),
                                                    writer_end.fileno()]})


if __name__ == "__main__":
    main()
