"""Integration tests for issue #15: core files as users have them.
Compressed cores (zstd, lz4, xz, gzip) read directly and recognised by their
bytes, not their names; truncated and corrupt archives refused in one line.

The cores are those of tests/integration/programs/native_crash.py (a ctypes
NULL dereference in thread "parser"), written by `pyscope run --core-dir`,
compressed by the formats' own command-line tools."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import PROGRAMS, run_pyscope
from test_native import callthrough_lib, check_crash_report, run_crash  # noqa: F401

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
    text = run_pyscope(["dump", "--core", packed]).stdout
    assert text.startswith("Core file %s (gzip-compressed) of process %d  "
                           % (packed, plain["pid"])), text[:300]


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

