"""The notebook magics (python/pyscope, docs/html.md) in IPython, run
non-interactively: `%load_ext pyscope`, a `%%pyscope -d 1` cell doing CPU
work in two threads (through get_ipython().run_cell_magic), `%pyscope dump`,
the errors, the report inline in a sandboxed frame (in Chromium), and
`make install PYTHON=...` putting a .pth where that interpreter finds it.

IPython is looked for in the interpreters conftest.py discovers (pyenv
3.11 has it here); without one these tests are skipped with the reason.
"""

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import chromium
from conftest import PYSCOPE, REPO, discovery, target_env

sys.path.insert(0, str(REPO / "python"))
import pyscope as pyscope_module  # noqa: E402

IPYTHON_TIMEOUT = 120

CELL = '''
import threading, time
def crunch_in_cell(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for i in range(1000):
            x = (x * 31 + i) % 1000003
    return x
worker = threading.Thread(target=crunch_in_cell, args=(1.5,), name="cell-worker")
worker.start()
crunch_in_cell(1.5)
worker.join()
print("cell done")
'''

SCRIPT = '''
%load_ext pyscope
import os
print("kernel pid", os.getpid())
get_ipython().run_cell_magic("pyscope", "-d 1 -o {report}", {cell!r})
%pyscope dump
for run in (lambda: get_ipython().run_line_magic("pyscope", "record"),
            lambda: get_ipython().run_cell_magic("pyscope", "-p 1", "pass")):
    try:
        run()
    except Exception as e:
        print("%s: %s" % (type(e).__name__, e))
print("script done")
'''


@pytest.fixture(scope="module")
def ipython_interp():
    for interp in discovery().supported:
        ok = subprocess.run([interp.path, "-c", "import IPython"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=target_env()).returncode == 0
        if ok:
            discovery().used.add(interp.id)
            return interp
    pytest.skip("no discovered interpreter has IPython")


def run_ipython(python, script_path, env):
    out = subprocess.run([python, "-m", "IPython", "--no-banner", "--quick", "--colors=NoColor",
                          "--HistoryManager.enabled=False", str(script_path)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env=env, cwd=str(script_path.parent), timeout=IPYTHON_TIMEOUT)
    return out.returncode, out.stdout.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def session(ipython_interp, pyscope_binary, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("magics")
    report = tmp / "cell.html"
    script = tmp / "magics.ipy"
    script.write_text(SCRIPT.format(report=report, cell=CELL))
    env = dict(target_env(), PYTHONPATH=str(REPO / "python"), PYSCOPE=str(PYSCOPE))
    rc, output = run_ipython(ipython_interp.path, script, env)
    return {"rc": rc, "output": output, "report": report, "tmp": tmp}


def embedded(path):
    m = re.search(r'<script type="application/json" id="pyscope-data">(.*?)</script>',
                  path.read_text(encoding="utf-8"), re.S)
    assert m, "no data in %s" % path
    return json.loads(m.group(1))


def test_cell_magic_records_the_cell(session):
    out = session["output"]
    assert session["rc"] == 0, out
    assert "cell done" in out and "script done" in out, out
    # The report was displayed (a terminal shows its repr) and kept.
    assert "<pyscope report, " in out and "saved to %s>" % session["report"] in out, out
    # The summary follows it.
    assert "Recorded process" in out and "GIL utilisation" in out, out
    kernel_pid = int(re.search(r"kernel pid (\d+)", out).group(1))
    data = embedded(session["report"])
    assert data["meta"]["pid"] == kernel_pid
    assert 0.9e9 <= data["meta"]["duration_ns"] < 1.5e9   # -d 1 passed through
    names = {t["name"] for t in data["summary"]["threads"]}
    assert {"MainThread", "cell-worker"} <= names, names
    # The cell's function is where the CPU time went, in both threads.
    strings, frames, nodes = data["strings"], data["frames"], data["nodes"]
    by_thread = {}
    for k in range(0, len(data["counts"]), 4):
        thread, node, state, samples = data["counts"][k:k + 4]
        if node >= 0 and strings[frames[4 * nodes[2 * node + 1]]] == "crunch_in_cell":
            by_thread[thread] = by_thread.get(thread, 0) + samples
    assert len(by_thread) == 2 and all(n >= 20 for n in by_thread.values()), by_thread


def test_dump_magic_shows_the_kernel(session):
    out = session["output"]
    kernel_pid = re.search(r"kernel pid (\d+)", out).group(1)
    assert re.search(r"^Process %s " % kernel_pid, out, re.M), out
    assert re.search(r'^Thread %s "MainThread"' % kernel_pid, out, re.M), out
    assert "dump_kernel (" in out, out      # the magic itself, on the main thread's stack


def test_magic_errors_are_usage_errors(session):
    out = session["output"]
    assert "UsageError: usage: %pyscope dump" in out, out
    assert "UsageError: %%pyscope profiles this kernel" in out, out


def test_options():
    parse = pyscope_module.parse_cell_options
    assert parse("-d 1 -r 200 --idle") == (["-d", "1", "-r", "200", "--idle"], None, False, 820)
    assert parse("-o x.html -q --height 500 -g") == (["-g"], "x.html", True, 500)
    assert parse("--output=y.html")[1] == "y.html"
    for bad in ("-p 12", "-f json", "-- python x.py", "--height"):
        with pytest.raises(pyscope_module.PyscopeError):
            parse(bad)


def test_inline_report_renders_in_a_sandboxed_frame(session, tmp_path):
    binary, reason = chromium.find_chromium()
    if not binary:
        pytest.skip(reason)
    report = pyscope_module.Report(session["report"].read_text(encoding="utf-8"), height=700)
    frame = report._repr_html_()
    assert frame.startswith('<iframe srcdoc="') and 'sandbox="allow-scripts"' in frame
    page = tmp_path / "notebook.html"
    page.write_text("<!DOCTYPE html><html><body style='margin:0'><p>cell output:</p>%s</body></html>" % frame)
    png = tmp_path / "notebook.png"
    holding, waiting = (0x2e, 0x9e, 0x44), (0xd9, 0x41, 0x2b)

    def shows(colors, rgb):
        return any(all(abs(a - b) <= 6 for a, b in zip(c, rgb)) for c in colors)
    # The sandboxed frame is painted by a renderer of its own, which on a busy
    # machine may not have drawn when the page's load event fires: capture the
    # page until the frame shows both colours, for up to a minute.
    with chromium.Browser(binary, width=1200, height=800) as browser:
        tab = browser.page()
        tab.open(page.as_uri(), "document.readyState === 'complete'")
        deadline = time.monotonic() + 60
        while True:
            shot = tab.call("Page.captureScreenshot", {"format": "png"})
            png.write_bytes(base64.b64decode(shot["data"]))
            width, height, channels, rows = chromium.png_pixels(png)
            colors = set()
            for row in rows:
                for x in range(0, len(row), channels):
                    colors.add(tuple(row[x:x + 3]))
            if shows(colors, holding) and shows(colors, waiting):
                break
            if time.monotonic() > deadline:
                pytest.fail("the framed report shows no GIL colours in %s after 60 s; errors: %s"
                            % (png, tab.errors))
            time.sleep(0.2)
        assert not tab.errors, tab.errors
        tab.close()


def test_make_install_with_python(ipython_interp, pyscope_binary, tmp_path):
    """make install PYTHON=... puts the module under PREFIX and a .pth into
    that interpreter's site-packages; here a venv's, so nothing else sees it."""
    venv = tmp_path / "venv"
    subprocess.run([ipython_interp.path, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, env=target_env(), timeout=120)
    python = venv / "bin" / "python"
    prefix = tmp_path / "prefix"
    make = subprocess.run(["make", "-s", "-C", str(REPO), "install", "PREFIX=%s" % prefix,
                           "PYTHON=%s" % python], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=600)
    assert make.returncode == 0, make.stdout.decode(errors="replace")
    module_dir = prefix / "share" / "pyscope" / "python"
    assert (module_dir / "pyscope" / "__init__.py").is_file()
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          stdout=subprocess.PIPE, check=True, env=target_env()).stdout.decode().strip()
    assert Path(site, "pyscope.pth").read_text().strip() == str(module_dir)
    script = tmp_path / "installed.ipy"
    script.write_text("%load_ext pyscope\nimport pyscope\nprint('module', pyscope.__file__)\n"
                      "print('binary', pyscope.find_binary())\n%pyscope dump\n")
    env = target_env()
    env.pop("PYSCOPE", None)
    rc, out = run_ipython(str(python), script, env)
    assert rc == 0, out
    assert "module %s" % (module_dir / "pyscope" / "__init__.py") in out, out
    assert "binary %s" % (prefix / "bin" / "pyscope") in out, out
    assert '"MainThread"' in out, out


def test_ptracer_gate(monkeypatch):
    """Under Yama ptrace_scope 1 (not root) the child waits until the parent
    has named it with prctl(PR_SET_PTRACER, pid), then execs pyscope under
    that same pid. This machine may have no Yama: the path is taken by
    pretending, and prctl then fails harmlessly."""
    monkeypatch.setattr(pyscope_module, "yama_scope", lambda: 1)
    monkeypatch.setattr(pyscope_module.os, "geteuid", lambda: 1000)
    proc = pyscope_module.start_pyscope(
        [sys.executable, "-c", "import os; print(os.getpid(), os.getppid())"], stdout=subprocess.PIPE)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    pid, ppid = map(int, out.split())
    assert pid == proc.pid and ppid == os.getpid()
