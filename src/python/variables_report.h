/* Adding frame locals (--locals) and --print EXPR results to a stack report
 * that stacks_collect has built. */
#ifndef PYSCOPE_PYTHON_VARIABLES_REPORT_H
#define PYSCOPE_PYTHON_VARIABLES_REPORT_H

#include "report/stack_report.h"
#include "python/object_repr.h"
#include "python/runtime.h"

/* Reads the locals of every frame (only_thread: of that thread only; 0 for
 * all). Returns -1 only when out of memory. */
int frame_locals_fill_report(struct py_runtime *rt, struct stack_report *report,
                             const struct repr_limits *limits, pid_t only_thread);

/* Is expr a valid --print path (name, then .attr, [int] or ['key'] steps)?
 * On failure writes why into why. */
int frame_locals_parse_check(const char *expr, char *why, size_t whysize);

/* Evaluates report->print_expr in every frame where its root name is a
 * local, appending report->prints. Returns -1 only when out of memory. */
int frame_locals_eval_print(struct py_runtime *rt, struct stack_report *report,
                            const struct repr_limits *limits);

#endif
