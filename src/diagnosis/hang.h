/* Hang diagnosis: from the waits of one snapshot and a second snapshot a
 * moment later, decide which threads are stuck for good (nothing alive can
 * release what they wait for), explain them as deadlock cycles, locks
 * nobody will release, starved queues, events nobody can set, a GIL held
 * while blocked, or network reads without timeout, and give a verdict. */
#ifndef PYSCOPE_DIAGNOSIS_HANG_H
#define PYSCOPE_DIAGNOSIS_HANG_H

#include <stdint.h>
#include "diagnosis/queries.h"
#include "python/signal_handlers.h"
#include "python/stacks.h"
#include "report/why_report.h"

struct hang_snapshot {
    struct stack_report *report;
    struct stacks_raw *raw;
    int64_t *cpu_ns;             /* per thread, -1 unknown */
    uint64_t caught_signals;     /* SigCgt: bit n-1 for signal n */
    struct py_signal_handlers handlers;  /* the signal module's table */
};

/* first has its waits analysed (python/waits.c, which answers q); second
 * may be NULL when no progress check was made. Fills why (why->stacks =
 * first.report). Reads nothing. 0, or -1 out of memory. */
int hang_analyze(const struct diagnosis_queries *q, const struct hang_snapshot *first,
                 const struct hang_snapshot *second, int interval_ms, struct why_report *why);

#endif
