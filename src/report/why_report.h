/* The result of `pyscope why`: a verdict, the findings behind it, whether
 * the process made progress between two snapshots, and per thread whether
 * it is stuck. The stacks and waits are those of the first snapshot. */
#ifndef PYSCOPE_REPORT_WHY_REPORT_H
#define PYSCOPE_REPORT_WHY_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "report/stack_report.h"

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
    WHY_STOPPED,                /* the process (or some threads) is stopped: SIGSTOP or a tracer */
    WHY_GIL_HOG,                /* one thread keeps the GIL, running, while others wait for it */
    WHY_LOOP_BLOCKED,           /* an asyncio loop stays inside one task step (diagnosis/asyncio_why.c) */
};

/* How sure a hang finding is. */
enum why_grade {
    WHY_GRADE_NONE = 0,         /* no hang finding */
    WHY_GRADE_CERTAIN,          /* nothing alive can release the threads */
    WHY_GRADE_PROBABLE,         /* only threads that merely sleep, poll or wait with a timeout could */
};

/* Why a thread was judged live (or not) for the liveness computation. */
enum why_live {
    WHY_LIVE_BLOCKED = 0,       /* blocked without timeout on an in-process object: live only
                                   through a releaser */
    WHY_LIVE_CHANGED,           /* moved between the snapshots */
    WHY_LIVE_RUNS,              /* runs, or wants the GIL */
    WHY_LIVE_OUTSIDE,           /* waits for something outside the process */
    WHY_LIVE_SIGNAL,            /* the main thread, and a signal has a Python handler */
    WHY_LIVE_UNTIED,            /* its wait is not tied to an object pyscope can follow */
    WHY_LIVE_SLEEPS,            /* only sleeps (weak) */
    WHY_LIVE_TIMEOUT,           /* waits or polls with a timeout (weak) */
    WHY_LIVE_STOPPED,           /* stopped: runs nothing until continued */
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
    uint64_t task;                       /* the asyncio task it is about; 0 for threads */
    enum why_grade grade;
    bool with_child;                     /* deadlock with a child process (pipes) */
    /* The threads wait for this child process to exit, and it is stuck
     * itself (kind and grade are its verdict's); 0 for none. */
    pid_t child_pid;
    int releasers[WHY_MAX_FINDING_THREADS];/* live threads that could still release it (probable) */
    int n_releasers;
    char summary[1024];
};

struct why_thread {
    bool stuck;                 /* blocked, and nothing alive can release it */
    bool changed;               /* stack or wait differed in the second snapshot */
    bool gone;                  /* not in the second snapshot */
    int64_t cpu_ns;             /* CPU used between the snapshots; -1 unknown */
    enum thread_run_state later_state;  /* its state in the second snapshot; UNKNOWN when none */
    enum why_live live_reason;  /* why it is live on its own, or BLOCKED */
    bool live;                  /* some releaser is live (or it is live on its own) */
    bool strong;                /* ... and one that does more than sleep or poll */
    int releasers[WHY_MAX_FINDING_THREADS]; /* threads that could release its wait */
    int n_releasers;
    bool owner_edges;           /* the releasers are the owner or the joined thread */
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
    int tasks_moved;            /* asyncio tasks that moved on (asyncio_tasks_moved); -1 none read */
    double watched_ms;          /* from the start of the first snapshot to the end of the second */
};

struct why_report {
    struct stack_report *stacks;
    struct why_thread *threads;          /* parallel to stacks->threads */
    enum why_verdict verdict;
    char summary[1024];
    struct why_progress progress;
    struct why_finding *findings;
    int n_findings;
    enum why_grade grade;                /* of the first finding */
    bool signals_known;                  /* the signal module's handler table was read */
    uint64_t python_signals;             /* bit n-1: signal n has a Python handler (and is caught) */
    uint64_t caught_signals;             /* SigCgt */
    char signals_source[96];
    bool verbose;                        /* text: print the liveness computation */
};

const char *why_verdict_name(enum why_verdict verdict);
const char *why_grade_name(enum why_grade grade);          /* NULL for NONE */
const char *why_live_text(enum why_live reason);
void why_report_free(struct why_report *why);

#endif
