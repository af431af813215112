/* Filtering, labels and the sampling period shared by the profile writers, so
 * that a frame or a thread reads the same in every output format. */
#include "output/profile_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool profile_state_kept(const struct profile_write_options *o, enum profile_state state)
{
    if (o && o->gil_only)
        return state == PROFILE_HOLDING_GIL;
    if (state == PROFILE_IDLE)
        return o && o->include_idle;
    return true;
}

double profile_process_rate_hz(const struct profile_process *pr)
{
    if (pr->passes < 2 || pr->last_ns <= pr->first_ns)
        return 0.0;
    return (double)(pr->passes - 1) * 1e9 / (double)(pr->last_ns - pr->first_ns);
}

bool profile_several_pids(const struct profile *p)
{
    for (size_t i = 1; i < p->n_threads; i++) {
        if (p->threads[i].pid != p->threads[0].pid)
            return true;
    }
    return false;
}

static void format_thread(char *buf, size_t size, const struct profile_thread *t)
{
    /* The name is a fixed array filled from the target: never trust a NUL. */
    int name_len = (int)strnlen(t->name, sizeof t->name);
    if (name_len)
        snprintf(buf, size, "thread %d \"%.*s\"", (int)t->tid, name_len, t->name);
    else
        snprintf(buf, size, "thread %d", (int)t->tid);
}

void thread_label(char buf[THREAD_LABEL_MAX], const struct profile_thread *t)
{
    format_thread(buf, THREAD_LABEL_MAX, t);
}

void process_label(char buf[THREAD_LABEL_MAX], pid_t pid)
{
    snprintf(buf, THREAD_LABEL_MAX, "process %d", (int)pid);
}

void thread_view_name(char buf[THREAD_LABEL_MAX], const struct profile *p,
                      const struct profile_thread *t)
{
    int prefix = 0;
    if (profile_several_pids(p))
        prefix = snprintf(buf, THREAD_LABEL_MAX, "process %d ", (int)t->pid);
    format_thread(buf + prefix, THREAD_LABEL_MAX - (size_t)prefix, t);
}

const char *frame_display_name(const struct profile_frame *f, char buf[FRAME_NAME_MAX])
{
    if (!f->native)
        return f->function;
    snprintf(buf, FRAME_NAME_MAX, "[C] %s (%s)", f->function[0] ? f->function : "unnamed",
             f->module && f->module[0] ? f->module : "no file");
    return buf;
}

char *frame_label(const struct profile_frame *f)
{
    char *label = NULL;
    int n;
    /* A C frame as dump --native prints one, without the offset (which
     * would split one function into as many frames as addresses). */
    if (f->native) {
        char name[FRAME_NAME_MAX];
        frame_display_name(f, name);
        if (f->file && f->file[0] && f->line > 0)
            n = asprintf(&label, "%s %s:%d", name, f->file, f->line);
        else
            n = asprintf(&label, "%s", name);
        return n < 0 ? NULL : label;
    }
    /* A pseudo-frame such as "<GC>" has no source to point at. */
    if (f->synthetic || !f->file || !f->file[0])
        n = asprintf(&label, "%s", f->function);
    else if (f->line < 0)
        n = asprintf(&label, "%s (%s)", f->function, f->file);
    else
        n = asprintf(&label, "%s (%s:%d)", f->function, f->file, f->line);
    return n < 0 ? NULL : label;
}

double profile_period_ns(const struct profile *p)
{
    if (p->meta.rate_hz > 0)
        return 1e9 / p->meta.rate_hz;
    if (p->meta.passes > 0)
        return (double)p->meta.duration_ns / (double)p->meta.passes;
    return 0;
}

double round_2dp(double v)
{
    double scaled = v * 100.0 + (v < 0 ? -0.5 : 0.5);
    return (double)(int64_t)scaled / 100.0;
}
