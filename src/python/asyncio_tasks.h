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

/* Where each loop's thread is in its iteration (selector, callback), and
 * how long the current callback has run at stacks_at, the CLOCK_MONOTONIC
 * seconds when the stacks were read (NAN for a core: no clock to compare).
 * report holds the stacks the tasks were read with. */
struct stack_report;
void asyncio_loop_steps_read(struct py_runtime *rt, struct report_tasks *tasks,
                             const struct stack_report *report, double stacks_at);

/* For why: the task that alone can end each wait (report_task.provider),
 * where the waiters and that one other task of the loop account for every
 * reference to what they wait on. */
void asyncio_wait_providers(struct py_runtime *rt, struct report_tasks *tasks);

/* For why's question of what a thread can reach: the objects the handles
 * of the loop at loop address (ready to run, and due later) will act on when
 * its thread runs them (a bound method's object, a closure's cells, the
 * arguments), at most max into out; how many. A worker waiting on the
 * Future of run_coroutine_threadsafe waits for that loop's thread. */
size_t asyncio_loop_handle_objects(struct py_runtime *rt, uint64_t loop, uint64_t *out,
                                   size_t max);

/* For samplers (record/top --async): what one loop thread runs right now,
 * read cheaply on every pass. Caches what it can between passes. */
struct asyncio_sampler;
/* NULL when the layout knows no asyncio, or out of memory. */
struct asyncio_sampler *asyncio_sampler_new(struct py_runtime *rt);
void asyncio_sampler_free(struct asyncio_sampler *as);
/* Forgets cached code objects and types (their addresses may be reused). */
void asyncio_sampler_flush(struct asyncio_sampler *as);
/* The task whose step the loop of thread tstate is running, 0 when none. */
uint64_t asyncio_running_task(struct asyncio_sampler *as, uint64_t interp, uint64_t tstate);
/* The frame of the task's coroutine as a walk of the thread's stack meets
 * it, 0 when unreadable. */
uint64_t asyncio_task_frame(struct asyncio_sampler *as, uint64_t task);
/* The task that awaits task (directly, through gather or a TaskGroup),
 * 0 when none. */
uint64_t asyncio_task_awaiter(struct asyncio_sampler *as, uint64_t task);
/* The task's name and coroutine chain (innermost first, with offsets);
 * release with asyncio_task_clear. -1 when task is no task. */
int asyncio_task_describe(struct asyncio_sampler *as, uint64_t task, struct report_task *out);
void asyncio_task_clear(struct report_task *t);
/* The pending tasks of the loop thread tstate runs, but the running one,
 * that no other task awaits (each at most once; at most max). */
size_t asyncio_waiting_tasks(struct asyncio_sampler *as, uint64_t interp, uint64_t tstate,
                             uint64_t *out, size_t max);
/* The task's name ("Task-N" for a default one). */
void asyncio_task_name(struct asyncio_sampler *as, uint64_t task, char *out, size_t size);

#endif
