/* Chrome Trace Event JSON from the timeline: per thread a track with its
 * Python stack as nested B/E slices and a second track with its GIL state as
 * X slices, thread names as "M" events, and the summary under "pyscope".
 * Perfetto UI, chrome://tracing and `viztracer --combine` read it. */
#include <stdlib.h>
#include <string.h>

#include "util/version.h"
#include "output/json_writer.h"
#include "output/profile_common.h"
#include "output/profile_summary.h"
#include "output/profile_writers.h"
#include "target/syscalls.h"

/* The GIL track of thread T is tid T + GIL_TID_OFFSET: Linux tids stay below
 * pid_max (at most 2^22), so this never meets a real tid and still fits the
 * 32-bit tids that trace viewers assume. */
#define GIL_TID_OFFSET 0x40000000

struct gil_slice {
    bool pending;
    uint8_t state, gc;
    uint16_t syscall;
    uint64_t start_ns, end_ns;
};

struct track {
    uint32_t *open;           /* frame ids with an open B slice, outermost first */
    uint32_t n_open, cap_open;
    bool started;
    uint64_t last_end_ns;
    struct gil_slice gil;
};

struct chrome {
    const struct profile *p;
    const struct profile_write_options *o;
    struct json_writer *w;
    struct track *tracks;
};

static void member_ts(struct json_writer *w, const char *key, uint64_t ns)
{
    json_key(w, key);
    json_double(w, (double)ns / 1000.0);
}

static void event_head(struct json_writer *w, const char *ph, pid_t pid, int64_t tid)
{
    json_begin_object(w);
    json_member_string(w, "ph", ph);
    json_member_int(w, "pid", pid);
    json_member_int(w, "tid", tid);
}

static void close_to(struct chrome *c, uint32_t thread, uint32_t keep, uint64_t ns)
{
    struct track *t = &c->tracks[thread];
    const struct profile_thread *th = &c->p->threads[thread];
    while (t->n_open > keep) {
        t->n_open--;
        event_head(c->w, "E", th->pid, th->tid);
        member_ts(c->w, "ts", ns);
        json_end_object(c->w);
    }
}

static int open_frame(struct chrome *c, uint32_t thread, uint32_t frame_id, uint64_t ns)
{
    struct track *t = &c->tracks[thread];
    if (t->n_open == t->cap_open) {
        uint32_t cap = t->cap_open ? t->cap_open * 2 : 32;
        uint32_t *grown = realloc(t->open, cap * sizeof *grown);
        if (!grown)
            return -1;
        t->open = grown;
        t->cap_open = cap;
    }
    t->open[t->n_open++] = frame_id;
    const struct profile_thread *th = &c->p->threads[thread];
    const struct profile_frame *f = &c->p->frames[frame_id];
    event_head(c->w, "B", th->pid, th->tid);
    member_ts(c->w, "ts", ns);
    char name[FRAME_NAME_MAX];
    json_member_string(c->w, "name", frame_display_name(f, name));
    json_member_string(c->w, "cat", f->native ? "native" : "python");
    json_key(c->w, "args");
    json_begin_object(c->w);
    json_member_string(c->w, "file", f->file);
    if (f->line >= 0)
        json_member_int(c->w, "line", f->line);
    else
        json_member_null(c->w, "line");
    json_end_object(c->w);
    json_end_object(c->w);
    return 0;
}

static bool same_function(const struct profile *p, uint32_t a, uint32_t b)
{
    const struct profile_frame *x = &p->frames[a], *y = &p->frames[b];
    return strcmp(x->function, y->function) == 0 && strcmp(x->file, y->file) == 0 &&
           x->native == y->native && (!x->native || strcmp(x->module, y->module) == 0);
}

static void gil_label(char *buf, size_t size, const struct gil_slice *g)
{
    if (g->gc) {
        snprintf(buf, size, "GC");
    } else if (g->state == PROFILE_IDLE && g->syscall != 0xffff) {
        const char *name = syscall_name(g->syscall);
        if (name)
            snprintf(buf, size, "idle (%s)", name);
        else
            snprintf(buf, size, "idle (syscall %u)", (unsigned)g->syscall);
    } else {
        snprintf(buf, size, "%s", profile_state_name((enum profile_state)g->state));
    }
}

static void flush_gil(struct chrome *c, uint32_t thread)
{
    struct gil_slice *g = &c->tracks[thread].gil;
    if (!g->pending)
        return;
    g->pending = false;
    const struct profile_thread *th = &c->p->threads[thread];
    char label[64];
    gil_label(label, sizeof label, g);
    event_head(c->w, "X", th->pid, (int64_t)th->tid + GIL_TID_OFFSET);
    member_ts(c->w, "ts", g->start_ns);
    member_ts(c->w, "dur", g->end_ns - g->start_ns);
    json_member_string(c->w, "name", label);
    json_member_string(c->w, "cat", "gil");
    json_key(c->w, "args");
    json_begin_object(c->w);
    json_member_string(c->w, "state", profile_state_name((enum profile_state)g->state));
    json_member_bool(c->w, "gc", g->gc);
    if (g->state == PROFILE_IDLE && g->syscall != 0xffff)
        json_member_string(c->w, "syscall", syscall_name(g->syscall));
    json_end_object(c->w);
    json_end_object(c->w);
}

/* Consecutive segments that differ only in their stack are one GIL slice. */
static void add_gil(struct chrome *c, uint32_t thread, const struct profile_segment *seg,
                    uint64_t start, uint64_t end)
{
    struct gil_slice *g = &c->tracks[thread].gil;
    uint16_t syscall = seg->state == PROFILE_IDLE ? seg->syscall : 0xffff;
    if (g->pending && g->end_ns == start && g->state == seg->state && g->gc == (seg->gc != 0) &&
        g->syscall == syscall) {
        g->end_ns = end;
        return;
    }
    flush_gil(c, thread);
    *g = (struct gil_slice){true, seg->state, seg->gc != 0, syscall, start, end};
}

static int on_segment(void *ctx, const struct profile_segment *seg)
{
    struct chrome *c = ctx;
    const struct profile *p = c->p;
    if (seg->thread >= p->n_threads || seg->stack >= p->n_stacks)
        return 0;
    struct track *t = &c->tracks[seg->thread];
    uint64_t start = seg->start_ns, end = seg->end_ns;
    /* Slices on one track must not overlap: a segment that starts before the
     * previous one ended starts where it ended. */
    if (t->started && start < t->last_end_ns)
        start = t->last_end_ns;
    if (end < start)
        end = start;
    /* Nothing is known about a gap between segments: show no stack there. */
    if (t->started && start > t->last_end_ns)
        close_to(c, seg->thread, 0, t->last_end_ns);

    const struct profile_stack *stack = &p->stacks[seg->stack];
    uint32_t depth = profile_state_kept(c->o, (enum profile_state)seg->state) ? stack->depth : 0;
    uint32_t common = 0;
    while (common < t->n_open && common < depth && t->open[common] == stack->frames[common])
        common++;
    /* Same function, another line: the call in progress moved on, it did not
     * return, so its slice stays open. Only the first differing frame can be
     * the same call; below it, a different call site means a different call. */
    if (common < t->n_open && common < depth && stack->frames[common] < p->n_frames &&
        same_function(p, t->open[common], stack->frames[common])) {
        t->open[common] = stack->frames[common];
        common++;
    }
    close_to(c, seg->thread, common, start);
    for (uint32_t k = common; k < depth; k++) {
        if (stack->frames[k] >= p->n_frames)
            break;
        if (open_frame(c, seg->thread, stack->frames[k], start) != 0)
            return -1;
    }
    t->started = true;
    t->last_end_ns = end;
    add_gil(c, seg->thread, seg, start, end);
    return 0;
}

static void metadata_event(struct json_writer *w, const char *what, pid_t pid, int64_t tid,
                           const char *key, const char *name, int64_t sort_index)
{
    event_head(w, "M", pid, tid);
    json_member_string(w, "name", what);
    json_key(w, "args");
    json_begin_object(w);
    if (name)
        json_member_string(w, key, name);
    else
        json_member_int(w, key, sort_index);
    json_end_object(w);
    json_end_object(w);
}

static void write_metadata(struct json_writer *w, const struct profile *p)
{
    for (size_t i = 0; i < p->n_threads; i++) {
        const struct profile_thread *t = &p->threads[i];
        bool first_of_pid = true;
        for (size_t j = 0; j < i && first_of_pid; j++)
            first_of_pid = p->threads[j].pid != t->pid;
        if (first_of_pid) {
            char name[THREAD_LABEL_MAX + 64];
            size_t command_len = strnlen(p->meta.command, sizeof p->meta.command);
            if (t->pid == p->meta.pid && command_len)
                snprintf(name, sizeof name, "%.*s", command_len > 100 ? 100 : (int)command_len,
                         p->meta.command);
            else
                snprintf(name, sizeof name, "python");
            metadata_event(w, "process_name", t->pid, 0, "name", name, 0);
        }
        char name[THREAD_LABEL_MAX + 8];
        int name_len = (int)strnlen(t->name, sizeof t->name);
        if (name_len)
            snprintf(name, sizeof name, "%.*s", name_len, t->name);
        else
            snprintf(name, sizeof name, "thread %d", (int)t->tid);
        metadata_event(w, "thread_name", t->pid, t->tid, "name", name, 0);
        metadata_event(w, "thread_sort_index", t->pid, t->tid, "sort_index", NULL, 2 * (int64_t)i);
        /* Room for " GIL": the track name reads "<thread> GIL". */
        strncat(name, " GIL", sizeof name - strlen(name) - 1);
        int64_t gil_tid = (int64_t)t->tid + GIL_TID_OFFSET;
        metadata_event(w, "thread_name", t->pid, gil_tid, "name", name, 0);
        metadata_event(w, "thread_sort_index", t->pid, gil_tid, "sort_index", NULL,
                       2 * (int64_t)i + 1);
    }
}

int profile_write_chrome(FILE *out, const struct profile *p, const struct profile_write_options *o)
{
    struct profile_summary summary;
    if (profile_summary_build(&summary, p) != 0)
        return -1;
    struct json_writer w;
    struct chrome c = {p, o, &w, calloc(p->n_threads ? p->n_threads : 1, sizeof *c.tracks)};
    if (!c.tracks) {
        profile_summary_free(&summary);
        return -1;
    }
    json_init(&w, out, 0);
    json_begin_object(&w);
    json_key(&w, "traceEvents");
    json_begin_array(&w);
    write_metadata(&w, p);
    int rc = profile_foreach_segment(p, on_segment, &c);
    for (size_t i = 0; i < p->n_threads; i++) {
        close_to(&c, (uint32_t)i, 0, c.tracks[i].last_end_ns);
        flush_gil(&c, (uint32_t)i);
        free(c.tracks[i].open);
    }
    free(c.tracks);
    json_end_array(&w);
    json_member_string(&w, "displayTimeUnit", "ms");
    /* What `viztracer --combine` (report_builder.py, ReportBuilder) needs of
     * each input, as of VizTracer 1.1: a file name ending in ".json"; a
     * top-level object whose "traceEvents" list it concatenates; "ph" on every
     * event and "name" on every X event (it scans X names of the form
     * "func (file:line)" for source files); a "viztracer_metadata" object,
     * which --align_combine indexes without a fallback and whose "overflow"
     * flag, when true, makes combine warn that early data was lost. Its
     * "version" and "file_info" are optional and filled in by combine itself.
     * Timestamps here are microseconds since the recording started, whereas
     * VizTracer's are CLOCK_MONOTONIC microseconds: --align_combine lines the
     * two up by their first events. */
    json_key(&w, "viztracer_metadata");
    json_begin_object(&w);
    json_member_bool(&w, "overflow", false);
    json_end_object(&w);
    json_key(&w, "pyscope");
    json_begin_object(&w);
    json_key(&w, "meta");
    profile_meta_write_json(&w, p);
    json_key(&w, "summary");
    profile_summary_write_json(&w, &summary);
    json_end_object(&w);
    json_end_object(&w);
    profile_summary_free(&summary);
    if (json_finish(&w) != 0 || fputc('\n', out) == EOF || fflush(out) != 0)
        rc = -1;
    return rc == 0 ? 0 : -1;
}
