/* The loop-blocking episodes of a recording, read from its timeline: runs of
 * consecutive samples of an asyncio loop thread that were not in the loop's
 * selector, as long as why's loop_blocked threshold or longer. asyncio's
 * loops are told by their _run_once frame, uvloop's by the frame that
 * called into its run_forever or run_until_complete. */
#include "output/loop_blocks.h"

#include <stdlib.h>
#include <string.h>

#include "diagnosis/asyncio_why.h"

enum sample_place { PLACE_OUTSIDE_LOOP, PLACE_SELECTOR, PLACE_STEP };

static bool frame_ends(const struct profile_frame *f, const char *file, const char *fn)
{
    if (f->native || f->synthetic || !f->function || !f->file)
        return false;
    const char *dot = strrchr(f->function, '.');
    if (strcmp(dot ? dot + 1 : f->function, fn) != 0)   /* 3.11+ names carry the class */
        return false;
    size_t n = strlen(f->file), m = strlen(file);
    return n >= m && strcmp(f->file + n - m, file) == 0 && (n == m || f->file[n - m - 1] == '/');
}

/* uvloop runs its loop in C: while it waits in libuv, the frame that called
 * run_until_complete or run_forever is innermost, sampled calling into it
 * (the pseudo-frame "[C] uvloop.loop.Loop.run_forever"); a callback or a
 * task step runs Python frames above that frame. */
static bool uvloop_run_frame(const struct profile_frame *f)
{
    if (!f->synthetic || !f->function || strncmp(f->function, "[C] uvloop.", 11) != 0)
        return false;
    const char *dot = strrchr(f->function, '.');
    return !strcmp(dot, ".run_forever") || !strcmp(dot, ".run_until_complete");
}

/* Where a loop thread's stack is, as asyncio_tasks.c's loop_step tells it
 * from the innermost _run_once and the Python frame inside it; record
 * --async replaces the loop's frames of a task step by "<task NAME>". */
static enum sample_place place_of(const struct profile *p, uint32_t stack_id)
{
    if (stack_id >= p->n_stacks)
        return PLACE_OUTSIDE_LOOP;
    const struct profile_stack *st = &p->stacks[stack_id];
    if (st->depth && st->frames[st->depth - 1] < p->n_frames &&
        uvloop_run_frame(&p->frames[st->frames[st->depth - 1]]))
        return PLACE_SELECTOR;
    for (uint32_t k = st->depth; k-- > 0;) {
        uint32_t id = st->frames[k];
        if (id >= p->n_frames)
            return PLACE_OUTSIDE_LOOP;
        const struct profile_frame *f = &p->frames[id];
        if (f->synthetic && f->function && strncmp(f->function, "<task ", 6) == 0)
            return PLACE_STEP;
        if (!frame_ends(f, "asyncio/base_events.py", "_run_once"))
            continue;
        for (uint32_t j = k + 1; j < st->depth; j++) {
            const struct profile_frame *g = st->frames[j] < p->n_frames ? &p->frames[st->frames[j]] : NULL;
            if (g && !g->native && !g->synthetic)
                return frame_ends(g, "selectors.py", "select") ? PLACE_SELECTOR : PLACE_STEP;
        }
        return PLACE_STEP;
    }
    return PLACE_OUTSIDE_LOOP;
}

struct open_run {
    bool open;
    bool from_first;           /* began with the thread's first sample */
    bool seen;
    uint64_t start_ns, end_ns;
    uint32_t stack;            /* its longest segment's */
    uint64_t stack_ns;
};

#define UVLOOP_BASES 4

/* A frame that called into uvloop's run_*, and its depth in the stack. */
struct uvloop_base {
    uint32_t frame, depth;
};

struct builder {
    const struct profile *p;
    struct loop_blocks *out;
    struct open_run *runs;
    uint8_t *place;            /* per stack, +1; 0 not yet known */
    struct uvloop_base (*bases)[UVLOOP_BASES];   /* per thread, from its waiting samples */
    uint8_t *n_bases;
};

/* A thread's samples waiting in uvloop name the frames that run it. */
static int learn_uvloop_base(void *ctx, const struct profile_segment *seg)
{
    struct builder *b = ctx;
    if (seg->thread >= b->p->n_threads || seg->stack >= b->p->n_stacks)
        return 0;
    const struct profile_stack *st = &b->p->stacks[seg->stack];
    if (st->depth < 2 || st->frames[st->depth - 1] >= b->p->n_frames ||
        !uvloop_run_frame(&b->p->frames[st->frames[st->depth - 1]]))
        return 0;
    struct uvloop_base base = {st->frames[st->depth - 2], st->depth - 2};
    uint8_t *n = &b->n_bases[seg->thread];
    for (uint8_t i = 0; i < *n; i++)
        if (b->bases[seg->thread][i].frame == base.frame &&
            b->bases[seg->thread][i].depth == base.depth)
            return 0;
    if (*n < UVLOOP_BASES)
        b->bases[seg->thread][(*n)++] = base;
    return 0;
}

/* A stack of a uvloop thread with Python frames above the one that runs
 * the loop: a callback or task step. */
static bool uvloop_step(const struct builder *b, uint32_t thread, uint32_t stack)
{
    const struct profile_stack *st = &b->p->stacks[stack];
    for (uint8_t i = 0; i < b->n_bases[thread]; i++) {
        const struct uvloop_base *base = &b->bases[thread][i];
        if (st->depth > base->depth + 1 && st->frames[base->depth] == base->frame)
            return true;
    }
    return false;
}

static int episode_order(const void *a, const void *b)
{
    const struct loop_block *x = a, *y = b;
    if (x->duration_ns != y->duration_ns)
        return x->duration_ns < y->duration_ns ? 1 : -1;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

static void close_run(struct builder *b, uint32_t thread, bool at_end)
{
    struct open_run *r = &b->runs[thread];
    if (!r->open)
        return;
    r->open = false;
    uint64_t d = r->end_ns - r->start_ns;
    if (d < (uint64_t)b->out->threshold_ms * 1000000ull)
        return;
    struct loop_blocks *o = b->out;
    o->count++;
    struct loop_block cand = {.thread = thread, .start_ns = r->start_ns, .duration_ns = d,
                              .stack = r->stack, .at_edge = r->from_first || at_end};
    if (o->n_longest == LOOP_BLOCKS_SHOWN) {
        if (episode_order(&cand, &o->longest[LOOP_BLOCKS_SHOWN - 1]) >= 0)
            return;
        o->n_longest--;
    }
    o->longest[o->n_longest++] = cand;
    qsort(o->longest, o->n_longest, sizeof o->longest[0], episode_order);
}

static int add_segment(void *ctx, const struct profile_segment *seg)
{
    struct builder *b = ctx;
    if (seg->thread >= b->p->n_threads || seg->stack >= b->p->n_stacks)
        return 0;
    if (!b->place[seg->stack])
        b->place[seg->stack] = (uint8_t)(place_of(b->p, seg->stack) + 1);
    enum sample_place place = (enum sample_place)(b->place[seg->stack] - 1);
    if (place == PLACE_OUTSIDE_LOOP && uvloop_step(b, seg->thread, seg->stack))
        place = PLACE_STEP;
    struct open_run *r = &b->runs[seg->thread];
    bool first = !r->seen;
    r->seen = true;
    /* A sample outside the loop (a torn walk that lost the loop's frames)
     * neither ends a run nor lengthens it: the next known sample decides. */
    if (place == PLACE_OUTSIDE_LOOP)
        return 0;
    if (place == PLACE_SELECTOR) {
        close_run(b, seg->thread, false);
        return 0;
    }
    if (!r->open) {
        *r = (struct open_run){.open = true, .seen = true, .from_first = first,
                               .start_ns = seg->start_ns, .stack = seg->stack};
    }
    r->end_ns = seg->end_ns;
    if (seg->end_ns - seg->start_ns > r->stack_ns || r->stack_ns == 0) {
        r->stack = seg->stack;
        r->stack_ns = seg->end_ns - seg->start_ns;
    }
    return 0;
}

int loop_blocks_build(struct loop_blocks *out, const struct profile *p)
{
    memset(out, 0, sizeof *out);
    out->threshold_ms = p->meta.loop_blocked_ms > 0 ? (int)p->meta.loop_blocked_ms
                                                    : ASYNCIO_BLOCKED_MS;
    struct builder b = {.p = p, .out = out};
    b.runs = calloc(p->n_threads ? p->n_threads : 1, sizeof *b.runs);
    b.place = calloc(p->n_stacks ? p->n_stacks : 1, 1);
    b.bases = calloc(p->n_threads ? p->n_threads : 1, sizeof *b.bases);
    b.n_bases = calloc(p->n_threads ? p->n_threads : 1, 1);
    int rc = -1;
    if (b.runs && b.place && b.bases && b.n_bases &&
        profile_foreach_segment(p, learn_uvloop_base, &b) == 0 &&
        profile_foreach_segment(p, add_segment, &b) == 0) {
        /* A run still open ends with the recording (or its thread's last sample). */
        for (uint32_t t = 0; t < p->n_threads; t++)
            close_run(&b, t, true);
        rc = 0;
    }
    free(b.runs);
    free(b.place);
    free(b.bases);
    free(b.n_bases);
    return rc;
}
