"""Writes the fuzz seed corpus: a minimal synthetic core (one PT_LOAD, the
notes pyscope reads: PRSTATUS, PRPSINFO, SIGINFO, AUXV, FILE), a truncated
copy, the core compressed four ways (zstd and lz4 need their command-line
tools), and a small ELF shared object. Run from the repository root:
    python3 tests/fuzz/make_seeds.py
"""
import gzip
import lzma
import os
import struct
import subprocess
import tempfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def note(name, ntype, desc):
    name = name.encode() + b"\0"
    pad = lambda b: b + b"\0" * ((4 - len(b) % 4) % 4)
    return struct.pack("<III", len(name), len(desc), ntype) + pad(name) + pad(desc)


def synthetic_core():
    prstatus = bytearray(336)
    struct.pack_into("<h", prstatus, 12, 11)           # pr_cursig
    struct.pack_into("<i", prstatus, 32, 4242)         # pr_pid
    regs = [0] * 27
    regs[15] = 2**64 - 1                               # orig_rax: not in a syscall
    regs[16] = 0x401000                                # rip
    regs[19] = 0x7ffd0000f000                          # rsp
    struct.pack_into("<27Q", prstatus, 112, *regs)
    prpsinfo = bytearray(136)
    struct.pack_into("<i", prpsinfo, 24, 4242)
    prpsinfo[40:46] = b"python"
    prpsinfo[56:70] = b"python3 app.py"
    siginfo = bytearray(128)
    struct.pack_into("<iii", siginfo, 0, 11, 0, 1)
    auxv = struct.pack("<QQQQ", 9, 0x401000, 0, 0)
    path = b"/usr/bin/python3.11\0"
    nt_file = struct.pack("<QQ", 1, 4096) + struct.pack("<QQQ", 0x400000, 0x402000, 0) + path
    notes = (note("CORE", 1, bytes(prstatus)) + note("CORE", 3, bytes(prpsinfo)) +
             note("CORE", 0x53494749, bytes(siginfo)) + note("CORE", 6, auxv) +
             note("CORE", 0x46494C45, nt_file))
    phnum = 3
    notes_off = 64 + 56 * phnum
    data_off = (notes_off + len(notes) + 4095) & ~4095
    memory = bytes(range(256)) * 16
    ehdr = (b"\x7fELF\x02\x01\x01" + b"\0" * 9 +
            struct.pack("<HHIQQQIHHHHHH", 4, 62, 1, 0, 64, 0, 0, 64, 56, phnum, 0, 0, 0))
    ph = struct.pack("<IIQQQQQQ", 4, 0, notes_off, 0, 0, len(notes), 0, 4)
    ph += struct.pack("<IIQQQQQQ", 1, 6, data_off, 0x7ffd0000e000, 0, len(memory), 0x2000, 4096)
    ph += struct.pack("<IIQQQQQQ", 1, 5, 0, 0x400000, 0, 0, 0x2000, 4096)
    out = ehdr + ph + notes
    out += b"\0" * (data_off - len(out)) + memory
    return out


def small_elf():
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "t.c")
        so = os.path.join(tmp, "t.so")
        with open(src, "w") as f:
            f.write("int _PyRuntime[4] = {1, 2, 3, 4};\n"
                    "const unsigned Py_Version = 0x030b07f0;\n"
                    "const char version[] = \"3.11.7\";\n")
        subprocess.check_call(["gcc", "-shared", "-nostdlib", "-Os", "-s", "-Wl,--build-id",
                               "-Wl,-z,noseparate-code", "-Wl,-z,max-page-size=64",
                               "-o", so, src])
        with open(so, "rb") as f:
            return f.read()


def main():
    core = synthetic_core()
    os.makedirs(os.path.join(OUT, "core"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "elf"), exist_ok=True)
    with open(os.path.join(OUT, "core", "synthetic.core"), "wb") as f:
        f.write(core)
    with open(os.path.join(OUT, "core", "truncated.core"), "wb") as f:
        f.write(core[:700])
    compressed = {"xz": lzma.compress(core), "gz": gzip.compress(core, mtime=0)}
    for ext, tool in (("zst", "zstd"), ("lz4", "lz4")):
        compressed[ext] = subprocess.run([tool, "-q", "-c"], input=core, stdout=subprocess.PIPE,
                                         check=True).stdout
    for ext, data in compressed.items():
        with open(os.path.join(OUT, "core", "synthetic.core." + ext), "wb") as f:
            f.write(data)
    with open(os.path.join(OUT, "elf", "small.so"), "wb") as f:
        f.write(small_elf())


if __name__ == "__main__":
    main()
