/* Hang diagnosis: from the waits of one snapshot and a second snapshot a
 * moment later, decide which threads are stuck for good (nothing alive can
 * release what they wait for), explain them as deadlock cycles, locks
 * nobody will release, starved queues, events nobody can set, a GIL held
 * while blocked, or network reads without timeout, and give a verdict. */
#ifndef PYSCOPE_PYTHON_HANG_H
#define PYSCOPE_PYTHON_HANG_H

#include <stdint.h>
#include "output/why_report.h"
#include "python/signal_handlers.h"
#include "python/stacks.h"
#include "python/waits.h"

struct hang_snapshot {
    struct stack_report *report;
    struct stacks_raw *raw;
    int64_t *cpu_ns;             /* per thread, -1 unknown */
    uint64_t caught_signals;     /* SigCgt: bit n-1 for signal n */
    struct py_signal_handlers handlers;  /* the signal module's table */
};

/* One snapshot of a live process or a core for the progress check: the
 * stacks, what the walk saw, and each thread's CPU time (-1 unknown).
 * why and the agent take two of them a moment apart. */
struct hang_live {
    struct stack_report report;
    struct stacks_raw raw;
    int64_t *cpu_ns;
};

int hang_live_take(struct py_runtime *rt, pid_t pid, struct hang_live *s,
                   struct pyscope_error *err);
void hang_live_free(struct hang_live *s);

/* first has its waits analysed (waits_analyze with ctx); second may be NULL
 * when no progress check was made. Fills why (why->stacks = first.report).
 * 0, or -1 out of memory. */
int hang_analyze(struct waits_ctx *ctx, const struct hang_snapshot *first,
                 const struct hang_snapshot *second, int interval_ms, struct why_report *why);

#endif
