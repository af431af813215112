/* The human-readable dump: a process header, the GIL and GC line, then each
 * thread with its state and frames. Colour only when writing to a terminal. */
#include <stdio.h>
#include <string.h>

#include "diagnosis/reentry_marks.h"
#include "output/dump_writers.h"
#include "output/task_writers.h"
#include "output/wait_writers.h"
#include "target/syscalls.h"

struct palette {
    const char *bold, *dim, *red, *green, *yellow, *cyan, *reset;
};

static const struct palette colors = {"\033[1m", "\033[2m", "\033[31m", "\033[32m",
                                      "\033[33m", "\033[36m", "\033[0m"};
static const struct palette plain = {"", "", "", "", "", "", ""};

/* Names come from the target: never let them drive the terminal. */
static void put_sanitized(FILE *out, const char *text)
{
    const unsigned char *c = (const unsigned char *)text;
    while (*c) {
        const unsigned char *run = c;
        while (*c && *c >= 0x20 && *c != 0x7f)
            c++;
        if (c > run)
            fwrite(run, 1, (size_t)(c - run), out);
        if (*c) {
            fprintf(out, "\\x%02x", *c);
            c++;
        }
    }
}

static void thread_label(FILE *out, const struct report_thread *th, const struct palette *p)
{
    if (th->tid)
        fprintf(out, "%sThread %d%s", p->bold, (int)th->tid, p->reset);
    else
        fprintf(out, "%sThread 0x%llx%s", p->bold, (unsigned long long)th->thread_id, p->reset);
    if (th->name[0]) {
        fputs(" \"", out);
        put_sanitized(out, th->name);
        fputc('"', out);
    }
}

static void thread_state_text(FILE *out, const struct stack_report *report,
                              const struct report_thread *th, const struct palette *p)
{
    if (th->stopped) {
        char text[160];
        wait_stopped_describe(report, th, text, sizeof text);
        fprintf(out, "%s%s%s", p->red, text, p->reset);
        return;
    }
    switch (th->state) {
    case THREAD_HOLDING_GIL:
        if (th->syscall)
            fprintf(out, "%sblocked in %s, holds the GIL%s", p->red, th->syscall, p->reset);
        else
            fprintf(out, "%srunning, holds the GIL%s", p->green, p->reset);
        break;
    case THREAD_WAITING_GIL:
        fprintf(out, "%swaiting for the GIL%s", p->yellow, p->reset);
        break;
    case THREAD_RUNNING:
        fprintf(out, "%srunning native code, GIL released%s", p->cyan, p->reset);
        break;
    case THREAD_IDLE:
        fprintf(out, "%sidle (%s), GIL released%s", p->dim, th->syscall ? th->syscall : "syscall",
                p->reset);
        break;
    case THREAD_UNKNOWN:
        fprintf(out, "state unknown");
        break;
    }
    if (th->gc)
        fprintf(out, ", %scollecting garbage%s", p->yellow, p->reset);
}

/* The gutter of a frame: re-entry marks, or plain indentation. */
static void write_gutter(FILE *out, const struct report_reentry_mark *mark, const struct palette *p)
{
    if (!mark)
        fputs("    ", out);
    else if (mark->role == REENTRY_BETWEEN)
        fprintf(out, "  %s|%s ", p->yellow, p->reset);
    else
        fprintf(out, "  %s>%s ", p->red, p->reset);
}

static void write_mark_tag(FILE *out, const struct report_reentry_mark *mark,
                           const struct palette *p)
{
    if (!mark)
        return;
    if (mark->role == REENTRY_INNER)
        fprintf(out, "  %s<- entered again here%s", p->red, p->reset);
    else if (mark->role == REENTRY_OUTER)
        fprintf(out, "  %s<- the activation already running%s", p->red, p->reset);
    else if (mark->category)
        fprintf(out, "  %s[%s]%s", p->yellow,
                strcmp(mark->category, "gc") == 0 ? "GC" : mark->category, p->reset);
}

/* A frame line is assembled in memory and written once: dumps of deep
 * stacks print thousands of them, and a stdio call per piece showed. */
struct line {
    char buf[1024];
    size_t len;
};

static void line_add(struct line *l, const char *text)
{
    size_t n = strlen(text);
    if (n > sizeof l->buf - l->len)
        n = sizeof l->buf - l->len;
    memcpy(l->buf + l->len, text, n);
    l->len += n;
}

static void line_add_sanitized(struct line *l, const char *text)
{
    static const char hex[] = "0123456789abcdef";
    for (const unsigned char *c = (const unsigned char *)text; *c && l->len < sizeof l->buf; c++) {
        if (*c >= 0x20 && *c != 0x7f) {
            l->buf[l->len++] = (char)*c;
        } else if (sizeof l->buf - l->len >= 4) {
            l->buf[l->len++] = '\\';
            l->buf[l->len++] = 'x';
            l->buf[l->len++] = hex[*c >> 4];
            l->buf[l->len++] = hex[*c & 15];
        } else {
            break;
        }
    }
}

/* Frames of one code object share one file name string: its short form is
 * worked out once per run of such frames. */
static const char *last_file, *last_short;   /* reset for every report */

static const char *short_path_of(const char *file)
{
    if (file != last_file) {
        last_file = file;
        last_short = stack_report_short_path(file);
    }
    return last_short;
}

static void write_python_frame(FILE *out, const struct stack_report *report,
                               const struct report_frame *f, const struct palette *p,
                               const struct report_reentry_mark *mark)
{
    write_gutter(out, mark, p);
    struct line l = {.len = 0};
    line_add(&l, p->bold);
    line_add_sanitized(&l, f->function);
    line_add(&l, p->reset);
    line_add(&l, " (");
    line_add_sanitized(&l, short_path_of(f->file));
    if (f->line >= 0) {
        /* By hand: snprintf was a third of the cost of a line. */
        char digits[12];
        size_t n = 0;
        for (unsigned v = (unsigned)f->line; n == 0 || v > 0; v /= 10)
            digits[n++] = (char)('0' + v % 10);
        if (l.len + n + 1 <= sizeof l.buf) {
            l.buf[l.len++] = ':';
            while (n > 0)
                l.buf[l.len++] = digits[--n];
        }
    }
    line_add(&l, ")");
    fwrite(l.buf, 1, l.len, out);
    write_mark_tag(out, mark, p);
    fputc('\n', out);
    if (!report->locals)
        return;
    if (f->locals_tried && !f->locals_read)
        fprintf(out, "        %s<locals unreadable>%s\n", p->dim, p->reset);
    for (size_t v = 0; v < f->n_locals; v++) {
        const struct report_local *l = &f->locals[v];
        fprintf(out, "        %s%s%s = %s\n", p->cyan, l->name, p->reset, l->repr);
    }
}

static void write_native_frame(FILE *out, const struct report_native_frame *f,
                               const struct palette *p, const struct report_reentry_mark *mark)
{
    write_gutter(out, mark, p);
    fprintf(out, "%s[C]%s ", p->dim, p->reset);
    if (f->symbol)
        fprintf(out, "%s+0x%llx", f->symbol, (unsigned long long)f->offset);
    else
        fprintf(out, "0x%llx", (unsigned long long)f->pc);
    fprintf(out, " %s(%s)%s", p->dim, f->module ? f->module : "?", p->reset);
    if (f->file)
        fprintf(out, " %s:%d", f->file, f->line);
    write_mark_tag(out, mark, p);
    fputc('\n', out);
}

static bool native_shown(const struct stack_report *report, const struct report_native_frame *f)
{
    return report->native_all || !f->internal;
}

/* Between two activations of a re-entered function the interpreter's own
 * frames (the collector, finalizer calls) are the point: show them, except
 * the interpreter loop, which the Python frames already stand for. */
static bool native_shown_marked(const struct stack_report *report,
                                const struct report_native_frame *f,
                                const struct report_reentry_mark *mark)
{
    return native_shown(report, f) || (mark && (!f->is_eval || mark->role != REENTRY_BETWEEN));
}

static void write_native_stack(FILE *out, const struct stack_report *report,
                               const struct report_thread *th, const struct report_native *native,
                               const struct palette *p)
{
    for (size_t k = 0; k < native->n_frames; k++) {
        const struct report_native_frame *f = &native->frames[k];
        const struct report_reentry_mark *mark = th ? reentry_mark_of(report, th, false, k) : NULL;
        if (native_shown_marked(report, f, mark) || f->is_eval)
            write_native_frame(out, f, p, mark);
    }
    if (!native->complete)
        fprintf(out, "    %s<native stack incomplete: %s>%s\n", p->red, native->error, p->reset);
}

static void write_thread_frames(FILE *out, const struct stack_report *report,
                                const struct report_thread *th, const struct palette *p)
{
    const struct report_native *native = th->native;
    if (native && native->merged) {
        for (size_t e = 0; e < native->n_entries; e++) {
            const struct report_stack_entry *entry = &native->entries[e];
            const struct report_reentry_mark *mark =
                reentry_mark_of(report, th, entry->python, entry->index);
            if (entry->python)
                write_python_frame(out, report, &th->frames[entry->index], p, mark);
            else if (native_shown_marked(report, &native->frames[entry->index], mark))
                write_native_frame(out, &native->frames[entry->index], p, mark);
        }
        if (!native->complete)
            fprintf(out, "    %s<native stack incomplete: %s>%s\n", p->red, native->error,
                    p->reset);
        return;
    }
    if (th->c_callable[0]) {
        fprintf(out, "    %s\u2192 [C]%s ", p->dim, p->reset);
        put_sanitized(out, th->c_callable);
        fputc('\n', out);
    }
    for (size_t k = 0; k < th->n_frames; k++)
        write_python_frame(out, report, &th->frames[k], p, reentry_mark_of(report, th, true, k));
    if (native) {
        fprintf(out, "    %s-- native stack (%s) --%s\n", p->dim,
                native->error[0] ? native->error : "not merged", p->reset);
        write_native_stack(out, report, th, native, p);
    } else if (report->native && !th->tid) {
        fprintf(out, "    %s<no native stack: the thread's kernel id is unknown>%s\n", p->dim,
                p->reset);
    }
}

static void write_os_threads(FILE *out, const struct stack_report *report, const struct palette *p)
{
    fprintf(out, "\n%sThreads without a Python thread state:%s\n", p->bold, p->reset);
    for (size_t i = 0; i < report->n_os_threads; i++) {
        const struct report_os_thread *ot = &report->os_threads[i];
        fprintf(out, "%sThread %d%s", p->bold, (int)ot->tid, p->reset);
        if (ot->comm[0]) {
            fputs(" \"", out);
            put_sanitized(out, ot->comm);
            fputc('"', out);
        }
        fprintf(out, "  ");
        if (ot->crashed)
            fprintf(out, "%sreceived %s%s, ", p->red, report->signal.name, p->reset);
        if (ot->syscall)
            fprintf(out, "%sidle (%s)%s\n", p->dim, ot->syscall, p->reset);
        else if (ot->run_state == 'R')
            fprintf(out, "%srunning%s\n", p->cyan, p->reset);
        else if (ot->run_state)
            fprintf(out, "state %c\n", ot->run_state);
        else
            fprintf(out, "state unknown\n");
        if (ot->native)
            write_native_stack(out, report, NULL, ot->native, p);
    }
}

/* Frames shown by name after a grouped --print error; the rest are counted. */
#define PRINT_ERROR_FRAMES 4

/* Values one line per frame; failures once per distinct reason, with the
 * frames it applies to, since `self` of another class in every other frame
 * would otherwise bury the answer. */
static void write_prints(FILE *out, const struct stack_report *report, const struct palette *p)
{
    fprintf(out, "\n%s--print %s%s\n", p->bold, report->print_expr, p->reset);
    if (report->n_prints == 0)
        fprintf(out, "    not found: no frame has a local variable of that name\n");
    size_t resolved = 0;
    for (size_t i = 0; i < report->n_prints; i++) {
        const struct report_print *pr = &report->prints[i];
        if (!pr->repr)
            continue;
        const struct report_thread *th = &report->threads[pr->thread_index];
        const struct report_frame *f = &th->frames[pr->frame_index];
        fprintf(out, "    ");
        thread_label(out, th, p);
        fprintf(out, ", frame #%zu %s (%s:%d): %s\n", pr->frame_index, f->function,
                stack_report_short_path(f->file), f->line, pr->repr);
        resolved++;
    }
    for (size_t i = 0; i < report->n_prints; i++) {
        const struct report_print *pr = &report->prints[i];
        const char *why = pr->error ? pr->error : "unreadable";
        bool seen = pr->repr != NULL;
        for (size_t k = 0; k < i && !seen; k++)
            seen = !report->prints[k].repr &&
                   strcmp(report->prints[k].error ? report->prints[k].error : "unreadable",
                          why) == 0;
        if (seen)
            continue;
        size_t count = 0;
        for (size_t k = i; k < report->n_prints; k++)
            count += !report->prints[k].repr &&
                     strcmp(report->prints[k].error ? report->prints[k].error : "unreadable",
                            why) == 0;
        fprintf(out, "    %s<%s>%s in %zu %sframe%s:", p->red, why, p->reset, count,
                resolved ? "other " : "", count == 1 ? "" : "s");
        size_t listed = 0;
        for (size_t k = i; k < report->n_prints && listed < PRINT_ERROR_FRAMES; k++) {
            const struct report_print *q = &report->prints[k];
            if (q->repr || strcmp(q->error ? q->error : "unreadable", why) != 0)
                continue;
            const struct report_thread *th = &report->threads[q->thread_index];
            fprintf(out, "%s %s (thread %d #%zu)", listed ? "," : "",
                    th->frames[q->frame_index].function, (int)th->tid, q->frame_index);
            listed++;
        }
        if (count > listed)
            fprintf(out, " and %zu more", count - listed);
        fprintf(out, "\n");
    }
}

static const struct report_thread *thread_by_tid(const struct stack_report *report, pid_t tid)
{
    for (size_t i = 0; i < report->n_threads; i++)
        if (tid && report->threads[i].tid == tid)
            return &report->threads[i];
    return NULL;
}

/* "SIGSEGV: NULL pointer dereference at 0x0 in thread 1234 'parser'" */
static void write_signal(FILE *out, const struct stack_report *report, const struct palette *p)
{
    const struct report_signal *s = &report->signal;
    fprintf(out, "%s%s: %s", p->red, s->name, s->cause);
    if (s->tid) {
        const struct report_thread *th = thread_by_tid(report, s->tid);
        fprintf(out, " in thread %d", (int)s->tid);
        if (th && th->name[0])
            fprintf(out, " '%s'", th->name);
    }
    fprintf(out, "%s\n", p->reset);
}

/* The frames between the two activations that say why it happened. */
static void write_reentry_between(FILE *out, const struct stack_report *report,
                                  const struct report_thread *th)
{
    const struct report_reentry *re = report->reentry;
    int shown = 0;
    for (size_t i = 0; i < re->n_marks && shown < 12; i++) {
        const struct report_reentry_mark *m = &re->marks[i];
        if (m->role != REENTRY_BETWEEN)
            continue;
        const char *name = NULL;
        if (m->python)
            name = th->frames[m->index].function;
        else if (m->category && th->native)
            name = th->native->frames[m->index].symbol;
        if (!name)
            continue;
        fputs(shown++ ? ", " : "  between them: ", out);
        put_sanitized(out, name);
        if (m->category)
            fprintf(out, " [%s]", strcmp(m->category, "gc") == 0 ? "GC" : m->category);
    }
    if (shown)
        fputc('\n', out);
}

static void write_reentry(FILE *out, const struct stack_report *report, const struct palette *p)
{
    const struct report_reentry *re = report->reentry;
    const struct report_thread *th = NULL;
    for (size_t i = 0; i < report->n_threads; i++)
        if (report->threads[i].tid == re->tid)
            th = &report->threads[i];
    fprintf(out, "%sRe-entry #%u: ", p->red, re->hit);
    put_sanitized(out, re->function);
    fprintf(out, " entered again in thread %d", (int)re->tid);
    if (th && th->name[0]) {
        fputs(" \"", out);
        put_sanitized(out, th->name);
        fputc('"', out);
    }
    fprintf(out, " while an earlier activation is still running%s\n", p->reset);
    fprintf(out, "  GC in progress: %s", re->gc_flag || re->gc_frames ? "yes" : "no");
    if (re->gc_flag && re->gc_frames)
        fputs(" (the collector's flag is set, and its frames lie between the activations)", out);
    else if (re->gc_flag)
        fputs(" (the collector's flag is set)", out);
    else if (re->gc_frames)
        fputs(" (collector frames lie between the activations)", out);
    fputc('\n', out);
    if (th)
        write_reentry_between(out, report, th);
    if (re->note[0]) {
        fputs("  note: ", out);
        put_sanitized(out, re->note);
        fputc('\n', out);
    }
    fputc('\n', out);
}

void stack_report_write_text(FILE *out, const struct stack_report *report, bool color)
{
    last_file = last_short = NULL;
    const struct palette *p = color ? &colors : &plain;
    if (report->reentry)
        write_reentry(out, report, p);
    if (report->core_path[0]) {
        fprintf(out, "%sCore file ", p->bold);
        put_sanitized(out, report->core_path);
        if (report->core_compression[0])
            fprintf(out, " (%s-compressed)", report->core_compression);
        fprintf(out, "%s of process %d  ", p->reset, (int)report->pid);
    } else {
        fprintf(out, "%sProcess %d%s  ", p->bold, (int)report->pid, p->reset);
    }
    put_sanitized(out, report->command);
    fprintf(out, "  (CPython %s, ", report->python_version);
    put_sanitized(out, report->executable);
    fputs(")\n", out);
    if (report->signal.signo)
        write_signal(out, report, p);
    else if (report->core_path[0])
        fprintf(out, "no fatal signal recorded (a core written on demand, e.g. by gcore)\n");
    const struct report_thread *holder = stack_report_gil_holder(report);
    if (holder) {
        fprintf(out, "GIL held by ");
        thread_label(out, holder, p);
    } else {
        fprintf(out, "GIL free");
    }
    const struct report_thread *gc = stack_report_gc_thread(report);
    if (report->gc_collecting) {
        fprintf(out, "   GC: %scollecting%s", p->yellow, p->reset);
        if (gc)
            fprintf(out, " in thread %d", (int)gc->tid);
        fputc('\n', out);
    } else {
        fprintf(out, "   GC: idle\n");
    }
    if (report->paused)
        fprintf(out, "%s(all threads were paused for this snapshot)%s\n", p->dim, p->reset);
    if (report->n_stopped) {
        fprintf(out, "%sThe process is stopped", p->red);
        if (report->tracer)
            fprintf(out, " by its tracer, process %d%s%s%s: detach the debugger to resume it",
                    (int)report->tracer, report->tracer_comm[0] ? " (" : "", report->tracer_comm,
                    report->tracer_comm[0] ? ")" : "");
        else
            fprintf(out, " (SIGSTOP or SIGTSTP): resume it with kill -CONT %d", (int)report->pid);
        fprintf(out, "%s\n", p->reset);
    }
    fputc('\n', out);
    for (size_t i = 0; i < report->n_threads; i++) {
        const struct report_thread *th = &report->threads[i];
        thread_label(out, th, p);
        fprintf(out, "  ");
        if (th->crashed)
            fprintf(out, "%sreceived %s%s, ", p->red, report->signal.name, p->reset);
        thread_state_text(out, report, th, p);
        fputc('\n', out);
        if (th->wait && th->wait->kind != WAIT_NONE) {
            char waiting[1024];
            wait_describe(report, th, waiting, sizeof waiting);
            fprintf(out, "    %swaiting for:%s ", p->yellow, p->reset);
            put_sanitized(out, waiting);
            fputc('\n', out);
        }
        write_thread_frames(out, report, th, p);
        if (th->n_frames == 0 && th->complete)
            fprintf(out, "    %s(no Python frames)%s\n", p->dim, p->reset);
        if (!th->complete)
            fprintf(out, "    %s<stack incomplete: %s>%s\n", p->red,
                    th->error[0] ? th->error : "unreadable", p->reset);
        task_report_write_thread_text(out, report->tasks, th->tid);
    }
    task_report_write_rest_text(out, report->tasks);
    if (report->n_os_threads)
        write_os_threads(out, report, p);
    if (report->print_expr)
        write_prints(out, report, p);
}
