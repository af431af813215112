"""The bundled demo: a small service with the usual suspects.

Two workers compete for the GIL, one waits on a lock that is never released,
one waits on a socket that never receives, and the main thread joins them.
"""
import socket
import threading
import time


def checksum(n):
    total = 0
    for i in range(n):
        total = (total * 31 + i) % 1000003
    return total


def compute(rounds):
    while True:
        checksum(rounds)


def wait_for_config(lock):
    with lock:
        pass


def read_reply(sock):
    return sock.recv(1024)


def main():
    stuck = threading.Lock()
    stuck.acquire()
    left, right = socket.socketpair()
    workers = [
        threading.Thread(target=compute, args=(200000,), name="worker-1", daemon=True),
        threading.Thread(target=compute, args=(300000,), name="worker-2", daemon=True),
        threading.Thread(target=wait_for_config, args=(stuck,), name="config-loader", daemon=True),
        threading.Thread(target=read_reply, args=(left,), name="rpc-client", daemon=True),
    ]
    for w in workers:
        w.start()
    print("demo running; pid", threading.get_native_id(), flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
