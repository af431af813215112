"""Function names behind wrappers: on 3.11+ a frame records the function
object it runs, and pyscope shows that function's __qualname__ when it is not
the code's (functools.wraps, numpy's array_function_dispatch), keeping the
code's file and line. Before 3.11 a frame does not record its function and
the code's name is all there is (docs/native.md)."""

import json

from conftest import run_pyscope


def wrapped_frames(doc):
    [thread] = [t for t in doc["threads"] if t["name"] == "wrapped"]
    return thread["frames"]


def test_wrapper_functions_named_after_what_they_wrap(interp, start_program):
    target = start_program(interp, "wrapped.py")
    truth = target.report["extra"]["frames"]
    frame_records_function = tuple(int(x) for x in interp.version.split(".")[:2]) >= (3, 11)
    doc = json.loads(run_pyscope(["dump", "--json", target.pid]).stdout)
    got = wrapped_frames(doc)[:len(truth)]
    for i, (want, frame) in enumerate(zip(truth, got)):
        name = want["function_qualname"] if frame_records_function else want["code_name"]
        assert frame["function"] == name, (i, frame, want)
        assert frame["file"] == want["file"], (i, frame, want)
        if i > 0:   # the innermost frame moved on to its blocking call
            assert frame["line"] == want["line"], (i, frame, want)
    # The cases the test is about really are wrappers.
    assert truth[1]["code_name"] == "wrapper" and truth[1]["function_qualname"] == "work"
    assert truth[3]["file"] == "<__array_function__ internals>"
    assert truth[3]["code_name"] == "public_api" and truth[3]["function_qualname"] == "dot"
    text = run_pyscope(["dump", target.pid]).stdout
    if frame_records_function:
        assert "    dot (<__array_function__ internals>:%d)\n" % truth[3]["line"] in text
        assert "\n    public_api (" not in text and "\n    wrapper (" not in text
