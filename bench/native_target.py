"""Benchmark target: 50 threads, each 10 Python frames deep, blocked on an
Event; prints "ready" when all are parked."""
import threading
import time

N_THREADS = 50
DEPTH = 10
stop = threading.Event()
parked = threading.Semaphore(0)


def recurse(depth, index):
    payload = {"thread": index, "depth": depth}
    if depth:
        return recurse(depth - 1, index)
    parked.release()
    stop.wait()
    return payload


for i in range(N_THREADS):
    threading.Thread(target=recurse, args=(DEPTH, i), name="worker-%d" % i, daemon=True).start()
for _ in range(N_THREADS):
    parked.acquire()
print("ready", flush=True)
while True:
    time.sleep(3600)
