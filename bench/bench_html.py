#!/usr/bin/env python3
"""Opens HTML reports in headless Chromium and times them: the wall-clock
time from navigation until the page's "ready" marker (data-ready="1" on
<html>, set once the timeline and the flame graph are drawn), the page's
own measure of the same (performance.now() at ready), and the cost of the
interactions that recompute the flame graph from the timeline.

  bench_html.py REPORT.html [REPORT.html...] [--runs N]

Run by `make bench-html` on the 10-minute, 50-thread report bench_html.c
synthesizes. Stdlib only; Chromium from Debian (apt-get install chromium).
"""

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
import chromium  # noqa: E402

READY = "!!document.documentElement && document.documentElement.getAttribute('data-ready') === '1'"

INTERACTIONS = """(() => {
  const r = window.pyscopeReport, t = () => performance.now(), out = {};
  let a = t(); r.select(60, 120); out.select_60s_ms = t() - a;
  a = t(); r.select(0, 1e9); out.select_all_ms = t() - a;
  a = t(); r.setThread(0); out.one_thread_ms = t() - a;
  a = t(); r.setThread(-1); r.select(null); out.back_to_whole_ms = t() - a;
  a = t(); r.search('parse'); out.search_typed_ms = t() - a;
  return out;
})()"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    binary, reason = chromium.find_chromium()
    if not binary:
        sys.exit("bench_html: %s" % reason)
    for report in args.reports:
        path = Path(report).resolve()
        size = path.stat().st_size
        walls, readies, scripts = [], [], []
        for _ in range(args.runs):
            with chromium.Browser(binary) as browser:
                page = browser.page()
                wall = page.open(path.as_uri(), READY, timeout=120)
                readies.append(page.evaluate("window.pyscopeReport.readyMs"))
                scripts.append(page.evaluate("window.pyscopeReport.scriptMs"))
                walls.append(wall * 1000)
                interactions = page.evaluate(INTERACTIONS)
                heap = page.call("Runtime.getHeapUsage")
                errors = list(page.errors)
                page.close()
        print("%s: %.2f MB" % (path.name, size / 1e6))
        print("  open to ready (wall, CDP poll):   median %.0f ms  (runs: %s)"
              % (statistics.median(walls), ", ".join("%.0f" % w for w in walls)))
        print("  navigation start to ready (page): median %.0f ms  (runs: %s)"
              % (statistics.median(readies), ", ".join("%.0f" % r for r in readies)))
        print("  of which the report's script:      median %.0f ms" % statistics.median(scripts))
        print("  interactions (last run): " + ", ".join("%s %.0f" % kv for kv in interactions.items()))
        print("  JS heap used after them: %.0f MB" % (heap.get("usedSize", 0) / 1e6))
        print("  console errors: %s" % (errors or "none"))
        if errors:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
