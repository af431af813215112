/* The result of `pyscope why`: a verdict, the findings behind it, whether
 * the process made progress between two snapshots, and per thread whether
 * it is stuck. The stacks and waits are those of the first snapshot. */
#ifndef PYSCOPE_OUTPUT_WHY_REPORT_H
#define PYSCOPE_OUTPUT_WHY_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "output/stack_report.h"

enum why_verdict {
    WHY_NOT_HUNG = 0,           /* the process made progress between the snapshots */
    WHY_IDLE,                   /* no progress, but nothing is stuck for good */
    WHY_UNCHECKED,              /* no progress check was made and nothing is stuck for good */
    WHY_DEADLOCK,
    WHY_GIL_BLOCKED,
    WHY_LOCK_NEVER_RELEASED,
    WHY_QUEUE_STARVED,
    WHY_NEVER_NOTIFIED,
    WHY_NETWORK_WAIT,
};

#define WHY_MAX_FINDING_THREADS 64

struct why_finding {
    enum why_verdict kind;               /* one of the hang kinds */
    bool certain;                        /* deadlock: every edge is a known owner or a join */
    int threads[WHY_MAX_FINDING_THREADS];/* indices into the report: the threads the finding is about */
    int n_threads;
    int blocked[WHY_MAX_FINDING_THREADS];/* indices of threads stuck behind them */
    int n_blocked;
    uint64_t object;                     /* the lock, queue, event... at its root; 0 for none */
    char summary[1024];
};

struct why_thread {
    bool stuck;                 /* blocked, and nothing alive can release it */
    bool changed;               /* stack or wait differed in the second snapshot */
    bool gone;                  /* not in the second snapshot */
    int64_t cpu_ns;             /* CPU used between the snapshots; -1 unknown */
    enum thread_run_state later_state;  /* its state in the second snapshot; UNKNOWN when none */
};

struct why_progress {
    bool checked;
    int interval_ms;
    bool progressing;
    uint64_t gil_switches;      /* GIL hand-offs during the interval */
    int64_t cpu_ns;             /* CPU used by the Python threads during the interval; -1 unknown */
    int threads_changed;        /* threads whose stack or wait changed */
    int threads_started;        /* threads only in the second snapshot */
    int threads_gone;
    int threads_running;        /* running Python (GIL held, no syscall) in the second snapshot */
};

struct why_report {
    struct stack_report *stacks;
    struct why_thread *threads;          /* parallel to stacks->threads */
    enum why_verdict verdict;
    char summary[1024];
    struct why_progress progress;
    struct why_finding *findings;
    int n_findings;
};

const char *why_verdict_name(enum why_verdict verdict);
void why_report_free(struct why_report *why);

void why_report_write_text(FILE *out, const struct why_report *why, bool color);
void why_report_write_json(FILE *out, const struct why_report *why);

#endif
