"""pyscope in IPython and Jupyter.

    %load_ext pyscope

    %%pyscope [record options]
        Profiles the cell: runs `pyscope record -p <this kernel> -f html` while
        the cell runs, stops it with SIGINT when the cell ends, and shows the
        report inline (timeline of the GIL per thread, flame graph, tables).
        Options are those of `pyscope record` (-r HZ, -d SECS, -i, -g, -s...),
        plus -o FILE to keep the report and --height PX for the inline frame;
        -q leaves out the text summary printed under the report.

    %pyscope dump [dump options]
        Every thread of this kernel now: Python stack, GIL, GC.

The pyscope binary is $PYSCOPE if set, else the one `make install` put this
module beside, else `pyscope` on PATH, else the one in the source tree this
file comes from. pyscope reads this process like a debugger: that needs
root, CAP_SYS_PTRACE, or kernel.yama.ptrace_scope 0; under ptrace_scope 1
this module lets its own pyscope child in with prctl(PR_SET_PTRACER).
See docs/html.md.
"""

import ctypes
import html
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["load_ipython_extension", "find_binary", "Report"]

READY_TIMEOUT = 30.0
STOP_TIMEOUT = 60.0
PR_SET_PTRACER = 0x59616D61
DEFAULT_HEIGHT = 820


class PyscopeError(Exception):
    pass


def find_binary():
    """The pyscope binary to run, or raise PyscopeError."""
    candidates = []
    if os.environ.get("PYSCOPE"):
        candidates.append(os.environ["PYSCOPE"])
    try:
        from . import _install  # written by `make install`
        candidates.append(_install.BINARY)
    except ImportError:
        pass
    on_path = shutil.which("pyscope")
    if on_path:
        candidates.append(on_path)
    candidates.append(str(Path(__file__).resolve().parents[2] / "pyscope"))
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise PyscopeError("pyscope binary not found: set PYSCOPE=/path/to/pyscope, "
                       "or install it (make install)")


def yama_scope():
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def start_pyscope(argv, stdout=subprocess.DEVNULL):
    """Starts argv (a pyscope command reading this process) with its stderr
    piped. Under Yama ptrace_scope 1 a child may not read its parent unless
    the parent names it with prctl(PR_SET_PTRACER): the child waits on its
    stdin (a shell's `read`) until that is done, then execs pyscope."""
    gate = os.geteuid() != 0 and yama_scope() == 1
    if gate:
        argv = ["/bin/sh", "-c", 'read _ && exec "$@"', "pyscope-gate"] + argv
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if gate else subprocess.DEVNULL,
                            stdout=stdout, stderr=subprocess.PIPE, start_new_session=True)
    if gate:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PTRACER, ctypes.c_ulong(proc.pid), 0, 0, 0)
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        proc.stdin = None      # communicate() must not flush it again
    return proc


class StderrReader(threading.Thread):
    """Collects a child's stderr lines; `ready` is set at the line that
    says sampling began (or when the stream ends)."""

    def __init__(self, stream):
        super().__init__(name="pyscope-stderr", daemon=True)
        self.stream = stream
        self.lines = []
        self.ready = threading.Event()

    def run(self):
        for raw in iter(self.stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            if line.startswith("pyscope: sampling process"):
                self.ready.set()
        self.ready.set()


def parse_cell_options(line):
    """(arguments for pyscope record, output path or None, quiet, height)."""
    args = shlex.split(line)
    passed, output, quiet, height = [], None, False, DEFAULT_HEIGHT
    i = 0
    while i < len(args):
        a = args[i]
        value = args[i + 1] if i + 1 < len(args) else None
        if a in ("-o", "--output"):
            if value is None:
                raise PyscopeError("%s needs a file name" % a)
            output, i = value, i + 2
            continue
        if a.startswith("--output="):
            output = a.split("=", 1)[1]
        elif a == "--height":
            if value is None or not value.isdigit():
                raise PyscopeError("--height needs a number of pixels")
            height, i = int(value), i + 2
            continue
        elif a in ("-q", "--quiet"):
            quiet = True
        elif a in ("-p", "--pid") or a.startswith("--pid=") or a == "--":
            raise PyscopeError("%%pyscope profiles this kernel; it takes no -p or command")
        elif a in ("-f", "--format") or a.startswith("--format="):
            raise PyscopeError("%%pyscope always writes the html format")
        elif a in ("-h", "--help"):
            raise PyscopeError(__doc__)
        else:
            passed.append(a)
        i += 1
    return passed, output, quiet, height


class Report:
    """A pyscope HTML report. A notebook shows it inline, in a sandboxed frame
    of its own: its scripts and styles cannot touch the notebook, nor the
    notebook's theirs. A terminal shows what it is."""

    def __init__(self, report_html, height=DEFAULT_HEIGHT, path=None):
        self.html = report_html
        self.height = height
        self.path = path

    def _repr_html_(self):
        return ('<iframe srcdoc="%s" sandbox="allow-scripts" '
                'style="width: 100%%; height: %dpx; border: 1px solid #d8dce1; border-radius: 4px;">'
                '</iframe>' % (html.escape(self.html, quote=True), self.height))

    def __repr__(self):
        return "<pyscope report, %d bytes of HTML%s>" % (
            len(self.html.encode("utf-8")), ", saved to %s" % self.path if self.path else "")


def stop(proc):
    """SIGINT, as Ctrl-C would: pyscope then writes the report and exits."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise PyscopeError("pyscope did not stop within %.0f s of SIGINT" % STOP_TIMEOUT)


def record_cell(shell, line, cell, display):
    """The %%pyscope cell magic, with display(obj) to show the report."""
    passed, output, quiet, height = parse_cell_options(line)
    binary = find_binary()
    keep = output is not None
    if not keep:
        fd, output = tempfile.mkstemp(prefix="pyscope-", suffix=".html")
        os.close(fd)
    argv = [binary, "record", "-p", str(os.getpid()), "-f", "html", "-o", output] + passed
    proc = start_pyscope(argv)
    reader = StderrReader(proc.stderr)
    reader.start()
    try:
        if not reader.ready.wait(READY_TIMEOUT) or proc.poll() is not None:
            stop(proc)
            reader.join(5)
            raise PyscopeError("pyscope record did not start:\n" + "\n".join(reader.lines))
        # Give the sampler its first pass before the cell starts.
        time.sleep(0.05)
        result = shell.run_cell(cell, store_history=False)
    finally:
        stop(proc)
        reader.join(10)
    messages = [l for l in reader.lines
                if not l.startswith("pyscope: sampling process") and not l.startswith("pyscope: wrote ")]
    try:
        with open(output, encoding="utf-8") as f:
            report = f.read()
    except OSError as e:
        raise PyscopeError("no report from pyscope (exit status %s): %s\n%s"
                           % (proc.returncode, e, "\n".join(messages)))
    finally:
        if not keep:
            try:
                os.unlink(output)
            except OSError:
                pass
    if proc.returncode != 0:
        raise PyscopeError("pyscope record failed (exit status %s):\n%s" % (proc.returncode, "\n".join(messages)))
    display(Report(report, height, output if keep else None))
    if not quiet and messages:
        print("\n".join(messages))
    return result


def dump_kernel(line):
    """The %pyscope dump line magic: pyscope's dump of this process."""
    args = shlex.split(line)
    if not args or args[0] != "dump":
        raise PyscopeError("usage: %pyscope dump [--json] [--pause] [--verbose]   "
                           "(and %%pyscope [record options] for a cell)")
    proc = start_pyscope([find_binary(), "dump"] + args[1:] + [str(os.getpid())], stdout=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise PyscopeError("pyscope dump did not finish within 60 s")
    text = out.decode("utf-8", "replace")
    if text:
        sys.stdout.write(text)
    if proc.returncode != 0 or err:
        sys.stderr.write(err.decode("utf-8", "replace"))
    if proc.returncode != 0:
        raise PyscopeError("pyscope dump failed with exit status %d" % proc.returncode)


def load_ipython_extension(ipython):
    from IPython.core.error import UsageError
    from IPython.core.magic import Magics, line_cell_magic, magics_class
    from IPython.display import display

    @magics_class
    class PyscopeMagics(Magics):
        @line_cell_magic
        def pyscope(self, line, cell=None):
            """%%pyscope [record options]: profile this cell (GIL timeline,
            flame graph). %pyscope dump: this kernel's threads now."""
            try:
                if cell is None:
                    dump_kernel(line)
                    return None
                record_cell(self.shell, line, cell, display)
                return None
            except PyscopeError as e:
                raise UsageError(str(e))

    globals()["PyscopeMagics"] = PyscopeMagics
    ipython.register_magics(PyscopeMagics)
