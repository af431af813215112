/* Reading a target's asyncio tasks: the registries (3.8-3.13) or per-thread
 * task lists (3.14+), each task's await chain and what it is suspended on,
 * and which thread runs which loop. */
#ifndef PYSCOPE_PYTHON_ASYNCIO_TASKS_H
#define PYSCOPE_PYTHON_ASYNCIO_TASKS_H

#include <stddef.h>
#include "report/task_report.h"
#include "python/runtime.h"

/* The most tasks one read collects, over all loops. */
#define ASYNCIO_MAX_TASKS 100000
/* The most coroutines followed down one task's await chain. */
#define ASYNCIO_MAX_CHAIN 64

/* Reads every task of the target into a new report (NULL when out of memory
 * or when the program never imported asyncio). At most max_shown tasks per
 * loop keep their details; the others are counted. */
struct report_tasks *asyncio_tasks_read(struct py_runtime *rt, enum tasks_mode mode,
                                        size_t max_shown);

#endif
