/* The human-readable dump: a process header, the GIL and GC line, then each
 * thread with its state and frames. Colour only when writing to a terminal. */
#include <stdio.h>
#include <string.h>

#include "output/stack_report.h"
#include "target/syscalls.h"

struct palette {
    const char *bold, *dim, *red, *green, *yellow, *cyan, *reset;
};

static const struct palette colors = {"\033[1m", "\033[2m", "\033[31m", "\033[32m",
                                      "\033[33m", "\033[36m", "\033[0m"};
static const struct palette plain = {"", "", "", "", "", "", ""};

static void thread_label(FILE *out, const struct report_thread *th, const struct palette *p)
{
    if (th->tid)
        fprintf(out, "%sThread %d%s", p->bold, (int)th->tid, p->reset);
    else
        fprintf(out, "%sThread 0x%llx%s", p->bold, (unsigned long long)th->thread_id, p->reset);
    if (th->name[0])
        fprintf(out, " \"%s\"", th->name);
}

static void thread_state_text(FILE *out, const struct report_thread *th, const struct palette *p)
{
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

void stack_report_write_text(FILE *out, const struct stack_report *report, bool color)
{
    const struct palette *p = color ? &colors : &plain;
    fprintf(out, "%sProcess %d%s  %s  (CPython %s, %s)\n", p->bold, (int)report->pid, p->reset,
            report->command, report->python_version, report->executable);
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
    fputc('\n', out);
    for (size_t i = 0; i < report->n_threads; i++) {
        const struct report_thread *th = &report->threads[i];
        thread_label(out, th, p);
        fprintf(out, "  ");
        thread_state_text(out, th, p);
        fputc('\n', out);
        if (th->wait && th->wait->kind != WAIT_NONE) {
            char waiting[1024];
            wait_describe(report, th, waiting, sizeof waiting);
            fprintf(out, "    %swaiting for:%s %s\n", p->yellow, p->reset, waiting);
        }
        for (size_t k = 0; k < th->n_frames; k++) {
            const struct report_frame *f = &th->frames[k];
            if (f->line >= 0)
                fprintf(out, "    %s%s%s (%s:%d)\n", p->bold, f->function, p->reset,
                        stack_report_short_path(f->file), f->line);
            else
                fprintf(out, "    %s%s%s (%s)\n", p->bold, f->function, p->reset,
                        stack_report_short_path(f->file));
        }
        if (th->n_frames == 0 && th->complete)
            fprintf(out, "    %s(no Python frames)%s\n", p->dim, p->reset);
        if (!th->complete)
            fprintf(out, "    %s<stack incomplete: %s>%s\n", p->red,
                    th->error[0] ? th->error : "unreadable", p->reset);
    }
}
