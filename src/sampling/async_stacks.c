/* Logical task stacks for the sampler: which task a loop thread is running
 * (python/asyncio_tasks.c reads it), which tasks await it, and the profile
 * frames that stand for them. The thread's own frames from the task's
 * coroutine up are kept as sampled; only the loop's frames below are
 * replaced. */
#include "sampling/async_stacks.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/asyncio_tasks.h"

/* The most tasks followed up one awaiter chain. */
#define MAX_AWAITERS 32
/* The most suspended tasks one pass keeps as waiting samples per loop. */
#define MAX_WAITING 1024
/* The longest prefix put before a running task's frames with --native. */
#define MAX_PREFIX 4096

struct async_stacks {
    struct asyncio_sampler *as;
    uint64_t *waiting;               /* scratch: one pass's suspended tasks */
    uint32_t *prefix;                /* a running task's prefix (--native), read... */
    size_t prefix_len, prefix_keep;  /* ...before the merge, spliced in after it */
    size_t prefix_n;                 /* the walk's Python frames it was read for */
    struct profile *profile;
    async_frame_fn frame_id;
    void *ctx;
};

struct async_stacks *async_stacks_new(struct py_runtime *rt, struct profile *profile,
                                      async_frame_fn frame_id, void *ctx)
{
    struct async_stacks *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->as = asyncio_sampler_new(rt);
    a->waiting = malloc(MAX_WAITING * sizeof *a->waiting);
    a->prefix = malloc(MAX_PREFIX * sizeof *a->prefix);
    if (!a->as || !a->waiting || !a->prefix) {
        asyncio_sampler_free(a->as);
        free(a->waiting);
        free(a->prefix);
        free(a);
        return NULL;
    }
    a->profile = profile;
    a->frame_id = frame_id;
    a->ctx = ctx;
    return a;
}

void async_stacks_free(struct async_stacks *a)
{
    if (!a)
        return;
    asyncio_sampler_free(a->as);
    free(a->waiting);
    free(a->prefix);
    free(a);
}

void async_stacks_flush(struct async_stacks *a)
{
    asyncio_sampler_flush(a->as);
}

static uint32_t task_frame(struct async_stacks *a, const char *name)
{
    char label[160];
    snprintf(label, sizeof label, "<task %s>", name);
    return profile_frame_id(a->profile, label, "<asyncio>", -1, true);
}

/* One awaiting task: its marker, then its chain outermost first. */
static size_t put_task(struct async_stacks *a, uint64_t task, uint32_t *out, size_t max)
{
    struct report_task t;
    if (max == 0 || asyncio_task_describe(a->as, task, &t) != 0)
        return 0;
    size_t n = 0;
    uint32_t id = task_frame(a, t.name);
    if (id != UINT32_MAX)
        out[n++] = id;
    for (size_t k = t.n_chain; k-- > 0 && n < max;) {
        id = a->frame_id(a->ctx, t.chain[k].code_addr, t.chain[k].offset);
        if (id != UINT32_MAX)
            out[n++] = id;
    }
    asyncio_task_clear(&t);
    return n;
}

/* The tasks awaiting task, outermost last, then task: how many. */
static size_t awaiter_chain(struct async_stacks *a, uint64_t task, uint64_t *chain)
{
    size_t depth = 0;
    chain[depth++] = task;
    while (depth < MAX_AWAITERS) {
        uint64_t up = asyncio_task_awaiter(a->as, chain[depth - 1]);
        bool cycle = false;
        for (size_t k = 0; k < depth; k++)
            cycle |= chain[k] == up;
        if (!up || cycle)
            break;
        chain[depth++] = up;
    }
    return depth;
}

size_t async_stacks_prefix(struct async_stacks *a, uint64_t interp, uint64_t tstate,
                           const struct py_frame *frames, const uint64_t *addrs, size_t n,
                           uint32_t *out, size_t max, size_t *keep)
{
    *keep = n;
    uint64_t task = asyncio_running_task(a->as, interp, tstate);
    uint64_t frame = task ? asyncio_task_frame(a->as, task) : 0;
    if (!frame)
        return 0;
    size_t at = n;
    for (size_t i = 0; i < n; i++)
        if ((addrs ? addrs[i] : frames[i].frame_addr) == frame) {
            at = i;
            break;
        }
    /* Read between the stack and the task: a step that began or ended in
     * between keeps the thread's stack as it is. */
    if (at == n)
        return 0;
    uint64_t chain[MAX_AWAITERS];
    size_t depth = awaiter_chain(a, task, chain);
    size_t len = 0;
    for (size_t k = depth; k-- > 1 && len < max;)
        len += put_task(a, chain[k], out + len, max - len);
    if (len < max) {
        char name[128];
        asyncio_task_name(a->as, task, name, sizeof name);
        uint32_t id = task_frame(a, name);
        if (id != UINT32_MAX)
            out[len++] = id;
    }
    *keep = at + 1;
    return len;
}

bool async_stacks_native_read(struct async_stacks *a, uint64_t interp, uint64_t tstate,
                              const struct py_frame *frames, const uint64_t *addrs, size_t n)
{
    a->prefix_len = async_stacks_prefix(a, interp, tstate, frames, addrs, n, a->prefix,
                                        MAX_PREFIX, &a->prefix_keep);
    a->prefix_n = n;
    return a->prefix_len > 0;
}

size_t async_stacks_native(struct async_stacks *a, const uint32_t *ids, size_t n,
                           uint32_t *stack, size_t depth, size_t max)
{
    size_t len = a->prefix_len, keep = a->prefix_keep;
    a->prefix_len = 0;
    if (len == 0 || keep == 0 || keep > n || n != a->prefix_n)
        return depth;
    /* The merged stack holds the walk's Python frames in their order,
     * outermost first, with C frames (whose profile frames are never a
     * Python frame's) between them; the running coroutine's frame is the
     * (n - keep)th Python frame from the outer end. */
    size_t want = n - keep, seen = 0, cut = depth;
    for (size_t i = 0; i < depth && cut == depth; i++) {
        if (stack[i] != ids[n - 1 - seen])
            continue;
        if (seen == want)
            cut = i;
        seen++;
    }
    if (cut == depth || len + (depth - cut) > max)
        return depth;
    memmove(stack + len, stack + cut, (depth - cut) * sizeof *stack);
    memcpy(stack, a->prefix, len * sizeof *stack);
    return len + (depth - cut);
}

size_t async_stacks_waiting(struct async_stacks *a, uint64_t interp, uint64_t tstate,
                            uint32_t *ids, size_t max, async_stack_fn add, void *ctx)
{
    size_t n = asyncio_waiting_tasks(a->as, interp, tstate, a->waiting, MAX_WAITING);
    for (size_t i = 0; i < n; i++) {
        uint64_t chain[MAX_AWAITERS];
        size_t depth = awaiter_chain(a, a->waiting[i], chain), len = 0;
        for (size_t k = depth; k-- > 0 && len < max;)
            len += put_task(a, chain[k], ids + len, max - len);
        if (len)
            add(ctx, ids, len);
    }
    return n;
}
