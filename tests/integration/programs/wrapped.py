"""Target: a thread "wrapped" blocked under two kinds of wrappers whose code
has another name than the function object running it:

- a functools.wraps decorator (`traced`): the wrapper's code is
  traced.<locals>.wrapper, the function is named after the one it wraps;
- a numpy-like dispatcher (array_function_dispatch before numpy 1.25): the
  public function is made by exec() of a template with a fake file name
  <__array_function__ internals>, its code is `public_api`, functools.wraps
  names the function after the implementation (`dot`).

extra.frames: the innermost frames of "wrapped", each with the code's name
and qualname, the file and line, and the __qualname__ of the function object
that runs it (checked here: its __code__ is the frame's code).

usage: python wrapped.py REPORT.json
"""

import functools
import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402

TEMPLATE = """
def public_api(*args, **kwargs):
    relevant_args = dispatcher(*args, **kwargs)
    return implementation(*args, **kwargs)
"""


def array_function_dispatch(dispatcher):
    def decorator(implementation):
        scope = {"dispatcher": dispatcher, "implementation": implementation}
        exec(compile(TEMPLATE, "<__array_function__ internals>", "exec"), scope)
        return functools.wraps(implementation)(scope["public_api"])
    return decorator


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@traced
def work(depth):
    frame = sys._getframe()
    frames = []
    for function in (work.__wrapped__, work, dot.__wrapped__, dot):
        code = frame.f_code
        assert function.__code__ is code, (function, code)
        frames.append({"code_name": code.co_name,
                       "code_qualname": getattr(code, "co_qualname", code.co_name),
                       "file": code.co_filename, "line": frame.f_lineno,
                       "function_qualname": function.__qualname__})
        frame = frame.f_back
    RESULT["frames"] = frames
    READY.set()
    BLOCK.acquire()


def _dot_dispatcher(a, b):
    return (a, b)


@array_function_dispatch(_dot_dispatcher)
def dot(a, b):
    return work(a + b)


RESULT = {}
READY = threading.Event()
BLOCK = threading.Lock()


def main():
    path = _target.report_path()
    BLOCK.acquire()
    threading.Thread(target=dot, args=(1, 2), name="wrapped", daemon=True).start()
    READY.wait()
    _target.park(__file__, path, extra=RESULT)


if __name__ == "__main__":
    main()
