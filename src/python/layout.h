/* The offsets of every CPython structure pyscope reads, for one interpreter
 * version. Filled from tables generated off each version's headers (3.8-3.12,
 * and 3.13 as a cross-check) or from the target's own _Py_DebugOffsets (3.13+).
 * A field a version does not have holds PY_OFF_NONE. */
#ifndef PYSCOPE_PYTHON_LAYOUT_H
#define PYSCOPE_PYTHON_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define PY_OFF_NONE (-1L)

enum py_linetable_kind {
    PY_LINETABLE_LNOTAB = 1,    /* 3.8-3.9 co_lnotab, f_lasti in bytes */
    PY_LINETABLE_310 = 2,       /* 3.10 co_linetable (PEP 626), f_lasti in code units */
    PY_LINETABLE_LOCATIONS = 3, /* 3.11+ location table */
};

enum py_dict_keys_kind {
    PY_DICT_KEYS_SIZED = 1,    /* <=3.10: dk_size entries, index width from the size */
    PY_DICT_KEYS_LOG2 = 2,     /* 3.11+: dk_log2_size, dk_log2_index_bytes, dk_kind */
};

enum py_frame_model {
    PY_FRAMES_OBJECTS = 1,     /* <=3.10: heap PyFrameObject chain via f_back */
    PY_FRAMES_INTERPRETER = 2, /* 3.11+: _PyInterpreterFrame chain via previous */
};

/* asyncio (python/asyncio_tasks.c): the C Task/Future objects, the way from
 * a suspended coroutine to what it awaits, and where each thread keeps its
 * running loop and (3.14+) its tasks. Generated like the rest. */
struct py_asyncio_layout {
    long fut_loop, fut_callback0, fut_callbacks, fut_state;
    long fut_exception;
    long fut_log_tb;             /* the byte holding fut_log_tb (a bitfield from 3.13) */
    int fut_log_tb_mask;         /* ... and its bit: set while nobody has seen the exception */
    long fut_awaited_by;         /* 3.14+ */
    long fut_awaited_by_is_set;  /* char, 3.14+ */
    long task_size, task_fut_waiter, task_coro, task_name;
    long task_node;              /* struct llist_node, 3.14+ */
    long future_iter_future;     /* _asyncio.FutureIter -> its future */
    long asend_gen;              /* async_generator_asend -> its async generator */
    long set_mask, set_table, set_entry_size, set_entry_key;
    long weakref_object;         /* PyWeakReference.wr_object */
    long type_dict;              /* PyTypeObject.tp_dict */
    long memberdescr_member;     /* PyMemberDescrObject.d_member */
    long memberdef_offset;       /* PyMemberDef.offset: where a __slots__ value lives */
    long method_self;            /* PyMethodObject.im_self */
    long cfunction_self;         /* PyCFunctionObject.m_self */
    long func_closure;           /* PyFunctionObject.func_closure */
    long wakeup_task;            /* <=3.9: TaskWakeupMethWrapper.ww_task */
    long tstate_dict;            /* <=3.12: the running loop is in the thread-state dict */
    long holder_loop;            /* <=3.11: ... inside a _RunningLoopHolder */
    long tstate_running_loop;    /* 3.13+: _PyThreadStateImpl */
    long tstate_running_task;    /* 3.14+ */
    long tstate_tasks_head;      /* 3.14+: sentinel of the thread's task list */
    long interp_tasks_head;      /* 3.14+: tasks of exited threads */
    long gen_qualname;
    long gen_frame_state;        /* int8, 3.11+ */
    long frame_stacktop;         /* 3.8/3.9 PyFrameObject */
    long frame_valuestack, frame_stackdepth;   /* 3.10 */
    int op_yield_from;           /* <=3.10: the opcode after f_lasti when awaiting */
    int op_resume, op_resume_alt;/* 3.11/3.12: RESUME after an await has oparg >= 2 */
    int state_created, state_cleared, state_yield_from;
    int yield_from_slot;         /* the awaited object is stack[-slot] */
};

struct py_layout {
    unsigned version_hex;   /* PY_VERSION_HEX of the interpreter the layout describes */
    const char *source;     /* where the numbers came from, for --verbose and errors */
    enum py_linetable_kind linetable;
    enum py_frame_model frames;

    /* _PyRuntimeState */
    long runtime_size;
    long runtime_interpreters_head;
    long runtime_tstate_current; /* gilstate.tstate_current, <=3.11 */
    long runtime_gil;            /* embedded struct _gil_runtime_state, <=3.11 */
    long runtime_gc;             /* struct _gc_runtime_state, 3.8 only */

    /* PyInterpreterState */
    long interp_size;
    long interp_next;
    long interp_threads_head;
    long interp_threads_main;    /* 3.13+ */
    long interp_id;
    long interp_modules;         /* sys.modules dict */
    long interp_sysdict;
    long interp_builtins;
    long interp_gil_ptr;         /* ceval.gil: pointer to the GIL in use, 3.12+ */
    long interp_gc;              /* struct _gc_runtime_state, 3.9+ */

    /* struct _gc_runtime_state */
    long gc_size;
    long gc_collecting;

    /* struct _gil_runtime_state */
    long gil_size;
    long gil_last_holder;
    long gil_locked;
    long gil_switch_number;

    /* PyThreadState */
    long tstate_size;
    long tstate_prev;
    long tstate_next;
    long tstate_interp;
    long tstate_frame;           /* PyFrameObject *frame, <=3.10 */
    long tstate_cframe;          /* _PyCFrame *cframe, 3.11-3.12 */
    long cframe_current_frame;   /* within _PyCFrame, 3.11-3.12 */
    long tstate_current_frame;   /* _PyInterpreterFrame *current_frame, 3.13+ */
    long tstate_thread_id;       /* pthread_t */
    long tstate_native_thread_id;/* kernel tid, 3.11+ */
    long tstate_datastack_chunk; /* 3.11+ */
    long tstate_datastack_top;
    long tstate_datastack_limit;

    /* PyFrameObject (<=3.10) */
    long frame_size;
    long frame_back;
    long frame_code;
    long frame_lasti;            /* int */
    long frame_lineno;           /* int */
    long frame_executing;        /* char f_executing, 1 while running (3.8-3.9) */
    long frame_state;            /* signed char f_state, 0 = FRAME_EXECUTING (3.10) */
    long frame_localsplus;

    /* _PyInterpreterFrame (3.11+) */
    long iframe_size;
    long iframe_executable;      /* f_code (3.11/3.12) or f_executable (3.13+, tagged on 3.14+) */
    long iframe_previous;
    long iframe_instr_ptr;       /* prev_instr (3.11/3.12) or instr_ptr (3.13+) */
    long iframe_stackpointer;    /* int stacktop (3.11-3.13) or pointer (3.14+) */
    long iframe_owner;           /* char */
    long iframe_is_entry;        /* bool, 3.11 only */
    long iframe_localsplus;
    long iframe_funcobj;         /* f_func (3.11) or f_funcobj (3.12+, a stack ref on 3.14+) */
    int owner_thread;            /* frame owner values; -1 where a version has none */
    int owner_generator;
    int owner_frame_object;
    int owner_cstack;            /* 3.12+: shim/entry frames on the C stack */
    int owner_interpreter;       /* 3.14+: the interpreter's base frame */
    int stackref_tagged;         /* 3.14+: f_executable and locals carry tag bits */

    /* _PyStackChunk (3.11+) */
    long chunk_previous;
    long chunk_size;
    long chunk_top;
    long chunk_data;

    /* PyCodeObject */
    long code_size;
    long code_argcount;
    long code_nlocals;
    long code_flags;
    long code_firstlineno;
    long code_filename;
    long code_name;
    long code_qualname;          /* 3.11+ */
    int eval_frame_arg;          /* _PyEval_EvalFrameDefault's frame argument: 0 or 1 */
    /* RESUME, which every frame runs when it starts or resumes (3.11+), and
     * its quickened form (3.11's RESUME_QUICK, 3.13+'s RESUME_CHECK); -1
     * where there is none. */
    int opcode_resume;
    int opcode_resume_quick;
    long code_consts;            /* co_consts, a tuple (nested code objects live there) */
    long code_linetable;         /* co_lnotab (<=3.9) or co_linetable */
    long code_varnames;          /* co_varnames (<=3.10) */
    long code_localsplusnames;   /* 3.11+ */
    long code_localspluskinds;   /* 3.11+ */
    long code_code;              /* co_code bytes object, <=3.10 */
    long code_code_adaptive;     /* inline bytecode, 3.11+ */
    /* A field the interpreter reads each time a frame of the code starts or
     * resumes running (a call, a generator or coroutine resumed, from C or
     * inline): co_opcache_flag at _PyEval_EvalFrameDefault's entry (<=3.10,
     * also incremented for its first 1024 runs), _co_instrumentation_version
     * at RESUME (3.12+). PY_OFF_NONE on 3.11, which has none. */
    long code_entry_read;
    int code_entry_read_size;    /* its size in bytes */

    /* PyFunctionObject */
    long func_code;
    long func_name;
    long func_qualname;

    /* PyObject / PyVarObject / PyTypeObject */
    long ob_type;
    long ob_size;
    long type_name;              /* tp_name, a char* */
    long type_basicsize;
    long type_dictoffset;
    long type_flags;
    long heaptype_cached_keys;   /* PyHeapTypeObject.ht_cached_keys, 3.11+ split dicts */

    /* str */
    long unicode_length;
    long unicode_state;          /* the state bitfield word */
    long unicode_ascii_size;     /* sizeof(PyASCIIObject): compact ASCII data follows */
    long unicode_compact_size;   /* sizeof(PyCompactUnicodeObject): compact non-ASCII data follows */
    long unicode_data_any;       /* PyUnicodeObject.data.any, for non-compact strings */

    /* bytes, tuple, list, dict, int, float, module */
    long bytes_sval;
    long tuple_items;
    long list_items;
    long dict_used;
    long dict_keys;
    long dict_values;
    long long_digits;            /* ob_digit */
    long long_tag;               /* lv_tag (3.12+); PY_OFF_NONE means the size is ob_size */
    long float_value;
    long module_dict;            /* PyModuleObject.md_dict */

    /* instance attributes without a tp_dictoffset slot (3.11+) */
    long managed_dict_offset;    /* dict pointer (or 3.12's tagged word) before the object */
    long managed_values_offset;  /* values pointer before the object, 3.11 only */
    int managed_dict_tagged;     /* 3.12: an odd word there is a values array + 1 */
    int inline_values;           /* 3.13+: values follow the object at tp_basicsize */
    /* PyDictValues */
    long dictvalues_values;      /* the PyObject *values[] array */
    long dictvalues_capacity;    /* uint8_t, 3.13+: the order array follows values[capacity] */
    long dictvalues_size;        /* uint8_t count of the order array; negative: before values */
    long dictvalues_valid;       /* uint8_t, 3.13+: inline values still in use */

    /* C callables (PyCFunctionObject, PyMethodDescrObject, PyMethodDef) */
    long cfunction_ml;
    long cfunction_self;
    long cfunction_module;
    long methoddef_name;
    long descr_type;
    long descr_method;
    long tpflags_heaptype;       /* Py_TPFLAGS_HEAPTYPE */
    /* Per opcode, what kind of call it is ('0': none); gen_layout.c tells
     * where each kind keeps the callable. */
    const char *call_kinds;

    /* generators and coroutines */
    long gen_frame;              /* gi_frame (<=3.10, a PyFrameObject*) */
    long gen_iframe;             /* gi_iframe (3.11+, the frame is inline) */

    /* Exceptions and tracebacks (uncaught) */
    long tstate_curexc_type;     /* <=3.11: the pending exception as a triple */
    long tstate_curexc_value;
    long tstate_curexc_traceback;
    long tstate_current_exception; /* 3.12+: one normalized exception */
    long exc_args;               /* PyBaseExceptionObject.args */
    long exc_traceback;          /* PyBaseExceptionObject.traceback */
    long frameobj_iframe;        /* PyFrameObject.f_frame, 3.11+ */
    long tb_next;                /* PyTracebackObject */
    long tb_frame;
    long tb_lasti;               /* int */
    long tb_lineno;              /* int */

    /* A frame's variables and value stack */
    long code_stacksize;         /* int */
    long code_kwonlyargcount;    /* int */
    long code_nlocalsplus;       /* int, 3.11+ */
    long code_cellvars;          /* tuple, <=3.10 */
    long code_freevars;          /* tuple, <=3.10 */
    long frame_valuestack;       /* PyObject **, <=3.10 */
    long frame_globals;          /* PyFrameObject.f_globals, <=3.10 */
    long iframe_globals;         /* _PyInterpreterFrame.f_globals, 3.11+ */
    int stackpointer_is_pointer; /* 3.14+: iframe_stackpointer is a pointer, not an index */
    int executable_any;          /* 3.13+: f_executable may hold a non-code object */
    long cell_ref;               /* PyCellObject.ob_ref */

    /* Callables and descriptors */
    long type_base;              /* tp_base */
    /* cfunction_ml, cfunction_self and methoddef_name: with the callables above */
    long method_func;            /* PyMethodObject.im_func */
    long method_self;
    long descr_name;             /* PyMethodDescrObject.d_common.d_name */
    long staticmethod_callable;  /* staticmethod/classmethod's callable */
    long property_get;           /* fget; fset and fdel follow */

    /* PyDictKeysObject and its entries */
    enum py_dict_keys_kind dict_keys_kind;
    long dictkeys_size;          /* Py_ssize_t dk_size, SIZED */
    long dictkeys_log2_size;     /* uint8_t, LOG2 */
    long dictkeys_log2_index_bytes; /* uint8_t, LOG2 */
    long dictkeys_kind;          /* uint8_t dk_kind (0: general entries), LOG2 */
    long dictkeys_nentries;
    long dictkeys_indices;       /* the index table; the entries follow it */
    long dictentry_size;         /* PyDictKeyEntry: hash, key, value */
    long dictentry_key;
    long dictentry_value;
    long dictunicode_size;       /* PyDictUnicodeEntry (3.11+): key, value */
    long dictunicode_key;
    long dictunicode_value;

    /* set */
    long set_used;
    long set_mask;
    long set_table;

    /* Behaviour that changed between versions */
    int parking_lot;             /* 3.13+: a PyMutex waiter parks on a wait entry whose
                                  * word before the futex names the lock */
    int with_exit_unbound;       /* 3.14+: `with` keeps __exit__ unbound with self after it */
    struct py_asyncio_layout asyncio;
};

/* The generated tables for versions whose layout comes from headers. */
struct py_layout_entry {
    unsigned version_min;        /* PY_VERSION_HEX range the table applies to, inclusive */
    unsigned version_max;
    struct py_layout layout;
};
extern const struct py_layout_entry py_generated_layouts[];
extern const size_t py_generated_layouts_count;

/* The compiled-in table for version_hex (patch-level aware), or NULL. */
const struct py_layout *py_layout_for_version(unsigned version_hex);

#endif
