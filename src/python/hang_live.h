/* why's snapshots of a live process or a core (diagnosis/hang.c compares
 * two of them). */
#ifndef PYSCOPE_PYTHON_HANG_LIVE_H
#define PYSCOPE_PYTHON_HANG_LIVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "python/runtime.h"
#include "python/stacks.h"
#include "report/stack_report.h"
#include "util/error.h"

/* One snapshot of a live process or a core for the progress check: the
 * stacks, what the walk saw, and each thread's CPU time (-1 unknown).
 * why and the agent take two of them a moment apart. */
struct hang_live {
    struct stack_report report;
    struct stacks_raw raw;
    int64_t *cpu_ns;
    /* Per thread: it used CPU while the snapshot was read, so its stack and
     * what it changes may be of different instants. NULL for a core. */
    bool *ran;
};

int hang_live_take(struct py_runtime *rt, pid_t pid, struct hang_live *s,
                   struct pyscope_error *err);
/* As hang_live_take, with thread names the caller knows (NULL: read).
 * Without time_before, the threads' CPU times are read after the
 * snapshot only, and every thread counts as having run during it: ran
 * matters only to an asyncio loop's thread, and a caller that saw no loop
 * last time spares a /proc read per thread (the agent's). */
int hang_live_take_named(struct py_runtime *rt, pid_t pid, const struct stacks_names *names,
                         bool time_before, struct hang_live *s, struct pyscope_error *err);
void hang_live_free(struct hang_live *s);
/* Whether thread tid of live process pid sleeps in a system call now. */
bool hang_live_thread_asleep(pid_t pid, pid_t tid);

#endif
