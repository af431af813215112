/* Prints one py_layout_entry initializer for the CPython whose headers this
 * file is compiled against (-I<inc> -I<inc>/internal -DPy_BUILD_CORE), using
 * offsetof()/sizeof() so no offset is ever typed by hand except where noted. */
#include <Python.h>
#include <frameobject.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>

#if PY_MAJOR_VERSION != 3 || PY_MINOR_VERSION < 8 || PY_MINOR_VERSION > 15
#error "gen_layout supports CPython 3.8 to 3.15 headers only"
#endif

#define MINOR PY_MINOR_VERSION

/* Internal headers: where each version keeps the structs we measure. */
#if MINOR == 8
#include "pycore_pystate.h"      /* _PyRuntimeState, PyInterpreterState */
#else
#include "pycore_runtime.h"
#include "pycore_interp.h"
#endif
#include "pycore_gil.h"
#if MINOR >= 9
#include "pycore_gc.h"
#endif
#if MINOR >= 10
#include "pycore_moduleobject.h"
#endif
#if MINOR >= 11
#include "pycore_frame.h"
#include "pycore_code.h"
#endif
#if MINOR >= 12
#include "pycore_long.h"
#endif
#if MINOR >= 11
/* Their inline helpers trip -Wunused-parameter in some versions. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "pycore_dict.h"
#include "pycore_object.h"
#pragma GCC diagnostic pop
#endif
#if MINOR <= 10
#include "opcode.h"
#elif MINOR == 11 || MINOR == 12
#define NEED_OPCODE_TABLES
#include "pycore_opcode.h"
#elif MINOR >= 13
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define NEED_OPCODE_METADATA
#include "pycore_opcode_metadata.h"
#pragma GCC diagnostic pop
#endif
#include "opcode.h"               /* LOAD_SPECIAL (3.14+) tells how `with` stacks __exit__ */
#if MINOR >= 14
#include "pycore_interpframe_structs.h"
#include "pycore_runtime_structs.h"
#include "pycore_interp_structs.h"
#endif

/* Printing helpers: one designated initializer per line, so the driver can
 * compare two versions' bodies with plain line tools. */
static void emit(const char *field, long value)
{
    printf("        .%s = %ld,\n", field, value);
}

static void emit_none(const char *field)
{
    printf("        .%s = PY_OFF_NONE,\n", field);
}

static void emit_int(const char *field, int value)
{
    printf("        .%s = %d,\n", field, value);
}

#define OFF(type, member) ((long)offsetof(type, member))
#define SIZE(type) ((long)sizeof(type))

#include "asyncio_layout.h"

static unsigned parse_hex(const char *text)
{
    return (unsigned)strtoul(text, NULL, 16);
}

static void emit_runtime_and_interpreter(void)
{
    emit("runtime_size", SIZE(_PyRuntimeState));
    emit("runtime_interpreters_head", OFF(_PyRuntimeState, interpreters.head));
#if MINOR <= 11
    emit("runtime_tstate_current", OFF(_PyRuntimeState, gilstate.tstate_current));
    emit("runtime_gil", OFF(_PyRuntimeState, ceval.gil));
#else
    /* 3.12 moved the current thread state to TLS and the GIL into each
     * interpreter. */
    emit_none("runtime_tstate_current");
    emit_none("runtime_gil");
#endif
#if MINOR == 8
    emit("runtime_gc", OFF(_PyRuntimeState, gc));
#else
    emit_none("runtime_gc");
#endif

    emit("interp_size", SIZE(PyInterpreterState));
    emit("interp_next", OFF(PyInterpreterState, next));
#if MINOR <= 10
    emit("interp_threads_head", OFF(PyInterpreterState, tstate_head));
#else
    emit("interp_threads_head", OFF(PyInterpreterState, threads.head));
#endif
#if MINOR >= 13
    emit("interp_threads_main", OFF(PyInterpreterState, threads.main));
#else
    emit_none("interp_threads_main");
#endif
    emit("interp_id", OFF(PyInterpreterState, id));
#if MINOR <= 11
    emit("interp_modules", OFF(PyInterpreterState, modules));
#else
    emit("interp_modules", OFF(PyInterpreterState, imports.modules));
#endif
    emit("interp_sysdict", OFF(PyInterpreterState, sysdict));
    emit("interp_builtins", OFF(PyInterpreterState, builtins));
#if MINOR >= 12
    emit("interp_gil_ptr", OFF(PyInterpreterState, ceval.gil));
#else
    emit_none("interp_gil_ptr");
#endif
#if MINOR >= 9
    emit("interp_gc", OFF(PyInterpreterState, gc));
#else
    emit_none("interp_gc");
#endif

    emit("gc_size", SIZE(struct _gc_runtime_state));
    emit("gc_collecting", OFF(struct _gc_runtime_state, collecting));

    emit("gil_size", SIZE(struct _gil_runtime_state));
    emit("gil_last_holder", OFF(struct _gil_runtime_state, last_holder));
    emit("gil_locked", OFF(struct _gil_runtime_state, locked));
    emit("gil_switch_number", OFF(struct _gil_runtime_state, switch_number));
}

static void emit_thread_state(void)
{
    emit("tstate_size", SIZE(PyThreadState));
    emit("tstate_prev", OFF(PyThreadState, prev));
    emit("tstate_next", OFF(PyThreadState, next));
    emit("tstate_interp", OFF(PyThreadState, interp));
#if MINOR <= 10
    emit("tstate_frame", OFF(PyThreadState, frame));
#else
    emit_none("tstate_frame");
#endif
#if MINOR == 11 || MINOR == 12
    emit("tstate_cframe", OFF(PyThreadState, cframe));
    emit("cframe_current_frame", OFF(_PyCFrame, current_frame));
#else
    /* 3.10 has a cframe too, but its frames still hang off tstate->frame. */
    emit_none("tstate_cframe");
    emit_none("cframe_current_frame");
#endif
#if MINOR >= 13
    emit("tstate_current_frame", OFF(PyThreadState, current_frame));
#else
    emit_none("tstate_current_frame");
#endif
    emit("tstate_thread_id", OFF(PyThreadState, thread_id));
#if MINOR >= 11
    emit("tstate_native_thread_id", OFF(PyThreadState, native_thread_id));
    emit("tstate_datastack_chunk", OFF(PyThreadState, datastack_chunk));
    emit("tstate_datastack_top", OFF(PyThreadState, datastack_top));
    emit("tstate_datastack_limit", OFF(PyThreadState, datastack_limit));
#else
    emit_none("tstate_native_thread_id");
    emit_none("tstate_datastack_chunk");
    emit_none("tstate_datastack_top");
    emit_none("tstate_datastack_limit");
#endif
}

static void emit_frames(void)
{
#if MINOR <= 10
    emit("frame_size", SIZE(PyFrameObject));
    emit("frame_back", OFF(PyFrameObject, f_back));
    emit("frame_code", OFF(PyFrameObject, f_code));
    emit("frame_lasti", OFF(PyFrameObject, f_lasti));
    emit("frame_lineno", OFF(PyFrameObject, f_lineno));
#if MINOR <= 9
    emit("frame_executing", OFF(PyFrameObject, f_executing));
    emit_none("frame_state");
#else
    emit_none("frame_executing");
    emit("frame_state", OFF(PyFrameObject, f_state));
#endif
    emit("frame_localsplus", OFF(PyFrameObject, f_localsplus));
#else
    emit_none("frame_size");
    emit_none("frame_back");
    emit_none("frame_code");
    emit_none("frame_lasti");
    emit_none("frame_lineno");
    emit_none("frame_executing");
    emit_none("frame_state");
    emit_none("frame_localsplus");
#endif

#if MINOR >= 11
    emit("iframe_size", SIZE(_PyInterpreterFrame));
#if MINOR <= 12
    emit("iframe_executable", OFF(_PyInterpreterFrame, f_code));
#else
    emit("iframe_executable", OFF(_PyInterpreterFrame, f_executable));
#endif
    emit("iframe_previous", OFF(_PyInterpreterFrame, previous));
#if MINOR <= 12
    emit("iframe_instr_ptr", OFF(_PyInterpreterFrame, prev_instr));
#else
    emit("iframe_instr_ptr", OFF(_PyInterpreterFrame, instr_ptr));
#endif
#if MINOR <= 13
    emit("iframe_stackpointer", OFF(_PyInterpreterFrame, stacktop));
#else
    emit("iframe_stackpointer", OFF(_PyInterpreterFrame, stackpointer));
#endif
    emit("iframe_owner", OFF(_PyInterpreterFrame, owner));
#if MINOR == 11
    emit("iframe_is_entry", OFF(_PyInterpreterFrame, is_entry));
#else
    emit_none("iframe_is_entry");
#endif
    emit("iframe_localsplus", OFF(_PyInterpreterFrame, localsplus));
#if MINOR == 11
    emit("iframe_funcobj", OFF(_PyInterpreterFrame, f_func));
#else
    emit("iframe_funcobj", OFF(_PyInterpreterFrame, f_funcobj));
#endif
    /* The enum constants themselves, so a renumbering cannot slip past. */
    emit_int("owner_thread", FRAME_OWNED_BY_THREAD);
    emit_int("owner_generator", FRAME_OWNED_BY_GENERATOR);
    emit_int("owner_frame_object", FRAME_OWNED_BY_FRAME_OBJECT);
#if MINOR >= 12 && MINOR <= 14
    emit_int("owner_cstack", FRAME_OWNED_BY_CSTACK);
#else
    /* 3.11 marks C entry with is_entry; 3.15 dropped C-stack frames. */
    emit_int("owner_cstack", -1);
#endif
#if MINOR >= 14
    emit_int("owner_interpreter", FRAME_OWNED_BY_INTERPRETER);
#else
    emit_int("owner_interpreter", -1);
#endif
#else
    emit_none("iframe_size");
    emit_none("iframe_executable");
    emit_none("iframe_previous");
    emit_none("iframe_instr_ptr");
    emit_none("iframe_stackpointer");
    emit_none("iframe_owner");
    emit_none("iframe_is_entry");
    emit_none("iframe_localsplus");
    emit_none("iframe_funcobj");
    emit_int("owner_thread", -1);
    emit_int("owner_generator", -1);
    emit_int("owner_frame_object", -1);
    emit_int("owner_cstack", -1);
    emit_int("owner_interpreter", -1);
#endif
    /* 3.14 made f_executable and the locals _PyStackRef words with tag bits. */
    emit_int("stackref_tagged", MINOR >= 14 ? 1 : 0);

#if MINOR >= 11
    emit("chunk_previous", OFF(_PyStackChunk, previous));
    emit("chunk_size", OFF(_PyStackChunk, size));
    emit("chunk_top", OFF(_PyStackChunk, top));
    emit("chunk_data", OFF(_PyStackChunk, data));
#else
    emit_none("chunk_previous");
    emit_none("chunk_size");
    emit_none("chunk_top");
    emit_none("chunk_data");
#endif
}

/* Which argument of _PyEval_EvalFrameDefault is the frame: the first on
 * 3.8, the second (after the thread state) since. */
static void emit_eval_signature(void)
{
    emit_int("eval_frame_arg", _Generic(&_PyEval_EvalFrameDefault,
                                        PyObject *(*)(PyFrameObject *, int): 0, default: 1));
}

/* The opcode every frame executes first when it starts and again when it
 * resumes after a yield or await (3.11+), and the form the interpreter
 * quickens it into: where the interpreter loop jumps for them (its
 * computed-goto table) is a breakpoint that sees every frame start, for
 * machines whose debug registers do not trap (watch). */
static void emit_resume_opcodes(void)
{
#if MINOR >= 11
    emit_int("opcode_resume", RESUME);
#else
    emit_int("opcode_resume", -1);
#endif
#if MINOR == 11
    emit_int("opcode_resume_quick", RESUME_QUICK);
#elif MINOR >= 13
    emit_int("opcode_resume_quick", RESUME_CHECK);
#else
    emit_int("opcode_resume_quick", -1);
#endif
}

static void emit_code(void)
{
    emit("code_size", SIZE(PyCodeObject));
    emit("code_argcount", OFF(PyCodeObject, co_argcount));
    emit("code_nlocals", OFF(PyCodeObject, co_nlocals));
    emit("code_flags", OFF(PyCodeObject, co_flags));
    emit("code_firstlineno", OFF(PyCodeObject, co_firstlineno));
    emit("code_filename", OFF(PyCodeObject, co_filename));
    emit("code_name", OFF(PyCodeObject, co_name));
    emit("code_consts", OFF(PyCodeObject, co_consts));
#if MINOR >= 11
    emit("code_qualname", OFF(PyCodeObject, co_qualname));
#else
    emit_none("code_qualname");
#endif
#if MINOR <= 9
    emit("code_linetable", OFF(PyCodeObject, co_lnotab));
#else
    emit("code_linetable", OFF(PyCodeObject, co_linetable));
#endif
#if MINOR <= 10
    emit("code_varnames", OFF(PyCodeObject, co_varnames));
    emit_none("code_localsplusnames");
    emit_none("code_localspluskinds");
    emit("code_code", OFF(PyCodeObject, co_code));
    emit_none("code_code_adaptive");
#else
    emit_none("code_varnames");
    emit("code_localsplusnames", OFF(PyCodeObject, co_localsplusnames));
    emit("code_localspluskinds", OFF(PyCodeObject, co_localspluskinds));
    emit_none("code_code");
    emit("code_code_adaptive", OFF(PyCodeObject, co_code_adaptive));
#endif
    /* Read at every start or resumption of the code's frames: the opcache
     * warm-up counter at _PyEval_EvalFrameDefault's entry up to 3.10; the
     * instrumentation version that RESUME compares from 3.12. 3.11's
     * quickened RESUME reads nothing of the code, but the interpreter loop
     * fetches the first code unit at every start of a frame (not at a
     * generator's resumption, which goes on after its YIELD_VALUE).
     * Checked in the running interpreters with gdb's awatch (docs/watch.md). */
#if MINOR <= 10
    emit("code_entry_read", OFF(PyCodeObject, co_opcache_flag));
    emit_int("code_entry_read_size", (int)sizeof(((PyCodeObject *)0)->co_opcache_flag));
#elif MINOR == 11
    emit("code_entry_read", OFF(PyCodeObject, co_code_adaptive));
    emit_int("code_entry_read_size", (int)sizeof(_Py_CODEUNIT));
#else
    emit("code_entry_read", OFF(PyCodeObject, _co_instrumentation_version));
    emit_int("code_entry_read_size",
             (int)sizeof(((PyCodeObject *)0)->_co_instrumentation_version));
#endif
    emit("func_code", OFF(PyFunctionObject, func_code));
    emit("func_name", OFF(PyFunctionObject, func_name));
    emit("func_qualname", OFF(PyFunctionObject, func_qualname));
}

static void emit_objects(void)
{
    emit("ob_type", OFF(PyObject, ob_type));
    emit("ob_size", OFF(PyVarObject, ob_size));
    emit("type_name", OFF(PyTypeObject, tp_name));
    emit("type_basicsize", OFF(PyTypeObject, tp_basicsize));
    emit("type_dictoffset", OFF(PyTypeObject, tp_dictoffset));
    emit("type_flags", OFF(PyTypeObject, tp_flags));
    /* Present in every supported version; only 3.11+ readers need it. */
    emit("heaptype_cached_keys", OFF(PyHeapTypeObject, ht_cached_keys));

    /* `state` is a struct of bitfields, but offsetof() on the enclosing
     * member is well defined; the bit positions are the reader's business. */
    emit("unicode_length", OFF(PyASCIIObject, length));
    emit("unicode_state", OFF(PyASCIIObject, state));
    emit("unicode_ascii_size", SIZE(PyASCIIObject));
    emit("unicode_compact_size", SIZE(PyCompactUnicodeObject));
    emit("unicode_data_any", OFF(PyUnicodeObject, data));

    emit("bytes_sval", OFF(PyBytesObject, ob_sval));
    emit("tuple_items", OFF(PyTupleObject, ob_item));
    emit("list_items", OFF(PyListObject, ob_item));
    emit("dict_used", OFF(PyDictObject, ma_used));
    emit("dict_keys", OFF(PyDictObject, ma_keys));
    emit("dict_values", OFF(PyDictObject, ma_values));
#if MINOR <= 11
    emit("long_digits", OFF(PyLongObject, ob_digit));
    emit_none("long_tag");
#else
    emit("long_digits", OFF(PyLongObject, long_value.ob_digit));
    emit("long_tag", OFF(PyLongObject, long_value.lv_tag));
#endif
    emit("float_value", OFF(PyFloatObject, ob_fval));
#if MINOR >= 10
    emit("module_dict", OFF(PyModuleObject, md_dict));
#else
    /* 3.8/3.9 define PyModuleObject privately in Objects/moduleobject.c with
     * md_dict right after PyObject_HEAD; checked live (docs/layouts.md). */
    emit("module_dict", SIZE(PyObject));
#endif

#if MINOR <= 10
    emit("gen_frame", OFF(PyGenObject, gi_frame));
    emit_none("gen_iframe");
#else
    emit_none("gen_frame");
    emit("gen_iframe", OFF(PyGenObject, gi_iframe));
#endif
}

/* C callables as a frame stopped at a call keeps them on its value stack:
 * PyCFunctionObject, PyMethodDescrObject and PyMethodDef, and which
 * opcodes call. The call kinds (one letter per opcode, after undoing the
 * specialisation 3.11+ applies in place) say where the callable lies below
 * the top of the stack for oparg n, from each version's ceval stack effects:
 *   F  callable, n args                          (CALL_FUNCTION <=3.10)
 *   K  callable, n args, kwnames                 (CALL_FUNCTION_KW <=3.10)
 *   M  method or NULL, callable or self, n args  (CALL_METHOD <=3.10, CALL/PRECALL 3.11-3.12)
 *   C  callable, self or NULL, n args            (CALL 3.13+)
 *   W  callable, self or NULL, n args, kwnames   (CALL_KW 3.13+)
 *   x  callable, args tuple, [kwargs if n & 1]   (CALL_FUNCTION_EX <=3.12)
 *   y  callable, NULL, args tuple, [kwargs if n & 1] (CALL_FUNCTION_EX 3.13)
 *   z  callable, NULL, args tuple, kwargs or NULL    (CALL_FUNCTION_EX 3.14+) */
static void emit_callables(void)
{
    emit("cfunction_ml", OFF(PyCFunctionObject, m_ml));
    emit("cfunction_self", OFF(PyCFunctionObject, m_self));
    emit("cfunction_module", OFF(PyCFunctionObject, m_module));
    emit("methoddef_name", OFF(PyMethodDef, ml_name));
    emit("descr_type", OFF(PyMethodDescrObject, d_common.d_type));
    emit("descr_method", OFF(PyMethodDescrObject, d_method));
    emit("tpflags_heaptype", Py_TPFLAGS_HEAPTYPE);
    char kinds[257];
    for (int op = 0; op < 256; op++) {
        int base = op;
#if MINOR >= 11
        base = _PyOpcode_Deopt[op];
#endif
        char k = '0';
#if MINOR <= 10
        if (base == CALL_FUNCTION) k = 'F';
        else if (base == CALL_FUNCTION_KW) k = 'K';
        else if (base == CALL_METHOD) k = 'M';
        else if (base == CALL_FUNCTION_EX) k = 'x';
#elif MINOR == 11
        if (base == CALL || base == PRECALL) k = 'M';
        else if (base == CALL_FUNCTION_EX) k = 'x';
#elif MINOR == 12
        if (base == CALL || op == INSTRUMENTED_CALL) k = 'M';
        else if (base == CALL_FUNCTION_EX || op == INSTRUMENTED_CALL_FUNCTION_EX) k = 'x';
#else
        if (base == CALL || op == INSTRUMENTED_CALL) k = 'C';
        else if (base == CALL_KW || op == INSTRUMENTED_CALL_KW) k = 'W';
        else if (base == CALL_FUNCTION_EX || op == INSTRUMENTED_CALL_FUNCTION_EX) k = MINOR == 13 ? 'y' : 'z';
#endif
        kinds[op] = k;
    }
    kinds[256] = 0;
    printf("        .call_kinds = \"%s\",\n", kinds);
}

/* Where an instance keeps its attributes when its class does not give it a
 * plain __dict__ slot (tp_dictoffset): 3.11's values pointer and dict
 * pointer before the object, 3.12's single tagged word, 3.13+'s values
 * inline after tp_basicsize; and how a values array records insertion
 * order (3.11/3.12: bytes before the array, counted by the byte at -2;
 * 3.13+: after values[capacity], counted by the size field). */
static void emit_instance_dicts(void)
{
#if MINOR >= 11
    /* The accessors assert the flag, so the probe gets a type that has it. */
    static PyTypeObject probe_type;
    static PyObject probe[8];
    probe_type.tp_flags = Py_TPFLAGS_MANAGED_DICT;
    PyObject *obj = &probe[4];
    obj->ob_type = &probe_type;
#if MINOR == 12
    emit("managed_dict_offset", (long)((char *)_PyObject_DictOrValuesPointer(obj) - (char *)obj));
#else
    emit("managed_dict_offset", MANAGED_DICT_OFFSET);
#endif
#if MINOR == 11
    emit("managed_values_offset", (long)((char *)_PyObject_ValuesPointer(obj) - (char *)obj));
#else
    emit_none("managed_values_offset");
#endif
    emit_int("managed_dict_tagged", MINOR == 12);
    emit_int("inline_values", MINOR >= 13);
    emit("dictvalues_values", OFF(PyDictValues, values));
#if MINOR >= 13
    emit("dictvalues_capacity", OFF(PyDictValues, capacity));
    emit("dictvalues_size", OFF(PyDictValues, size));
    emit("dictvalues_valid", OFF(PyDictValues, valid));
#else
    /* _PyDictValues_AddToInsertionOrder: the count is the byte at -2. */
    emit_none("dictvalues_capacity");
    emit("dictvalues_size", -2);
    emit_none("dictvalues_valid");
#endif
#else
    emit_none("managed_dict_offset");
    emit_none("managed_values_offset");
    emit_int("managed_dict_tagged", 0);
    emit_int("inline_values", 0);
    /* 3.8-3.10 keep a bare PyObject *values[] with no header or order. */
    emit("dictvalues_values", 0);
    emit_none("dictvalues_capacity");
    emit_none("dictvalues_size");
    emit_none("dictvalues_valid");
#endif
}

/* The pending exception of a thread and the traceback it carries, for
 * uncaught: 3.12 replaced the (type, value, traceback) triple by one object. */
static void emit_exceptions(void)
{
#if MINOR <= 11
    emit("tstate_curexc_type", OFF(PyThreadState, curexc_type));
    emit("tstate_curexc_value", OFF(PyThreadState, curexc_value));
    emit("tstate_curexc_traceback", OFF(PyThreadState, curexc_traceback));
    emit_none("tstate_current_exception");
#else
    emit_none("tstate_curexc_type");
    emit_none("tstate_curexc_value");
    emit_none("tstate_curexc_traceback");
    emit("tstate_current_exception", OFF(PyThreadState, current_exception));
#endif
    emit("exc_args", OFF(PyBaseExceptionObject, args));
    emit("exc_traceback", OFF(PyBaseExceptionObject, traceback));
#if MINOR >= 11
    emit("frameobj_iframe", OFF(PyFrameObject, f_frame));
#else
    emit_none("frameobj_iframe");
#endif
    emit("tb_next", OFF(PyTracebackObject, tb_next));
    emit("tb_frame", OFF(PyTracebackObject, tb_frame));
    emit("tb_lasti", OFF(PyTracebackObject, tb_lasti));
    emit("tb_lineno", OFF(PyTracebackObject, tb_lineno));
}

/* What naming and reading a frame's variables and value stack needs beyond
 * the frame walk. */
static void emit_frame_vars(void)
{
    emit("code_stacksize", OFF(PyCodeObject, co_stacksize));
    emit("code_kwonlyargcount", OFF(PyCodeObject, co_kwonlyargcount));
#if MINOR <= 10
    emit_none("code_nlocalsplus");
    emit("code_cellvars", OFF(PyCodeObject, co_cellvars));
    emit("code_freevars", OFF(PyCodeObject, co_freevars));
    emit("frame_valuestack", OFF(PyFrameObject, f_valuestack));
    emit("frame_globals", OFF(PyFrameObject, f_globals));
    emit_none("iframe_globals");
    emit_int("stackpointer_is_pointer", 0);
#else
    emit("code_nlocalsplus", OFF(PyCodeObject, co_nlocalsplus));
    emit_none("code_cellvars");
    emit_none("code_freevars");
    emit_none("frame_valuestack");
    emit_none("frame_globals");
    emit("iframe_globals", OFF(_PyInterpreterFrame, f_globals));
#if MINOR <= 13
    emit_int("stackpointer_is_pointer", _Generic(((_PyInterpreterFrame *)0)->stacktop,
                                                 int: 0, default: 1));
#else
    emit_int("stackpointer_is_pointer", _Generic(((_PyInterpreterFrame *)0)->stackpointer,
                                                 int: 0, default: 1));
#endif
#endif
    /* f_code held only code objects; f_executable (3.13+) may hold others. */
#if MINOR <= 12
    emit_int("executable_any", 0);
#else
    emit_int("executable_any", 1);
#endif
    emit("cell_ref", OFF(PyCellObject, ob_ref));
}

/* What primitives.c and func_lookup.c follow to a callable's name; the C
 * function object's own fields are emitted by emit_callables(). */
static void emit_methods_and_descriptors(void)
{
    emit("type_base", OFF(PyTypeObject, tp_base));
    emit("method_func", OFF(PyMethodObject, im_func));
    emit("method_self", OFF(PyMethodObject, im_self));
    emit("descr_name", OFF(PyMethodDescrObject, d_common.d_name));
    /* staticmethod, classmethod and property are private to Objects/
     * funcobject.c and descrobject.c in every version: each keeps its first
     * callable right after PyObject_HEAD (property: fget, fset, fdel). */
    emit("staticmethod_callable", SIZE(PyObject));
    emit("property_get", SIZE(PyObject));
}

static void emit_dict_keys(void)
{
#if MINOR <= 10
    /* 3.8-3.10 keep PyDictKeysObject and PyDictKeyEntry private in
     * Objects/dict-common.h: dk_refcnt, dk_size, dk_lookup, dk_usable,
     * dk_nentries, then dk_indices; entries are {hash, key, value}. */
    printf("        .dict_keys_kind = PY_DICT_KEYS_SIZED,\n");
    emit("dictkeys_size", 8);
    emit_none("dictkeys_log2_size");
    emit_none("dictkeys_log2_index_bytes");
    emit_none("dictkeys_kind");
    emit("dictkeys_nentries", 32);
    emit("dictkeys_indices", 40);
    emit("dictentry_size", 24);
    emit("dictentry_key", 8);
    emit("dictentry_value", 16);
    emit_none("dictunicode_size");
    emit_none("dictunicode_key");
    emit_none("dictunicode_value");
#else
    printf("        .dict_keys_kind = PY_DICT_KEYS_LOG2,\n");
    emit_none("dictkeys_size");
    emit("dictkeys_log2_size", OFF(PyDictKeysObject, dk_log2_size));
    emit("dictkeys_log2_index_bytes", OFF(PyDictKeysObject, dk_log2_index_bytes));
    emit("dictkeys_kind", OFF(PyDictKeysObject, dk_kind));
    emit("dictkeys_nentries", OFF(PyDictKeysObject, dk_nentries));
    emit("dictkeys_indices", OFF(PyDictKeysObject, dk_indices));
    emit("dictentry_size", SIZE(PyDictKeyEntry));
    emit("dictentry_key", OFF(PyDictKeyEntry, me_key));
    emit("dictentry_value", OFF(PyDictKeyEntry, me_value));
    emit("dictunicode_size", SIZE(PyDictUnicodeEntry));
    emit("dictunicode_key", OFF(PyDictUnicodeEntry, me_key));
    emit("dictunicode_value", OFF(PyDictUnicodeEntry, me_value));
#endif
    emit("set_used", OFF(PySetObject, used));
    emit("set_mask", OFF(PySetObject, mask));
    emit("set_table", OFF(PySetObject, table));
}

/* Behaviour that a reader must know, decided by what the headers contain. */
static void emit_behaviour(void)
{
#if __has_include("pycore_parking_lot.h")
    emit_int("parking_lot", 1);
#else
    emit_int("parking_lot", 0);
#endif
#ifdef LOAD_SPECIAL
    emit_int("with_exit_unbound", 1);
#else
    emit_int("with_exit_unbound", 0);
#endif
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: %s SOURCE-LABEL [VERSION-MIN-HEX VERSION-MAX-HEX]\n", argv[0]);
        return 2;
    }
    /* By default an entry covers the whole minor from its first final. */
    unsigned minor_base = (PY_MAJOR_VERSION << 24) | (PY_MINOR_VERSION << 16);
    unsigned version_min = minor_base | 0xf0u;
    unsigned version_max = minor_base | 0xffffu;
    if (argc == 4) {
        version_min = parse_hex(argv[2]);
        version_max = parse_hex(argv[3]);
    }
    const char *linetable = MINOR <= 9 ? "PY_LINETABLE_LNOTAB"
                          : MINOR == 10 ? "PY_LINETABLE_310"
                          : "PY_LINETABLE_LOCATIONS";
    const char *frames = MINOR <= 10 ? "PY_FRAMES_OBJECTS" : "PY_FRAMES_INTERPRETER";

    printf("    { .version_min = 0x%08x, .version_max = 0x%08x, .layout = {\n",
           version_min, version_max);
    printf("        .version_hex = 0x%08lx,\n", (unsigned long)PY_VERSION_HEX);
    printf("        .source = \"%s\",\n", argv[1]);
    printf("        .linetable = %s,\n", linetable);
    printf("        .frames = %s,\n", frames);
    emit_runtime_and_interpreter();
    emit_thread_state();
    emit_frames();
    emit_code();
    emit_eval_signature();
    emit_resume_opcodes();
    emit_objects();
    emit_instance_dicts();
    emit_callables();
    emit_exceptions();
    emit_frame_vars();
    emit_methods_and_descriptors();
    emit_dict_keys();
    emit_behaviour();
    emit_asyncio();
    printf("    } },\n");
    return 0;
}
