"""Integration tests for issue #15: core files as users have them.
Compressed cores (zstd, lz4, xz, gzip) read directly and recognised by their
bytes, not their names; truncated and corrupt archives refused in one line.

The cores are those of tests/integration/programs/native_crash.py (a ctypes
NULL dereference in thread "parser"), written by `pyscope run --core-dir`,
compressed by the formats' own command-line tools."""

import json
import os
import re
import resource
import signal
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import PROGRAMS, pick_interp, run_pyscope
from test_native import (callthrough_lib, check_crash_report, gcore,  # noqa: F401
                         kernel_core_pattern, run_crash, uses_own_glibc)
from test_why import by_name, check_lock_wait, explain, finding_tids, tids

COMPRESSORS = {
    "zstd": ["zstd", "-q", "-c"],
    "lz4": ["lz4", "-q", "-c"],
    "xz": ["xz", "-T1", "-0", "-c"],
    "gzip": ["gzip", "-1", "-c"],
}


def compress(kind, src, dst):
    tool = COMPRESSORS[kind]
    if shutil.which(tool[0]) is None:
        pytest.skip("%s not installed (make test-deps installs it)" % tool[0])
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        subprocess.run(tool, stdin=fin, stdout=fout, check=True, timeout=120)
    return dst


def dump_json(*args):
    result = run_pyscope(["dump", "--json"] + [str(a) for a in args], timeout=30)
    assert result.returncode == 0, result
    return json.loads(result.stdout, object_pairs_hook=strict_object)


def strict_object(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), "duplicate keys in %s" % keys
    return dict(pairs)


def crash_core(interp, callthrough_lib, tmp_path):
    result, _, cores = run_crash(interp, callthrough_lib, tmp_path)
    assert result.returncode == 139, result
    [core] = list(cores.iterdir())
    return core


def test_compressed_cores(interp, callthrough_lib, tmp_path):
    core = crash_core(interp, callthrough_lib, tmp_path)
    plain = dump_json("--core", core, "--native", "--locals")
    assert plain["core"] == {"path": str(core), "compression": None}
    for kind in COMPRESSORS:
        # A name that says nothing: the format is told by the file's bytes.
        packed = compress(kind, core, tmp_path / ("crash-%s.bin" % kind))
        doc = dump_json("--core", packed, "--native", "--locals")
        assert doc["core"] == {"path": str(packed), "compression": kind}
        check_crash_report(doc, interp, from_core=True)
        doc["core"] = plain["core"]
        assert doc == plain, kind
    # With TMPDIR set the core is expanded into an unlinked file there.
    spool = tmp_path / "spool"
    spool.mkdir()
    result = run_pyscope(["dump", "--json", "-v", "--core", packed, "--native", "--locals"],
                         prefix=("env", "TMPDIR=%s" % spool), timeout=30)
    assert result.returncode == 0, result
    assert "(in %s)" % spool in result.stderr, result.stderr
    doc = json.loads(result.stdout, object_pairs_hook=strict_object)
    doc["core"] = plain["core"]
    assert doc == plain
    assert list(spool.iterdir()) == []
    text = run_pyscope(["dump", "--core", packed]).stdout
    assert text.startswith("Core file %s (gzip-compressed) of process %d  "
                           % (packed, plain["pid"])), text[:300]


def test_expansion_kept_for_the_next_look(callthrough_lib, tmp_path):
    """A large compressed core is expanded once: the expansion is kept in the
    cache under the compressed file's identity, and the next look reads it
    instead of expanding again, with the same report. The kept copy is the
    kernel's core, byte for byte. A changed file is expanded anew; small
    cores are not kept; a cache directory others may write to is not used.
    (PYSCOPE_CORE_CACHE_MIN=0 makes this small core count as large.)"""
    core = crash_core(pick_interp(), callthrough_lib, tmp_path)
    plain = dump_json("--core", core, "--native", "--locals")
    packed = compress("zstd", core, tmp_path / "crash.zst")
    cache = tmp_path / "cache"
    env = ("env", "PYSCOPE_CORE_CACHE=%s" % cache, "PYSCOPE_CORE_CACHE_MIN=0")

    def look(prefix=env):
        result = run_pyscope(["dump", "--json", "-v", "--core", packed, "--native", "--locals"],
                             prefix=prefix, timeout=30)
        assert result.returncode == 0, result
        doc = json.loads(result.stdout, object_pairs_hook=strict_object)
        assert doc["core"] == {"path": str(packed), "compression": "zstd"}
        doc["core"] = plain["core"]
        assert doc == plain
        return result.stderr

    first = look()
    [kept] = list(cache.iterdir())
    assert "expanded to %d bytes (in %s) in " % (core.stat().st_size, kept) in first, first
    assert ", kept for the next look\n" in first, first
    assert kept.read_bytes() == core.read_bytes()
    assert oct(kept.stat().st_mode & 0o777) == oct(0o600)
    assert oct(cache.stat().st_mode & 0o777) == oct(0o700)
    second = look()
    assert ("zstd, the expansion an earlier look kept (%s, %d bytes), opened in"
            % (kept, core.stat().st_size)) in second, second
    assert "expanded to" not in second
    # Another file under the same name is another key.
    packed.write_bytes(packed.read_bytes())
    third = look()
    assert ", kept for the next look\n" in third, third
    assert len(list(cache.iterdir())) == 2
    # Without the test's threshold this core is too small to keep.
    small = tmp_path / "small-cache"
    assert "(in memory)" in look(("env", "PYSCOPE_CORE_CACHE=%s" % small))
    assert not small.exists()
    # Off, or a directory anyone may write to: expanded, nothing kept.
    assert "(in memory)" in look(("env", "PYSCOPE_CORE_CACHE=off", "PYSCOPE_CORE_CACHE_MIN=0"))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert "(in memory)" in look(("env", "PYSCOPE_CORE_CACHE=%s" % shared,
                                   "PYSCOPE_CORE_CACHE_MIN=0"))
    assert list(shared.iterdir()) == []


@pytest.fixture(scope="module")
def debian_core(tmp_path_factory, callthrough_lib):
    """One real crash core, of Debian's python3.11, for the tests of bad files."""
    python = Path("/usr/bin/python3.11")
    if not python.exists():
        pytest.skip("needs /usr/bin/python3.11")
    cores = tmp_path_factory.mktemp("cores")
    result = run_pyscope(["run", "--core-dir", cores, "--", python, PROGRAMS / "native_crash.py",
                          callthrough_lib], timeout=60)
    assert result.returncode == 139, result
    [core] = list(cores.iterdir())
    return core


def one_line_error(result, fragment):
    assert result.returncode == 2, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pyscope: ") and fragment in lines[0], \
        result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_truncated_and_corrupt_archives(kind, debian_core, tmp_path, pyscope):
    packed = compress(kind, debian_core, tmp_path / "core.packed")
    data = packed.read_bytes()
    # Cut anywhere: in the middle, or just before the stream's checksum.
    for size in (len(data) // 2, len(data) - 3):
        cut = tmp_path / ("cut-%d" % size)
        cut.write_bytes(data[:size])
        one_line_error(pyscope("dump", "--core", cut),
                       "%s is a truncated %s file" % (cut, kind))
    # Bytes flipped in the middle: the decoder or the stream's checksum notices.
    middle = len(data) // 2
    bad = tmp_path / "corrupt"
    bad.write_bytes(data[:middle] + bytes(b ^ 0x5A for b in data[middle:middle + 64])
                    + data[middle + 64:])
    one_line_error(pyscope("dump", "--core", bad), "%s is a corrupt %s file" % (bad, kind))


def test_compressed_file_that_is_not_a_core(tmp_path, pyscope):
    text = tmp_path / "notes.txt"
    text.write_text("not a core\n" * 1000)
    packed = compress("gzip", text, tmp_path / "notes.gz")
    one_line_error(pyscope("dump", "--core", packed),
                   "%s is gzip-compressed, but what it holds is not an ELF core file" % packed)


# --------------------------------------------------------------------------
# systemd-coredump's store: --core PID and --core latest

BOOT_ID = "3f1c5e0a9b2d4c6e8f0a1b2c3d4e5f60"
OLD_BOOT_ID = "0123456789abcdef0123456789abcdef"


def debian_crash(callthrough_lib, cores):
    result = run_pyscope(["run", "--core-dir", cores, "--", "/usr/bin/python3.11",
                          PROGRAMS / "native_crash.py", callthrough_lib], timeout=60)
    assert result.returncode == 139, result
    return max(cores.iterdir(), key=lambda p: p.stat().st_mtime)


def store_name(pid, usec, boot=BOOT_ID, ext=""):
    # systemd-coredump escapes the '.' of the command name as \x2e.
    return "core.python3\\x2e11.0.%s.%d.%d%s" % (boot, pid, usec, ext)


def test_coredump_store(callthrough_lib, tmp_path):
    if not Path("/usr/bin/python3.11").exists():
        pytest.skip("needs /usr/bin/python3.11")
    made = tmp_path / "made"
    made.mkdir()
    store = tmp_path / "coredump"
    store.mkdir()
    crashes = []
    for _ in range(3):
        core = debian_crash(callthrough_lib, made)
        crashes.append((int(core.name.split(".")[1]), core))
    base = 1764583323000000
    # Stored the ways systemd-coredump stores them: zstd (its default), lz4, plain.
    (a_pid, a), (b_pid, b), (c_pid, c) = crashes
    names = {
        a_pid: compress("zstd", a, store / store_name(a_pid, base + 3000000, ext=".zst")),
        b_pid: compress("lz4", b, store / store_name(b_pid, base + 1000000, ext=".lz4")),
        c_pid: store / store_name(c_pid, base + 2000000),
    }
    shutil.copy(c, names[c_pid])
    # The same PID in an earlier boot, and files that are not cores of the store.
    shutil.copy(c, store / store_name(a_pid, base, boot=OLD_BOOT_ID))
    (store / "core.notes.txt").write_text("not a store entry\n")
    (store / store_name(4242, base + 9000000)).mkdir()
    env_before = os.environ.get("PYSCOPE_COREDUMP_DIR")
    os.environ["PYSCOPE_COREDUMP_DIR"] = str(store)
    try:
        for request, pid, count in ((b_pid, b_pid, 1), (c_pid, c_pid, 1), (a_pid, a_pid, 2),
                                    ("latest", a_pid, 4)):
            result = run_pyscope(["dump", "--json", "--core", request], timeout=30)
            assert result.returncode == 0, result
            doc = json.loads(result.stdout, object_pairs_hook=strict_object)
            assert doc["pid"] == pid
            assert doc["core"]["path"] == str(names[pid])
            [line] = result.stderr.splitlines()
            assert line.startswith("pyscope: --core %s: %s (python3\\x2e11, PID %d, UID 0, "
                                   "taken 2025-12-01 " % (request, names[pid], pid)), line
            if count > 1:
                assert line.endswith("; the newest of %d %s)" % (
                    count, "cores" if request == "latest" else "cores of that PID")), line
            assert thread_named(doc, "parser")["crashed"]
            # why takes the same names for a core of the store, and says
            # which file it chose the same way.
            why = run_pyscope(["why", "--json", "--core", request], timeout=30)
            assert why.returncode == 0, why
            wdoc = json.loads(why.stdout, object_pairs_hook=strict_object)
            assert wdoc["pid"] == pid, wdoc.get("pid")
            assert why.stderr.splitlines()[0] == line, why.stderr
        result = run_pyscope(["dump", "--core", "999999"])
        assert result.returncode == 3, result
        assert result.stderr == ("pyscope: no core of process 999999 in systemd-coredump's "
                                 "store %s ($PYSCOPE_COREDUMP_DIR)\n" % store)
        # No store at all.
        os.environ["PYSCOPE_COREDUMP_DIR"] = str(tmp_path / "none")
        result = run_pyscope(["dump", "--core", "latest"])
        assert result.returncode == 3 and "cannot read systemd-coredump's store" in result.stderr
    finally:
        if env_before is None:
            del os.environ["PYSCOPE_COREDUMP_DIR"]
        else:
            os.environ["PYSCOPE_COREDUMP_DIR"] = env_before


FAKE_COREDUMPCTL = """#!/bin/sh
# Stands in for coredumpctl: logs its arguments, knows one core of PID %(pid)d.
printf '%%s\\n' "$@" >> %(log)s
[ "$1" = --no-pager ] && [ "$2" = dump ] || exit 2
if [ "$3" != -o ]; then [ "$3" = %(pid)d ] || exit 1; shift; fi
[ "$3" = -o ] || exit 2
cp %(core)s "$4"
"""


def test_coredumpctl_when_the_store_has_none(callthrough_lib, tmp_path):
    """No store directory (or no match in it): coredumpctl, which also finds
    cores kept in the journal, extracts the core. The real tool is not
    installed here (installing it would take over core_pattern), so a stand-in
    checks the documented call: coredumpctl dump [PID] -o FILE."""
    if not Path("/usr/bin/python3.11").exists():
        pytest.skip("needs /usr/bin/python3.11")
    store = Path("/var/lib/systemd/coredump")
    if store.is_dir() and any(p.name.startswith("core.") for p in store.iterdir()):
        pytest.skip("this machine's systemd-coredump store holds cores")
    made = tmp_path / "made"
    made.mkdir()
    core = debian_crash(callthrough_lib, made)
    pid = int(core.name.split(".")[1])
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "argv"
    tool = bindir / "coredumpctl"
    tool.write_text(FAKE_COREDUMPCTL % {"pid": pid, "log": log, "core": core})
    tool.chmod(0o755)
    env = ("env", "-u", "PYSCOPE_COREDUMP_DIR", "TMPDIR=%s" % tmp_path,
           "PATH=%s:%s" % (bindir, os.environ["PATH"]))
    for request in (str(pid), "latest"):
        log.write_text("")
        result = run_pyscope(["dump", "--json", "--core", request], prefix=env, timeout=30)
        assert result.returncode == 0, result
        doc = json.loads(result.stdout, object_pairs_hook=strict_object)
        assert doc["pid"] == pid and thread_named(doc, "parser")["crashed"]
        [line] = result.stderr.splitlines()
        prefix = "pyscope: --core %s: the core coredumpctl extracted, in %s/pyscope-coredumpctl-" % (
            request, tmp_path)
        assert line.startswith(prefix), line
        extracted = line.split(", in ")[1]
        assert log.read_text().splitlines() == (
            ["--no-pager", "dump"] + ([str(pid)] if request != "latest" else []) + ["-o", extracted])
        assert not Path(extracted).exists()
    result = run_pyscope(["dump", "--core", "999999"], prefix=env)
    assert result.returncode == 3, result
    assert result.stderr == ("pyscope: no core of process 999999 in systemd-coredump's store "
                             "/var/lib/systemd/coredump, and coredumpctl found none either\n")


def thread_named(doc, name):
    [found] = [t for t in doc["threads"] if t["name"] == name]
    return found


# --------------------------------------------------------------------------
# Files from elsewhere: --sysroot and --debug-dir

def mapped_files(core):
    """The paths of NT_FILE, parsed from the core's notes."""
    data = Path(core).read_bytes()
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    paths = set()
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + 56 * i)
        if p_type != 4:
            continue
        pos, end = p_offset, p_offset + p_filesz
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
            desc = pos + 12 + (namesz + 3) // 4 * 4
            if ntype == 0x46494C45:
                count, _ = struct.unpack_from("<QQ", data, desc)
                names = data[desc + 16 + 24 * count:desc + descsz].split(b"\0")
                paths.update(n.decode() for n in names[:count])
            pos = desc + (descsz + 3) // 4 * 4
    return sorted(p for p in paths if p.startswith("/") and os.path.isfile(p))


def test_sysroot(interp, callthrough_lib, tmp_path):
    """The crashed program's executable, libpython and C library lived in a
    root that is not this machine's (a container's): after the crash they
    exist only below a copy of that root, with everything else it mapped."""
    orig = tmp_path / "app"
    (orig / "bin").mkdir(parents=True)
    (orig / "lib").mkdir()
    exe = Path(os.path.realpath(interp.path))
    prefix = exe.parent.parent
    version = "python%s" % ".".join(interp.version.split(".")[:2])
    shutil.copy(exe, orig / "bin" / exe.name)
    # The stdlib by symlink (its files stay where they are), libpython by copy.
    os.symlink(prefix / "lib" / version, orig / "lib" / version)
    for lib in (prefix / "lib").glob("libpython*.so*"):
        shutil.copy(lib, orig / "lib" / lib.name)
    shutil.copy(callthrough_lib, orig / "lib" / "libcallthrough.so")
    cores = tmp_path / "cores"
    cores.mkdir()
    result = run_pyscope(["run", "--core-dir", cores, "--", orig / "bin" / exe.name,
                          PROGRAMS / "native_crash.py", orig / "lib" / "libcallthrough.so"],
                         prefix=("env", "LD_LIBRARY_PATH=%s" % (orig / "lib")), timeout=60)
    assert result.returncode == 139, result
    [core] = list(cores.iterdir())
    files = mapped_files(core)
    moved = [f for f in files if f.startswith(str(orig) + "/")]
    assert str(orig / "bin" / exe.name) in moved and str(orig / "lib" / "libcallthrough.so") in moved
    sysroot = tmp_path / "root"
    for f in files:
        dst = sysroot / f.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dst)
    for f in moved:
        os.unlink(f)
    # Without --sysroot: the C library's frame is lost, and stderr says
    # which file is missing, its build-id and the option that supplies it.
    result = run_pyscope(["dump", "--json", "--core", core, "--native"])
    lib = str(orig / "lib" / "libcallthrough.so")
    build_id = elf_build_id(sysroot / lib.lstrip("/"))
    want = ("pyscope: warning: %s (build-id %s), mapped by the process, is not on this machine; "
            "supply it with --sysroot DIR" % (lib, build_id))
    assert want in result.stderr, result.stderr
    assert result.returncode == 5, result
    assert ("cannot find CPython in core of process %d" % doc_pid(core)) in result.stderr
    assert "  %s (build-id %s)\n" % (lib, build_id) in result.stderr, result.stderr
    # With it: the whole crash report, as from the original files.
    doc = dump_json("--core", core, "--native", "--locals", "--sysroot", sysroot)
    check_crash_report(doc, interp, from_core=True)
    # --debug-dir: the moved files by build-id alone, the rest where it always was.
    debug = tmp_path / "debug"
    for f in moved:
        bid = elf_build_id(sysroot / f.lstrip("/"))
        dst = debug / ".build-id" / bid[:2] / bid[2:]
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(sysroot / f.lstrip("/"), dst)
    args = ["--debug-dir", debug]
    if uses_own_glibc(interp):
        # patchelf moved these executables' build-id note out of their first
        # page, the only one a core keeps of a file mapping: nothing can find
        # them by build-id, --exe names them.
        args += ["--exe", sysroot / moved[moved.index(str(orig / "bin" / exe.name))].lstrip("/")]
    doc = dump_json("--core", core, "--native", "--locals", *args)
    check_crash_report(doc, interp, from_core=True)
    # A different file where the core's was: named with both build-ids.
    shutil.copy(sysroot / files_not(moved, files), sysroot / lib.lstrip("/"))
    result = run_pyscope(["dump", "--core", core, "--native", "--sysroot", sysroot])
    other = elf_build_id(sysroot / lib.lstrip("/"))
    assert ("pyscope: warning: %s/%s is not the file the process had mapped as %s (build-id %s, "
            "the core says %s)" % (sysroot, lib.lstrip("/"), lib, other, build_id)
            in result.stderr), result.stderr


def files_not(moved, files):
    """A mapped ELF file with a build-id that is not one of moved."""
    for f in files:
        if f not in moved and ".so" in f:
            return f.lstrip("/")
    pytest.fail("no other library mapped")


def doc_pid(core):
    """The PID the core's name carries (pyscope run writes core.PID)."""
    return int(Path(core).name.split(".")[1])


def elf_build_id(path):
    out = subprocess.run(["readelf", "-n", str(path)], stdout=subprocess.PIPE, check=True)
    for line in out.stdout.decode().splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:")[1].strip()
    pytest.fail("no build-id in %s" % path)


def test_debug_dir_debug_files(callthrough_lib, tmp_path):
    """--debug-dir DIR also holds separate debug files, as
    DIR/.build-id/xx/yyyy.debug (the layout of Debian's -dbgsym packages and
    of `objcopy --only-keep-debug`): a crash in a library stripped of its
    DWARF gets its source lines back from there, found by build-id alone."""
    if not Path("/usr/bin/python3.11").exists():
        pytest.skip("needs /usr/bin/python3.11")
    lib = tmp_path / "libcallthrough.so"
    shutil.copy(callthrough_lib, lib)
    debug_file = tmp_path / "libcallthrough.debug"
    subprocess.run(["objcopy", "--only-keep-debug", str(lib), str(debug_file)], check=True)
    subprocess.run(["strip", "--strip-debug", str(lib)], check=True)
    bid = elf_build_id(lib)
    assert elf_build_id(debug_file) == bid
    debug = tmp_path / "debug"
    (debug / ".build-id" / bid[:2]).mkdir(parents=True)
    shutil.move(str(debug_file), str(debug / ".build-id" / bid[:2] / (bid[2:] + ".debug")))
    cores = tmp_path / "cores"
    cores.mkdir()
    core = debian_crash(lib, cores)
    line = next(i for i, text in enumerate(
        (Path(__file__).parent / "native" / "callthrough.c").read_text().splitlines(), 1)
        if "*pointer" in text and "return" in text)
    where = "callthrough.c:%d" % line
    plain = run_pyscope(["dump", "--native", "--core", core], timeout=60)
    assert plain.returncode == 0, plain
    assert "pyscope_crash_read" in plain.stdout and where not in plain.stdout, plain.stdout
    found = run_pyscope(["dump", "--native", "--core", core, "--debug-dir", debug], timeout=60)
    assert found.returncode == 0, found
    frame = [text for text in found.stdout.splitlines() if "pyscope_crash_read" in text]
    assert frame and where in frame[0], found.stdout


# --------------------------------------------------------------------------
# why --core: the waits and verdict of the moment the core was taken

def core_of(interp, target, tmp_path):
    """A core of the live target taken by the kernel (SIGABRT with RLIMIT_CORE
    raised), or by gcore where the kernel writes cores elsewhere: either way
    the process is gone after it and nothing is left to read but the core.
    gdb 13's gcore zeroes the top of the stacks of the Debian 3.13+ builds,
    where their locks' wait entries live, so those need the kernel's core."""
    target.wait_asleep()
    if kernel_core_pattern() is None:
        if uses_own_glibc(interp):
            pytest.skip("core_pattern does not write a core file into the working directory")
        core = gcore(target.pid, tmp_path / "gc")
        target.kill()
        return core
    resource.prlimit(target.pid, resource.RLIMIT_CORE,
                     (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    os.kill(target.pid, signal.SIGABRT)
    target.proc.wait(timeout=60)
    cores = [p for p in tmp_path.iterdir() if re.fullmatch(r"core(\.\d+)?", p.name)]
    assert cores, "the kernel wrote no core (pattern %r)" % kernel_core_pattern()
    return cores[0]


def why_core(*args):
    result = run_pyscope(["why", "--json", "--core"] + [str(a) for a in args], timeout=30)
    assert result.returncode == 0, result
    doc = json.loads(result.stdout, object_pairs_hook=strict_object)
    assert doc["progress"]["checked"] is False
    return doc


NOT_IN_A_CORE = ["progress", "wait_durations", "time_left", "peers", "kernel_thread_states"]


def why_live(pid):
    result = run_pyscope(["why", "--json", pid], timeout=30)
    assert result.returncode == 0, result
    return json.loads(result.stdout, object_pairs_hook=strict_object)


def same_as_live(doc, live, core):
    """The core's verdict is the live one; what it cannot know is null."""
    assert doc["core"] == {"path": str(core), "compression": None,
                           "not_in_a_core": NOT_IN_A_CORE}, doc["core"]
    assert live["core"] is None
    assert (doc["verdict"], doc["grade"]) == (live["verdict"], live["grade"])
    findings = lambda d: [(f["kind"], finding_tids(f)) for f in d["findings"]]
    assert findings(doc) == findings(live)
    waits = [t["waiting_for"] for t in doc["threads"] if t["waiting_for"]]
    assert waits and all(w["waiting_seconds"] is None for w in waits), waits
    assert any(t["waiting_for"] and t["waiting_for"]["waiting_seconds"] is not None
               for t in live["threads"])
    assert doc["progress"]["checked"] is False


def test_why_core_queue(interp, start_program, tmp_path):
    target = start_program(interp, "why_queue.py")
    extra = target.report["extra"]
    tid = tids(target)
    target.wait_asleep()
    live = why_live(target.pid)
    core = core_of(interp, target, tmp_path)
    doc = why_core(core)
    same_as_live(doc, live, core)
    assert doc["pid"] == target.pid
    threads = by_name(doc, target)
    assert doc["verdict"] == "queue_starved", explain(doc)
    finding = doc["findings"][0]
    assert finding["object"] == extra["queue"]
    assert finding_tids(finding) == [tid["consumer"]]
    wait = threads["consumer"]["waiting_for"]
    assert wait["kind"] == "notify" and wait["operation"] == "get", wait
    assert wait["object"]["address"] == extra["queue"] and wait["object"]["type"] == "Queue"
    assert wait["queue_length"] == 0 and wait["forever"] is True and wait["waiters"] == 1
    assert threads["consumer"]["stuck"] is True
    text = run_pyscope(["why", "--core", core]).stdout
    assert text.startswith("Core file %s of process %d  " % (core, target.pid)), text[:200]
    assert "Progress  cannot be checked: a core holds one moment\nNot in a core  whether " in text, text


def test_why_core_lock_deadlock(interp, start_program, tmp_path):
    target = start_program(interp, "why_lock_deadlock.py")
    tid = tids(target)
    waits = target.report["extra"]["waits"]
    target.wait_asleep()
    live = why_live(target.pid)
    core = core_of(interp, target, tmp_path)
    doc = why_core(core)
    same_as_live(doc, live, core)
    threads = by_name(doc, target)
    assert doc["verdict"] == "deadlock", explain(doc)
    deadlocks = {tuple(finding_tids(f)) for f in doc["findings"] if f["kind"] == "deadlock"}
    assert deadlocks == {tuple(sorted([tid["with-a"], tid["with-b"]])),
                         tuple(sorted([tid["acquire-a"], tid["acquire-b"]]))}, explain(doc)
    for name, want in waits.items():
        qualname = "with_worker" if name.startswith("with") else "acquire_worker"
        check_lock_wait(interp, threads[name], want["lock"], "second", qualname, "Lock")
        assert threads[name]["stuck"] is True
        if name.startswith("with"):
            assert threads[name]["waiting_for"]["owner"]["tid"] == tid[want["owner"]]


# --------------------------------------------------------------------------
# What asyncio support will read: objects that only the heap holds

def print_results(doc):
    return [(r["frame_index"], r["repr"], r["error"]) for r in doc["print"]["results"]]


def test_core_heap_objects_as_live(interp, start_program, tmp_path):
    """Suspended tasks and the loop's timers are on no thread's stack: they are
    reached through heap objects only, and a core answers those reads as the
    live process did."""
    target = start_program(interp, "core_asyncio.py")
    extra = target.report["extra"]
    # The report is written before the loop reaches its selector: read the
    # live process once it sleeps there, as the core will have it.
    target.wait_asleep()
    live = {expr: dump_json("--print", expr, target.pid)
            for expr in ("future", "self._scheduled")}
    core = core_of(interp, target, tmp_path)
    for expr, live_doc in live.items():
        doc = dump_json("--core", core, "--print", expr)
        assert print_results(doc) == print_results(live_doc), expr
    addresses = lambda text: [int(a, 16) for a in re.findall(r"object at (0x[0-9a-f]+)>", text)]
    doc = dump_json("--core", core, "--print", "future")
    [task_repr] = {r for _, r, _ in print_results(doc) if r}
    assert addresses(task_repr) == [extra["main_task"]], task_repr
    doc = dump_json("--core", core, "--print", "self._scheduled")
    reprs = {r for _, r, _ in print_results(doc) if r}
    assert reprs == {"[%s]" % ", ".join("<TimerHandle object at %#x>" % a
                                         for a in extra["scheduled"])}, reprs
