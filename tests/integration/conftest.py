"""Fixtures for the `pyscope dump` integration tests.

Interpreters are discovered once per session:
  * pyenv CPython 3.8+ (root from `pyenv root`, $PYENV_ROOT or ~/.pyenv);
    3.8-3.13 are expected, and a missing one is reported as skipped;
  * Debian's /usr/bin/python3.11 ("debian-3.11");
  * Debian builds of 3.13/3.14/3.15 from <repo>/../shared/tools/debian-python.sh
    ("debian-3.X"), used when already cached, or fetched when
    PYSCOPE_FETCH_DEBIAN=1;
  * pyenv interpreters older than 3.8 (2.7, 3.6, 3.7): unsupported, used only
    by the negative tests.
Tests that take the `interp` fixture run once per supported interpreter.
The session ends with a summary of interpreters exercised and skipped.

Environment:
  PYSCOPE              pyscope binary (default <repo>/pyscope)
  PYSCOPE_FETCH_DEBIAN 1: download missing Debian interpreters (slow, network)
  PYSCOPE_TIMEOUT      seconds allowed for one pyscope run (default 10)
  PYSCOPE_STRICT       1: a missing expected interpreter fails the session
  PYSCOPE_INTERPRETERS comma-separated ids (e.g. 3.8.18,debian-3.15): run the
                       `interp` tests on these only (the ASan pass, make
                       test-quick); the others are listed as not selected
Under pytest-xdist each worker discovers the interpreters itself; the
workers tell the controller which ones they used, for the summary.
"""

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
REPO = HERE.parent.parent
DEBIAN_SCRIPT = REPO.parent / "shared" / "tools" / "debian-python.sh"

PYSCOPE = Path(os.environ.get("PYSCOPE") or REPO / "pyscope")
PYSCOPE_TIMEOUT = float(os.environ.get("PYSCOPE_TIMEOUT", "10"))
READY_TIMEOUT = 20.0
PROBE_TIMEOUT = 30.0

# A shell without job control (a CI runner's) starts a command in the
# background with SIGINT and SIGQUIT ignored, nohup with SIGHUP ignored, and
# every program the suite starts would inherit that. pyscope keeps a signal
# that was ignored when it started ignored (README, "Signals"), so the tests
# that send these signals give them back their default action here.
for _name in ("SIGINT", "SIGQUIT", "SIGHUP", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM"):
    if signal.getsignal(getattr(signal, _name)) == signal.SIG_IGN:
        signal.signal(getattr(signal, _name), signal.default_int_handler
                      if _name == "SIGINT" else signal.SIG_DFL)

PYENV_EXPECTED_MINORS = range(8, 14)   # 3.8 .. 3.13
DEBIAN_VERSIONS = ("3.13", "3.14", "3.15")


# --------------------------------------------------------------------------
# Strict JSON: json keeps the last of two equal keys without a word, which
# would hide a writer that emits a key twice. Every test reads JSON through
# json.loads/json.load, so those refuse duplicates for the whole suite, also
# in tests that never heard of this helper.

def strict_pairs(items):
    """An object's pairs as a dict; a key written twice is an error."""
    keys = [k for k, _ in items]
    if len(keys) != len(set(keys)):
        twice = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError("duplicate keys in a JSON object: %r" % twice)
    return dict(items)


_plain_json_loads = json.loads


def strict_json(text, **kwargs):
    """json.loads that refuses duplicate keys (the default in the tests)."""
    if kwargs.get("object_pairs_hook") is None and kwargs.get("object_hook") is None:
        kwargs["object_pairs_hook"] = strict_pairs
    return _plain_json_loads(text, **kwargs)


json.loads = strict_json   # json.load reads through json.loads


# --------------------------------------------------------------------------
# Interpreter discovery

class Interp:
    """One CPython interpreter: id for test names, path, full version."""

    def __init__(self, ident, path, version):
        self.id = ident
        self.path = str(path)
        self.version = version

    def __repr__(self):
        return "Interp(%s, %s)" % (self.id, self.path)


class Discovery:
    def __init__(self):
        self.supported = []      # Interp, parametrizes `interp`
        self.unsupported = []    # Interp, parametrizes `old_interp`
        self.skipped = []        # (id, reason)
        self.used = set()        # ids of interpreters a test actually ran with
        self.unselected = []     # ids left out by PYSCOPE_INTERPRETERS


def probe_version(path):
    """Full version of the interpreter at path, or raise RuntimeError."""
    code = "import platform; print(platform.python_version())"
    try:
        out = subprocess.run([str(path), "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=PROBE_TIMEOUT,
                             env=target_env())
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError("does not run: %s" % e)
    if out.returncode != 0:
        raise RuntimeError("does not run: exit %d: %s"
                           % (out.returncode, out.stderr.decode(errors="replace")[-200:]))
    return out.stdout.decode().strip()


def pyenv_root():
    try:
        out = subprocess.run(["pyenv", "root"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, timeout=PROBE_TIMEOUT)
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.decode().strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def discover_pyenv(found):
    root = pyenv_root()
    versions = root / "versions"
    seen_minors = set()
    names = os.listdir(versions) if versions.is_dir() else []
    names.sort(key=lambda n: [int(p) if p.isdigit() else -1 for p in n.split(".")])
    for name in names:
        m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", name)
        if not m:
            continue
        major, minor = int(m.group(1)), int(m.group(2))
        path = versions / name / "bin" / ("python%d.%d" % (major, minor))
        if not path.exists():
            path = versions / name / "bin" / "python"
        try:
            version = probe_version(path)
        except RuntimeError as e:
            found.skipped.append((name, "pyenv %s: %s" % (path, e)))
            continue
        interp = Interp(name, path, version)
        if (major, minor) >= (3, 8):
            found.supported.append(interp)
            seen_minors.add(minor)
        else:
            found.unsupported.append(interp)
    for minor in PYENV_EXPECTED_MINORS:
        if minor not in seen_minors:
            found.skipped.append(("3.%d" % minor, "no pyenv 3.%d under %s" % (minor, versions)))


def discover_debian_311(found):
    path = Path("/usr/bin/python3.11")
    if not path.exists():
        found.skipped.append(("debian-3.11", "%s not installed" % path))
        return
    try:
        found.supported.append(Interp("debian-3.11", path, probe_version(path)))
    except RuntimeError as e:
        found.skipped.append(("debian-3.11", str(e)))


def debian_cached_path(version):
    """Where debian-python.sh keeps VERSION (mirrors its default DEST)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "debian-python" / version / "root" / "usr" / "bin" / ("python" + version)


def discover_debian_new(found):
    fetch = os.environ.get("PYSCOPE_FETCH_DEBIAN") == "1"
    # One at a time: the script's copies share one apt state.
    for version in DEBIAN_VERSIONS:
        ident = "debian-" + version
        path = debian_cached_path(version)
        if not path.exists():
            if not fetch:
                found.skipped.append((ident, "not cached; set PYSCOPE_FETCH_DEBIAN=1 to fetch it with %s" % DEBIAN_SCRIPT))
                continue
            if not DEBIAN_SCRIPT.exists():
                found.skipped.append((ident, "%s not found" % DEBIAN_SCRIPT))
                continue
            try:
                out = subprocess.run(["bash", str(DEBIAN_SCRIPT), version],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     timeout=900)
            except subprocess.TimeoutExpired:
                found.skipped.append((ident, "debian-python.sh timed out"))
                continue
            if out.returncode != 0:
                err = out.stderr.decode(errors="replace").strip().splitlines()
                found.skipped.append((ident, "debian-python.sh failed: %s" % (err[-1] if err else out.returncode)))
                continue
            path = Path(out.stdout.decode().strip().splitlines()[-1])
        try:
            found.supported.append(Interp(ident, path, probe_version(path)))
        except RuntimeError as e:
            found.skipped.append((ident, str(e)))


def select_interpreters(found, wanted):
    """Keep only the interpreters named in wanted (all when it is empty).
    A name that matches no discovered interpreter is reported as skipped,
    so that a typo cannot silently shrink the run."""
    names = [w.strip() for w in wanted.split(",") if w.strip()]
    if not names:
        return
    known = {i.id for i in found.supported}
    for name in names:
        if name not in known and name not in {ident for ident, _ in found.skipped}:
            found.skipped.append((name, "named in PYSCOPE_INTERPRETERS but not found"))
    found.unselected = [i.id for i in found.supported if i.id not in names]
    found.supported = [i for i in found.supported if i.id in names]


_DISCOVERY = None


def discovery():
    global _DISCOVERY
    if _DISCOVERY is None:
        found = Discovery()
        discover_pyenv(found)
        discover_debian_311(found)
        discover_debian_new(found)
        select_interpreters(found, os.environ.get("PYSCOPE_INTERPRETERS", ""))
        _DISCOVERY = found
    return _DISCOVERY


# Tests marked `representative` check what does not depend on the
# interpreter's layout (a terminal's size, a consumer's protocol, signal and
# exit handling, process trees): they run on the oldest build, a 3.12 build
# (both shared libpython with symbols), Debian's static, stripped, non-PIE
# 3.11 and the newest layout, 3.15. Every interpreter is still exercised by
# the tests that read its structures; this keeps make test within its time.
REPRESENTATIVE = ("3.8.18", "3.12.1", "debian-3.11", "debian-3.15")


def representative(interps):
    """The representative interpreters among interps; when a selection
    (PYSCOPE_INTERPRETERS) leaves none of them, its first interpreter."""
    chosen = [i for i in interps if i.id in REPRESENTATIVE]
    return chosen or interps[:1]


def pytest_generate_tests(metafunc):
    if "interp" in metafunc.fixturenames:
        interps = discovery().supported
        if metafunc.definition.get_closest_marker("representative"):
            interps = representative(interps)
        metafunc.parametrize("interp", interps, ids=[i.id for i in interps], indirect=True)
    if "old_interp" in metafunc.fixturenames:
        interps = discovery().unsupported
        metafunc.parametrize("old_interp", interps, ids=[i.id for i in interps], indirect=True)


def pytest_sessionfinish(session):
    # An xdist worker hands the interpreters it used to the controller.
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["pyscope_used"] = sorted(discovery().used)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    output = getattr(node, "workeroutput", None) or {}
    discovery().used.update(output.get("pyscope_used", ()))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    found = discovery()
    tr = terminalreporter
    tr.section("interpreters")
    exercised = [i.id for i in found.supported if i.id in found.used]
    idle = [i.id for i in found.supported if i.id not in found.used]
    tr.write_line("interpreters exercised: %s" % (", ".join(exercised) or "none"))
    if idle:
        tr.write_line("interpreters found but not run (deselected): %s" % ", ".join(idle))
    if found.unselected:
        tr.write_line("interpreters not selected (PYSCOPE_INTERPRETERS): %s"
                      % ", ".join(found.unselected))
    if found.skipped:
        tr.write_line("interpreters skipped: %s" % "; ".join(
            "%s (%s)" % (ident, reason) for ident, reason in found.skipped))
    else:
        tr.write_line("interpreters skipped: none")
    old = [i.id for i in found.unsupported if i.id in found.used]
    if old:
        tr.write_line("unsupported interpreters (negative tests only): %s" % ", ".join(old))


@pytest.fixture
def interp(request):
    """Overridden by parametrization; records that the interpreter ran."""
    discovery().used.add(request.param.id)
    return request.param


def pick_interp():
    """For a test that does not depend on the version: one interpreter."""
    found = discovery().supported
    if not found:
        pytest.skip("no supported interpreter found")
    preferred = [i for i in found if i.version.startswith("3.12.")] or found
    discovery().used.add(preferred[0].id)
    return preferred[0]


def every_interp():
    """For a test that runs one consumer (a Prometheus, a go tool) over
    targets of every interpreter at once: all of them, marked as run."""
    found = discovery().supported
    if not found:
        pytest.skip("no supported interpreter found")
    discovery().used.update(i.id for i in found)
    return list(found)


@pytest.fixture
def old_interp(request):
    discovery().used.add(request.param.id)
    return request.param


# --------------------------------------------------------------------------
# Running target programs

def target_env():
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT"):
        env.pop(name, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUTF8"] = "1"
    return env


def stat_state(path):
    """State letter (R, S, T, Z...) from a /proc stat file, None if gone."""
    try:
        with open(path, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain ") ".
    return stat[stat.rfind(b")") + 2:][:1].decode()


def proc_state(pid):
    return stat_state("/proc/%d/stat" % pid)


def proc_state_task(pid, tid):
    return stat_state("/proc/%d/task/%d/stat" % (pid, tid))


class Target:
    """A running target program and the report it wrote about itself."""

    def __init__(self, proc, program, report_path, stderr_path):
        self.proc = proc
        self.pid = proc.pid
        self.program = program
        self.report_path = report_path
        self.stderr_path = stderr_path
        self.report = None

    def stderr(self):
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def cmdline(self):
        with open("/proc/%d/cmdline" % self.pid, "rb") as f:
            return f.read().rstrip(b"\0").split(b"\0")

    def exe(self):
        return os.readlink("/proc/%d/exe" % self.pid)

    def wait_ready(self, timeout=READY_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            if self.report_path.exists():
                with open(self.report_path, encoding="utf-8") as f:
                    self.report = json.load(f)
                return self.report
            if self.proc.poll() is not None:
                pytest.fail("%s exited with status %s before reporting ready; stderr:\n%s"
                            % (self.program, self.proc.returncode, self.stderr()))
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail("%s did not report ready within %.0fs; stderr:\n%s"
                            % (self.program, timeout, self.stderr()))
            time.sleep(0.02)

    def wait_asleep(self, timeout=10.0):
        """Wait until every thread of the report is asleep in the kernel."""
        tids = [t["native_id"] for t in self.report["threads"]]
        deadline = time.monotonic() + timeout
        while True:
            states = {tid: proc_state_task(self.pid, tid) for tid in tids}
            if all(s in ("S", "D") for s in states.values()):
                return
            if time.monotonic() > deadline:
                pytest.fail("threads of %s not all asleep: %r" % (self.program, states))
            time.sleep(0.02)

    def wait_in_syscall(self, tid, numbers, timeout=20.0):
        """Wait until thread tid is blocked in one of the x86-64 syscall
        numbers given. A thread that has written its report may still need
        the GIL to reach its blocking call, which takes a while when other
        threads keep the GIL and the CPUs busy."""
        path = "/proc/%d/task/%d/syscall" % (self.pid, tid)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open(path) as f:
                    first = f.read().split()[0]
            except (OSError, IndexError):
                first = ""
            if first.isdigit() and int(first) in numbers:
                return
            if time.monotonic() > deadline:
                pytest.fail("thread %d of %s never blocked in %s (last: %r)"
                            % (tid, self.program, sorted(numbers), first))
            time.sleep(0.01)

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture
def start_program(tmp_path):
    """start_program(interp, "blocking.py", *args, ready=True) -> Target.

    Starts tests/integration/programs/<program> with the interpreter in its
    own session (process group), waits for its ready report unless
    ready=False, and kills the whole group at teardown."""
    targets = []
    counter = [0]

    def start(interp, program, *args, ready=True):
        counter[0] += 1
        stem = "%s-%d" % (Path(program).stem, counter[0])
        report_path = tmp_path / (stem + ".json")
        stderr_path = tmp_path / (stem + ".stderr")
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                [interp.path, str(PROGRAMS / program), str(report_path)] + [str(a) for a in args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                cwd=str(tmp_path), env=target_env(), start_new_session=True)
        target = Target(proc, program, report_path, stderr_path)
        targets.append(target)
        if ready:
            target.wait_ready()
        return target

    yield start
    for target in targets:
        target.kill()


@pytest.fixture
def spawn(tmp_path):
    """spawn(argv, ready_line=None) -> Popen, in its own process group,
    killed at teardown. With ready_line, waits (20 s at most) until the
    process prints that line on stdout."""
    procs = []

    def start(argv, ready_line=None):
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE if ready_line else subprocess.DEVNULL,
                                stderr=subprocess.PIPE, cwd=str(tmp_path),
                                env=target_env(), start_new_session=True)
        procs.append(proc)
        if ready_line is not None:
            got = []
            reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()),
                                      daemon=True)
            reader.start()
            reader.join(READY_TIMEOUT)
            if not got or got[0].strip() != ready_line.encode():
                proc.kill()
                pytest.fail("%r did not print %r within %.0fs (got %r)"
                            % (argv, ready_line, READY_TIMEOUT, got))
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


# --------------------------------------------------------------------------
# Running pyscope

class Result:
    def __init__(self, argv, returncode, stdout, stderr, elapsed):
        self.argv = argv
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.elapsed = elapsed

    def __repr__(self):
        return ("pyscope run %s -> exit %s after %.2fs\n--- stderr ---\n%s\n--- stdout (start) ---\n%s"
                % (" ".join(self.argv), self.returncode, self.elapsed,
                   self.stderr, self.stdout[:2000]))


def run_pyscope(args, binary=None, prefix=(), timeout=None):
    """Run pyscope with a timeout. Fails the test on a hang or a crash
    (death by signal); otherwise returns a Result with decoded output."""
    binary = str(binary or PYSCOPE)
    argv = list(prefix) + [binary] + [str(a) for a in args]
    timeout = PYSCOPE_TIMEOUT if timeout is None else timeout
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail("pyscope hung: %s did not finish within %.0fs; stderr:\n%s"
                    % (" ".join(argv), timeout, err.decode(errors="replace")))
    try:
        stdout = out.decode("utf-8")
    except UnicodeDecodeError as e:
        if proc.returncode == 0:
            pytest.fail("pyscope printed invalid UTF-8 (%s): %r" % (e, out[:2000]))
        stdout = out.decode(errors="replace")
    result = Result(argv, proc.returncode, stdout, err.decode(errors="replace"),
                    time.monotonic() - start)
    if proc.returncode < 0:
        pytest.fail("pyscope crashed with signal %s (%s):\n%r"
                    % (-proc.returncode, signal.Signals(-proc.returncode).name, result))
    return result


@pytest.fixture(scope="session")
def pyscope_binary():
    if not (PYSCOPE.is_file() and os.access(str(PYSCOPE), os.X_OK)):
        pytest.fail("pyscope binary not found at %s: build it with `make`, or set PYSCOPE"
                    % PYSCOPE, pytrace=False)
    return PYSCOPE


@pytest.fixture
def pyscope(pyscope_binary):
    """pyscope(*args, timeout=None) -> Result."""
    def run(*args, **kwargs):
        return run_pyscope(args, **kwargs)
    return run


def pytest_collection_modifyitems(config, items):
    """PYSCOPE_FIELD_INTERPRETERS (the ASan pass's): test_field's programs
    on those interpreters only. Its analyses are the same C on every
    version; the readers under them are the other tests' on all three."""
    only = os.environ.get("PYSCOPE_FIELD_INTERPRETERS")
    if not only:
        return
    wanted = set(only.split(","))
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        interp = callspec.params.get("interp") if callspec else None
        if item.module.__name__ == "test_field" and interp is not None and \
                getattr(interp, "id", None) not in wanted:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
