/* The interpreters and thread states of a target, with each thread's kernel
 * tid, top frame and GIL/GC facts. */
#ifndef PYSCOPE_PYTHON_THREADS_H
#define PYSCOPE_PYTHON_THREADS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "python/objects.h"

#define PY_MAX_INTERPRETERS 64
#define PY_MAX_THREADS 4096

struct py_interp {
    uint64_t addr;
    int64_t id;
    uint64_t gil;             /* address of the struct _gil_runtime_state in use */
    uint64_t gil_holder;      /* tstate holding it, 0 when it is free */
    uint64_t gil_switches;    /* switch_number: changes on every hand-off */
    bool gc_collecting;
};

struct py_thread {
    uint64_t tstate;
    int interp_index;         /* into py_snapshot.interps */
    uint64_t thread_id;       /* pthread_t, what threading.get_ident() returns */
    pid_t tid;                /* kernel tid, 0 when unknown */
    uint64_t top_frame;
    uint64_t datastack_chunk; /* 3.11+: the chunk holding the newest frames */
    uint64_t datastack_top;   /* 3.11+: end of the live part of that chunk */
    bool holds_gil;
};

struct py_snapshot {
    struct py_interp interps[PY_MAX_INTERPRETERS];
    int n_interps;
    struct py_thread *threads;
    int n_threads;
    bool truncated;           /* more threads than PY_MAX_THREADS, or a broken list */
};

/* Reads every interpreter and thread state. tids/n_tids are the process's
 * kernel threads (used to map pthread_t to tid before 3.11). */
int py_snapshot_read(struct py_reader *r, const pid_t *tids, int n_tids, struct py_snapshot *snap);
void py_snapshot_free(struct py_snapshot *snap);

/* Re-reads the GIL holder and switch count of interp; returns -1 if unreadable. */
int py_interp_read_gil(struct py_reader *r, struct py_interp *interp);

/* threading.Thread names by thread_id; returns names found. Names are copied
 * into names[i] for threads[i] ("" when unknown). */
int py_thread_names(struct py_reader *r, const struct py_snapshot *snap, char (*names)[64]);

#endif
