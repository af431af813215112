"""Reliability (issue 13): no file is clobbered through pyscope's outputs,
every failed write is reported, odd processes and odd arguments get the
right answer and exit status.

Output files: a device or a FIFO named with -o is written to, never replaced;
the temporary a profile is written to before its rename cannot be guessed
(a symbolic link planted at the old predictable name is not followed); an
output that cannot be written is refused before the program or the recording
starts. Write errors: a report that did not reach /dev/full is a failure."""

import json
import os
import re
import signal
import stat
import subprocess
import threading
import time
import types

import pytest

from conftest import PROGRAMS, PYSCOPE, pick_interp, proc_state, run_pyscope, target_env

def strict_json(text):
    """One JSON document, with no key twice in an object."""
    def pairs(items):
        keys = [k for k, _ in items]
        assert len(keys) == len(set(keys)), "duplicate keys: %r" % keys
        return dict(items)
    return json.loads(text, object_pairs_hook=pairs)


# The ASan build, on a busy machine, takes longer than the default to attach
# the flight recorder and write its recording.
RUN_TIMEOUT = 60

# A program that fails after a second: long enough for the flight recorder to
# attach, and it writes a file to show that it ran at all.
FAILING = ("import sys, time; open(sys.argv[1], 'w').close(); time.sleep(1.0); "
           "raise SystemExit(3)")


@pytest.fixture
def target(start_program):
    return start_program(pick_interp(), "blocking.py")


def record_last(tmp_path, out):
    interp = pick_interp()
    ran = tmp_path / "ran"
    return run_pyscope(["run", "--record-last", "5s", "-f", "json", "-o", out, "--", interp.path,
                        "-c", FAILING, ran], timeout=RUN_TIMEOUT), ran


def test_record_last_to_a_fifo_writes_through_it(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []

    def drain():
        with open(fifo, "rb") as f:
            got.append(f.read())
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    result, _ = record_last(tmp_path, fifo)
    reader.join(10)
    assert result.returncode == 3, result
    assert "written to %s" % fifo in result.stderr, result
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    assert got and got[0].startswith(b"{"), got
    assert sorted(os.listdir(tmp_path)) == ["fifo", "ran"]


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root")
def test_record_last_to_a_device_keeps_the_device(tmp_path):
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    result, _ = record_last(tmp_path, null)
    assert result.returncode == 3, result
    assert "written to %s" % null in result.stderr, result
    st = os.lstat(null)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3), "the device was replaced"
    assert sorted(os.listdir(tmp_path)) == ["null", "ran"]


def test_record_last_does_not_follow_a_planted_temporary(tmp_path):
    """Before, the temporary was OUT.<pyscope's pid>.tmp, opened following
    links. The shell plants the link under its own pid, which pyscope keeps
    through exec."""
    out = tmp_path / "out.json"
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    interp = pick_interp()
    ran = tmp_path / "ran"
    argv = [str(PYSCOPE), "run", "--record-last", "5s", "-f", "json", "-o", str(out), "--",
            interp.path, "-c", FAILING, str(ran)]
    result = run_pyscope(["-c", 'ln -s "$0" "$1.$$.tmp" && shift && exec "$@"',
                          victim, out] + argv, binary="/bin/sh", timeout=RUN_TIMEOUT)
    assert result.returncode == 3, result
    assert victim.read_text() == "precious\n"
    assert out.read_text().startswith("{"), result
    assert not stat.S_ISLNK(os.lstat(out).st_mode)
    leftovers = [n for n in os.listdir(tmp_path) if n not in ("out.json", "victim", "ran")]
    # The planted link itself is left alone, and nothing else is left behind.
    assert [n for n in leftovers if not os.path.islink(tmp_path / n)] == [], leftovers


def test_record_last_replaces_a_regular_file_through_a_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old\n")
    os.chmod(real, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    result, _ = record_last(tmp_path, link)
    assert result.returncode == 3, result
    assert os.readlink(link) == str(real)
    assert real.read_text().startswith("{")
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["link.json", "ran", "real.json"]


@pytest.mark.parametrize("where", ["missing-dir/out.json", "a-directory"])
def test_unwritable_output_refused_before_the_program_runs(tmp_path, where):
    (tmp_path / "a-directory").mkdir()
    out = tmp_path / where
    result, ran = record_last(tmp_path, out)
    assert result.returncode == 2, result
    assert "cannot write %s" % out in result.stderr, result
    assert not ran.exists(), "the program ran although its recording could not be written"


def test_unwritable_record_output_refused_before_recording(tmp_path):
    interp = pick_interp()
    ran = tmp_path / "ran"
    out = tmp_path / "missing-dir" / "profile.txt"
    result = run_pyscope(["record", "-o", out, "--", interp.path, "-c", FAILING, ran])
    assert result.returncode == 2 and "cannot write %s" % out in result.stderr, result
    assert not ran.exists()
    result = run_pyscope(["run", "-o", out, "--", interp.path, "-c", FAILING, ran])
    assert result.returncode == 2 and "cannot write %s" % out in result.stderr, result
    assert not ran.exists()


def test_unwritable_watch_outputs_refused_before_watching(tmp_path):
    interp = pick_interp()
    ran = tmp_path / "ran"
    bad = tmp_path / "missing-dir" / "x"
    for flag in ("--core", "-o"):
        result = run_pyscope(["watch", "--reentry", "f", flag, bad, "--", interp.path, "-c",
                              FAILING, ran])
        assert result.returncode == 2 and "cannot write %s" % bad in result.stderr, result
        assert not ran.exists()


# ---- write errors ------------------------------------------------------------

def run_to_full(args):
    """pyscope with stdout on /dev/full."""
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([str(PYSCOPE)] + [str(a) for a in args], stdout=full,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60,
                              env=target_env())
    return proc.returncode, proc.stderr.decode(errors="replace")


@pytest.mark.parametrize("args", [["dump"], ["dump", "--json"], ["why"], ["why", "--json"]])
def test_report_to_a_full_disk_fails(target, args):
    status, stderr = run_to_full(args + [target.pid])
    assert status == 1, stderr
    assert "pyscope: cannot write the output" in stderr, stderr


def test_record_to_a_full_disk_fails(target, tmp_path):
    status, stderr = run_to_full(["record", "-p", target.pid, "-d", "0.3", "-i", "-q", "-o", "-"])
    assert status == 1 and "cannot write" in stderr, stderr
    result = run_pyscope(["record", "-p", target.pid, "-d", "0.3", "-i", "-q", "-o", "/dev/full"])
    assert result.returncode == 1 and "/dev/full" in result.stderr, result
    assert "wrote /dev/full" not in result.stderr


def test_help_to_a_full_disk_fails():
    status, stderr = run_to_full(["--version"])
    assert status == 1 and "cannot write the output" in stderr, stderr
    status, stderr = run_to_full(["dump", "--help"])
    assert status == 1 and "cannot write the output" in stderr, stderr


# ---- the thread list, torn by thread churn -------------------------------------

def test_thread_list_read_as_a_cycle(interp, start_program, pyscope):
    """A thread list that leads back to a thread state already read (a
    thread exited and a new one took its memory while pyscope followed the
    list) holds each thread once: in the dump, and in every sampling pass."""
    target = start_program(interp, "thread_cycle.py")
    expected = sorted(t["native_id"] for t in target.report["threads"])
    assert target.report["extra"]["thread_states"] == len(expected)
    result = pyscope("dump", "--json", target.pid)
    assert result.returncode == 0, result
    got = sorted(t["tid"] for t in strict_json(result.stdout)["threads"])
    assert got == expected
    result = pyscope("record", "-p", target.pid, "-d", "0.5", "-i", "-q", "-f", "json", "-o", "-")
    assert result.returncode == 0, result
    rec = strict_json(result.stdout)
    passes = rec["meta"]["passes"]
    assert passes > 0 and rec["meta"]["stacks_sampled"] == passes * len(expected), rec["meta"]
    assert sorted(t["tid"] for t in rec["threads"]) == expected


def test_sampling_under_thread_churn(start_program, pyscope):
    """Thousands of thread starts a second and a busy CPU: the sampler reads
    thread states that are freed and reused under it. It must neither crash
    (the ASan build runs this too) nor count a thread twice in a pass."""
    target = start_program(pick_interp(), "thread_churn.py", 2)
    assert target.report["extra"]["thread_starts_per_second"] > 500, target.report["extra"]
    result = pyscope("record", "-p", target.pid, "-d", "3", "-r", "max", "-i", "-q", "-f", "json",
                     "-o", "-")
    assert result.returncode == 0, result
    assert target.alive()
    rec = strict_json(result.stdout)
    passes = rec["meta"]["passes"]
    assert passes > 20 and len(rec["threads"]) > 20, rec["meta"]
    # A thread is sampled at most once a pass.
    most = max(t["samples"] for t in rec["threads"])
    assert most <= passes, (most, passes)


# ---- processes in unusual states ------------------------------------------------

def wait_leader_zombie(target):
    deadline = time.monotonic() + 10
    while proc_state(target.pid) != "Z":
        assert time.monotonic() < deadline, "the main thread did not exit"
        time.sleep(0.02)


def test_leader_exited_read_through_a_live_thread(interp, start_program, pyscope):
    """The main thread called pthread_exit, the workers run: every command
    reads the process through a live thread instead of "no such process"."""
    target = start_program(interp, "leader_exit.py")
    wait_leader_zombie(target)
    workers = {t["native_id"]: t for t in target.report["threads"]}
    assert len(workers) == 2
    result = pyscope("dump", "--json", target.pid)
    assert result.returncode == 0, result
    doc = strict_json(result.stdout)
    assert doc["pid"] == target.pid
    dumped = {t["tid"]: t for t in doc["threads"]}
    for tid, t in workers.items():
        assert dumped[tid]["name"] == t["name"]
        assert [f["function"] for f in dumped[tid]["frames"]] == \
            [f["function"] for f in t["frames"]]
        assert dumped[tid]["state"] == "idle"
    # The exited main thread's state is left in the list; it runs nothing.
    main = [t for t in doc["threads"] if t["name"] == "MainThread"]
    assert len(main) == 1 and main[0]["state"] == "unknown", main
    result = pyscope("why", "--json", target.pid)
    assert result.returncode == 0, result
    assert {t["tid"] for t in strict_json(result.stdout)["threads"]} >= set(workers)
    result = pyscope("record", "-p", target.pid, "-d", "0.5", "-i", "-q", "-f", "json", "-o", "-")
    assert result.returncode == 0, result
    rec = strict_json(result.stdout)
    sampled = {t["tid"]: t["samples"] for t in rec["threads"]}
    assert all(sampled.get(tid, 0) > 0 for tid in workers), sampled


def test_top_of_a_process_whose_leader_exited(start_program):
    target = start_program(pick_interp(), "leader_exit.py")
    wait_leader_zombie(target)
    proc = subprocess.Popen([str(PYSCOPE), "top", "-p", str(target.pid)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    for t in target.report["threads"]:
        assert re.search(r"^\s*%d\s+%s\s" % (t["native_id"], t["name"]), out.decode(), re.M), out


def test_kernel_thread_is_not_python(pyscope):
    # kthreadd is pid 2 wherever the kernel's threads are visible.
    with open("/proc/2/stat") as f:
        if "(kthreadd)" not in f.read():
            pytest.skip("pid 2 is not kthreadd in this PID namespace")
    for command in ("dump", "why"):
        result = pyscope(command, 2)
        assert result.returncode == 5, result
        assert "process 2 (kthreadd) is a kernel thread, not a Python process" in result.stderr
    result = pyscope("record", "-p", 2, "-d", "0.2", "-o", "-")
    assert result.returncode == 5, result


def test_dump_right_after_exec_is_never_unsupported(interp, tmp_path):
    """A shared-library Python read right after exec, before the loader has
    mapped libpython, looked like an interpreter without a runtime:
    "unsupported Python version". Each dump either reads the program, or says
    what it was (the shell before its exec), or that it is starting up. A
    shell starts the programs, so that what runs before the exec is a shell."""
    driver = r"""
for i in $(seq 15); do
    sh -c 'exec "$0" -c "import time; time.sleep(30)"' "$1" &
    p=$!
    "$2" dump $p >/dev/null 2>"$3"
    echo "$? $(head -n 1 "$3")"
    kill $p; wait $p 2>/dev/null
done
"""
    proc = subprocess.run(["/bin/sh", "-c", driver, "sh", interp.path, str(PYSCOPE),
                           str(tmp_path / "err")], stdout=subprocess.PIPE, timeout=120,
                          stdin=subprocess.DEVNULL)
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 15, lines
    statuses = set()
    for line in lines:
        status, _, message = line.partition(" ")
        assert "unsupported" not in message, lines
        if status == "5":
            assert "(sh) is not a Python process" in message, lines
        elif status == "1":
            # Before libpython is mapped, "is starting up"; once it is (or,
            # in a static build, from the exec), the runtime without an
            # interpreter yet, after dump's 300 ms wait for one: a loaded
            # machine (the ASan pass, Debian's 3.15) can take longer.
            assert ("is starting up" in message or
                    "loaded but no interpreter running (starting up" in message), lines
        else:
            assert status == "0", lines
        statuses.add(status)
    assert "0" in statuses, lines


def test_core_with_the_wrong_executable(tmp_path, pyscope):
    """--exe naming another file than the one the process ran: the dump says
    the build-ids differ, instead of "unsupported Python version" (which is
    what the wrong file's contents led to). A static interpreter, so that the
    runtime is in the executable."""
    python = "/usr/bin/python3.11"
    if not os.path.exists(python):
        pytest.skip("no %s" % python)
    cores = tmp_path / "cores"
    cores.mkdir()
    result = pyscope("run", "--core-dir", cores, "--", python, "-c",
                     "import ctypes; ctypes.string_at(0)")
    assert result.returncode == 139, result
    (core,) = cores.iterdir()
    assert pyscope("dump", "--core", core).returncode == 0
    for wrong in ("/bin/ls", pick_interp().path):
        result = pyscope("dump", "--core", core, "--exe", wrong)
        assert result.returncode == 2, result
        assert re.search(r"pyscope: %s does not match the core: its build-id is [0-9a-f]+, the "
                         r"process's %s had [0-9a-f]+\n" % (re.escape(wrong), re.escape(python)),
                         result.stderr), result
        assert "unsupported" not in result.stderr


def test_record_of_a_process_that_execs(spawn, pyscope, tmp_path):
    """The recorded process execs another program: the recording ends there,
    with a line saying so, and is written."""
    interp = pick_interp()
    proc = spawn([interp.path, "-c", "import os, time; print('ready', flush=True); "
                  "time.sleep(1.0); os.execv('/bin/sleep', ['sleep', '30'])"], ready_line="ready")
    out = tmp_path / "rec.json"
    result = pyscope("record", "-p", proc.pid, "-d", "8", "-i", "-f", "json", "-o", out)
    assert result.returncode == 0, result
    assert result.elapsed < 6, result
    assert ("pyscope: process %d exec'd %s: its recording ends here (the new program is not "
            "Python)\n" % (proc.pid, os.path.realpath("/bin/sleep"))) in result.stderr, result
    doc = strict_json(out.read_text())
    assert doc["meta"]["passes"] > 0 and doc["meta"]["duration_ns"] < 6e9


def exec_partner(interp):
    """Another supported interpreter of another minor version to exec into."""
    from conftest import discovery
    others = [i for i in discovery().supported
              if i.version.split(".")[:2] != interp.version.split(".")[:2]]
    preferred = [i for i in others if i.version.startswith("3.12.")] or \
        [i for i in others if i.version.startswith("3.8.")] or others
    if not preferred:
        pytest.skip("no interpreter of another version to exec into")
    discovery().used.add(preferred[0].id)
    return preferred[0]


def test_record_follows_an_exec_into_another_python(interp, spawn, pyscope, tmp_path):
    """The recorded process os.execv's an interpreter of another version
    (3.x to 3.12, 3.12 to 3.8): pyscope says so, opens the new image with its
    own layout and records on. What the program reports about both of its
    stages is the truth: both stages' functions are in the recording, and the
    process is described by the new version."""
    other = exec_partner(interp)
    report = tmp_path / "stages.jsonl"
    proc = spawn([interp.path, str(PROGRAMS / "exec_other.py"), str(report), other.path],
                 ready_line="ready")
    out = tmp_path / "rec.json"
    # The first stage execs only once pyscope samples it.
    start = None
    recorder = subprocess.Popen([str(PYSCOPE), "record", "-p", str(proc.pid), "-d", "10", "-r",
                                 "200", "-f", "json", "-o", str(out)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    lines = []
    for line in recorder.stderr:
        lines.append(line)
        if line.startswith("pyscope: sampling process %d " % proc.pid):
            (tmp_path / "stages.jsonl.go").touch()
            start = time.monotonic()
            break
    try:
        rest, err = recorder.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        recorder.kill()
        rest, err = recorder.communicate()
    result = types.SimpleNamespace(returncode=recorder.returncode, stdout=rest,
                                   stderr="".join(lines) + err,
                                   elapsed=time.monotonic() - (start or 0))
    assert result.returncode == 0 and start is not None, result
    stages = [json.loads(line) for line in report.read_text().splitlines()]
    assert [s["stage"] for s in stages] == ["before", "exec", "after"], stages
    assert {s["pid"] for s in stages} == {proc.pid}
    before, after = stages[0], stages[2]
    assert before["python_version"] == interp.version
    assert after["python_version"] == other.version
    assert ("pyscope: process %d exec'd %s (Python %s): following the new program\n"
            % (proc.pid, after["executable"], after["python_version"])) in result.stderr, result
    # The recording ended when the second stage exited (2 s after it was
    # let go), not at -d.
    assert result.elapsed < 8, result
    doc = strict_json(out.read_text())
    assert doc["meta"]["python_version"] == before["python_version"]
    [process] = doc["summary"]["processes"]
    assert process["pid"] == proc.pid
    assert process["python_version"] == after["python_version"]
    functions = {doc["frames"][f]["function"] for sample in doc["samples"]
                 for f in doc["stacks"][sample[1]]}
    assert {"before_exec", "after_exec"} <= functions, functions
    [thread] = {(t["pid"], t["tid"]) for t in doc["threads"]}
    assert thread == (proc.pid, proc.pid)


# ---- arguments -------------------------------------------------------------------

@pytest.mark.parametrize("args, status, message", [
    (["dump", "2147483647"], 3, "no such process 2147483647"),
    (["dump", "99999999"], 3, "no such process 99999999"),
    (["why", "2147483647"], 3, "no such process 2147483647"),
    (["dump", "2147483648"], 2, "process id 2147483648 is out of range (1 to 2147483647)"),
    (["why", "99999999999"], 2, "process id 99999999999 is out of range"),
    (["record", "-p", "4294967297", "-d", "1"], 2, "process id 4294967297 is out of range"),
    (["top", "-p", "-5"], 2, "invalid process id '-5'"),
    (["watch", "--reentry", "f", "-p", "0"], 2, "invalid process id '0'"),
    (["dump", "12x"], 2, "invalid process id '12x'"),
    (["dump", "1", "2"], 2, "unexpected argument '2'"),
    (["record", "-p", "1", "-d", "nan"], 2, "--duration takes a positive number of seconds"),
    (["record", "-p", "1", "-d", "inf"], 2, "--duration takes a positive number of seconds"),
    (["record", "-p", "1", "-r", "nan"], 2, "--rate takes"),
    (["run", "--record-last", "nan", "--", "true"], 2, "--record-last takes a duration"),
])
def test_argument_values(args, status, message):
    result = run_pyscope(args)
    assert result.returncode == status and message in result.stderr, result


@pytest.mark.parametrize("args", [
    ["watch", "--reentry", "--exact", "PROGRAM", "-p", "PID"],
    ["record", "-p", "PID", "PROGRAM"],
    ["top", "-p", "PID", "PROGRAM"],
])
def test_stray_word_is_not_run(args, tmp_path, target):
    """A word after the options that does not follow -- was run as a program
    (and -p ignored): now a usage error, and nothing runs."""
    marker = tmp_path / "ran"
    program = tmp_path / "program"
    program.write_text("#!/bin/sh\ntouch %s\nsleep 30\n" % marker)
    program.chmod(0o755)
    argv = [str(program) if a == "PROGRAM" else target.pid if a == "PID" else a for a in args]
    result = run_pyscope(argv, timeout=20)
    assert result.returncode == 2, result
    assert "unexpected argument '%s' (a program to run goes after --)" % program in result.stderr
    assert not marker.exists()


def test_core_that_is_a_fifo_is_refused(tmp_path):
    fifo = tmp_path / "core"
    os.mkfifo(fifo)
    result = run_pyscope(["dump", "--core", fifo], timeout=10)
    assert result.returncode == 2 and "%s is not a regular file" % fifo in result.stderr, result
    result = run_pyscope(["dump", "--core", tmp_path], timeout=10)
    assert result.returncode == 2 and "is not a regular file" in result.stderr, result


# ---- file descriptors --------------------------------------------------------------

@pytest.mark.parametrize("limit, degraded", [("256:8192", False), ("256:256", True)])
def test_more_threads_than_open_files(start_program, limit, degraded):
    """record keeps one descriptor per thread: past the soft limit of open
    files it raises it to the hard limit, and past the hard limit it opens
    the remaining threads' /proc files on every pass (and says so). No
    thread's state is "unknown" either way."""
    target = start_program(pick_interp(), "many_sleepers.py", 1100)
    deadline = time.monotonic() + 20
    while len(os.listdir("/proc/%d/task" % target.pid)) < 1101:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    result = run_pyscope(["record", "-p", target.pid, "-d", "1", "-i", "-f", "json", "-o", "-"],
                         prefix=["prlimit", "--nofile=" + limit, "--"])
    assert result.returncode == 0, result
    rec = strict_json(result.stdout)
    sleepers = [t for t in rec["threads"] if t["name"].startswith("sleeper-")]
    assert len(sleepers) == 1100
    unknown = [t["name"] for t in sleepers if t["state_samples"]["unknown"]]
    assert unknown == [], unknown
    assert all(t["state_samples"]["idle"] == t["samples"] > 0 for t in sleepers)
    note = "more threads than open files allowed (256)"
    assert (note in result.stderr) == degraded, result.stderr


# ---- permissions --------------------------------------------------------------------

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
YAMA = "/proc/sys/kernel/yama/ptrace_scope"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


def check_yama_line(stderr):
    if os.path.exists(YAMA):
        with open(YAMA) as f:
            scope = f.read().strip()
        assert ("kernel.yama.ptrace_scope is %s" % scope in stderr) == (scope != "0"), stderr
    else:
        assert "yama" not in stderr, stderr


@needs_root
def test_permission_message_names_the_uid(target):
    result = run_pyscope(["dump", target.pid], prefix=NOBODY)
    assert result.returncode == 4, result
    assert "it runs as uid 0, pyscope as uid 65534" in result.stderr, result
    assert "pyscope does not have CAP_SYS_PTRACE" in result.stderr
    assert "run pyscope as root, or give it CAP_SYS_PTRACE" in result.stderr
    check_yama_line(result.stderr)


@needs_root
def test_permission_message_to_root_without_the_capability(target):
    result = run_pyscope(["--drop=cap_sys_ptrace", "--", "-c", '"$0" dump "$1"', PYSCOPE,
                          target.pid], binary="/usr/sbin/capsh")
    assert result.returncode == 4, result
    assert "pyscope runs as root but without CAP_SYS_PTRACE" in result.stderr, result
    assert "run pyscope as root" not in result.stderr
    assert "uid" not in result.stderr
    check_yama_line(result.stderr)


@needs_root
def test_permission_message_names_a_non_dumpable_target(spawn):
    python = "/usr/bin/python3.11"
    if not os.path.exists(python):
        pytest.skip("no %s" % python)
    proc = spawn(NOBODY + [python, "-c", "import ctypes, time; "
                           "ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); print('ready', flush=True); "
                           "time.sleep(60)"], ready_line="ready")
    result = run_pyscope(["dump", proc.pid], prefix=NOBODY)
    assert result.returncode == 4, result
    assert "it is not dumpable" in result.stderr, result
    assert "runs as uid" not in result.stderr
