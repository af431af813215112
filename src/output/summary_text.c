/* The human-readable summary printed when a recording ends: what was
 * recorded, the per-thread GIL table (like per4m's giltracer), GIL and GC
 * utilisation, and the stacks that hogged the GIL while others waited. */
#include <stdlib.h>
#include <string.h>

#include "output/profile_common.h"
#include "output/profile_summary.h"
#include "output/profile_writers.h"

#define HOG_FRAMES_SHOWN 3
#define LABEL_WIDTH_MAX 40

/* Names come from the target's memory: a stray escape sequence must not
 * reach the user's terminal. */
static void put_printable(FILE *out, const char *s, size_t len)
{
    for (size_t i = 0; i < len && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        fputc(c < 0x20 || c == 0x7f ? '?' : c, out);
    }
}

static const char *plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

/* Characters, not bytes: thread names may be any UTF-8. */
static int text_width(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* s in exactly width columns: padded, or cut with an ellipsis so that the
 * columns after it stay aligned. */
static void put_padded(FILE *out, const char *s, int width)
{
    int chars = text_width(s);
    if (chars > width) {
        size_t keep = 0;
        for (int seen = 0; s[keep]; keep++) {
            if (((unsigned char)s[keep] & 0xc0) != 0x80 && seen++ == width - 1)
                break;
        }
        put_printable(out, s, keep);
        fputs("\xe2\x80\xa6", out);
        return;
    }
    put_printable(out, s, strlen(s));
    for (int pad = width - chars; pad > 0; pad--)
        fputc(' ', out);
}

/* With several processes, each has its own GIL and its own pace: one row
 * each, never an average across them. */
static void write_processes(FILE *out, const struct profile *p)
{
    int role_width = (int)strlen("Role");
    for (size_t i = 0; i < p->n_processes; i++) {
        int len = text_width(p->processes[i].role);
        if (len > role_width)
            role_width = len;
    }
    fputc('\n', out);
    fprintf(out, "%8s  ", "Process");
    put_padded(out, "Role", role_width);
    fprintf(out, "  %8s  %10s  %8s  %s\n", "Passes", "Rate", "GIL busy", "Command");
    for (size_t i = 0; i < p->n_processes; i++) {
        const struct profile_process *pr = &p->processes[i];
        fprintf(out, "%8d  ", (int)pr->pid);
        put_padded(out, pr->role, role_width);
        fprintf(out, "  %8llu  %7.1f Hz  %7.1f%%  ", (unsigned long long)pr->passes,
                profile_process_rate_hz(pr),
                pr->passes ? 100.0 * (double)pr->gil_busy_passes / (double)pr->passes : 0.0);
        size_t len = strnlen(pr->command, sizeof pr->command);
        put_printable(out, pr->command, len);
        fputc('\n', out);
    }
}

static void write_header(FILE *out, const struct profile *p, const struct profile_summary *s)
{
    const struct profile_meta *m = &p->meta;
    if (p->n_processes > 1) {
        fprintf(out, "Recorded %zu processes under %d for %.2f s", p->n_processes, (int)m->pid,
                (double)m->duration_ns / 1e9);
    } else {
        fprintf(out, "Recorded process %d for %.2f s", (int)m->pid,
                (double)m->duration_ns / 1e9);
    }
    size_t command_len = strnlen(m->command, sizeof m->command);
    if (command_len) {
        fputs(": ", out);
        put_printable(out, m->command, command_len);
    }
    size_t version_len = strnlen(m->python_version, sizeof m->python_version);
    if (version_len) {
        fputs(" (CPython ", out);
        put_printable(out, m->python_version, version_len);
        /* The process exec'd another interpreter and was followed. */
        const char *now = p->n_processes == 1 ? p->processes[0].python_version : "";
        size_t now_len = strnlen(now, sizeof p->processes[0].python_version);
        if (now_len && (now_len != version_len || memcmp(now, m->python_version, now_len))) {
            fputs(", then CPython ", out);
            put_printable(out, now, now_len);
            fputs(" after an exec", out);
        }
        fputc(')', out);
    }
    fputc('\n', out);

    if (p->n_processes > 1)
        fprintf(out, "Sampling: %llu pass%s over all processes, each at its own rate (",
                (unsigned long long)m->passes, m->passes == 1 ? "" : "es");
    else
        fprintf(out, "Sampling: %llu pass%s at %.1f Hz (", (unsigned long long)m->passes,
                m->passes == 1 ? "" : "es", s->rate_achieved_hz);
    if (m->rate_hz > 0)
        fprintf(out, "requested %g Hz", m->rate_hz);
    else
        fputs("as fast as possible", out);
    fprintf(out, "), %llu stack%s read, %llu torn (%.1f%%), %llu incomplete pass%s (%.1f%%)\n",
            (unsigned long long)m->stacks_sampled, plural(m->stacks_sampled),
            (unsigned long long)m->stacks_torn, s->torn_pct,
            (unsigned long long)m->passes_failed, m->passes_failed == 1 ? "" : "es", s->failed_pct);
    if (m->native_mode[0]) {
        uint64_t all = m->native_merged + m->native_unmerged + m->native_missing;
        fprintf(out, "C stacks (%s): %llu of %llu sample%s merged with their Python stack, "
                "%llu not matched (shown separately",
                strcmp(m->native_mode, "ptrace") == 0 ? "ptrace interrupts" : "perf_event samples",
                (unsigned long long)m->native_merged, (unsigned long long)all, plural(all),
                (unsigned long long)m->native_unmerged);
        if (m->native_truncated)
            fprintf(out, "; %llu of them with a stack copy that ends before the Python frames",
                    (unsigned long long)m->native_truncated);
        fprintf(out, "), %llu without a C stack of the same instant\n",
                (unsigned long long)m->native_missing);
    }
}

static void write_thread_table(FILE *out, const struct profile *p, const struct profile_summary *s)
{
    bool any_unknown = false;
    int width = (int)strlen("Thread");
    for (size_t i = 0; i < s->n_threads; i++) {
        const struct profile_thread *t = &p->threads[s->threads[i].thread];
        char label[THREAD_LABEL_MAX];
        thread_view_name(label, p, t);
        int len = text_width(label);
        if (len > width)
            width = len > LABEL_WIDTH_MAX ? LABEL_WIDTH_MAX : len;
        any_unknown |= t->state_samples[PROFILE_UNKNOWN] > 0;
    }

    fputc('\n', out);
    put_padded(out, "Thread", width);
    fprintf(out, "  %8s  %8s  %8s  %8s  %8s  %8s", "Samples", "Holding", "Waiting", "Running",
            "Idle", "GC");
    if (any_unknown)
        fprintf(out, "  %8s", "Unknown");
    fputc('\n', out);
    static const enum profile_state columns[] = {PROFILE_HOLDING_GIL, PROFILE_WAITING_GIL,
                                                 PROFILE_RUNNING, PROFILE_IDLE};
    for (size_t i = 0; i < s->n_threads; i++) {
        const struct summary_thread *row = &s->threads[i];
        const struct profile_thread *t = &p->threads[row->thread];
        char label[THREAD_LABEL_MAX];
        thread_view_name(label, p, t);
        put_padded(out, label, width);
        fprintf(out, "  %8llu", (unsigned long long)t->samples);
        for (size_t c = 0; c < sizeof columns / sizeof columns[0]; c++)
            fprintf(out, "  %7.1f%%", row->state_pct[columns[c]]);
        fprintf(out, "  %7.1f%%", row->gc_pct);
        if (any_unknown)
            fprintf(out, "  %7.1f%%", row->state_pct[PROFILE_UNKNOWN]);
        fputc('\n', out);
    }
    if (s->n_threads == 0)
        fputs("(no thread was sampled)\n", out);
    if (any_unknown)
        fputs("Unknown: samples in which the thread's state could not be read from /proc\n", out);
}

/* The innermost frames of a stack, indented, and how many outer ones are left out. */
static void write_stack_frames(FILE *out, const struct profile *p, uint32_t stack_id)
{
    const struct profile_stack *stack = &p->stacks[stack_id];
    uint32_t shown = 0;
    for (uint32_t k = stack->depth; k-- > 0 && shown < HOG_FRAMES_SHOWN; shown++) {
        uint32_t id = stack->frames[k];
        char *label = id < p->n_frames ? frame_label(&p->frames[id]) : NULL;
        fputs("       ", out);
        if (label)
            put_printable(out, label, strlen(label));
        else
            fputs("?", out);
        fputc('\n', out);
        free(label);
    }
    if (stack->depth > shown)
        fprintf(out, "       ... %u outer frame%s\n", stack->depth - shown,
                plural(stack->depth - shown));
    else if (stack->depth == 0)
        fputs("       (no Python frames)\n", out);
}

static void write_gc_triggers(FILE *out, const struct profile *p, const struct profile_summary *s)
{
    if (s->n_gc_triggers == 0)
        return;
    fputs("Collections ran on top of (the allocations that triggered them):\n", out);
    for (size_t i = 0; i < s->n_gc_triggers; i++) {
        const struct summary_gc_trigger *g = &s->gc_triggers[i];
        fprintf(out, "%3zu. %llu collection%s, %llu sample%s\n", i + 1,
                (unsigned long long)g->collections, plural(g->collections),
                (unsigned long long)g->samples, plural(g->samples));
        write_stack_frames(out, p, g->stack);
    }
}

static void write_hogs(FILE *out, const struct profile *p, const struct profile_summary *s)
{
    if (s->n_hogs == 0) {
        fputs("\nGIL hogs: none (no thread held the GIL while another waited for it)\n", out);
        return;
    }
    fputs("\nGIL hogs (stacks that held the GIL while other threads waited for it):\n", out);
    for (size_t i = 0; i < s->n_hogs; i++) {
        const struct summary_hog *h = &s->hogs[i];
        fprintf(out, "%3zu. %llu sample%s (%.1f%% of passes)", i + 1,
                (unsigned long long)h->samples, plural(h->samples), h->passes_pct);
        if (h->native_keeps_gil)
            fputs("  [native call keeps the GIL]", out);
        fputc('\n', out);
        write_stack_frames(out, p, h->stack);
    }
    if (s->n_hogs_total > s->n_hogs)
        fprintf(out, "     (%zu more stack%s)\n", s->n_hogs_total - s->n_hogs,
                plural(s->n_hogs_total - s->n_hogs));
    if (s->n_c_hogs == 0) {
        /* --native was asked for the C function: say why there is none. */
        if (!p->meta.native_mode[0])
            return;
        if (s->c_hog_unmerged > 0)
            fprintf(out, "\nC functions holding the GIL (--native): none named. In %llu of "
                         "those samples the C stack could not be matched with the Python stack "
                         "(it is shown apart, after \"%s\"); outside the interpreter and the C "
                         "runtime it has no frame to name, and the interpreter's own frames "
                         "cannot be placed in it (a stripped interpreter, or stack copies too "
                         "short: see the C stacks line above).\n",
                    (unsigned long long)s->c_hog_unmerged, PROFILE_NATIVE_NOT_MERGED);
        else
            fputs("\nC functions holding the GIL (--native): none; no hog stack is inside a C "
                  "call of its own (they run Python code, or are taking or dropping the "
                  "GIL).\n", out);
        return;
    }
    fputs("\nC functions holding the GIL in those stacks (--native), with their Python caller:\n", out);
    for (size_t i = 0; i < s->n_c_hogs; i++) {
        const struct summary_c_hog *h = &s->c_hogs[i];
        char *c = frame_label(&p->frames[h->c_frame]);
        char *py = h->py_frame != UINT32_MAX ? frame_label(&p->frames[h->py_frame]) : NULL;
        fprintf(out, "%3zu. %llu sample%s (%.1f%% of passes)  ", i + 1,
                (unsigned long long)h->samples, plural(h->samples), h->passes_pct);
        if (c)
            put_printable(out, c, strlen(c));
        fputs("\n       called from ", out);
        if (py)
            put_printable(out, py, strlen(py));
        else
            fputs("no Python frame", out);
        fputc('\n', out);
        free(c);
        free(py);
    }
}

static void write_loop_blocks(FILE *out, const struct profile *p, const struct loop_blocks *lb)
{
    if (lb->count == 0) {
        fprintf(out, "\nLoop blocked: no episode (no asyncio loop thread stayed %d ms or longer "
                     "outside its selector)\n", lb->threshold_ms);
        return;
    }
    fprintf(out, "\nLoop blocked: %llu episode%s in which an asyncio loop thread stayed %d ms or "
                 "longer in one step, outside its selector; longest %.0f ms\n",
            (unsigned long long)lb->count, plural(lb->count), lb->threshold_ms,
            (double)lb->longest[0].duration_ns / 1e6);
    fputs("(each from its first sample outside the selector to the first one after it: "
          "within one sampling interval of the truth)\n", out);
    for (size_t i = 0; i < lb->n_longest; i++) {
        const struct loop_block *e = &lb->longest[i];
        char label[THREAD_LABEL_MAX];
        thread_view_name(label, p, &p->threads[e->thread]);
        fprintf(out, "%3zu. %.0f ms at %.3f s, %s%s\n", i + 1,
                (double)e->duration_ns / 1e6, (double)e->start_ns / 1e9, label,
                e->at_edge ? "  [under way at the recording's edge]" : "");
        write_stack_frames(out, p, e->stack);
    }
}

int profile_write_summary(FILE *out, const struct profile *p)
{
    struct profile_summary s;
    if (profile_summary_build(&s, p) != 0)
        return -1;
    write_header(out, p, &s);
    if (p->n_processes > 1)
        write_processes(out, p);
    write_thread_table(out, p, &s);
    if (p->n_processes > 1)
        fputs("\nGIL utilisation: per process above (each process has its own GIL)\n", out);
    else
        fprintf(out, "\nGIL utilisation: %.1f%% of passes had a thread holding the GIL\n",
                s.gil_utilisation_pct);
    fprintf(out, "GC: collecting in %.1f%% of passes, %llu collection%s seen\n", s.gc_pct,
            (unsigned long long)p->meta.gc_collections, plural(p->meta.gc_collections));
    write_gc_triggers(out, p, &s);
    write_hogs(out, p, &s);
    write_loop_blocks(out, p, &s.loop_blocks);
    profile_summary_free(&s);
    return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}
