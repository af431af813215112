# Target process for check_live: builds objects whose addresses and contents
# it reports (via id() and ctypes), then parks its threads in known functions
# so an outside reader can verify every layout offset against ground truth.
# Runs unchanged on CPython 3.8 to 3.15.
import ctypes
import sys
import threading
import time

facts_path = sys.argv[1]
facts = []


def fact(key, value):
    facts.append("%s %s" % (key, value))


class Widget:
    def __init__(self, n):
        self.alpha = n
        self.beta = n * 2


def suspended_generator():
    yield 1
    yield 2


def worker_sleep(ready):
    ready.set()
    while True:
        time.sleep(0.05)


class Outer:
    def level_one(self):
        return self.level_two(7)

    def level_two(self, depth):
        local_marker = depth * 6
        publish()
        while True:
            time.sleep(0.05 + local_marker * 0)


widgets = [Widget(i) for i in range(3)]
generator = suspended_generator()
next(generator)
ascii_text = "pyscope-ascii-marker"
latin1_text = "pyscope-l\xe9tin1-marker"
big_int = 123456789012345678901234567890
a_float = 2.718281828
a_bytes = b"pyscope-bytes"
a_tuple = (ascii_text, a_float, None)
a_list = [a_bytes, big_int]
a_dict = {"k1": 1, "k2": 2, "k3": 3}
int_dict = {big_int: a_float}
a_set = {ascii_text}


def closure_maker():
    captured = [ascii_text]

    def inner(a, *, kw_only=None):
        return captured, a, kw_only
    return inner


def raiser():
    raise KeyError(ascii_text)


def caught_exception():
    try:
        raiser()
    except KeyError as e:
        return e


closure = closure_maker()
a_cell = closure.__closure__[0]
an_exception = caught_exception()
bound_builtin = a_list.append
bound_method = Widget(9).__init__
a_staticmethod = staticmethod(closure)
a_property = property(closure)


def publish():
    runtime = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
    fact("hexversion", sys.hexversion)
    fact("runtime", runtime)
    fact("sys_module", id(sys))
    fact("sys_dict", id(sys.__dict__))
    fact("sys_modules", id(sys.modules))
    import builtins
    fact("builtins_dict", id(builtins.__dict__))
    fact("ascii_text", id(ascii_text))
    fact("ascii_text_len", len(ascii_text))
    fact("latin1_text", id(latin1_text))
    fact("latin1_text_len", len(latin1_text))
    fact("widget_type", id(Widget))
    fact("widget_basicsize", Widget.__basicsize__)
    fact("widget_dictoffset", Widget.__dictoffset__)
    fact("widget_flags", Widget.__flags__)
    fact("big_int", id(big_int))
    fact("a_float", id(a_float))
    fact("a_bytes", id(a_bytes))
    fact("a_tuple", id(a_tuple))
    fact("a_list", id(a_list))
    fact("a_dict", id(a_dict))
    fact("generator", id(generator))
    fact("generator_code", id(generator.gi_code))
    fact("generator_frame", id(generator.gi_frame))
    code = Outer.level_two.__code__
    fact("level_two_code", id(code))
    fact("level_two_argcount", code.co_argcount)
    fact("level_two_nlocals", code.co_nlocals)
    fact("level_two_flags", code.co_flags)
    fact("level_two_firstlineno", code.co_firstlineno)
    fact("level_two_code_len", len(code.co_code))
    fact("level_two_stacksize", code.co_stacksize)
    fact("level_two_func", id(Outer.level_two))
    fact("level_two_name", id(Outer.level_two.__name__))
    fact("main_globals", id(globals()))
    fact("int_dict", id(int_dict))
    fact("a_set", id(a_set))
    fact("inner_code", id(closure.__code__))
    fact("inner_kwonly", closure.__code__.co_kwonlyargcount)
    fact("inner_nlocalsplus", len(closure.__code__.co_varnames) + len(closure.__code__.co_cellvars)
         + len(closure.__code__.co_freevars))
    fact("inner_freevars", id(closure.__code__.co_freevars))
    fact("maker_cellvars", id(closure_maker.__code__.co_cellvars))
    fact("maker_code", id(closure_maker.__code__))
    fact("a_cell", id(a_cell))
    fact("a_cell_contents", id(a_cell.cell_contents))
    fact("exception", id(an_exception))
    fact("exception_args", id(an_exception.args))
    tb = an_exception.__traceback__
    fact("exception_tb", id(tb))
    fact("tb_lineno", tb.tb_lineno)
    fact("tb_lasti", tb.tb_lasti)
    fact("tb_next", id(tb.tb_next))
    fact("tb_frame", id(tb.tb_frame))
    fact("tb_frame_code", id(tb.tb_frame.f_code))
    fact("bound_builtin", id(bound_builtin))
    fact("bound_method", id(bound_method))
    fact("bound_method_func", id(bound_method.__func__))
    fact("bound_method_self", id(bound_method.__self__))
    fact("object_type", id(object))
    fact("staticmethod", id(a_staticmethod))
    fact("property", id(a_property))
    fact("closure", id(closure))
    fact("method_descr", id(list.append))
    fact("main_ident", threading.main_thread().ident)
    for thread in threading.enumerate():
        fact("thread_ident", thread.ident)
        if hasattr(thread, "native_id"):
            fact("thread_native_id", thread.native_id)
    with open(facts_path + ".tmp", "w") as out:
        out.write("\n".join(facts) + "\n")
    import os
    os.rename(facts_path + ".tmp", facts_path)


ready = threading.Event()
threading.Thread(target=worker_sleep, args=(ready,), daemon=True).start()
ready.wait()
Outer().level_one()
