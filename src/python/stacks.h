/* Building a stack report of every Python thread of a target: the walk that
 * dump (and later why, run and core analysis) share. */
#ifndef PYSCOPE_PYTHON_STACKS_H
#define PYSCOPE_PYTHON_STACKS_H

#include <stdbool.h>
#include "output/stack_report.h"
#include "python/runtime.h"
#include "util/error.h"

struct stacks_options {
    bool paused;           /* the target is stopped: no retries needed */
    int max_retries;       /* re-walks of a thread whose stack changed under us */
};

int stacks_collect(struct py_runtime *rt, const struct stacks_options *opts,
                   struct stack_report *report, struct pyscope_error *err);

#endif
