"""The end of `make test`: each stage's time and exit status, the 20
slowest tests of the integration runs (from their JUnit files), and an exit
status that fails the run when any stage failed.

usage: test_summary.py RESULTS_DIR"""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def stages(results):
    rows = []
    path = results / "stages.tsv"
    if path.exists():
        for line in path.read_text().splitlines():
            name, seconds, status = line.split("\t")
            rows.append((name, float(seconds), int(status)))
    return rows


def slowest(results, count=20):
    tests = []
    for xml in sorted(results.glob("*.xml")):
        run = xml.stem
        for case in ET.parse(xml).getroot().iter("testcase"):
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "FAILED"
                elif child.tag == "skipped":
                    outcome = "skipped"
            name = "%s::%s" % (case.get("classname", "").rsplit(".", 1)[-1], case.get("name"))
            tests.append((float(case.get("time") or 0), run, name, outcome))
    tests.sort(reverse=True)
    return tests[:count], len(tests)


def main():
    results = Path(sys.argv[1])
    rows = stages(results)
    print()
    print("== make test: stages")
    print("%-22s %9s  %s" % ("stage", "seconds", "result"))
    for name, seconds, status in rows:
        print("%-22s %9.1f  %s" % (name, seconds, "ok" if status == 0 else "FAILED (exit %d)" % status))
    print("%-22s %9.1f" % ("total", sum(r[1] for r in rows)))
    top, total = slowest(results)
    if top:
        print()
        print("== the %d slowest of %d integration tests" % (len(top), total))
        print("%8s  %-20s %-8s %s" % ("seconds", "run", "result", "test"))
        for seconds, run, name, outcome in top:
            print("%8.1f  %-20s %-8s %s" % (seconds, run, outcome, name))
    counts = {"passed": 0, "FAILED": 0, "skipped": 0}
    for xml in sorted(results.glob("*.xml")):
        for case in ET.parse(xml).getroot().iter("testcase"):
            kinds = {child.tag for child in case}
            counts["FAILED" if kinds & {"failure", "error"} else
                   "skipped" if "skipped" in kinds else "passed"] += 1
    failed = [name for name, _, status in rows if status != 0]
    print()
    if failed:
        print("make test: FAILED stages: %s" % ", ".join(failed))
    # The closing line: integration tests counted over every run.
    print("integration: %d passed, %d failed, %d skipped"
          % (counts["passed"], counts["FAILED"], counts["skipped"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
