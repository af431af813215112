"""Target: a thread "handler" blocked inside Server.handle, whose arguments
and locals cover every type pyscope renders (None, bool, small and big int,
float, str with non-ASCII, bytes, tuple, list, dict, set, a cycle, a deep
nest, a long list and plain instances), plus a cell variable.

extra.expected maps each local whose repr pyscope must reproduce exactly to
repr(value); extra.kinds gives the kind pyscope reports.

usage: python locals_values.py REPORT.json
"""

import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402


class Pool:
    def __init__(self):
        self.free_lists = [3, 1, 2]
        self.name = "pool-\u03b1"


class Server:
    def __init__(self):
        self.pool = Pool()

    def handle(self, request, *args, limit=5, **options):
        nothing = None
        yes, no = True, False
        small, negative = 42, -7
        big = 2 ** 200
        big_negative = -(10 ** 50)
        pi, huge, infinite = 3.14, 1e100, float("inf")
        text = "h\u00e9llo w\u00f6rld \u2713 \U0001F40D"
        quote = "it's"
        raw = b"\x00ab'\n"
        triple = (1, "two", 3.0)
        single = (1,)
        nested = [1, [2, [3, [4, [5]]]]]
        mapping = {"a": 1, "b": [1, 2]}
        one_set = {1}
        empty_set = set()
        frozen = frozenset()
        long_list = list(range(100))
        long_text = "x" * 1000
        cycle = []
        cycle.append(cycle)
        captured = "in a cell"

        def inner():
            return captured

        expected = {}
        for name in ("request", "limit", "nothing", "yes", "no", "small", "negative", "big",
                     "big_negative", "pi", "huge", "infinite", "text", "quote", "raw", "triple",
                     "single", "mapping", "one_set", "empty_set", "frozen", "captured", "args"):
            expected[name] = repr(locals()[name])
        kinds = {"self": "arg", "request": "arg", "args": "arg", "limit": "arg",
                 "options": "arg", "small": "local", "captured": "cell"}
        special = {"nested": "[1, [2, [3, <list len=2>]]]",
                   "long_list": "[0, 1, 2, 3, 4, 5, 6, 7, ...] (len=100)",
                   "long_text": "'" + "x" * 120 + "\u2026' (1,000 chars)",
                   "cycle": "[[...]]",
                   "self": "Server(pool=Pool(free_lists=%r, name=%r))"
                           % (self.pool.free_lists, self.pool.name)}
        RESULT.update(expected=expected, kinds=kinds, special=special, self_id=id(self))
        READY.set()
        BLOCK.acquire()


RESULT = {}
READY = threading.Event()
BLOCK = threading.Lock()


def main():
    path = _target.report_path()
    BLOCK.acquire()
    server = Server()
    threading.Thread(target=server.handle, args=("GET /", 10, "x"),
                     kwargs={"limit": 3, "verbose": True}, name="handler",
                     daemon=True).start()
    READY.wait()
    _target.park(__file__, path, extra=RESULT)


if __name__ == "__main__":
    main()
