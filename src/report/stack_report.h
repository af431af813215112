/* The data a dump shows: per process, per thread, per frame. python/ fills
 * it, diagnosis/ adds to it, output/dump_writers.h prints it as text or JSON. */
#ifndef PYSCOPE_REPORT_STACK_REPORT_H
#define PYSCOPE_REPORT_STACK_REPORT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "report/task_report.h"
#include "report/wait_report.h"
#include "python/thread_state.h"

struct report_local {
    char *name;
    const char *kind;            /* "arg", "local", "cell", "free" */
    char *type;                  /* the value's type name */
    char *repr;                  /* bounded repr (python/object_repr.h) */
    uint64_t addr;               /* the object's address, 0 for tagged ints */
};

struct report_frame {
    char *function;
    char *file;
    int line;                    /* -1: unknown */
    uint64_t frame_addr;         /* where the frame was read, for locals */
    uint64_t code_addr;
    bool is_entry;               /* first frame of a C->Python call (native merge) */
    long instr_offset;           /* bytes into its bytecode (the call it makes, for uvloop's loop) */
    struct report_local *locals; /* with --locals; NULL otherwise */
    size_t n_locals;
    bool locals_tried;           /* locals were asked for this frame */
    bool locals_read;            /* ... and could be read */
    bool names_pooled;           /* function and file live in the report's name pool */
};

/* One result of --print EXPR: where the root name was found and the value. */
struct report_print {
    pid_t tid;
    size_t thread_index;
    size_t frame_index;
    char *repr;                  /* NULL when the path could not be followed */
    char *error;                 /* why not, e.g. "no attribute 'pool'" */
};

/* One C frame of a native stack, innermost first. */
struct report_native_frame {
    uint64_t pc;
    char *symbol;                /* NULL when no symbol covers pc */
    uint64_t offset;             /* pc - symbol start */
    char *module;                /* file name of the ELF it is in, NULL if none */
    char *file;                  /* source file from debug info, NULL if none */
    int line;                    /* 0 when unknown */
    bool internal;               /* inside the interpreter (hidden without --native-all) */
    bool is_eval;                /* an interpreter-loop activation (_PyEval_EvalFrameDefault) */
};

/* The merged order of a thread's frames: a native frame or a Python frame. */
struct report_stack_entry {
    bool python;
    size_t index;                /* into native.frames or the thread's frames */
};

struct report_native {
    struct report_native_frame *frames;
    size_t n_frames;
    bool complete;               /* the unwind reached the outermost frame */
    bool merged;                 /* entries interleave both stacks */
    struct report_stack_entry *entries;
    size_t n_entries;
    char error[192];             /* why not merged or not complete, "" otherwise */
};

/* An OS thread with no Python thread state (BLAS pools, gRPC, ...). */
struct report_os_thread {
    pid_t tid;
    char comm[64];
    char run_state;              /* R, S, D, ... 0 when unknown */
    const char *syscall;         /* NULL unless blocked in a syscall */
    bool crashed;
    struct report_native *native;    /* with --native */
};

struct report_thread {
    pid_t tid;                   /* 0: unknown */
    uint64_t thread_id;
    char name[64];               /* "" when not a threading.Thread */
    int64_t interp_id;
    enum thread_run_state state;
    const char *syscall;         /* NULL unless blocked in a syscall */
    bool holds_gil;
    bool gc;
    struct report_frame *frames; /* innermost first */
    size_t n_frames;
    char c_callable[192];        /* the C callable the innermost frame calls, "" if none known */
    bool complete;
    char error[160];
    bool crashed;                /* received the fatal signal (core files, run) */
    char stopped;                /* 'T' stopped by a signal, 't' by its tracer, 0 not stopped */
    pid_t tracer;                /* TracerPid when stopped by a tracer, 0 otherwise */
    struct report_native *native;    /* with --native, NULL otherwise */
    struct report_wait *wait;    /* what it waits for; NULL when not analysed */
};

/* The fatal signal of a core file or of a program under `pyscope run`. */
struct report_signal {
    int signo;                   /* 0: none recorded */
    int code;
    uint64_t addr;
    char name[16];               /* "SIGSEGV" */
    char cause[192];             /* "NULL pointer dereference at 0x0" */
    pid_t tid;                   /* the thread that received it, 0 unknown */
};

/* `pyscope watch --reentry`: a thread entered a function while an earlier
 * activation of it was still on its stack. The marks run from the new
 * (inner) activation to the earlier (outer) one, innermost first, in the
 * order the text writer prints the thread. */
enum reentry_role {
    REENTRY_INNER = 1,           /* the activation just entered */
    REENTRY_BETWEEN,
    REENTRY_OUTER,               /* the activation that was already running */
};

struct report_reentry_mark {
    bool python;                 /* index into the thread's frames, else its native frames */
    size_t index;
    enum reentry_role role;
    const char *category;        /* "gc", "finalizer", "dealloc" or NULL */
};

struct report_reentry {
    char function[512];          /* what was watched, e.g. "Pool.release (pool.py:12)" */
    bool native;                 /* a C function rather than a Python one */
    pid_t tid;
    unsigned hit;                /* 1 for the first re-entry reported */
    bool gc_flag;                /* the interpreter's "collecting" flag was set */
    bool gc_frames;              /* garbage-collector C frames lie between the activations */
    bool finalizer;              /* a finalizer or dealloc lies between them */
    struct report_reentry_mark *marks;
    size_t n_marks;
    char note[512];              /* what could not be shown, "" otherwise */
};

struct stack_report {
    pid_t pid;
    bool locals;                 /* --locals was asked */
    char *print_expr;            /* --print EXPR, or NULL */
    struct report_print *prints;
    size_t n_prints;
    char command[1024];
    char executable[PATH_MAX];
    char python_version[32];
    bool paused;
    bool no_interpreter;         /* the read found CPython loaded but no interpreter */
    bool gc_collecting;
    int n_stopped;               /* threads stopped (SIGSTOP or a tracer), live processes only */
    pid_t tracer;                /* a stopped thread's tracer, 0 when none */
    char tracer_comm[64];
    char core_path[PATH_MAX];    /* "" for a live process */
    char core_compression[8];    /* "zstd", "lz4", "xz", "gzip"; "" for a plain core */
    struct report_signal signal;
    struct report_thread *threads;
    size_t n_threads;
    struct report_os_thread *os_threads;   /* threads Python does not know */
    size_t n_os_threads;
    bool native;                 /* --native was asked */
    bool native_all;             /* --native-all: show interpreter frames too */
    struct report_reentry *reentry;    /* watch --reentry; NULL otherwise */
    struct report_names *names;  /* the pool names_pooled frames point into */
    struct report_tasks *tasks;  /* asyncio tasks (report/task_report.h); NULL: none */
};

/* Frames of one code object share their function and file names: a dump of
 * 50 threads x 100 frames copies them once each, not 10,000 times. */
struct report_names;
/* A copy of text that lives as long as the report, or NULL. */
char *report_names_add(struct report_names **pool, const char *text);
void report_names_free(struct report_names *pool);

void report_native_free(struct report_native *native);

void stack_report_free(struct stack_report *report);
/* The thread holding the GIL in the main interpreter, or NULL. */
const struct report_thread *stack_report_gil_holder(const struct stack_report *report);
const struct report_thread *stack_report_gc_thread(const struct stack_report *report);

/* A frame's file as the text outputs show it: standard-library and
 * installed-package paths from the package root, others unchanged. */
const char *stack_report_short_path(const char *path);
/* Appends 'Thread 4250 "worker-2"' (its ident in hex when the tid is unknown)
 * to out, as text_append does. */
void stack_report_append_thread(char *out, size_t size, const struct report_thread *th);
#endif
