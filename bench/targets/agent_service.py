"""Bench target for pyscope agent: a service-like process with THREADS
threads (default 10, the main one included). Every worker waits in
time.sleep a few frames down and wakes every 50 ms to do a little work, so
stacks and states change under the sampler; the main thread sleeps.

usage: python agent_service.py [THREADS]
"""

import sys
import threading
import time


def handle(n):
    total = 0
    for i in range(200):
        total += i * n
    return total


def serve(n):
    while True:
        handle(n)
        time.sleep(0.05)


def worker(n):
    serve(n)


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    for n in range(threads - 1):
        threading.Thread(target=worker, args=(n,), name="worker-%d" % n, daemon=True).start()
    print("ready", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
