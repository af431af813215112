/* The flight recorder's memory: circular arrays of passes and of samples that
 * forget what is older than the window, and the window turned into a fresh
 * struct profile (ids re-interned, the timeline rebuilt as the sampler would). */
#include "sampling/ring.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define PASS_FAILED 0x01
#define PASS_GIL_BUSY 0x02
#define PASS_GC 0x04
#define PASS_GC_STARTED 0x08
#define PASS_HOG_NATIVE 0x10

#define MIN_SAMPLES 4096u
/* Room for passes beyond window x rate: extra passes taken at stops, and a
 * clock that runs a little fast. */
#define EXTRA_PASSES 256u

static struct sample_ring *ring_of(struct sample_sink *sink)
{
    return (struct sample_ring *)(void *)((char *)sink - offsetof(struct sample_ring, sink));
}

static void sink_begin_pass(struct sample_sink *sink, uint64_t time_ns)
{
    sample_ring_begin_pass(ring_of(sink), time_ns);
}

static void sink_add(struct sample_sink *sink, struct sink_thread *th, const struct sink_sample *smp)
{
    (void)th;
    sample_ring_add(ring_of(sink), smp->thread, smp->stack, smp->state, smp->gc, smp->syscall);
}

static void sink_end_pass(struct sample_sink *sink, const struct sample_pass *pass)
{
    sample_ring_end_pass(ring_of(sink), pass);
}

/* Nothing to keep: the ring holds no running tallies and no open segments. */
static void sink_gc_trigger(struct sample_sink *sink, uint32_t stack, bool new_collection)
{
    (void)sink, (void)stack, (void)new_collection;
}

static void sink_thread_gone(struct sample_sink *sink, struct sink_thread *th, uint64_t time_ns)
{
    (void)sink, (void)th, (void)time_ns;
}

static void sink_mark(struct sample_sink *sink, struct sink_mark *mark)
{
    sample_ring_mark(ring_of(sink), mark);
}

static bool sink_repeat(struct sample_sink *sink, uint64_t time_ns, const struct sink_mark *mark)
{
    return sample_ring_repeat(ring_of(sink), time_ns, mark);
}

static const struct sample_sink_ops ring_sink_ops = {
    .begin_pass = sink_begin_pass,
    .add = sink_add,
    .gc_trigger = sink_gc_trigger,
    .end_pass = sink_end_pass,
    .thread_gone = sink_thread_gone,
    .mark = sink_mark,
    .repeat = sink_repeat,
};

int sample_ring_init(struct sample_ring *r, uint64_t window_ns, double rate_hz, size_t max_bytes)
{
    memset(r, 0, sizeof *r);
    r->sink.ops = &ring_sink_ops;
    r->window_ns = window_ns;
    /* The passes get at most a quarter of the cap again (a pass without any
     * thread takes no sample, so the samples' cap alone would not bound them). */
    size_t max_passes = max_bytes / 4 / sizeof(struct ring_pass);
    if (max_passes < EXTRA_PASSES)
        max_passes = EXTRA_PASSES;
    double expected = (double)window_ns / 1e9 * (rate_hz > 0 ? rate_hz : 1000.0) * 1.25;
    r->pass_cap = expected + EXTRA_PASSES < (double)max_passes ? (size_t)expected + EXTRA_PASSES
                                                               : max_passes;
    r->max_samples = max_bytes / sizeof(struct ring_sample);
    if (r->max_samples < MIN_SAMPLES)
        r->max_samples = MIN_SAMPLES;
    r->sample_cap = MIN_SAMPLES;
    r->passes = calloc(r->pass_cap, sizeof *r->passes);
    r->samples = calloc(r->sample_cap, sizeof *r->samples);
    if (!r->passes || !r->samples) {
        sample_ring_free(r);
        return -1;
    }
    return 0;
}

void sample_ring_free(struct sample_ring *r)
{
    free(r->passes);
    free(r->samples);
    memset(r, 0, sizeof *r);
    r->sink.ops = &ring_sink_ops;   /* an emptied ring still takes (and drops) passes */
}

static struct ring_pass *pass_at(const struct sample_ring *r, size_t i)
{
    return &r->passes[(r->pass_head + i) % r->pass_cap];
}

static struct ring_sample *sample_at(const struct sample_ring *r, uint64_t seq)
{
    return &r->samples[seq % r->sample_cap];
}

/* Forgets the oldest pass and its samples. */
static void drop_oldest(struct sample_ring *r)
{
    if (r->n_passes == 0)
        return;
    struct ring_pass *oldest = pass_at(r, 0);
    r->first_seq = oldest->first_sample + oldest->n_samples;
    r->pass_head = (r->pass_head + 1) % r->pass_cap;
    r->n_passes--;
    if (r->n_passes == 0)
        r->first_seq = r->next_seq;
}

static void evict_oldest(struct sample_ring *r)
{
    uint64_t t = pass_at(r, 0)->time_ns;
    drop_oldest(r);
    r->passes_evicted++;
    r->evicted_any = true;
    if (t > r->newest_evicted_ns)
        r->newest_evicted_ns = t;
}

void sample_ring_begin_pass(struct sample_ring *r, uint64_t time_ns)
{
    if (!r->passes)
        return;
    if (r->in_pass)
        sample_ring_end_pass(r, NULL);
    while (r->n_passes > 0 && pass_at(r, 0)->time_ns + r->window_ns < time_ns)
        drop_oldest(r);
    if (r->n_passes == r->pass_cap)
        evict_oldest(r);
    struct ring_pass *p = pass_at(r, r->n_passes);
    memset(p, 0, sizeof *p);
    p->time_ns = time_ns;
    p->first_sample = r->next_seq;
    p->hog_stack = UINT32_MAX;
    p->weight = r->pass_weight;
    r->n_passes++;
    r->in_pass = true;
}

/* Doubles the samples array, keeping every live sample at its sequence
 * number's new position. */
static int grow_samples(struct sample_ring *r)
{
    size_t cap = r->sample_cap * 2;
    if (cap > r->max_samples)
        cap = r->max_samples;
    if (cap <= r->sample_cap)
        return -1;
    struct ring_sample *grown = malloc(cap * sizeof *grown);
    if (!grown)
        return -1;
    for (uint64_t s = r->first_seq; s < r->next_seq; s++)
        grown[s % cap] = *sample_at(r, s);
    free(r->samples);
    r->samples = grown;
    r->sample_cap = cap;
    return 0;
}

/* Room for n more samples: the array grown, or at the cap whole old passes
 * forgotten, never the open one (false: it cannot take them). */
static bool make_room(struct sample_ring *r, uint64_t n)
{
    while (r->next_seq + n - r->first_seq > r->sample_cap) {
        if (grow_samples(r) == 0)
            continue;
        if (r->n_passes <= 1)
            return false;
        evict_oldest(r);
    }
    return true;
}

void sample_ring_add(struct sample_ring *r, uint32_t thread, uint32_t stack,
                     enum profile_state state, bool gc, uint16_t syscall)
{
    if (!r->in_pass)
        return;
    if (!make_room(r, 1)) {
        r->samples_dropped++;
        return;
    }
    *sample_at(r, r->next_seq) = (struct ring_sample){thread, stack, syscall, (uint8_t)state, gc};
    r->next_seq++;
    pass_at(r, r->n_passes - 1)->n_samples++;
}

void sample_ring_end_pass(struct sample_ring *r, const struct sample_pass *facts)
{
    if (!r->in_pass)
        return;
    r->in_pass = false;
    if (!facts)
        return;
    struct ring_pass *p = pass_at(r, r->n_passes - 1);
    p->flags = (uint8_t)((facts->failed ? PASS_FAILED : 0) | (facts->gil_busy ? PASS_GIL_BUSY : 0) |
                         (facts->gc ? PASS_GC : 0) | (facts->gc_started ? PASS_GC_STARTED : 0) |
                         (facts->hog_native ? PASS_HOG_NATIVE : 0));
    p->hog_stack = facts->hog_stack;
    p->stacks_sampled = facts->stacks_sampled;
    p->stacks_torn = facts->stacks_torn;
}

void sample_ring_mark(const struct sample_ring *r, struct sink_mark *mark)
{
    mark->valid = r->n_passes > 0;
    if (!mark->valid)
        return;
    const struct ring_pass *p = pass_at(r, r->n_passes - 1);
    mark->first = p->first_sample;
    mark->n = r->in_pass ? (uint32_t)(r->next_seq - p->first_sample) : p->n_samples;
}

/* The copy goes where the samples' sequence numbers go next: room is made
 * first, so that writing it overwrites nothing live, the marked samples
 * included (which the room made may have forgotten). */
bool sample_ring_repeat(struct sample_ring *r, uint64_t time_ns, const struct sink_mark *mark)
{
    sample_ring_begin_pass(r, time_ns);
    if (!r->in_pass || !mark->valid || mark->n == 0 || mark->first < r->first_seq ||
        mark->first + mark->n > r->next_seq)
        return false;
    if (!make_room(r, mark->n) || mark->first < r->first_seq)
        return false;
    for (uint32_t i = 0; i < mark->n; i++)
        *sample_at(r, r->next_seq + i) = *sample_at(r, mark->first + i);
    r->next_seq += mark->n;
    pass_at(r, r->n_passes - 1)->n_samples = mark->n;
    return true;
}

int sample_ring_set_last(struct sample_ring *r, uint32_t thread, uint32_t stack,
                         enum profile_state state)
{
    if (r->n_passes == 0)
        return -1;
    struct ring_pass *p = pass_at(r, r->n_passes - 1);
    for (uint32_t i = 0; i < p->n_samples; i++) {
        struct ring_sample *s = sample_at(r, p->first_sample + i);
        if (s->thread == thread) {
            s->stack = stack;
            s->state = (uint8_t)state;
            s->gc = 0;
            s->syscall = 0xffff;
            return 0;
        }
    }
    /* Not sampled in that pass: append, which needs the pass to be open. */
    bool was_open = r->in_pass;
    r->in_pass = true;
    uint32_t before = p->n_samples;
    sample_ring_add(r, thread, stack, state, false, 0xffff);
    r->in_pass = was_open;
    return p->n_samples > before ? 0 : -1;
}

size_t sample_ring_memory(const struct sample_ring *r)
{
    return r->pass_cap * sizeof *r->passes + r->sample_cap * sizeof *r->samples;
}

size_t sample_ring_memory_cap(const struct sample_ring *r)
{
    return r->pass_cap * sizeof *r->passes + r->max_samples * sizeof *r->samples;
}

/* ---- the window as a profile ---- */

struct open_segment {
    bool open;
    bool seen;                /* sampled in the current pass */
    struct profile_segment seg;
};

struct window_builder {
    const struct profile *src;
    struct profile *out;
    uint32_t *frame_map, *stack_map, *thread_map;   /* src id -> out id, UINT32_MAX unset */
    uint32_t *scratch;
    size_t cap_scratch;
    struct open_segment *segments;                  /* by out thread id */
    size_t cap_segments;
};

static uint32_t *id_map(size_t n)
{
    uint32_t *map = malloc((n ? n : 1) * sizeof *map);
    if (map)
        memset(map, 0xff, (n ? n : 1) * sizeof *map);
    return map;
}

static uint32_t map_frame(struct window_builder *b, uint32_t id)
{
    if (id >= b->src->n_frames)
        return UINT32_MAX;
    if (b->frame_map[id] == UINT32_MAX) {
        b->frame_map[id] = profile_copy_frame(b->out, b->src, id);
    }
    return b->frame_map[id];
}

static uint32_t map_stack(struct window_builder *b, uint32_t id)
{
    if (id >= b->src->n_stacks)
        return UINT32_MAX;
    if (b->stack_map[id] != UINT32_MAX)
        return b->stack_map[id];
    const struct profile_stack *s = &b->src->stacks[id];
    if (s->depth > b->cap_scratch) {
        uint32_t *grown = realloc(b->scratch, s->depth * sizeof *grown);
        if (!grown)
            return UINT32_MAX;
        b->scratch = grown;
        b->cap_scratch = s->depth;
    }
    for (uint32_t i = 0; i < s->depth; i++) {
        b->scratch[i] = map_frame(b, s->frames[i]);
        if (b->scratch[i] == UINT32_MAX)
            return UINT32_MAX;
    }
    b->stack_map[id] = profile_stack_id(b->out, b->scratch, s->depth);
    return b->stack_map[id];
}

static uint32_t map_thread(struct window_builder *b, uint32_t id)
{
    if (id >= b->src->n_threads)
        return UINT32_MAX;
    if (b->thread_map[id] != UINT32_MAX)
        return b->thread_map[id];
    const struct profile_thread *t = &b->src->threads[id];
    uint32_t out_id = profile_thread_id(b->out, t->pid, t->tid);
    if (out_id == UINT32_MAX)
        return UINT32_MAX;
    memcpy(b->out->threads[out_id].name, t->name, sizeof t->name);
    if (out_id >= b->cap_segments) {
        size_t cap = b->cap_segments ? b->cap_segments * 2 : 16;
        while (cap <= out_id)
            cap *= 2;
        struct open_segment *grown = realloc(b->segments, cap * sizeof *grown);
        if (!grown)
            return UINT32_MAX;
        memset(grown + b->cap_segments, 0, (cap - b->cap_segments) * sizeof *grown);
        b->segments = grown;
        b->cap_segments = cap;
    }
    b->thread_map[id] = out_id;
    return out_id;
}

static int close_segment(struct window_builder *b, struct open_segment *o, uint64_t at_ns)
{
    if (!o->open)
        return 0;
    o->open = false;
    o->seg.end_ns = at_ns;
    return profile_add_segment(b->out, &o->seg);
}

/* Adds one sample at rel_ns (since the window's start) the way the sampler
 * would have: counted weight times (its pass stood for that many), and
 * extending or replacing the thread's open timeline segment. */
static int add_window_sample(struct window_builder *b, const struct ring_sample *s, uint64_t rel_ns,
                             uint32_t weight)
{
    if (s->thread >= b->src->n_threads || s->stack >= b->src->n_stacks ||
        s->state >= PROFILE_STATE_COUNT)
        return 0;
    uint32_t thread = map_thread(b, s->thread);
    uint32_t stack = map_stack(b, s->stack);
    if (thread == UINT32_MAX || stack == UINT32_MAX)
        return -1;
    if (profile_add_samples(b->out, thread, stack, (enum profile_state)s->state, s->gc, rel_ns,
                            weight) != 0)
        return -1;
    struct open_segment *o = &b->segments[thread];
    o->seen = true;
    if (o->open && o->seg.stack == stack && o->seg.state == s->state && o->seg.gc == s->gc &&
        o->seg.syscall == s->syscall)
        return 0;
    if (close_segment(b, o, rel_ns) != 0)
        return -1;
    o->open = true;
    o->seg = (struct profile_segment){.thread = thread, .stack = stack, .state = s->state,
                                      .gc = s->gc, .syscall = s->syscall, .start_ns = rel_ns};
    return 0;
}

int sample_ring_window(const struct sample_ring *r, const struct profile *src, uint64_t end_ns,
                       struct profile *out, struct ring_window *window)
{
    struct ring_window w = {0};
    w.end_ns = end_ns;
    w.start_ns = end_ns > r->window_ns ? end_ns - r->window_ns : 0;
    /* Passes evicted for memory inside the window: it starts after them. */
    if (r->evicted_any && r->newest_evicted_ns >= w.start_ns && r->n_passes > 0) {
        w.start_ns = pass_at(r, 0)->time_ns;
        w.shortened = true;
    }
    if (profile_init(out) != 0)
        return -1;
    out->meta = src->meta;
    out->meta.start_unix_ns = src->meta.start_unix_ns + w.start_ns;
    out->meta.duration_ns = end_ns - w.start_ns;
    out->meta.passes = out->meta.passes_failed = out->meta.stacks_sampled = 0;
    out->meta.stacks_torn = out->meta.gil_busy_passes = 0;
    out->meta.gc_passes = out->meta.gc_collections = 0;

    struct window_builder b = {.src = src, .out = out};
    b.frame_map = id_map(src->n_frames);
    b.stack_map = id_map(src->n_stacks);
    b.thread_map = id_map(src->n_threads);
    int rc = b.frame_map && b.stack_map && b.thread_map ? 0 : -1;
    for (size_t i = 0; i < r->n_passes && rc == 0; i++) {
        const struct ring_pass *p = pass_at(r, i);
        if (p->time_ns < w.start_ns || p->time_ns > end_ns)
            continue;
        uint64_t rel = p->time_ns - w.start_ns;
        for (size_t t = 0; t < b.cap_segments; t++)
            b.segments[t].seen = false;
        uint32_t weight = p->weight ? p->weight : 1;
        for (uint32_t k = 0; k < p->n_samples && rc == 0; k++)
            rc = add_window_sample(&b, sample_at(r, p->first_sample + k), rel, weight);
        /* A thread missing from a pass has ended (or could not be read):
         * its stretch ends here, as the sampler ends it. */
        for (size_t t = 0; t < b.cap_segments && rc == 0; t++)
            if (b.segments[t].open && !b.segments[t].seen)
                rc = close_segment(&b, &b.segments[t], rel);
        if (rc != 0)
            break;
        if (p->hog_stack != UINT32_MAX) {
            uint32_t hog = map_stack(&b, p->hog_stack);
            for (uint32_t k = 0; hog != UINT32_MAX && k < weight; k++)
                profile_add_hog(out, hog, (p->flags & PASS_HOG_NATIVE) != 0);
        }
        struct profile_meta *m = &out->meta;
        m->passes++;
        m->passes_failed += (p->flags & PASS_FAILED) != 0;
        m->stacks_sampled += p->stacks_sampled;
        m->stacks_torn += p->stacks_torn;
        m->gil_busy_passes += (p->flags & PASS_GIL_BUSY) != 0;
        m->gc_passes += (p->flags & PASS_GC) != 0;
        m->gc_collections += (p->flags & PASS_GC_STARTED) != 0;
        w.passes++;
    }
    for (size_t t = 0; t < b.cap_segments && rc == 0; t++)
        rc = close_segment(&b, &b.segments[t], end_ns - w.start_ns);
    w.threads = out->n_threads;
    free(b.frame_map);
    free(b.stack_map);
    free(b.thread_map);
    free(b.scratch);
    free(b.segments);
    if (rc != 0) {
        profile_free(out);
        return -1;
    }
    if (window)
        *window = w;
    return 0;
}

int sample_ring_window_between(const struct sample_ring *r, const struct profile *src,
                               uint64_t start_ns, uint64_t end_ns, struct profile *out,
                               struct ring_window *window)
{
    struct sample_ring view = *r;
    if (end_ns > start_ns && end_ns - start_ns < r->window_ns)
        view.window_ns = end_ns - start_ns;
    return sample_ring_window(&view, src, end_ns, out, window);
}

size_t sample_ring_last_pass(const struct sample_ring *r, struct ring_sample *out, size_t cap)
{
    if (r->n_passes == 0)
        return 0;
    const struct ring_pass *p = pass_at(r, r->n_passes - 1);
    uint64_t first = p->first_sample < r->first_seq ? r->first_seq : p->first_sample;
    uint64_t end = r->in_pass ? r->next_seq : p->first_sample + p->n_samples;
    size_t n = 0;
    for (uint64_t seq = first; seq < end && n < cap; seq++)
        out[n++] = *sample_at(r, seq);
    return (size_t)(end > first ? end - first : 0);
}
