"""Benchmark target: N threads, each blocked D Python frames deep.

Prints "ready" on stdout once every thread has reached its full depth, then
waits until killed.
usage: python sleep_deep.py THREADS DEPTH
"""
import sys
import threading


def descend(depth, reached, release):
    if depth <= 1:
        reached.release()
        release.wait()
        return 0
    return descend(depth - 1, reached, release) + 1


def main():
    threads, depth = int(sys.argv[1]), int(sys.argv[2])
    reached = threading.Semaphore(0)
    release = threading.Event()
    for i in range(threads):
        threading.Thread(target=descend, args=(depth, reached, release),
                         name="deep-%d" % i, daemon=True).start()
    for _ in range(threads):
        reached.acquire()
    print("ready", flush=True)
    release.wait()


if __name__ == "__main__":
    main()
