"""The program bench_watch.py times: it calls one function N times, never
re-entering it, and prints how long the calls took. It says "ready" and
waits for a line on stdin before it starts, so that pyscope can attach and
find the function first.

usage: python watch_target.py N python
       python watch_target.py N generator         (a generator resumed N times)
       python watch_target.py N others            (another Python function, N times)
       python watch_target.py N native LIBRARY   (LIBRARY from watch_native.c)
"""
import ctypes
import sys
import time


class Pool:
    def __init__(self):
        self.free_sizes = [0, 64, 128, 256, 512, 1 << 20]

    def _append_to_free_list(self, size):
        seen = set()
        index = 0
        while self.free_sizes[index] < size:
            seen.add(index)
            index += 1
        self.free_sizes.insert(index, size)
        del self.free_sizes[index]

    def _appender(self):
        """The same append as a generator, sent each size."""
        while True:
            size = yield
            self._append_to_free_list(size)


def other_call(size):
    """Not watched: what each other Python call of a program pays while
    FUNC is watched (without debug registers every frame start is a
    breakpoint)."""
    return size + 1


def main():
    n, mode = int(sys.argv[1]), sys.argv[2]
    pool = Pool()
    if mode == "native":
        append = ctypes.CDLL(sys.argv[3]).pyscope_bench_append
        append.argtypes = [ctypes.c_int]
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.perf_counter()
    if mode == "native":
        for i in range(n):
            append(i % 997)
    elif mode == "others":
        for i in range(n):
            other_call(i % 997)
    elif mode == "generator":
        appender = pool._appender()
        appender.send(None)
        for i in range(n):
            appender.send(i % 997)
    else:
        for i in range(n):
            pool._append_to_free_list(i % 997)
    print("elapsed %.6f" % (time.perf_counter() - start), flush=True)


if __name__ == "__main__":
    main()
