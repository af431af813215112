/* Building a stack report of every Python thread of a target: the walk that
 * dump, why and run share (through cmd/collect.c and why.c), on a live
 * process or a core. */
#ifndef PYSCOPE_PYTHON_STACKS_H
#define PYSCOPE_PYTHON_STACKS_H

#include <stdbool.h>
#include "report/stack_report.h"
#include "python/frames.h"
#include "python/runtime.h"
#include "target/process.h"
#include "util/error.h"

/* Frames kept per thread for analyses that read them again (why, waits). */
#define STACKS_RAW_FRAMES 256

/* What the walk saw of one thread, beyond what the report shows. */
struct stacks_thread_raw {
    uint64_t tstate;
    struct thread_activity activity;
    struct py_frame *frames;   /* innermost first, at most STACKS_RAW_FRAMES */
    size_t n_frames;
};

struct stacks_raw {
    struct stacks_thread_raw *threads;   /* parallel to stack_report.threads */
    size_t n_threads;
    uint64_t gil_switches;               /* GIL hand-offs so far, summed over interpreters */
};

/* Re-walks of a live thread whose stack changed under the walk: three quick
 * ones, then the rest after naps (under 7 ms in all per thread). */
#define STACKS_LIVE_RETRIES 10

struct py_code_cache;

/* Thread names a caller keeps fresh itself (the agent's sampler): name_of
 * fills out with the threading name of the thread (thread_id, tid) and
 * returns true, or false when it does not know it; threading's dict is
 * then read for all of them. */
struct stacks_names {
    bool (*name_of)(void *ctx, uint64_t thread_id, pid_t tid, char out[64]);
    void *ctx;
    /* Function and file names too: the caller's code cache, kept between
     * calls (so each entry is checked against its object before use);
     * NULL: one made for the call. */
    struct py_code_cache *codes;
};

struct stacks_options {
    bool paused;           /* the target is stopped: no retries needed */
    const struct stacks_names *names;  /* NULL: read them */
    int max_retries;       /* re-walks of a thread whose stack changed under us */
    struct stacks_raw *raw;  /* when set, filled in (free with stacks_raw_free) */
};

void stacks_raw_free(struct stacks_raw *raw);

int stacks_collect(struct py_runtime *rt, const struct stacks_options *opts,
                   struct stack_report *report, struct pyscope_error *err);

#endif
