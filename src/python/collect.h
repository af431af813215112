/* The stack report dump (live or core), run's crash report and watch's
 * reports share: given an opened target, the full report (Python stacks,
 * locals, --print, native stacks, threads Python does not know) ready to be
 * written. */
#ifndef PYSCOPE_PYTHON_COLLECT_H
#define PYSCOPE_PYTHON_COLLECT_H

#include <stdbool.h>
#include "report/stack_report.h"
#include "python/runtime.h"
#include "target/target.h"
#include "util/error.h"

struct collect_request {
    bool paused;             /* every thread is stopped (pause, core, run) */
    bool locals;             /* --locals for every thread */
    pid_t locals_thread;     /* with !locals: locals of this thread only (run's crash) */
    const char *print_expr;  /* --print */
    bool native;             /* --native: unwind C stacks (threads must be stopped) */
    bool native_all;         /* --native-all: keep interpreter-internal frames */
    bool waits;              /* say what each thread waits for (live processes) */
    enum tasks_mode tasks;   /* asyncio tasks to read (--tasks); TASKS_NONE: none */
    size_t max_tasks;        /* shown per loop, the rest counted */
};

/* Fills report from t. rt may be NULL when no CPython was found: then only
 * the OS threads (and their native stacks) are reported. */
int collect_report(struct target *t, struct py_runtime *rt, const struct collect_request *req,
                   struct stack_report *report, struct pyscope_error *err);

/* Fills report->signal from a signal and the thread that got it, and marks
 * that thread crashed. */
void collect_set_signal(struct stack_report *report, int signo, int code, uint64_t addr,
                        int sender_pid, pid_t tid);

#endif
