#!/usr/bin/env python3
"""Checks a Chrome Trace Event JSON file against the rules its viewers
(Perfetto UI, chrome://tracing) and `viztracer --combine` rely on: the
fields each phase requires, B/E pairs balanced and nested per track, X
durations, timestamps that never go back within a track, well-formed
metadata events. Standard library only.

Usage: check_chrome_trace.py FILE [--pyscope]
  --pyscope  also require what pyscope's writer promises: the "pyscope"
             summary object and VizTracer's "viztracer_metadata".
Exit status 0 when the file passes, 1 with the problems listed otherwise.
"""
import json
import numbers
import sys

METADATA_NAMES = {
    "process_name": "name",
    "process_labels": "labels",
    "process_sort_index": "sort_index",
    "thread_name": "name",
    "thread_sort_index": "sort_index",
}
# Timestamps are microseconds written with nanosecond resolution; ts + dur
# computed here in floating point may miss the next ts by far less than that.
TS_EPSILON = 1e-4
# Phases with a single timestamp that still sit on a thread's track.
INSTANT_PHASES = {"i", "I", "n", "b", "e", "s", "t", "f", "O", "N", "D", "P", "R", "c"}


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def ns(microseconds):
    """A time in whole nanoseconds: ts and dur are decimal microseconds, and
    float sums of them (ts + dur) can land a hair past the next slice's ts
    when in decimal they abut exactly. Viewers keep nanoseconds (Perfetto)."""
    return round(microseconds * 1000)


class Checker:
    def __init__(self):
        self.problems = []
        self.phases = {}
        self.tracks = {}        # (pid, tid) -> state
        self.max_depth = 0

    def problem(self, index, message):
        self.problems.append(f"event {index}: {message}")

    def track(self, event):
        key = (event["pid"], event["tid"])
        if key not in self.tracks:
            self.tracks[key] = {"last_ts": None, "open": [], "x_ends": []}
        return self.tracks[key]

    def require(self, index, event, fields):
        ok = True
        for field, kind in fields:
            if field not in event:
                self.problem(index, f'ph {event["ph"]!r} needs "{field}"')
                ok = False
            elif kind == "int" and not is_int(event[field]):
                self.problem(index, f'"{field}" must be an integer, got {event[field]!r}')
                ok = False
            elif kind == "number" and not is_number(event[field]):
                self.problem(index, f'"{field}" must be a number, got {event[field]!r}')
                ok = False
            elif kind == "str" and not isinstance(event[field], str):
                self.problem(index, f'"{field}" must be a string, got {event[field]!r}')
                ok = False
        return ok

    def advance(self, index, event, track):
        ts = event["ts"]
        if track["last_ts"] is not None and ts < track["last_ts"]:
            self.problem(index, f'ts {ts} goes back on track pid={event["pid"]} '
                                f'tid={event["tid"]} (last {track["last_ts"]})')
        track["last_ts"] = ts
        # X slices that ended by now no longer enclose anything.
        while track["x_ends"] and track["x_ends"][-1] <= ns(ts):
            track["x_ends"].pop()

    def check_event(self, index, event):
        if not isinstance(event, dict):
            self.problem(index, "is not an object")
            return
        ph = event.get("ph")
        if not isinstance(ph, str):
            self.problem(index, 'has no "ph" string')
            return
        self.phases[ph] = self.phases.get(ph, 0) + 1
        where = [("pid", "int"), ("tid", "int")]
        if ph == "M":
            self.check_metadata(index, event)
        elif ph in ("B", "E"):
            fields = where + [("ts", "number")] + ([("name", "str")] if ph == "B" else [])
            if not self.require(index, event, fields):
                return
            track = self.track(event)
            self.advance(index, event, track)
            if ph == "B":
                track["open"].append((event["name"], event["ts"]))
                self.max_depth = max(self.max_depth, len(track["open"]))
            elif not track["open"]:
                self.problem(index, f'E with no open B on pid={event["pid"]} tid={event["tid"]}')
            else:
                name, _ = track["open"].pop()
                if "name" in event and event["name"] != name:
                    self.problem(index, f'E named {event["name"]!r} closes B named {name!r}')
        elif ph == "X":
            fields = where + [("ts", "number"), ("dur", "number"), ("name", "str")]
            if not self.require(index, event, fields):
                return
            if event["dur"] < 0:
                self.problem(index, f'X with negative dur {event["dur"]}')
            track = self.track(event)
            self.advance(index, event, track)
            end = ns(event["ts"]) + ns(event["dur"])
            if track["x_ends"] and end > track["x_ends"][-1]:
                self.problem(index, f'X [{event["ts"]}, {end / 1000}] overlaps the end of an '
                                    f'enclosing X at {track["x_ends"][-1] / 1000}')
            track["x_ends"].append(end)
            self.max_depth = max(self.max_depth, len(track["x_ends"]))
        elif ph == "C":
            if self.require(index, event, [("pid", "int"), ("ts", "number"), ("name", "str")]):
                args = event.get("args")
                if not isinstance(args, dict) or not all(is_number(v) for v in args.values()):
                    self.problem(index, "C needs args with numeric values")
        elif ph in INSTANT_PHASES:
            if self.require(index, event, where + [("ts", "number"), ("name", "str")]):
                self.advance(index, event, self.track(event))
        else:
            self.problem(index, f"unknown ph {ph!r}")

    def check_metadata(self, index, event):
        name = event.get("name")
        if name not in METADATA_NAMES:
            self.problem(index, f"metadata event with unknown name {name!r}")
            return
        fields = [("pid", "int")] + ([("tid", "int")] if name.startswith("thread_") else [])
        if not self.require(index, event, fields):
            return
        args = event.get("args")
        key = METADATA_NAMES[name]
        if not isinstance(args, dict) or key not in args:
            self.problem(index, f'{name} needs args.{key}')
        elif key == "name" and not isinstance(args[key], str):
            self.problem(index, f'{name}: args.name must be a string')
        elif key == "sort_index" and not is_int(args[key]):
            self.problem(index, f'{name}: args.sort_index must be an integer')

    def finish(self):
        for (pid, tid), track in self.tracks.items():
            for name, ts in track["open"]:
                self.problems.append(f"B {name!r} at {ts} on pid={pid} tid={tid} is never closed")


def check_top_level(trace, checker, pyscope):
    if isinstance(trace, list):
        if pyscope:
            checker.problems.append("pyscope writes the object form, got a bare array")
        return trace
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        checker.problems.append('top level must be an array or an object with a "traceEvents" array')
        return []
    unit = trace.get("displayTimeUnit")
    if unit is not None and unit not in ("ms", "ns"):
        checker.problems.append(f'displayTimeUnit must be "ms" or "ns", got {unit!r}')
    if pyscope:
        meta = trace.get("viztracer_metadata")
        if not isinstance(meta, dict):
            checker.problems.append('"viztracer_metadata" object missing (viztracer --align_combine needs it)')
        elif not isinstance(meta.get("overflow", False), bool):
            checker.problems.append('"viztracer_metadata.overflow" must be a boolean')
        summary = trace.get("pyscope")
        if not isinstance(summary, dict) or not isinstance(summary.get("meta"), dict) \
                or not isinstance(summary.get("summary"), dict):
            checker.problems.append('"pyscope" object with "meta" and "summary" missing')
    return trace["traceEvents"]


def unique_keys(pairs):
    """A JSON object as a dict; a key written twice is an error of the writer."""
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate keys in a JSON object: %r" % keys)
    return dict(pairs)


def main(argv):
    paths = [a for a in argv[1:] if not a.startswith("--")]
    if len(paths) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(paths[0], encoding="utf-8") as f:
        trace = json.load(f, object_pairs_hook=unique_keys)
    checker = Checker()
    events = check_top_level(trace, checker, "--pyscope" in argv)
    for index, event in enumerate(events):
        checker.check_event(index, event)
    checker.finish()
    if checker.problems:
        for line in checker.problems[:30]:
            print(f"{paths[0]}: {line}")
        if len(checker.problems) > 30:
            print(f"{paths[0]}: ... {len(checker.problems) - 30} more problems")
        return 1
    phases = ", ".join(f"{ph} {n}" for ph, n in sorted(checker.phases.items()))
    print(f"{paths[0]}: chrome trace OK: {len(events)} events ({phases}), "
          f"{len(checker.tracks)} tracks, deepest nesting {checker.max_depth}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
