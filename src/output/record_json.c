/* The json format of `pyscope record`: every table of the profile (frames,
 * stacks, threads, aggregated samples, the timeline) plus the summary, for
 * scripts. docs/record-json.md is its contract. */
#include <stdlib.h>
#include <string.h>

#include "util/version.h"
#include "output/json_writer.h"
#include "output/profile_common.h"
#include "output/profile_summary.h"
#include "output/profile_writers.h"
#include "target/syscalls.h"

static void write_frames(struct json_writer *w, const struct profile *p)
{
    json_begin_array(w);
    for (size_t i = 0; i < p->n_frames; i++) {
        const struct profile_frame *f = &p->frames[i];
        json_begin_object(w);
        json_member_string(w, "function", f->function);
        json_member_string(w, "file", f->file);
        if (f->line >= 0)
            json_member_int(w, "line", f->line);
        else
            json_member_null(w, "line");
        json_member_bool(w, "synthetic", f->synthetic);
        /* Only C frames (--native) say so, and name their ELF file. */
        if (f->native) {
            json_member_bool(w, "native", true);
            json_member_string(w, "module", f->module ? f->module : "");
        }
        json_end_object(w);
    }
    json_end_array(w);
}

static void write_stacks(struct json_writer *w, const struct profile *p)
{
    json_begin_array(w);
    for (size_t i = 0; i < p->n_stacks; i++) {
        json_begin_array(w);
        for (uint32_t k = 0; k < p->stacks[i].depth; k++)
            json_uint(w, p->stacks[i].frames[k]);
        json_end_array(w);
    }
    json_end_array(w);
}

static void write_threads(struct json_writer *w, const struct profile_summary *s)
{
    const struct profile *p = s->profile;
    json_begin_array(w);
    for (size_t i = 0; i < s->n_threads; i++) {
        const struct summary_thread *row = &s->threads[i];
        const struct profile_thread *t = &p->threads[row->thread];
        json_begin_object(w);
        json_member_int(w, "pid", t->pid);
        json_member_int(w, "tid", t->tid);
        json_key(w, "name");
        json_string_n(w, t->name, strnlen(t->name, sizeof t->name));
        json_member_uint(w, "samples", t->samples);
        json_key(w, "state_samples");
        json_begin_object(w);
        for (int st = 0; st < PROFILE_STATE_COUNT; st++)
            json_member_uint(w, profile_state_name((enum profile_state)st), t->state_samples[st]);
        json_end_object(w);
        json_member_uint(w, "gc_samples", t->gc_samples);
        json_key(w, "state_pct");
        json_begin_object(w);
        for (int st = 0; st < PROFILE_STATE_COUNT; st++) {
            json_key(w, profile_state_name((enum profile_state)st));
            json_double(w, round_2dp(row->state_pct[st]));
        }
        json_end_object(w);
        json_member_uint(w, "first_ns", t->first_ns);
        json_member_uint(w, "last_ns", t->last_ns);
        json_end_object(w);
    }
    json_end_array(w);
}

struct ranked_count {
    uint64_t samples;
    size_t index;
};

/* Heaviest first, ties in recording order, so that the output is the same
 * whatever the C library's qsort does with equal keys. */
static int by_samples_then_index(const void *a, const void *b)
{
    const struct ranked_count *x = a, *y = b;
    if (x->samples != y->samples)
        return x->samples < y->samples ? 1 : -1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int write_samples(struct json_writer *w, const struct profile *p,
                         const struct profile_write_options *o)
{
    struct ranked_count *ranked = malloc((p->n_counts ? p->n_counts : 1) * sizeof *ranked);
    if (!ranked)
        return -1;
    for (size_t i = 0; i < p->n_counts; i++)
        ranked[i] = (struct ranked_count){p->counts[i].samples, i};
    qsort(ranked, p->n_counts, sizeof *ranked, by_samples_then_index);
    json_begin_array(w);
    for (size_t i = 0; i < p->n_counts; i++) {
        const struct profile_count *c = &p->counts[ranked[i].index];
        if (!profile_state_kept(o, (enum profile_state)c->state))
            continue;
        json_begin_array(w);
        json_uint(w, c->thread);
        json_uint(w, c->stack);
        json_string(w, profile_state_name((enum profile_state)c->state));
        json_uint(w, c->samples);
        json_end_array(w);
    }
    json_end_array(w);
    free(ranked);
    return 0;
}

static int write_segment(void *ctx, const struct profile_segment *seg)
{
    struct json_writer *w = ctx;
    json_begin_array(w);
    json_uint(w, seg->thread);
    json_uint(w, seg->stack);
    json_string(w, profile_state_name((enum profile_state)seg->state));
    json_bool(w, seg->gc != 0);
    json_uint(w, seg->start_ns);
    json_uint(w, seg->end_ns);
    if (seg->state == PROFILE_IDLE && seg->syscall != 0xffff) {
        const char *name = syscall_name(seg->syscall);
        if (name)
            json_string(w, name);
        else
            json_uint(w, seg->syscall);
    } else {
        json_null(w);
    }
    json_end_array(w);
    return w->failed ? -1 : 0;
}

int profile_write_json(FILE *out, const struct profile *p, const struct profile_write_options *o)
{
    struct profile_summary summary;
    if (profile_summary_build(&summary, p) != 0)
        return -1;
    struct json_writer w;
    json_init(&w, out, 0);
    json_begin_object(&w);
    json_member_string(&w, "format", "pyscope-record");
    json_member_int(&w, "format_version", 1);
    json_key(&w, "meta");
    profile_meta_write_json(&w, p);
    json_key(&w, "filters");
    json_begin_object(&w);
    json_member_bool(&w, "idle", o && o->include_idle);
    json_member_bool(&w, "gil_only", o && o->gil_only);
    json_end_object(&w);
    json_key(&w, "frames");
    write_frames(&w, p);
    json_key(&w, "stacks");
    write_stacks(&w, p);
    json_key(&w, "threads");
    write_threads(&w, &summary);
    json_key(&w, "samples");
    int rc = write_samples(&w, p, o);
    json_key(&w, "timeline");
    json_begin_array(&w);
    if (rc == 0)
        rc = profile_foreach_segment(p, write_segment, &w);
    json_end_array(&w);
    json_key(&w, "summary");
    profile_summary_write_json(&w, &summary);
    json_end_object(&w);
    profile_summary_free(&summary);
    if (json_finish(&w) != 0 || fputc('\n', out) == EOF || fflush(out) != 0)
        rc = -1;
    return rc == 0 ? 0 : -1;
}
