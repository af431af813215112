"""Target: values users meet in real programs and that a naive repr gets
wrong or cannot show: a 5,000,000-character str and a 3,000,000-byte bytes
(readable, only long), a str holding a lone surrogate (as os.fsdecode makes
of undecodable file names) and other characters repr() escapes, and
instances of ordinary classes (a tree of Nodes, one with many attributes,
one with __slots__ and no __dict__).

A thread "holder" blocks in Node.hold, called from Tree.visit, so `self` is
a Node in one frame and a Tree (or a threading object) in the others.

extra.expected maps each local of Node.hold to the text pyscope must show,
built from repr() of the shown part and the objects' own id()s.

usage: python locals_big.py REPORT.json
"""

import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402

MAX_CHARS, MAX_ITEMS, MAX_DEPTH = 120, 8, 3   # pyscope's documented defaults


class Node:
    def __init__(self, depth, child):
        self.depth = depth
        self.child = child

    def hold(self, chain):
        big = "a" * 5000000
        big_bytes = b"x" * 3000000
        bad = b"bad\xffbyte".decode("utf-8", "surrogateescape")
        odd = "nb\xa0sp\u200bzw\u2028ls\ue000pu\U0001F40D\x7f"
        wide = Wide()
        slotted = Slotted()
        expected = {
            "big": "'" + "a" * MAX_CHARS + "\u2026' (5,000,000 chars)",
            "big_bytes": "b'" + "x" * MAX_CHARS + "\u2026' (3,000,000 bytes)",
            "bad": repr(bad),
            "odd": repr(odd),
            "self": "Node(depth=500, child=None)",
            "chain": summary(chain, 0),
            "wide": "Wide(" + ", ".join("a%d=%d" % (i, i) for i in range(MAX_ITEMS)) + ", ...)",
            "slotted": "<Slotted object at 0x%x>" % id(slotted),
        }
        RESULT.update(expected=expected, self_depth=self.depth)
        READY.set()
        BLOCK.acquire()  # park-here


class Tree:
    def __init__(self, root):
        self.root = root

    def visit(self, chain):
        self.root.hold(chain)


class Wide:
    def __init__(self):
        for i in range(12):
            setattr(self, "a%d" % i, i)


class Slotted:
    __slots__ = ("x",)

    def __init__(self):
        self.x = 1


def summary(node, depth):
    """What the instance summary must be, from the program's own objects."""
    if node is None:
        return "None"
    if depth >= MAX_DEPTH:
        return "<Node object at 0x%x>" % id(node)
    return "Node(depth=%d, child=%s)" % (node.depth, summary(node.child, depth + 1))


RESULT = {}
READY = threading.Event()
BLOCK = threading.Lock()


def main():
    path = _target.report_path()
    BLOCK.acquire()
    chain = None
    for depth in range(1, 6):
        chain = Node(depth, chain)
    tree = Tree(Node(500, None))
    threading.Thread(target=tree.visit, args=(chain,), name="holder", daemon=True).start()
    READY.wait()
    _target.park(__file__, path, extra=RESULT)


if __name__ == "__main__":
    main()
