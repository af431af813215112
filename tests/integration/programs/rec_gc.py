"""Target for `pyscope record` GC accounting: a thread ("collector") keeps a
large graph of objects in reference cycles alive and runs gc.collect() on it
in a loop, pausing 20 ms between collections so that they can be told apart,
and spends most of its time inside the collector. The main thread sleeps.

usage: python rec_gc.py REPORT.json [NODES]
"""

import gc
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402


class Node:
    def __init__(self, prev):
        self.prev = prev
        self.items = [prev, {"node": prev}]


def build(count):
    head = Node(None)
    node = head
    for _ in range(count):
        node = Node(node)
    head.prev = node          # one big cycle
    return head


def collect_forever(graph):
    while True:
        gc.collect()
        time.sleep(0.02)


def main():
    path = _target.report_path()
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
    graph = build(nodes)
    threading.Thread(target=collect_forever, args=(graph,), name="collector",
                     daemon=True).start()
    _target.park(__file__, path, settle=False,
                 extra={"thread": "collector", "function": "collect_forever", "nodes": nodes})


if __name__ == "__main__":
    main()
