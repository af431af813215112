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
#define TSTATE_READ_MAX 4096   /* the most of a PyThreadState pyscope reads */

struct py_interp {
    uint64_t addr;
    int64_t id;
    uint64_t gil;             /* address of the struct _gil_runtime_state in use */
    uint64_t gil_holder;      /* tstate holding it, 0 when it is free */
    uint64_t gil_switches;    /* switch_number: changes on every hand-off */
    uint64_t gc_flag;         /* address of the GC's collecting flag, 0 if none */
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
    uint64_t datastack_limit; /* 3.11+: end of that chunk, 0 when unknown */
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

/* Reads one interpreter: id, GIL address, holder and GC flag. */
void py_interp_read(struct py_reader *r, uint64_t addr, struct py_interp *out);
/* Fills th from a copy of a PyThreadState (TSTATE_READ_MAX bytes at most);
 * interp_index and holds_gil are left to the caller. */
void py_thread_from_block(struct py_reader *r, uint64_t tstate, const unsigned char *block,
                          struct py_thread *th);

/* The same without looking up the top frame (which on 3.11/3.12 costs a read). */
void py_thread_from_block_no_frame(struct py_reader *r, uint64_t tstate, const unsigned char *block,
                                   struct py_thread *th);
/* The thread's innermost frame, read afresh from its thread state (0 when
 * it runs no Python code or the state is unreadable). */
uint64_t py_tstate_top_frame(struct py_reader *r, uint64_t tstate);
/* The same, read straight from the process, past the page cache: what the
 * thread runs at this moment, to check a walk of a copy made earlier. */
uint64_t py_tstate_top_frame_now(struct py_reader *r, uint64_t tstate);
/* Refreshes th's top frame and data stack from the process as it is now
 * (past the page cache); returns -1 when the state cannot be read. */
int py_thread_reread(struct py_reader *r, struct py_thread *th);
/* 3.11/3.12: the _PyCFrame the thread state points to (its current_frame
 * is the top frame), or 0 on other versions. */
uint64_t py_tstate_cframe(const struct py_layout *L, const unsigned char *block);

/* Re-reads the GIL holder and switch count of interp; returns -1 if unreadable. */
int py_interp_read_gil(struct py_reader *r, struct py_interp *interp);

/* Fills holder and switch count from a copy of the GIL struct (gil_size bytes). */
void py_gil_decode(const struct py_layout *L, const unsigned char *gil, struct py_interp *interp);
/* The address of the GC's "collecting" flag of interp, or 0. */
uint64_t py_interp_gc_flag(struct py_reader *r, uint64_t interp);

/* threading.Thread names by thread_id; returns names found. Names are copied
 * into names[i] for threads[i] ("" when unknown). */
int py_thread_names(struct py_reader *r, const struct py_snapshot *snap, char (*names)[64]);

#endif
