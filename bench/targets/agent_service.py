"""Bench target for pyscope agent: a service-like process with THREADS
threads (default 10, the main one included). Every worker waits in
time.sleep a few frames down and wakes every WAKE seconds (default 0.05) to
do a little work, so stacks and states change under the sampler; the main
thread sleeps. A larger WAKE makes a quiet service, whose threads mostly
stay where they were between two passes.

usage: python agent_service.py [THREADS [MARKER [WAKE]]]
"""

import sys
import threading
import time


def handle(n):
    total = 0
    for i in range(200):
        total += i * n
    return total


def serve(n, wake):
    while True:
        handle(n)
        time.sleep(wake)


def worker(n, wake):
    serve(n, wake)


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    wake = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
    for n in range(threads - 1):
        threading.Thread(target=worker, args=(n, wake), name="worker-%d" % n, daemon=True).start()
    print("ready", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
