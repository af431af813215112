"""Writes str/bytes object images for tests/unit/test_strings.c.

    python3.X tools/gen_fixtures/str_fixtures.py OUTDIR [OTHER_PYTHON ...]

The interpreter creates a set of str objects (ASCII, Latin-1, UCS-2, UCS-4,
non-compact str-subclass instances, surrogates) and bytes objects, then
copies each object's own memory (header plus characters, and the separate
character block of non-compact strings) with ctypes.string_at. Before writing
it checks, in the live process, that the state bits and header sizes are
where pyscope expects them, so a layout change fails here first.
Output file OUTDIR/pyXY.txt; each OTHER_PYTHON is re-run with OUTDIR.
"""

import ctypes
import os
import struct
import subprocess
import sys

V = sys.version_info[:2]
ASCII_SIZE = 48 if V < (3, 12) else 40
COMPACT_SIZE = 72 if V < (3, 12) else 56
LENGTH_OFFSET = 16
STATE_OFFSET = 32
BYTES_SIZE_OFFSET = 16
BYTES_SVAL_OFFSET = 32


class Sub(str):
    """Instances of str subclasses are the legacy, non-compact layout."""


def expected_kind(s):
    top = max((ord(c) for c in s), default=0)
    return 1 if top < 256 else (2 if top < 65536 else 4)


def encode_units(s, kind):
    if kind == 1:
        return s.encode("latin-1")
    codec = "utf-16-le" if kind == 2 else "utf-32-le"
    return s.encode(codec, "surrogatepass")


def expected_utf8(s):
    """What pyscope should print: surrogates become U+FFFD."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s).encode("utf-8")


def fail(msg):
    sys.exit("%s: %s" % (sys.version.split()[0], msg))


def capture_str(name, s, regions, records):
    addr = id(s)
    state = struct.unpack("<I", ctypes.string_at(addr + STATE_OFFSET, 4))[0]
    length = struct.unpack("<q", ctypes.string_at(addr + LENGTH_OFFSET, 8))[0]
    kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
    want_kind = expected_kind(s)
    want_ascii = int(all(ord(c) < 128 for c in s))
    want_compact = int(type(s) is str)
    if (length, kind, ascii_, compact) != (len(s), want_kind, want_ascii, want_compact):
        fail("%s: length/kind/ascii/compact %r, expected %r"
             % (name, (length, kind, ascii_, compact),
                (len(s), want_kind, want_ascii, want_compact)))
    units = encode_units(s, kind) + b"\0" * kind
    if compact:
        header = ASCII_SIZE if ascii_ else COMPACT_SIZE
        regions[addr] = ctypes.string_at(addr, header + len(units))
        data = addr + header
    else:
        regions[addr] = ctypes.string_at(addr, COMPACT_SIZE + 8)
        data = struct.unpack("<Q", ctypes.string_at(addr + COMPACT_SIZE, 8))[0]
        regions[data] = ctypes.string_at(data, len(units))
    if ctypes.string_at(data, len(units)) != units:
        fail("%s: characters not found at the expected data offset" % name)
    records.append("str %s %x %d %d %d %s"
                   % (name, addr, kind, compact, ascii_, expected_utf8(s).hex() or "-"))


def capture_bytes(name, b, regions, records):
    addr = id(b)
    size = struct.unpack("<q", ctypes.string_at(addr + BYTES_SIZE_OFFSET, 8))[0]
    if size != len(b) or ctypes.string_at(addr + BYTES_SVAL_OFFSET, len(b)) != b:
        fail("%s: bytes layout differs from ob_size@16 / ob_sval@32" % name)
    regions[addr] = ctypes.string_at(addr, BYTES_SVAL_OFFSET + len(b) + 1)
    records.append("bytes %s %x %s" % (name, addr, b.hex() or "-"))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    # Built at run time so that none of them is a shared, interned constant.
    strings = [
        ("empty", "".join([])),
        ("ascii", "".join(["hel", "lo"])),
        ("latin1", "".join(["funci", "\u00f3n_se\u00f1al"])),
        ("ucs2", "".join(["\u65e5\u672c", "\u8a9e"])),
        ("ucs4", "".join(["emoji ", "\U0001F600 ok"])),
        ("max_code_point", "".join(["\U0010FFFF", " max"])),
        ("lone_surrogate", "".join(["\ud800", " lone"])),
        ("surrogate_pair_units", "".join(["\ud83d", "\ude00"])),
        ("embedded_nul", "".join(["x\0", "y"])),
        ("controls", "".join(["tab\t", "nl\n\x01"])),
        ("long_latin1", "".join(["a" * 300, "\u00e9"])),
        ("long_ucs2", "".join(["\u0100" * 600, "z"])),
        ("sub_ascii", Sub("plain ascii")),
        ("sub_latin1", Sub("h\u00e9llo w\u00f6rld")),
        ("sub_ucs2", Sub("\u65e5\u672c")),
        ("sub_ucs4", Sub("\U0001F600!")),
    ]
    blobs = [
        ("bytes_empty", b"".join([])),
        ("bytes_short", b"".join([b"abc", b"\x00\xff"])),
        ("bytes_all", bytes(range(256))),
    ]
    regions = {}
    records = []
    for name, s in strings:
        capture_str(name, s, regions, records)
    for name, b in blobs:
        capture_bytes(name, b, regions, records)
    path = os.path.join(outdir, "py%d%d.txt" % V)
    with open(path, "w") as out:
        out.write("# pyscope str fixture: %s\n" % sys.version.split()[0])
        out.write("header %d %d\n" % (ASCII_SIZE, COMPACT_SIZE))
        for rec in records:
            out.write(rec + "\n")
        for addr in sorted(regions):
            out.write("mem %x %s\n" % (addr, regions[addr].hex()))
    print("%s: %d objects, %d memory regions" % (path, len(records), len(regions)))
    for other in sys.argv[2:]:
        subprocess.check_call([other, os.path.abspath(__file__), outdir])


if __name__ == "__main__":
    main()
