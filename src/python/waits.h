/* What each thread of a stack report waits for: the GIL, a lock or other
 * threading primitive (found in its frames and matched to the futex it
 * sleeps on), a socket, select/poll/epoll, sleep, a child, or file I/O.
 * Also answers the cross-thread questions later analyses ask (who holds
 * this lock, which threads can reach this object). */
#ifndef PYSCOPE_PYTHON_WAITS_H
#define PYSCOPE_PYTHON_WAITS_H

#include <stdbool.h>
#include <stdint.h>
#include "diagnosis/queries.h"
#include "report/stack_report.h"
#include "python/runtime.h"
#include "python/stacks.h"

struct waits_ctx;

struct waits_ctx *waits_new(struct py_runtime *rt);
void waits_free(struct waits_ctx *ctx);

/* Fills report->threads[i].wait for every thread, from the frames and
 * kernel state in raw (collected with the report). 0, or -1 out of memory. */
int waits_analyze(struct waits_ctx *ctx, struct stack_report *report, const struct stacks_raw *raw);

/* The questions the diagnoses ask (diagnosis/queries.h), answered from
 * the snapshot the last waits_analyze was given. */
void waits_queries(struct waits_ctx *ctx, struct diagnosis_queries *q);

#endif
