/* record/top --async: a loop thread's sample shown as the logical stack of
 * the task it runs (the tasks awaiting it above it, outermost first) instead
 * of the event loop's own frames, and the suspended tasks as waiting stacks. */
#ifndef PYSCOPE_SAMPLING_ASYNC_STACKS_H
#define PYSCOPE_SAMPLING_ASYNC_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/profile.h"
#include "python/frames.h"
#include "python/runtime.h"

struct async_stacks;

/* The profile frame of (code object, instruction offset), as the sampler
 * interns its own frames; UINT32_MAX when unreadable. */
typedef uint32_t (*async_frame_fn)(void *ctx, uint64_t code, long offset);

/* NULL when the target's layout has no asyncio, or out of memory. */
struct async_stacks *async_stacks_new(struct py_runtime *rt, struct profile *profile,
                                      async_frame_fn frame_id, void *ctx);
void async_stacks_free(struct async_stacks *a);
/* Forgets what is cached by address (with the sampler's code caches). */
void async_stacks_flush(struct async_stacks *a);

/* For one thread's walk (frames innermost first: addrs[i], or frames[i]
 * when addrs is NULL; ids[i] their profile frames): when its loop is
 * running a task step and the task's coroutine is among the frames, writes
 * the prefix that stands for everything below that coroutine (the awaiting
 * tasks, each as a "<task NAME>" frame followed by its coroutine chain, then
 * the running task's own "<task NAME>") to out, outermost first, and sets
 * *keep to how many of the innermost frames follow it. Otherwise returns 0
 * and sets *keep to n. */
size_t async_stacks_prefix(struct async_stacks *a, uint64_t interp, uint64_t tstate,
                           const struct py_frame *frames, const uint64_t *addrs, size_t n,
                           uint32_t *out, size_t max, size_t *keep);

/* --native, in two steps. First, right after the walk (the running task is
 * read then, not after the native unwind, which takes long enough for the
 * step to end meanwhile): async_stacks_native_read finds the task as
 * async_stacks_prefix does and keeps its prefix; returns whether one was
 * found. Then, once the stack is merged with its C frames (stack, depth
 * entries, outermost first; ids the walk's n Python frames, innermost
 * first): everything outer than the running coroutine's frame, C frames of
 * the loop included, gives way to the prefix; the C frames within the task
 * stay where the merge put them. Returns the new depth (at most max), or
 * depth when no task step was found. */
bool async_stacks_native_read(struct async_stacks *a, uint64_t interp, uint64_t tstate,
                              const struct py_frame *frames, const uint64_t *addrs, size_t n);
size_t async_stacks_native(struct async_stacks *a, const uint32_t *ids, size_t n,
                           uint32_t *stack, size_t depth, size_t max);

/* The suspended tasks of the loop thread tstate runs (but the running one,
 * and those awaiting other tasks, which stand above those): add is called
 * with each one's stack, outermost first (its awaiting tasks, its own
 * "<task NAME>", its coroutine chain); ids is scratch room for max frames.
 * Returns how many tasks. */
typedef void (*async_stack_fn)(void *ctx, const uint32_t *ids, size_t n);
size_t async_stacks_waiting(struct async_stacks *a, uint64_t interp, uint64_t tstate,
                            uint32_t *ids, size_t max, async_stack_fn add, void *ctx);

#endif
