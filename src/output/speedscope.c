/* speedscope's file format (https://www.speedscope.app/file-format-schema.json):
 * shared frames plus one "sampled" profile per thread. From the timeline each
 * sample is a stretch of the thread's time weighted in seconds, so that
 * speedscope's time-order view is the real order; a profile without a timeline
 * falls back to the aggregated counts, weighted in samples. */
#include <stdlib.h>
#include <string.h>

#include "util/version.h"
#include "output/json_writer.h"
#include "output/profile_common.h"
#include "output/profile_writers.h"

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

struct stretch {
    uint32_t stack;
    uint64_t weight;          /* ns from the timeline, samples from the counts */
};

struct thread_samples {
    struct stretch *items;
    size_t n, cap;
    uint64_t start_ns, end_ns;
    bool seen;
    uint64_t total;
};

struct collect {
    const struct profile *p;
    const struct profile_write_options *o;
    struct thread_samples *threads;
};

/* Adds weight to the thread's last stretch when the stack is the same:
 * speedscope shows consecutive equal samples as one anyway, and it keeps the
 * file and the memory small. */
static int append(struct thread_samples *t, uint32_t stack, uint64_t weight)
{
    t->total += weight;
    if (t->n && t->items[t->n - 1].stack == stack) {
        t->items[t->n - 1].weight += weight;
        return 0;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct stretch *grown = realloc(t->items, cap * sizeof *grown);
        if (!grown)
            return -1;
        t->items = grown;
        t->cap = cap;
    }
    t->items[t->n++] = (struct stretch){stack, weight};
    return 0;
}

static int collect_segment(void *ctx, const struct profile_segment *seg)
{
    struct collect *c = ctx;
    if (seg->thread >= c->p->n_threads || seg->stack >= c->p->n_stacks || seg->end_ns < seg->start_ns)
        return 0;
    struct thread_samples *t = &c->threads[seg->thread];
    if (!t->seen || seg->start_ns < t->start_ns)
        t->start_ns = seg->start_ns;
    if (!t->seen || seg->end_ns > t->end_ns)
        t->end_ns = seg->end_ns;
    t->seen = true;
    if (!profile_state_kept(c->o, (enum profile_state)seg->state) || seg->end_ns == seg->start_ns)
        return 0;
    return append(t, seg->stack, seg->end_ns - seg->start_ns);
}

static int collect_counts(struct collect *c)
{
    const struct profile *p = c->p;
    for (size_t i = 0; i < p->n_counts; i++) {
        const struct profile_count *count = &p->counts[i];
        if (count->thread >= p->n_threads || count->stack >= p->n_stacks || count->samples == 0 ||
            !profile_state_kept(c->o, (enum profile_state)count->state))
            continue;
        if (append(&c->threads[count->thread], count->stack, count->samples) != 0)
            return -1;
    }
    return 0;
}

static void write_frames(struct json_writer *w, const struct profile *p)
{
    json_begin_array(w);
    for (size_t i = 0; i < p->n_frames; i++) {
        const struct profile_frame *f = &p->frames[i];
        char name[FRAME_NAME_MAX];
        json_begin_object(w);
        json_member_string(w, "name", frame_display_name(f, name));
        if (f->file && f->file[0])
            json_member_string(w, "file", f->file);
        if (f->line >= 0)
            json_member_int(w, "line", f->line);
        json_end_object(w);
    }
    json_end_array(w);
}

static void write_profile(struct json_writer *w, const struct profile *p, uint32_t thread,
                          const struct thread_samples *t, bool timed)
{
    char name[THREAD_LABEL_MAX];
    thread_view_name(name, p, &p->threads[thread]);
    json_begin_object(w);
    json_member_string(w, "type", "sampled");
    json_member_string(w, "name", name);
    json_member_string(w, "unit", timed ? "seconds" : "none");
    json_key(w, "startValue");
    json_double(w, timed ? (double)t->start_ns / 1e9 : 0.0);
    json_key(w, "endValue");
    json_double(w, timed ? (double)t->end_ns / 1e9 : (double)t->total);
    json_key(w, "samples");
    json_begin_array(w);
    for (size_t i = 0; i < t->n; i++) {
        const struct profile_stack *stack = &p->stacks[t->items[i].stack];
        json_begin_array(w);
        for (uint32_t k = 0; k < stack->depth; k++)
            json_uint(w, stack->frames[k]);
        json_end_array(w);
    }
    json_end_array(w);
    json_key(w, "weights");
    json_begin_array(w);
    for (size_t i = 0; i < t->n; i++) {
        if (timed)
            json_double(w, (double)t->items[i].weight / 1e9);
        else
            json_uint(w, t->items[i].weight);
    }
    json_end_array(w);
    json_end_object(w);
}

int profile_write_speedscope(FILE *out, const struct profile *p, const struct profile_write_options *o)
{
    struct collect c = {p, o, calloc(p->n_threads ? p->n_threads : 1, sizeof *c.threads)};
    if (!c.threads)
        return -1;
    bool timed = p->n_segments > 0;
    int rc = timed ? profile_foreach_segment(p, collect_segment, &c) : collect_counts(&c);

    /* Open on the busiest thread rather than on whichever was seen first
     * (usually a main thread that only waits for the others). */
    size_t n_profiles = 0, active = 0;
    uint64_t busiest = 0;
    for (size_t i = 0; i < p->n_threads; i++) {
        if (c.threads[i].n == 0)
            continue;
        if (c.threads[i].total > busiest) {
            busiest = c.threads[i].total;
            active = n_profiles;
        }
        n_profiles++;
    }

    if (rc == 0) {
        struct json_writer w;
        json_init(&w, out, 0);
        json_begin_object(&w);
        json_member_string(&w, "$schema", SPEEDSCOPE_SCHEMA);
        json_member_string(&w, "exporter", "pyscope@" PYSCOPE_VERSION);
        char *name = NULL;
        size_t command_len = strnlen(p->meta.command, sizeof p->meta.command);
        if (asprintf(&name, "pyscope record of process %d%s%.*s", (int)p->meta.pid,
                     command_len ? ": " : "", (int)command_len, p->meta.command) < 0)
            name = NULL;
        json_member_string(&w, "name", name ? name : "pyscope record");
        free(name);
        json_member_uint(&w, "activeProfileIndex", active);
        json_key(&w, "shared");
        json_begin_object(&w);
        json_key(&w, "frames");
        write_frames(&w, p);
        json_end_object(&w);
        json_key(&w, "profiles");
        json_begin_array(&w);
        for (size_t i = 0; i < p->n_threads; i++) {
            if (c.threads[i].n)
                write_profile(&w, p, (uint32_t)i, &c.threads[i], timed);
        }
        json_end_array(&w);
        json_end_object(&w);
        rc = json_finish(&w);
        if (rc == 0 && fputc('\n', out) == EOF)
            rc = -1;
    }
    for (size_t i = 0; i < p->n_threads; i++)
        free(c.threads[i].items);
    free(c.threads);
    return rc == 0 && fflush(out) == 0 ? 0 : -1;
}
