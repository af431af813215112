/* What a diagnosis asks about the process beyond its report: questions only
 * a reader of the target can answer (python/waits.c answers them for a live
 * process and for a core). The analyses in this folder read nothing
 * themselves; a question that cannot be answered gets "no", so they know
 * less, never something wrong. */
#ifndef PYSCOPE_DIAGNOSIS_QUERIES_H
#define PYSCOPE_DIAGNOSIS_QUERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "report/why_report.h"
#include "target/pipe_peers.h"

/* The most `with`-held locks one thread's answer carries. */
#define DIAGNOSIS_MAX_HELD 16

/* What `why` says of a child process, looked at on its own. */
struct diagnosis_child {
    enum why_verdict verdict;
    enum why_grade grade;
    char comm[32];
    char summary[640];
};

struct diagnosis_queries {
    void *ctx;
    /* Can thread (an index into the report) reach obj from its frames: a
     * local or cell variable, an attribute of one, a global of its module? */
    bool (*reaches)(void *ctx, size_t thread, uint64_t obj);
    /* The locks thread holds through `with` blocks, innermost frame first,
     * with the index of the frame holding each. Returns how many (<= max). */
    int (*held_locks)(void *ctx, size_t thread, uint64_t *locks, int *frames, int max);
    /* A child of the process (only_child when > 0) blocked writing to a
     * pipe, other than read_pipe (0: none excluded), whose read end the
     * process holds: 0 and *out, or -1. */
    int (*blocked_pipe_writer)(void *ctx, uint64_t read_pipe, pid_t only_child,
                               struct pipe_blocked_writer *out);
    /* The verdict on a child process of a live target, diagnosed as `why`
     * would (a Python process; not for a core): 0 and *out, or -1. Its own
     * context, as the caller of the diagnosis answers it (NULL: no). */
    int (*child_verdict)(void *child_ctx, pid_t child, struct diagnosis_child *out);
    void *child_ctx;
};

#endif
