"""The HTML report (`pyscope record -f html`, docs/html.md) of a real
recording, opened in headless Chromium through the DevTools protocol
(chromium.py): it loads from a file without console errors or network
requests, the flame graph's widest frame is the recording's top function,
the timeline has one row per thread, a selected time range (by API, by
dragging, by clicking) filters the flame graph, and a screenshot shows the
timeline's colours.

Chromium comes from Debian's `chromium` package; as root it is installed
when missing, otherwise these tests are skipped with the reason.
"""

import json
import re

import pytest

import chromium
from conftest import PROGRAMS, REPO, pick_interp, run_pyscope

READY = "!!document.documentElement && document.documentElement.getAttribute('data-ready') === '1'"
PHASE_SECONDS = 2.0
STATE_RGB = {"holding": (0x2e, 0x9e, 0x44), "waiting": (0xd9, 0x41, 0x2b), "idle": (0xc4, 0xc8, 0xce)}


def embedded_data(html):
    m = re.search(r'<script type="application/json" id="pyscope-data">(.*?)</script>', html, re.S)
    assert m, "no data element in the report"
    return json.loads(m.group(1))


def top_function(data, threads=None, idle=False):
    """(function, file) with the most self samples, as the page's flame graph
    of the whole recording counts them (idle samples left out)."""
    strings, frames, nodes, counts = data["strings"], data["frames"], data["nodes"], data["counts"]
    idle_state = data["states"].index("idle")
    totals = {}
    for k in range(0, len(counts), 4):
        thread, node, state, samples = counts[k:k + 4]
        if (state == idle_state and not idle) or node < 0 or (threads is not None and thread not in threads):
            continue
        frame = nodes[2 * node + 1]
        key = (strings[frames[4 * frame]], strings[frames[4 * frame + 1]])
        totals[key] = totals.get(key, 0) + samples
    return max(totals.items(), key=lambda kv: kv[1]) if totals else None


def inclusive_samples(data, function):
    """Samples (idle left out) of stacks that pass through function, a
    (name, file) pair: the width of its frames in the flame graph."""
    strings, frames, nodes, counts = data["strings"], data["frames"], data["nodes"], data["counts"]
    idle_state = data["states"].index("idle")
    total = 0
    for k in range(0, len(counts), 4):
        node, state, samples = counts[k + 1:k + 4]
        if state == idle_state:
            continue
        while node >= 0:
            frame = nodes[2 * node + 1]
            if (strings[frames[4 * frame]], strings[frames[4 * frame + 1]]) == function:
                total += samples
                break
            node = nodes[2 * node]
    return total


@pytest.fixture(scope="module")
def browser_binary():
    path, reason = chromium.find_chromium()
    if not path:
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def recording(tmp_path_factory, pyscope_binary):
    """A real recording of programs/phases.py as HTML, with the program's
    own account of when each phase ran."""
    interp = pick_interp()
    tmp = tmp_path_factory.mktemp("html")
    report = tmp / "report.html"
    bounds = tmp / "phases.json"
    result = run_pyscope(["record", "-q", "-f", "html", "-o", report, "--", interp.path,
                          PROGRAMS / "phases.py", bounds, PHASE_SECONDS], timeout=60)
    assert result.returncode == 0, result
    html = report.read_text(encoding="utf-8")
    return {"path": report, "html": html, "data": embedded_data(html),
            "program": json.loads(bounds.read_text()), "interp": interp, "tmp": tmp}


@pytest.fixture(scope="module")
def page(browser_binary, recording):
    with chromium.Browser(browser_binary, width=1400, height=1000) as browser:
        page = browser.page()
        page.set_viewport(1400, 1000)
        page.open(recording["path"].as_uri(), READY, timeout=60)
        yield page
        page.close()


def test_self_contained(recording):
    html = recording["html"]
    assert "http://" not in html and "https://" not in html
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=|url\(", html)
    assert html.count("<script") == 2
    data = recording["data"]
    assert data["format"] == "pyscope-html"
    assert data["meta"]["command"].endswith("phases.json %s" % PHASE_SECONDS)
    assert data["meta"]["python_version"] == recording["interp"].version


def test_loads_without_errors(page):
    assert page.errors == [], page.errors
    assert page.evaluate("document.documentElement.getAttribute('data-error')") is None
    assert page.evaluate("document.getElementById('load-error').hidden") is True
    # The header says what was recorded.
    meta = page.evaluate("document.getElementById('meta').innerText")
    for word in ("phases.py", "CPython", "Duration", "Sample rate", "Errors"):
        assert word in meta, meta


def test_timeline_has_a_row_per_thread(page, recording):
    data = recording["data"]
    threads = data["summary"]["threads"]
    assert page.evaluate("window.pyscopeReport.timelineRows()") == len(threads)
    names = {t["name"] for t in threads}
    assert {"MainThread", "cruncher", "spinner", "sleeper", "locked"} <= names
    table_rows = page.evaluate("document.querySelectorAll('#threads tbody tr').length")
    assert table_rows == len(threads)


def test_widest_frame_is_the_top_function(page, recording):
    expected, samples = top_function(recording["data"])
    assert expected[0] in ("phase_one", "phase_two", "spin"), expected
    top = page.evaluate("window.pyscopeReport.topFunction()")
    assert (top["name"], top["file"]) == expected
    assert top["weight"] == samples
    # As drawn: the top function's frames are as wide as its share of the
    # samples (with what it calls), and it is the widest frame by self time.
    width = page.evaluate("window.pyscopeReport.flameWidth()")
    total = page.evaluate("window.pyscopeReport.flameTotal()")
    frames = page.evaluate("window.pyscopeReport.widestFrames(100000)")
    drawn = sum(f["width"] for f in frames if f["name"] == expected[0])
    inclusive = inclusive_samples(recording["data"], expected)
    assert abs(drawn - width * inclusive / total) < 2, (drawn, width, inclusive, total)
    leaves = [f for f in frames if f["self"] > 0]
    assert max(leaves, key=lambda f: f["self"])["name"] == expected[0]


def relative_phase(recording, name, inner=0.6):
    """The middle `inner` share of a phase, in seconds since the recording
    started."""
    start = recording["data"]["meta"]["start_unix_ns"] / 1e9
    a, b = recording["program"]["bounds"][name]
    margin = (b - a) * (1 - inner) / 2
    return a - start + margin, b - start - margin


def thread_index(recording, name):
    for t in recording["data"]["summary"]["threads"]:
        if t["name"] == name:
            return t["thread"]
    raise AssertionError("no thread %r" % name)


def test_selected_range_filters_the_flame_graph(fresh, recording):
    page = fresh
    data = recording["data"]
    cruncher = thread_index(recording, "cruncher")
    page.evaluate("window.pyscopeReport.setThread(%d)" % cruncher)
    for phase in ("phase_one", "phase_two"):
        t0, t1 = relative_phase(recording, phase)
        page.evaluate("window.pyscopeReport.select(%f, %f)" % (t0, t1))
        top = page.evaluate("window.pyscopeReport.topFunction()")
        assert top and top["name"] == phase, (phase, t0, t1, top)
        status = page.evaluate("document.getElementById('flame-status').textContent")
        assert status.startswith("Showing time "), status
        # The thread's time in the range (idle excluded): at most the range.
        seconds = page.evaluate("window.pyscopeReport.flameTotal()") * data["timeline"]["unit_ns"] / 1e9
        assert 0.3 * (t1 - t0) < seconds <= (t1 - t0) * 1.05 + 2 * data["timeline"]["bin_ns"] / 1e9
    # Back to the whole recording: the thread's exact sample counts.
    page.evaluate("window.pyscopeReport.select(null)")
    assert page.evaluate("window.pyscopeReport.selection()") is None
    idle = data["states"].index("idle")
    counts = data["counts"]
    expected = sum(counts[k + 3] for k in range(0, len(counts), 4)
                   if counts[k] == cruncher and counts[k + 2] != idle)
    assert page.evaluate("window.pyscopeReport.flameTotal()") == expected
    assert page.errors == [], page.errors


def mouse(page, kind, x, y):
    page.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                           "buttons": 1 if kind != "mouseReleased" else 0,
                                           "clickCount": 1})


@pytest.fixture
def fresh(page):
    """The page as it opened (no selection, all threads, no search), and
    again after the test, whatever it did."""
    reset = "window.pyscopeReport.select(null); window.pyscopeReport.setThread(-1); window.pyscopeReport.search('')"
    page.evaluate(reset)
    yield page
    page.evaluate(reset)


def test_dragging_and_clicking_the_timeline(fresh, recording):
    page = fresh
    g = page.evaluate("window.pyscopeReport.timelineGeometry()")
    s0, s1 = g["viewSeconds"]

    def x_of(seconds):
        return g["left"] + g["labelWidth"] + (seconds - s0) / (s1 - s0) * g["plotWidth"]

    row = thread_index(recording, "cruncher")
    y = g["top"] + g["axisHeight"] + row * (g["rowHeight"] + g["rowGap"]) + g["rowHeight"] / 2
    t0, t1 = relative_phase(recording, "phase_two")
    mouse(page, "mousePressed", x_of(t0), y)
    mouse(page, "mouseMoved", (x_of(t0) + x_of(t1)) / 2, y)
    mouse(page, "mouseMoved", x_of(t1), y)
    mouse(page, "mouseReleased", x_of(t1), y)
    sel = page.evaluate("window.pyscopeReport.selection()")
    assert sel is not None
    pixel = (s1 - s0) / g["plotWidth"]
    assert abs(sel[0] - t0) < 2 * pixel and abs(sel[1] - t1) < 2 * pixel, (sel, t0, t1)
    # Selecting did not move the timeline.
    assert page.evaluate("window.pyscopeReport.timelineGeometry()") == g
    # Clicking the label column shows only that thread.
    mouse(page, "mousePressed", g["left"] + 20, y)
    mouse(page, "mouseReleased", g["left"] + 20, y)
    assert page.evaluate("document.getElementById('thread-filter').value") == str(row)
    assert page.evaluate("window.pyscopeReport.topFunction()")["name"] == "phase_two"
    # A click in a row selects the stretch under the pointer.
    page.evaluate("window.pyscopeReport.select(null)")
    mid = (t0 + t1) / 2
    mouse(page, "mousePressed", x_of(mid), y)
    mouse(page, "mouseReleased", x_of(mid), y)
    sel = page.evaluate("window.pyscopeReport.selection()")
    # Within a pixel: the pointer's position is rounded to whole pixels.
    assert sel is not None and sel[0] - pixel <= mid <= sel[1] + pixel, (sel, mid, pixel)
    assert page.errors == [], page.errors


def test_search(fresh):
    page = fresh
    page.evaluate("window.pyscopeReport.search('phase_')")
    result = page.evaluate("new Promise(r => setTimeout(() => r(document.getElementById('search-result').textContent), 400))")
    assert result.startswith("matched "), result
    matched = float(result.split()[1].rstrip("%"))
    assert 0 < matched < 100
    page.evaluate("window.pyscopeReport.search('')")
    assert page.errors == [], page.errors


def near(a, b, tolerance=6):
    return all(abs(x - y) <= tolerance for x, y in zip(a, b))


def test_screenshot_is_not_blank(browser_binary, recording):
    png = recording["tmp"] / "report.png"
    log = chromium.screenshot(browser_binary, recording["path"].as_uri(), png, 1400, 1000)
    console = [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console
    width, height, channels, rows = chromium.png_pixels(png)
    assert (width, height) == (1400, 1000)
    colors = set()
    for row in rows:
        for x in range(0, len(row), channels):
            colors.add(tuple(row[x:x + 3]) if channels >= 3 else (row[x],) * 3)
    assert len(colors) > 50, "only %d colours in %s" % (len(colors), png)
    for state, rgb in STATE_RGB.items():
        assert any(near(c, rgb) for c in colors), "no %s colour %s in the screenshot %s" % (state, rgb, png)
    # Kept for a look (docs/html.md names this path).
    keep = REPO / "build" / "test-html" / "report.png"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_bytes(png.read_bytes())
    (keep.parent / "report.html").write_bytes(recording["path"].read_bytes())
