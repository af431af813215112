"""What asyncio itself says about its tasks, for the programs that compare
pyscope's task view with it: all_tasks(), each task's await chain (cr_await,
gi_yieldfrom, an async generator's ag_await, innermost first),
Task.get_stack(), the tasks it awaits and the primitive it waits in.

Import it after asyncio (a program may first make _asyncio unimportable).
Runs unchanged on CPython 3.8 to 3.15.
"""

import asyncio
import gc
import sys

import _target

# Async generators a program iterates: an async_generator_asend object does
# not show its generator, so the one awaiting is looked for among these.
AGENS = []
# The C Task class and the pure-Python one.
TASKS = (asyncio.Task, asyncio.tasks._PyTask)
# The classes whose methods pyscope names as what a task waits in.
PRIMITIVES = ("Queue", "LifoQueue", "PriorityQueue", "Event", "Lock", "Condition", "Semaphore",
              "BoundedSemaphore", "Barrier", "StreamReader", "TaskGroup", "Timeout")


def all_tasks(loop):
    """asyncio.all_tasks(loop); from 3.14 that reads only the C tasks' lists,
    and pure-Python tasks are in the registry _py_all_tasks reads."""
    py_all = getattr(asyncio.tasks, "_py_all_tasks", None)
    return asyncio.all_tasks(loop) | (py_all(loop) if py_all else set())


def chain_frames(task):
    """(frame, coroutine or generator) of each link, innermost first."""
    frames = []
    obj = task.get_coro()
    for _ in range(64):
        if asyncio.iscoroutine(obj) and hasattr(obj, "cr_frame"):
            frame, nxt = obj.cr_frame, obj.cr_await
        elif hasattr(obj, "gi_frame"):
            frame, nxt = obj.gi_frame, obj.gi_yieldfrom
        elif type(obj).__name__ == "async_generator_asend":
            gens = [g for g in AGENS if g.ag_await is not None]
            assert len(gens) == 1, gens
            obj = gens[0]
            frame, nxt = obj.ag_frame, obj.ag_await
        else:
            break
        if frame is None:
            break
        frames.append((frame, obj))
        obj = nxt
    return list(reversed(frames))


def describe(frame):
    return {"function": _target.function_name(frame.f_code),
            "file": frame.f_code.co_filename, "line": frame.f_lineno}


def chain_of(task):
    return [describe(frame) for frame, _ in chain_frames(task)]


def stack_of(task):
    """Task.get_stack(): the frames asyncio itself reports for the task
    (the outermost coroutine's, for a suspended coroutine)."""
    return [describe(frame) for frame in task.get_stack()]


def type_name(obj):
    """tp_name: a C type's carries its module, a Python class's does not."""
    if obj is None:
        return None
    cls = type(obj)
    return cls.__module__ + "." + cls.__name__ if cls.__module__ == "_asyncio" else cls.__name__


def locals_of(frame):
    """frame.f_locals, leaving no reference behind: up to 3.12 that is a dict
    the frame keeps, holding every local (one more referrer of each, which
    pyscope would rightly count), so it is copied and emptied (the frame's
    own variables are untouched); from 3.13 it is a view of the frame."""
    d = frame.f_locals
    if sys.version_info >= (3, 13):
        return d
    copy = dict(d)
    d.clear()
    return copy


def gathered(fut, depth=0):
    """The tasks a gather gathers, through nested gathers."""
    out = []
    for child in getattr(fut, "_children", ()):
        if isinstance(child, TASKS):
            out.append(child)
        elif depth < 8 and hasattr(child, "_children"):
            out.extend(gathered(child, depth + 1))
    return out


def awaited_tasks(task):
    """The tasks task waits on to finish: the one it awaits, a gather's, a
    TaskGroup's (its owner waits in __aexit__), asyncio.wait's set, the one
    wait_for made."""
    waiter = getattr(task, "_fut_waiter", None)
    if isinstance(waiter, TASKS):
        return [waiter]
    out = gathered(waiter) if waiter is not None else []
    for frame, _ in chain_frames(task):
        name = frame.f_code.co_name
        file = frame.f_code.co_filename
        if name in ("__aexit__", "_aexit") and "asyncio" in file or (
                name in ("_wait", "wait_for") and file.endswith("asyncio/tasks.py")):
            local = locals_of(frame)
            if isinstance(local.get("self"), getattr(asyncio, "TaskGroup", ())):
                return list(local["self"]._tasks)
            if name == "_wait":
                return [f for f in local["fs"] if isinstance(f, TASKS)]
            # wait_for up to 3.11 runs what it waits for as a task of its own
            if name == "wait_for" and isinstance(local.get("fut"), TASKS):
                return [local["fut"]]
    return out


def primitive(task):
    """(as pyscope names it: "Class.method", the object) of the innermost
    asyncio frame of the chain whose self is a primitive, or (None, None)."""
    for frame, _ in chain_frames(task):
        if "asyncio" not in frame.f_code.co_filename:
            continue
        me = locals_of(frame).get("self")
        if type(me).__name__ in PRIMITIVES:
            return "%s.%s" % (type(me).__name__, frame.f_code.co_name), me
    return None, None


def task_truth(task):
    """One task as asyncio sees it."""
    waiter = getattr(task, "_fut_waiter", None)
    method, _ = primitive(task)
    return {"address": id(task), "name": task.get_name(), "chain": chain_of(task),
            "stack": stack_of(task),
            "awaits_task": id(waiter) if isinstance(waiter, TASKS) else None,
            "awaits_tasks": sorted(id(t) for t in awaited_tasks(task)),
            "waiter": id(waiter) if waiter is not None else None,
            "waiter_type": type_name(waiter), "primitive": method,
            "done": task.done(), "pure": isinstance(task, asyncio.tasks._PyTask)}


def timer_due(loop, waiter):
    """asyncio.sleep's timer: when the scheduled handle that sets the future
    the task waits on is due (uvloop's timers are not visible from Python).
    A function of its own: a comprehension in the caller would keep waiter
    in a closure cell (up to 3.11), a reference of the program's own."""
    due = [h.when() for h in getattr(loop, "_scheduled", ())
           if h._args and h._args[0] is waiter]
    return due[0] if due else None


def traceback_frames(tasks):
    """The frames in the tracebacks of the exceptions of finished tasks:
    frames that never run again."""
    out = []
    for task in tasks:
        if task.done() and not task.cancelled():
            tb = task._exception.__traceback__ if task._exception is not None else None
            while tb is not None:
                out.append(tb.tb_frame)
                tb = tb.tb_next
    return out


def referrers_outside(obj, tasks, allowed=()):
    """gc's referrers of obj that are no part of the given tasks' chains
    (their frames and coroutines, a Future's FutureIter, a bound method of
    obj only they hold, a pure-Python task's own __dict__) nor of allowed."""
    mine = {id(sys._getframe()), id(sys._getframe(1))} | {id(a) for a in allowed}
    for task in tasks:
        mine.add(id(task))
        if isinstance(task, asyncio.tasks._PyTask) and hasattr(task, "__dict__"):
            mine.add(id(task.__dict__))
        for frame, gen in chain_frames(task):
            mine.update((id(frame), id(gen)))
    refs = gc.get_referrers(obj)
    mine.add(id(refs))
    out = []
    for ref in refs:
        if id(ref) in mine or type(ref).__name__.endswith("FutureIter"):
            continue
        if getattr(ref, "__self__", None) is obj:
            # an `async with`'s bound __aexit__ on a frame of theirs
            owners = gc.get_referrers(ref)
            if all(id(r) in mine for r in owners):
                continue
        out.append(ref)
    return out
