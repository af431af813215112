/* The state the watch engine's parts share: its event loop (watch.c), the
 * Python-function detector (watch_python.c) and the native-function
 * detector (watch_native.c). The command line sees only watch/watch.h. */
#ifndef PYSCOPE_WATCH_SESSION_H
#define PYSCOPE_WATCH_SESSION_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "native/unwind.h"
#include "python/code.h"
#include "python/frames.h"
#include "python/func_lookup.h"
#include "python/objects.h"
#include "python/runtime.h"
#include "target/breakpoint.h"
#include "target/target.h"
#include "target/tracer.h"
#include "target/uprobe_filter.h"
#include "watch/watch.h"

#define WATCH_MAX_NATIVE 64
#define WATCH_MAX_RECORDS 32
#define WATCH_MAX_FILES 1024
#define WATCH_SCAN_SLOTS 32768

/* One --reentry argument. */
struct watch_func {
    const char *arg;
    bool want_python, want_native;
    struct py_func_spec spec;
    char symbol[256];
    bool found_python, found_native;
    bool warned;               /* a warning about it was printed */
    bool hinted;               /* "did you mean" was said */
    unsigned hint_tries;       /* lookups that found no close name */
    char hint[1024];           /* its names, "" when none */
};

/* A Python code object watched through one debug-register slot. */
struct py_watch {
    uint64_t code;
    int slot;
    int func;
    char label[512];           /* "Pool.release (pool.py:12)" */
    uint32_t last_refcnt;      /* exact mode: the count after the last write seen */
    bool generator;            /* a generator or coroutine function's code */
    /* Where the interpreter reads the code each time one of its frames
     * starts or resumes (the layout's code_entry_read): watched instead of
     * the reference count where the version has such a field. */
    bool entry;
    uint64_t watch_addr;       /* the watched bytes: entry's field, else the count */
    int watch_len;
    uint64_t last_value;       /* entry: the field's value at the last trap */
};

/* A native function watched through an int3 at its entry. */
struct native_watch {
    struct sw_breakpoint bp;
    uint64_t size;
    int func;
    char label[512];           /* "pool_append (libpool.so)" */
    char module[PATH_MAX];
};

/* An entry of a native watch on a thread that may still be running. */
struct watch_record {
    int watch;
    uint64_t rsp;              /* the stack pointer at entry; UINT64_MAX: unknown */
};

#define WATCH_CHAIN_MAX 64

/* What watch remembers per thread. */
struct watch_thread {
    pid_t tid;
    uint64_t tstate;           /* 0: not looked up yet or not a Python thread */
    /* The Python frames (top first) and the 3.11/3.12 _PyCFrame seen at
     * the last watchpoint trap: the next trap reads them again in the same
     * system call as everything else, and only the frames not seen before
     * one by one. */
    uint64_t chain[WATCH_CHAIN_MAX];
    int chain_n;
    uint64_t cframe;
    unsigned dr_mask;          /* debug-register slots armed on the thread */
    struct watch_record records[WATCH_MAX_RECORDS];
    int n_records;
    int pending_signal;        /* arrived while we stepped the thread; delivered on resume */
};

struct watch_stats {
    unsigned long eval_entries, dr_traps, frame_starts, native_entries, unwinds, candidates,
        steps, single_step_windows;
};

struct watch_session {
    /* options */
    bool all, stop, json, native_all, locals, exact, verbose;
    unsigned max_hits;
    const char *core_path;
    FILE *out;

    struct tracer tr;
    struct target *t;
    struct bp_memory mem;
    /* Breakpoints as uprobes and watchpoints as perf events, which the
     * kernel removes if pyscope dies (when it allows them); int3s and
     * ptrace debug registers otherwise. */
    bool uprobes, watch_kernel;
    char mechanism_why[256];   /* why not, when not */
    unsigned int3_fallbacks;   /* breakpoints written as int3 all the same */
    bool int3_said;
    bool awaiting_exec;        /* started a program: nothing to look at before its exec */

    struct watch_func funcs[WATCH_MAX_FUNCS];
    int n_funcs;

    /* Python */
    bool have_rt;
    struct py_runtime rt;
    struct py_reader reader;
    struct py_code_cache *codes;
    struct py_frame *frames;   /* PY_MAX_FRAMES, for stack walks */
    struct py_watch py[DR_SLOTS];
    int n_py;
    bool lazy;                 /* 3.11+ without --exact: arm on C->Python entries */
    struct sw_breakpoint eval_bp;
    bool eval_bp_used;
    /* The machine's debug registers never trap (kbp_debug_registers_trap):
     * every start of a Python frame is a breakpoint instead, at the
     * interpreter loop's RESUME handlers (3.11+, start_bp) or at
     * _PyEval_EvalFrameDefault (up to 3.10, eval_bp), on every thread. */
    bool no_dr;
    struct sw_breakpoint start_bp[2];
    int n_start_bp;
    bool frame_starts_planted;
    bool blind;                /* none of that could be placed: watching stopped */
    /* Those breakpoints filtered in the kernel (watch_filter.c): 0 not
     * tried yet, 1 the maps are open, -1 not available (filter_why). */
    int filter_state;
    struct ufilter filter;
    int filter_prog[2];        /* per enum watch_filter_kind; -1 not loaded yet, -2 refused */
    char filter_why[512];
    /* Waiting for a function not found yet: every code object entered at
     * eval_bp is searched, with the code objects in its constants, once. */
    bool waiting;
    uint64_t *scanned;         /* WATCH_SCAN_SLOTS {code, identity} pairs, 0 = empty */
    struct timespec wait_start;

    struct fast_read *fast;    /* watch_python.c's scattered read, allocated on first use */
    /* native */
    struct native_watch native[WATCH_MAX_NATIVE];
    int n_native;
    char *searched[WATCH_MAX_FILES];   /* files already searched for symbols */
    int n_searched;
    struct sw_breakpoint dl_bp;        /* the dynamic linker's notification hook */
    bool dl_bp_used;
    struct native_unwinder *unwinder;

    struct watch_thread *threads;
    int n_threads;

    unsigned hits;
    bool done;                 /* stop watching (hits reached, --stop) */
    bool left_stopped;
    sigset_t stop_signals;     /* the signals that end watching (blocked, waited for) */
    struct watch_stats stats;
};

struct watch_thread *watch_thread_get(struct watch_session *s, pid_t tid);
void watch_thread_forget(struct watch_session *s, pid_t tid);

/* A confirmed re-entry: thread tid (stopped) entered the watched function
 * py_index (Python) or native_index (native; the other is -1). Writes the
 * report and carries out --core and --stop. */
void watch_report(struct watch_session *s, pid_t tid, int py_index, int native_index);
/* Resumes every stopped thread except one (0: none), after setting up the
 * threads that started meanwhile. */
void watch_resume_others(struct watch_session *s, pid_t except);

/* ---- watch_python.c ---- */

/* Finds the Python functions not found yet and starts watching them.
 * Returns the number of new code objects watched. */
int watch_python_resolve(struct watch_session *s, pid_t except);
/* Arms the debug registers a new thread needs (exact mode). */
void watch_python_thread_started(struct watch_session *s, pid_t tid);
/* A watchpoint trap on thread tid (stopped); si its siginfo. */
void watch_python_dr_trap(struct watch_session *s, pid_t tid, const siginfo_t *si);
/* The int3 at _PyEval_EvalFrameDefault (lazy mode): tid is stopped at it.
 * Returns true when the thread was moved past the breakpoint already. */
bool watch_python_eval_entry(struct watch_session *s, pid_t tid, const struct user_regs_struct *regs);
/* A thread stopped at one of start_bp: a frame has just become its top
 * frame and is starting or resuming. */
void watch_python_frame_start(struct watch_session *s, pid_t tid);
/* Forgets everything about the process image (exec). */
void watch_python_reset(struct watch_session *s);
/* Still waiting for a Python function: whether it is time to say which
 * names come close (once per function, after a few seconds), and saying it. */
void watch_python_hint(struct watch_session *s);
/* Whether a Python function is still looked for (see watch_python.c). */
bool watch_python_wants_more(const struct watch_session *s);
/* Whether every hit of the breakpoint at _PyEval_EvalFrameDefault must
 * stop the thread (the kernel filter then lets them all through). */
bool watch_python_eval_needs_all(const struct watch_session *s);
/* Disarms the debug registers of every (stopped) thread. */
void watch_python_disarm_all(struct watch_session *s);

/* ---- watch_native.c ---- */

/* Searches newly mapped files for the native functions and plants their
 * breakpoints (and the dynamic linker's hook). Returns watches added. */
int watch_native_resolve(struct watch_session *s);
/* tid stopped at the int3 of native watch index; regs as read there. */
void watch_native_entry(struct watch_session *s, pid_t tid, int index,
                        const struct user_regs_struct *regs);
void watch_native_reset(struct watch_session *s);
/* The int3 at the dynamic linker's hook, which runs whenever libraries
 * were loaded (also how a shared libpython is seen arriving). */
void watch_native_plant_dl_hook(struct watch_session *s);

/* ---- watch_filter.c ---- */

enum watch_filter_kind {
    WATCH_FILTER_EVAL,         /* at _PyEval_EvalFrameDefault: the frame is its argument */
    WATCH_FILTER_RESUME,       /* at RESUME: the frame is the running thread's top frame */
};

/* Before bp (one of the frame-start breakpoints) is inserted: attaches the
 * kernel filter to its uprobe events where that is possible. check_keys:
 * the breakpoint also stops watched code found running further down. */
void watch_filter_prepare(struct watch_session *s, struct sw_breakpoint *bp,
                          enum watch_filter_kind kind, bool check_keys);
/* Tells the filter the code objects watched and whether pyscope waits. */
void watch_filter_sync(struct watch_session *s);
/* A code object pyscope has searched (with its identity, see first_scan). */
void watch_filter_mark_seen(struct watch_session *s, uint64_t code, uint64_t identity);
/* Whether bp's hits are all filtered. */
bool watch_filter_active(const struct watch_session *s, const struct sw_breakpoint *bp);
/* Why there is no filter. */
const char *watch_filter_why(const struct watch_session *s);
/* The filter's counts so far: 0, or -1 without a filter. */
int watch_filter_counts(const struct watch_session *s, struct ufilter_state *out);
/* Closes the programs and maps (after exec, a new image needs new ones). */
void watch_filter_close(struct watch_session *s);

/* ---- shared helpers (watch.c) ---- */

/* Puts bp in at bp->addr: a uprobe where the kernel allows it, else an
 * int3. needs_args: the handler reads the function's arguments. */
int watch_insert_breakpoint(struct watch_session *s, struct sw_breakpoint *bp, bool needs_args,
                            struct pyscope_error *err);
/* The breakpoint at addr (any kind), or NULL. */
struct sw_breakpoint *watch_breakpoint_at(struct watch_session *s, uint64_t addr);
/* Single-steps tid once, stepping over our own breakpoints as needed; a
 * signal that arrives meanwhile is kept for the thread. -1 if the thread
 * is gone or the step failed. */
int watch_single_step(struct watch_session *s, pid_t tid);
/* Whether a signal that ends watching is pending: long work at one trap
 * (stepping to a new frame) gives up then, so that pyscope stops at once. */
bool watch_stop_requested(const struct watch_session *s);
/* Signals that arrived while we stepped a thread, to deliver on resume. */
void watch_note_signal(struct watch_session *s, pid_t tid, int sig);
int watch_take_signal(struct watch_session *s, pid_t tid);

#endif
