/* What each thread of a stack report waits for: the GIL, a lock or other
 * threading primitive (found in its frames and matched to the futex it
 * sleeps on), a socket, select/poll/epoll, sleep, a child, or file I/O.
 * Also answers the cross-thread questions later analyses ask (who holds
 * this lock, which threads can reach this object). */
#ifndef PYSCOPE_PYTHON_WAITS_H
#define PYSCOPE_PYTHON_WAITS_H

#include <stdbool.h>
#include <stdint.h>
#include "output/stack_report.h"
#include "python/runtime.h"
#include "python/stacks.h"

struct waits_ctx;

struct waits_ctx *waits_new(struct py_runtime *rt);
void waits_free(struct waits_ctx *ctx);

/* Fills report->threads[i].wait for every thread, from the frames and
 * kernel state in raw (collected with the report). 0, or -1 out of memory. */
int waits_analyze(struct waits_ctx *ctx, struct stack_report *report, const struct stacks_raw *raw);

/* Can thread index reach obj from its frames: a local or cell variable, an
 * attribute of one (two levels for `self`), or a global of a frame's module?
 * Threads that can reach an object are the ones that can release, notify or
 * feed it. */
bool waits_thread_reaches(struct waits_ctx *ctx, const struct stacks_raw *raw, size_t index,
                          uint64_t obj);

#endif
