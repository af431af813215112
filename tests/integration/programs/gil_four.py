"""Truth workload for GIL states under CPU contention (issue 19, item 7):
four threads run pure-Python loops until killed, contending for the GIL; the
main thread joins them. Run beside a CPU hog, on fewer cores than runnable
threads, a waiter spends a visible share of its time runnable or on a CPU
between the futex wake-up and taking the GIL.

Writes "<native tid> <role>" lines (py-loop-1..4, main) to $GIL_TRUTH_LABELS,
as the workloads of shared/tools/gil_workloads do; runs on 3.8-3.15.
"""
import os
import threading


def label(role):
    path = os.environ.get("GIL_TRUTH_LABELS")
    if path:
        with open(path, "a") as f:
            f.write("%d %s\n" % (threading.get_native_id(), role))


def spin(role):
    label(role)
    total = 0
    while True:
        for i in range(100000):
            total += i


def main():
    label("main")
    threads = [threading.Thread(target=spin, args=("py-loop-%d" % k,), daemon=True)
               for k in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
