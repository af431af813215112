"""Writes line-table fixtures for tests/unit/test_linetable.c.

Run with each interpreter to cover (3.8 and later):

    python3.X tools/gen_fixtures/linetable_fixtures.py [--module NAME ...] OUTDIR [OTHER_PYTHON ...]

It compiles a generated module full of awkward line-table cases, and for every
code object in it records the raw table, co_firstlineno, the bytecode length
and the line of every 2-byte code unit. The expected line comes from the
interpreter's own PyCode_Addr2Line (via ctypes), which is what frame.f_lineno
reports, and is cross-checked against dis/co_lines()/co_positions(). Each
OTHER_PYTHON given is re-run on this script with the same arguments.
--module NAME also compiles that stdlib module's source: far too big for the
committed fixtures, but a cheap way to check the decoders on real code.
Output file: OUTDIR/pyXY.txt, format described in write_fixture().
"""

import ctypes
import dis
import os
import subprocess
import sys
import types

V = sys.version_info[:2]
KIND = 1 if V < (3, 10) else (2 if V == (3, 10) else 3)


def source():
    """A module whose functions exercise multi-entry encodings."""
    parts = []
    add = parts.append
    add("import os\n")
    add("def simple(a, b):\n    c = a + b\n    return c\n\n")
    add(
        "def multi_line_call(obj, a, b):\n"
        "    return obj.method(\n"
        "        a,\n"
        "        b +\n"
        "        a,\n"
        "    ).other(\n"
        "        b)\n\n"
    )
    add(
        "def loops(n):\n"
        "    total = 0\n"
        "    for i in range(n):\n"
        "        if i % 3 == 0:\n"
        "            continue\n"
        "        while total > 100:\n"
        "            total -= 7\n"
        "            if total == 3:\n"
        "                break\n"
        "        else:\n"
        "            total += i\n"
        "    return total\n\n"
    )
    add(
        "def exceptions(x):\n"
        "    try:\n"
        "        y = 1 / x\n"
        "    except ZeroDivisionError as e:\n"
        "        y = str(e)\n"
        "    except (TypeError, ValueError):\n"
        "        raise\n"
        "    else:\n"
        "        y = y * 2\n"
        "    finally:\n"
        "        x = None\n"
        "    with open(os.devnull) as f, open(os.devnull) as g:\n"
        "        f.read(); g.read()\n"
        "    return y\n\n"
    )
    add(
        "def comprehensions(data):\n"
        "    a = [x * 2 for x in data if x]\n"
        "    b = {k: v for k, v in\n"
        "         zip(data, data)}\n"
        "    c = {x for x in data}\n"
        "    d = list(x for x in data\n"
        "             if x > 1)\n"
        "    e = lambda q: (q +\n"
        "                   1)\n"
        "    return a, b, c, d, e\n\n"
    )
    add(
        "def closures(n):\n"
        "    def inner(m):\n"
        "        nonlocal n\n"
        "        n += m\n"
        "        return n\n"
        "    return inner\n\n"
    )
    add(
        "def generator(n):\n"
        "    for i in range(n):\n"
        "        yield i\n"
        "    yield from range(\n"
        "        n)\n\n"
    )
    add(
        "async def coroutine(x):\n"
        "    await x\n"
        "    async with x as y:\n"
        "        async for z in y:\n"
        "            await z\n"
        "    return [w async for w in x]\n\n"
    )
    add(
        "class Klass:\n"
        "    attr = 1\n"
        "    @staticmethod\n"
        "    def method(a):\n"
        "        return a\n"
        "    @property\n"
        "    def prop(self):\n"
        "        return self.attr\n\n"
    )
    # One line whose bytecode is well over 255 bytes (lnotab/3.10 byte deltas
    # split into several pairs; location entries cap at 8 code units), with
    # columns past 127 so 3.11+ needs the long form.
    long_expr = " + ".join("v%d" % (i % 10) for i in range(160))
    add(
        "def long_line(" + ", ".join("v%d" % i for i in range(10)) + "):\n"
        "    r = " + long_expr + "\n"
        "    return r\n\n"
    )
    # A body spanning many lines so jumps need EXTENDED_ARG and the loop
    # back-edge crosses hundreds of bytes.
    body = "".join("        acc = acc + i * %d\n" % k for k in range(80))
    add(
        "def long_jump(n):\n"
        "    acc = 0\n"
        "    for i in range(n):\n" + body + "    return acc\n\n"
    )
    # Forward gaps of more than 127 and 255 lines between statements.
    add("def line_gaps():\n    a = 1\n" + "\n" * 200 + "    b = 2\n" + "\n" * 400
        + "    return a + b\n\n")
    # Backward line deltas larger than 128: the call is reported on its first
    # line after evaluating arguments hundreds of lines below.
    add("def negative_gap(f, a, b):\n    return f(\n" + "\n" * 300 + "        a,\n"
        + "\n" * 150 + "        b)\n\n")
    add(
        "def conditional_expr(a, b):\n"
        "    return (a\n"
        "            if b else\n"
        "            -a)\n\n"
    )
    if V >= (3, 10):
        add(
            "def matching(p):\n"
            "    match p:\n"
            "        case (x, y):\n"
            "            return x + y\n"
            "        case {'k': v}:\n"
            "            return v\n"
            "        case _:\n"
            "            return None\n\n"
        )
    if V >= (3, 11):
        add(
            "def exception_groups(f):\n"
            "    r = None\n"
            "    try:\n"
            "        f()\n"
            "    except* ValueError:\n"
            "        r = 1\n"
            "    except* TypeError as eg:\n"
            "        r = eg\n"
            "    return r\n\n"
        )
    # Functions past line 2**16, so firstlineno and the running line need
    # more than 16 bits.
    add("\n" * 70000)
    add("def far_away(a):\n    b = a * 2\n" + "\n" * 130 + "    return b\n\n")
    add("async def far_coroutine(a):\n    return await a\n\n")
    add("x = simple(1, 2)\nfor _i in range(3):\n    x += _i\n")
    return "".join(parts)


def code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            for sub in code_objects(const):
                yield sub


def table_of(code):
    return code.co_lnotab if KIND == 1 else code.co_linetable


def addr2line():
    fn = ctypes.pythonapi.PyCode_Addr2Line
    fn.argtypes = [ctypes.py_object, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def lines_from_dis(code):
    """An independent derivation per 2-byte unit, to cross-check Addr2Line."""
    n = len(code.co_code) // 2
    out = [None] * n
    if KIND == 1:
        starts = list(dis.findlinestarts(code))
        line = code.co_firstlineno
        it = 0
        for unit in range(n):
            while it < len(starts) and starts[it][0] <= unit * 2:
                line = starts[it][1]
                it += 1
            out[unit] = line
    elif KIND == 2:
        for start, end, line in code.co_lines():
            for off in range(start, end, 2):
                out[off // 2] = -1 if line is None else line
    else:
        for unit, pos in enumerate(code.co_positions()):
            out[unit] = -1 if pos[0] is None else pos[0]
    return out


def write_fixture(path, codes):
    """Format, one record per code object:
         code NAME FIRSTLINENO CODELEN
         table HEX          ('-' when empty)
         runs OFF:LINE ...  (byte offset where a run of equal lines starts)
    The last run extends to CODELEN. Lines are -1 for "no line"."""
    fn = addr2line()
    mismatches = 0
    with open(path, "w") as out:
        out.write("# pyscope linetable fixture: %s kind %d\n" % (sys.version.split()[0], KIND))
        for code in codes:
            n = len(code.co_code)
            expected = [fn(code, off) for off in range(0, n, 2)]
            derived = lines_from_dis(code)
            for unit, (a, b) in enumerate(zip(expected, derived)):
                if a != b:
                    mismatches += 1
                    sys.stderr.write("%s: %s offset %d: Addr2Line %d, dis %s\n"
                                     % (path, code.co_name, unit * 2, a, b))
            runs = []
            for unit, line in enumerate(expected):
                if not runs or runs[-1][1] != line:
                    runs.append((unit * 2, line))
            table = table_of(code)
            name = getattr(code, "co_qualname", code.co_name).replace(" ", "_")
            out.write("code %s %d %d\n" % (name, code.co_firstlineno, n))
            out.write("table %s\n" % (table.hex() if table else "-"))
            out.write("runs %s\n" % " ".join("%d:%d" % r for r in runs))
    return mismatches


def module_source(name):
    import importlib.util
    with open(importlib.util.find_spec(name).origin, encoding="utf-8") as f:
        return f.read()


def main():
    args = sys.argv[1:]
    extra = []
    while len(args) >= 2 and args[0] == "--module":
        extra.append(args[1])
        args = args[2:]
    if not args:
        sys.exit(__doc__)
    outdir = args[0]
    os.makedirs(outdir, exist_ok=True)
    codes = list(code_objects(compile(source(), "linetable_fixture.py", "exec")))
    for name in extra:
        codes.extend(code_objects(compile(module_source(name), name, "exec")))
    path = os.path.join(outdir, "py%d%d.txt" % V)
    mismatches = write_fixture(path, codes)
    print("%s: %d code objects, %d dis mismatches" % (path, len(codes), mismatches))
    passthrough = []
    for name in extra:
        passthrough += ["--module", name]
    for other in args[1:]:
        subprocess.check_call([other, os.path.abspath(__file__)] + passthrough + [outdir])


if __name__ == "__main__":
    main()
