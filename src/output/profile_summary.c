/* Builds the summary of a recording (the per-thread GIL table, GIL and GC
 * utilisation, sampling statistics, top GIL hogs) and writes it and the
 * recording's metadata as JSON for the chrome and json formats. */
#include "output/profile_summary.h"

#include <stdlib.h>
#include <string.h>

#include "util/version.h"
#include "output/profile_common.h"

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static int hog_order(const void *a, const void *b)
{
    const struct summary_hog *x = a, *y = b;
    if (x->samples != y->samples)
        return x->samples < y->samples ? 1 : -1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* Most collections first, then most samples: a stack that starts many short
 * collections matters as much as one that sits in a long one. */
static int gc_trigger_order(const void *a, const void *b)
{
    const struct summary_gc_trigger *x = a, *y = b;
    if (x->collections != y->collections)
        return x->collections < y->collections ? 1 : -1;
    if (x->samples != y->samples)
        return x->samples < y->samples ? 1 : -1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static bool c_runtime_module(const char *module)
{
    static const char *const prefixes[] = {"libc.so", "ld-linux", "libpthread.so", "libm.so"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(module, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

/* The interpreter's own taking and dropping of the GIL, and the eval
 * breaker's handler that calls them: a thread sampled in there is between
 * holding the GIL and not, never holding it for a C function. */
static bool interpreter_module(const char *module)
{
    const char *base = strrchr(module, '/');
    base = base ? base + 1 : module;
    return strncmp(base, "libpython", 9) == 0 || strncmp(base, "python", 6) == 0;
}

static bool gil_switch_frame(const struct profile_frame *f)
{
    static const char *const names[] = {
        "take_gil", "drop_gil", "PyEval_RestoreThread", "PyEval_SaveThread",
        "PyEval_AcquireThread", "PyEval_ReleaseThread", "PyEval_AcquireLock",
        "PyEval_ReleaseLock", "_PyEval_AcquireLock", "_PyEval_ReleaseLock",
        "_PyThreadState_Attach", "_PyThreadState_Detach", "detach_thread", "tstate_try_attach",
        "_PyThreadState_Swap", "_PyThreadState_SwapNoGIL", "PyThreadState_Swap",
        "PyGILState_Ensure", "PyGILState_Release", "_Py_HandlePending",
        "eval_frame_handle_pending"};
    if (!interpreter_module(f->module))
        return false;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        /* gcc's clones: take_gil.constprop.0, drop_gil_impl */
        if (strncmp(f->function, names[i], n) == 0 &&
            (f->function[n] == '\0' || f->function[n] == '.' || f->function[n] == '_'))
            return true;
    }
    return false;
}

/* Innermost first: the first C frame outside the C runtime (memcpy called
 * by the regex matcher is not what holds the GIL), else the first C frame.
 * None when that frame takes or drops the GIL, or in a merged stack any C
 * frame between it and the Python caller does. In a stack not merged (the C
 * frames after "[C stack not merged]", the interpreter's plumbing left out)
 * an interpreter frame or a C-runtime one may be of any activation, not the
 * innermost: only a frame of another file is named there. */
static void c_holder(const struct profile *p, const struct profile_stack *st, uint32_t *c_frame,
                     uint32_t *py_frame)
{
    *c_frame = *py_frame = UINT32_MAX;
    uint32_t first_c = UINT32_MAX;
    bool switching = false, switching_below = false, unmerged = false;
    for (uint32_t k = st->depth; k-- > 0;) {
        uint32_t id = st->frames[k];
        if (id >= p->n_frames)
            return;
        const struct profile_frame *f = &p->frames[id];
        if (f->native) {
            if (first_c == UINT32_MAX)
                first_c = id;
            if (*c_frame == UINT32_MAX && !c_runtime_module(f->module)) {
                *c_frame = id;
                switching = gil_switch_frame(f);
            }
            /* Any frame, not only the innermost: a thread just past
             * take_gil, in PyEval_RestoreThread's swap of its thread
             * state, is still switching. */
            if (gil_switch_frame(f))
                switching_below = true;
        } else if (f->synthetic && strcmp(f->function, PROFILE_NATIVE_NOT_MERGED) == 0) {
            unmerged = true;
        } else if (!f->synthetic) {
            *py_frame = id;
            break;
        }
    }
    if (unmerged) {
        if (*c_frame != UINT32_MAX && interpreter_module(p->frames[*c_frame].module))
            *c_frame = UINT32_MAX;
    } else if (*c_frame == UINT32_MAX) {
        *c_frame = first_c;
    }
    if (switching || (switching_below && !unmerged))
        *c_frame = UINT32_MAX;
}

static int c_hog_order(const void *a, const void *b)
{
    const struct summary_c_hog *x = a, *y = b;
    return x->samples > y->samples ? -1 : x->samples < y->samples;
}

static bool same_c_function(const struct profile *p, uint32_t a, uint32_t b)
{
    const struct profile_frame *x = &p->frames[a], *y = &p->frames[b];
    return strcmp(x->function, y->function) == 0 && strcmp(x->module, y->module) == 0 &&
           (x->function[0] || a == b); /* unnamed frames are only themselves */
}

static bool stack_unmerged(const struct profile *p, const struct profile_stack *st)
{
    for (uint32_t k = 0; k < st->depth; k++) {
        uint32_t id = st->frames[k];
        if (id < p->n_frames && p->frames[id].synthetic &&
            strcmp(p->frames[id].function, PROFILE_NATIVE_NOT_MERGED) == 0)
            return true;
    }
    return false;
}

static int c_hogs_build(struct profile_summary *s, const struct profile *p)
{
    struct summary_c_hog *all = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < p->n_hogs; i++) {
        const struct profile_hog *h = &p->hogs[i];
        if (h->samples == 0 || h->stack >= p->n_stacks)
            continue;
        uint32_t c_frame, py_frame;
        c_holder(p, &p->stacks[h->stack], &c_frame, &py_frame);
        if (c_frame == UINT32_MAX) {
            if (stack_unmerged(p, &p->stacks[h->stack]))
                s->c_hog_unmerged += h->samples;
            continue;
        }
        size_t k = 0;
        while (k < n && !(all[k].py_frame == py_frame && same_c_function(p, all[k].c_frame, c_frame)))
            k++;
        if (k == n) {
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 16;
                struct summary_c_hog *grown = realloc(all, ncap * sizeof *grown);
                if (!grown) {
                    free(all);
                    return -1;
                }
                all = grown;
                cap = ncap;
            }
            all[n++] = (struct summary_c_hog){c_frame, py_frame, 0, 0, 0};
        }
        /* The frame (and so the line) shown is the one sampled most. */
        if (h->samples > all[k].samples)
            all[k].c_frame = c_frame;
        all[k].samples += h->samples;
        all[k].native_samples += h->native_samples;
    }
    if (n)
        qsort(all, n, sizeof *all, c_hog_order);
    for (size_t k = 0; k < n && s->n_c_hogs < SUMMARY_MAX_C_HOGS; k++) {
        all[k].passes_pct = pct(all[k].samples, p->meta.passes);
        s->c_hogs[s->n_c_hogs++] = all[k];
    }
    free(all);
    return 0;
}

int profile_summary_build(struct profile_summary *s, const struct profile *p)
{
    memset(s, 0, sizeof *s);
    s->profile = p;
    s->threads = calloc(p->n_threads ? p->n_threads : 1, sizeof *s->threads);
    if (!s->threads)
        return -1;
    for (size_t i = 0; i < p->n_threads; i++) {
        const struct profile_thread *t = &p->threads[i];
        struct summary_thread *row = &s->threads[s->n_threads++];
        row->thread = (uint32_t)i;
        for (int st = 0; st < PROFILE_STATE_COUNT; st++)
            row->state_pct[st] = pct(t->state_samples[st], t->samples);
        row->gc_pct = pct(t->gc_samples, t->samples);
    }

    /* Only the top few are shown: keep a small sorted window rather than
     * sorting every hog stack, of which a long recording may have many. */
    for (size_t i = 0; i < p->n_hogs; i++) {
        const struct profile_hog *h = &p->hogs[i];
        if (h->samples == 0 || h->stack >= p->n_stacks)
            continue;
        s->n_hogs_total++;
        struct summary_hog cand = {
            .stack = h->stack,
            .samples = h->samples,
            .native_samples = h->native_samples,
            .native_keeps_gil = h->native_samples * 2 > h->samples,
            .passes_pct = pct(h->samples, p->meta.passes),
        };
        if (s->n_hogs == SUMMARY_MAX_HOGS) {
            if (hog_order(&cand, &s->hogs[SUMMARY_MAX_HOGS - 1]) >= 0)
                continue;
            s->n_hogs--;
        }
        s->hogs[s->n_hogs++] = cand;
        qsort(s->hogs, s->n_hogs, sizeof s->hogs[0], hog_order);
    }

    if (c_hogs_build(s, p) != 0)
        return -1;

    for (size_t i = 0; i < p->n_gc_triggers; i++) {
        const struct profile_gc_trigger *g = &p->gc_triggers[i];
        if (g->stack >= p->n_stacks)
            continue;
        struct summary_gc_trigger cand = {g->stack, g->samples, g->collections};
        if (s->n_gc_triggers == SUMMARY_MAX_GC_TRIGGERS) {
            if (gc_trigger_order(&cand, &s->gc_triggers[SUMMARY_MAX_GC_TRIGGERS - 1]) >= 0)
                continue;
            s->n_gc_triggers--;
        }
        s->gc_triggers[s->n_gc_triggers++] = cand;
        qsort(s->gc_triggers, s->n_gc_triggers, sizeof s->gc_triggers[0], gc_trigger_order);
    }

    const struct profile_meta *m = &p->meta;
    s->gil_utilisation_pct = pct(m->gil_busy_passes, m->passes);
    s->gc_pct = pct(m->gc_passes, m->passes);
    if (m->duration_ns)
        s->rate_achieved_hz = (double)m->passes * 1e9 / (double)m->duration_ns;
    if (m->passes)
        s->mean_interval_ns = (double)m->duration_ns / (double)m->passes;
    s->torn_pct = pct(m->stacks_torn, m->stacks_sampled);
    s->failed_pct = pct(m->passes_failed, m->passes);
    return loop_blocks_build(&s->loop_blocks, p);
}

void profile_summary_free(struct profile_summary *s)
{
    free(s->threads);
    memset(s, 0, sizeof *s);
}

static void member_double(struct json_writer *w, const char *key, double v)
{
    json_key(w, key);
    json_double(w, v);
}

static void member_2dp(struct json_writer *w, const char *key, double v)
{
    member_double(w, key, round_2dp(v));
}

void profile_meta_write_json(struct json_writer *w, const struct profile *p)
{
    const struct profile_meta *m = &p->meta;
    json_begin_object(w);
    json_member_string(w, "pyscope_version", PYSCOPE_VERSION);
    json_member_int(w, "pid", m->pid);
    json_key(w, "command");
    json_string_n(w, m->command, strnlen(m->command, sizeof m->command));
    json_key(w, "python_version");
    json_string_n(w, m->python_version, strnlen(m->python_version, sizeof m->python_version));
    json_member_uint(w, "start_unix_ns", m->start_unix_ns);
    json_member_uint(w, "duration_ns", m->duration_ns);
    member_double(w, "rate_hz", m->rate_hz);
    member_double(w, "period_ns", profile_period_ns(p));
    json_member_uint(w, "passes", m->passes);
    json_member_uint(w, "passes_failed", m->passes_failed);
    json_member_uint(w, "stacks_sampled", m->stacks_sampled);
    json_member_uint(w, "stacks_torn", m->stacks_torn);
    json_member_uint(w, "gil_busy_passes", m->gil_busy_passes);
    json_member_uint(w, "gc_passes", m->gc_passes);
    json_member_uint(w, "gc_collections", m->gc_collections);
    /* --native only: how C stacks were taken and what came of the merges */
    if (m->native_mode[0]) {
        json_key(w, "native");
        json_begin_object(w);
        json_member_string(w, "mode", m->native_mode);
        if (m->native_note[0])
            json_member_string(w, "note", m->native_note);
        else
            json_member_null(w, "note");
        json_member_uint(w, "merged", m->native_merged);
        json_member_uint(w, "unmerged", m->native_unmerged);
        json_member_uint(w, "truncated", m->native_truncated);
        json_member_uint(w, "missing", m->native_missing);
        json_member_uint(w, "clock_samples", m->native_clock_samples);
        json_member_uint(w, "switch_samples", m->native_switch_samples);
        json_member_uint(w, "lost_samples", m->native_lost_samples);
        json_end_object(w);
    }
    json_end_object(w);
}

static void write_thread_row(struct json_writer *w, const struct profile *p,
                             const struct summary_thread *row)
{
    const struct profile_thread *t = &p->threads[row->thread];
    json_begin_object(w);
    json_member_uint(w, "thread", row->thread);
    json_member_int(w, "pid", t->pid);
    json_member_int(w, "tid", t->tid);
    json_key(w, "name");
    json_string_n(w, t->name, strnlen(t->name, sizeof t->name));
    json_member_uint(w, "samples", t->samples);
    for (int st = 0; st < PROFILE_STATE_COUNT; st++) {
        char key[32];
        snprintf(key, sizeof key, "%s_pct", profile_state_name((enum profile_state)st));
        member_2dp(w, key, row->state_pct[st]);
    }
    member_2dp(w, "gc_pct", row->gc_pct);
    json_end_object(w);
}

/* A stack's frames as labels, innermost first. */
static void write_stack_labels(struct json_writer *w, const struct profile *p, uint32_t stack_id)
{
    const struct profile_stack *stack = &p->stacks[stack_id];
    json_begin_array(w);
    for (uint32_t k = stack->depth; k-- > 0;) {
        uint32_t id = stack->frames[k];
        char *label = id < p->n_frames ? frame_label(&p->frames[id]) : NULL;
        json_string(w, label ? label : "?");
        free(label);
    }
    json_end_array(w);
}

static void write_hog(struct json_writer *w, const struct profile *p, const struct summary_hog *h)
{
    json_begin_object(w);
    json_member_uint(w, "stack", h->stack);
    json_member_uint(w, "samples", h->samples);
    json_member_uint(w, "native_samples", h->native_samples);
    json_member_bool(w, "native_call_keeps_gil", h->native_keeps_gil);
    member_2dp(w, "passes_pct", h->passes_pct);
    json_key(w, "frames");
    write_stack_labels(w, p, h->stack);
    json_end_object(w);
}

static void write_loop_blocks(struct json_writer *w, const struct profile *p,
                              const struct loop_blocks *lb)
{
    json_key(w, "loop_blocked");
    json_begin_object(w);
    json_member_int(w, "threshold_ms", lb->threshold_ms);
    json_member_uint(w, "episodes", lb->count);
    json_member_uint(w, "longest_ns", lb->n_longest ? lb->longest[0].duration_ns : 0);
    json_key(w, "longest");
    json_begin_array(w);
    for (size_t i = 0; i < lb->n_longest; i++) {
        const struct loop_block *e = &lb->longest[i];
        json_begin_object(w);
        json_member_uint(w, "thread", e->thread);
        json_member_int(w, "tid", p->threads[e->thread].tid);
        json_member_uint(w, "start_ns", e->start_ns);
        json_member_uint(w, "duration_ns", e->duration_ns);
        json_member_bool(w, "at_edge", e->at_edge);
        json_member_uint(w, "stack", e->stack);
        json_key(w, "frames");
        write_stack_labels(w, p, e->stack);
        json_end_object(w);
    }
    json_end_array(w);
    json_end_object(w);
}

void profile_summary_write_json(struct json_writer *w, const struct profile_summary *s)
{
    const struct profile *p = s->profile;
    const struct profile_meta *m = &p->meta;
    json_begin_object(w);
    json_key(w, "threads");
    json_begin_array(w);
    for (size_t i = 0; i < s->n_threads; i++)
        write_thread_row(w, p, &s->threads[i]);
    json_end_array(w);
    member_2dp(w, "gil_utilisation_pct", s->gil_utilisation_pct);
    json_key(w, "gc");
    json_begin_object(w);
    member_2dp(w, "passes_pct", s->gc_pct);
    json_member_uint(w, "collections", m->gc_collections);
    json_key(w, "triggers");
    json_begin_array(w);
    for (size_t i = 0; i < s->n_gc_triggers; i++) {
        const struct summary_gc_trigger *g = &s->gc_triggers[i];
        json_begin_object(w);
        json_member_uint(w, "stack", g->stack);
        json_member_uint(w, "collections", g->collections);
        json_member_uint(w, "samples", g->samples);
        json_key(w, "frames");
        write_stack_labels(w, p, g->stack);
        json_end_object(w);
    }
    json_end_array(w);
    json_end_object(w);
    json_key(w, "sampling");
    json_begin_object(w);
    json_member_uint(w, "passes", m->passes);
    json_member_uint(w, "duration_ns", m->duration_ns);
    member_double(w, "rate_hz_requested", m->rate_hz);
    member_2dp(w, "rate_hz_achieved", s->rate_achieved_hz);
    member_2dp(w, "mean_interval_ns", s->mean_interval_ns);
    json_member_uint(w, "passes_failed", m->passes_failed);
    json_member_uint(w, "stacks_sampled", m->stacks_sampled);
    json_member_uint(w, "stacks_torn", m->stacks_torn);
    json_end_object(w);
    json_key(w, "gil_hogs");
    json_begin_array(w);
    for (size_t i = 0; i < s->n_hogs; i++)
        write_hog(w, p, &s->hogs[i]);
    json_end_array(w);
    json_member_uint(w, "gil_hog_stacks", s->n_hogs_total);
    write_loop_blocks(w, p, &s->loop_blocks);
    /* --native: which C functions those were */
    if (m->native_mode[0]) {
        json_key(w, "gil_hog_c_functions");
        json_begin_array(w);
    }
    for (size_t i = 0; m->native_mode[0] && i < s->n_c_hogs; i++) {
        const struct summary_c_hog *h = &s->c_hogs[i];
        const struct profile_frame *c = &p->frames[h->c_frame];
        json_begin_object(w);
        json_member_string(w, "function", c->function);
        json_member_string(w, "module", c->module ? c->module : "");
        json_member_string(w, "file", c->file);
        json_member_int(w, "line", c->line);
        char *label = frame_label(c);
        json_member_string(w, "label", label ? label : "");
        free(label);
        json_key(w, "python_caller");
        if (h->py_frame != UINT32_MAX) {
            label = frame_label(&p->frames[h->py_frame]);
            json_string(w, label ? label : "");
            free(label);
        } else {
            json_null(w);
        }
        json_member_uint(w, "samples", h->samples);
        json_member_uint(w, "native_samples", h->native_samples);
        member_2dp(w, "passes_pct", h->passes_pct);
        json_end_object(w);
    }
    if (m->native_mode[0])
        json_end_array(w);
    /* Each process has its own GIL and pace: its own figures. */
    json_key(w, "processes");
    json_begin_array(w);
    for (size_t i = 0; i < p->n_processes; i++) {
        const struct profile_process *pr = &p->processes[i];
        json_begin_object(w);
        json_member_int(w, "pid", pr->pid);
        json_member_int(w, "ppid", pr->ppid);
        json_key(w, "role");
        json_string_n(w, pr->role, strnlen(pr->role, sizeof pr->role));
        json_key(w, "command");
        json_string_n(w, pr->command, strnlen(pr->command, sizeof pr->command));
        json_key(w, "python_version");
        json_string_n(w, pr->python_version, strnlen(pr->python_version, sizeof pr->python_version));
        json_member_uint(w, "passes", pr->passes);
        json_member_uint(w, "passes_failed", pr->passes_failed);
        member_2dp(w, "rate_hz_achieved", profile_process_rate_hz(pr));
        member_2dp(w, "gil_utilisation_pct", pct(pr->gil_busy_passes, pr->passes));
        json_end_object(w);
    }
    json_end_array(w);
    json_end_object(w);
}
