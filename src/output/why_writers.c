/* Writers for `pyscope why`: the verdict first, then the findings, the
 * progress check and every thread with what it waits for. The JSON form is
 * documented in docs/why.md. */
#include "output/why_writers.h"

#include <string.h>

#include "util/version.h"
#include "output/json_writer.h"
#include "output/wait_writers.h"
#include "target/signals.h"

#define TEXT_FRAMES 6

struct palette {
    const char *bold, *dim, *red, *green, *yellow, *reset;
};

static const struct palette colors = {"\033[1m", "\033[2m", "\033[31m", "\033[32m", "\033[33m", "\033[0m"};
static const struct palette plain = {"", "", "", "", "", ""};

static bool is_hang(enum why_verdict v)
{
    return v != WHY_NOT_HUNG && v != WHY_IDLE && v != WHY_UNCHECKED;
}

static void thread_label(FILE *out, const struct report_thread *th)
{
    if (th->tid)
        fprintf(out, "Thread %d", (int)th->tid);
    else
        fprintf(out, "Thread 0x%llx", (unsigned long long)th->thread_id);
    if (th->name[0])
        fprintf(out, " \"%s\"", th->name);
}

static void waiting_line(FILE *out, const struct stack_report *report, int index, const char *prefix)
{
    const struct report_thread *th = &report->threads[index];
    char waiting[1024];
    wait_describe(report, th, waiting, sizeof waiting);
    fputs(prefix, out);
    thread_label(out, th);
    fprintf(out, ": %s\n", waiting[0] ? waiting : "(not waiting)");
}

static const char *state_text(const struct report_thread *th)
{
    switch (th->state) {
    case THREAD_HOLDING_GIL: return th->syscall ? "blocked, holds the GIL" : "running, holds the GIL";
    case THREAD_WAITING_GIL: return "waiting for the GIL";
    case THREAD_RUNNING: return "running native code";
    case THREAD_IDLE: return "idle";
    case THREAD_UNKNOWN: break;
    }
    return "state unknown";
}

/* why -v: every thread's own liveness, its releasers and the result of the
 * fixpoint, so a verdict can be checked by hand. */
static void write_liveness(FILE *out, const struct why_report *why, const struct palette *p)
{
    const struct stack_report *report = why->stacks;
    char name[32];
    fprintf(out, "\n%sLiveness%s\n", p->bold, p->reset);
    fprintf(out, "  signals that can run Python code in the main thread: ");
    int shown = 0;
    for (int s = 1; s <= 64; s++)
        if (why->python_signals & (1ull << (s - 1)))
            fprintf(out, "%s%s", shown++ ? ", " : "", signal_name(s, name, sizeof name));
    fprintf(out, "%s (%s%s)\n", shown ? "" : "none", why->signals_known ? "read from " : "",
            why->signals_source);
    for (size_t i = 0; i < report->n_threads; i++) {
        const struct why_thread *t = &why->threads[i];
        fputs("  ", out);
        thread_label(out, &report->threads[i]);
        if (t->live_reason != WHY_LIVE_BLOCKED) {
            fprintf(out, ": live, %s%s\n", why_live_text(t->live_reason),
                    t->strong ? "" : " (weak: counts only for its owner or joiner)");
            continue;
        }
        fprintf(out, ": blocked; released by %s: ",
                t->owner_edges ? "its owner or the thread it joins" : "any thread that can reach the object");
        for (int k = 0; k < t->n_releasers; k++) {
            const struct why_thread *r = &why->threads[t->releasers[k]];
            if (k)
                fputs(", ", out);
            thread_label(out, &report->threads[t->releasers[k]]);
            fprintf(out, " (%s)", r->live_reason != WHY_LIVE_BLOCKED ? why_live_text(r->live_reason)
                                  : r->strong ? "blocked, but live" : "blocked");
        }
        fprintf(out, "%s -> %s\n", t->n_releasers ? "" : "none",
                t->strong ? "live" : t->live ? "probably stuck (only weak releasers)" : "stuck for good");
    }
}

/* What the verdict from a core is made without: said, not guessed. */
static const struct {
    const char *key, *text;
} not_in_a_core[] = {
    {"progress", "whether anything would have moved (there is no second snapshot)"},
    {"wait_durations", "how long each thread had been waiting"},
    {"time_left", "the time left on timed waits"},
    {"peers", "the other ends of sockets and pipes (the process's /proc is gone)"},
    {"kernel_thread_states", "the kernel's thread states beyond each thread's registers"},
};

void why_report_write_text(FILE *out, const struct why_report *why, bool color)
{
    const struct palette *p = color ? &colors : &plain;
    const struct stack_report *report = why->stacks;
    if (report->core_path[0])
        fprintf(out, "%sCore file %s%s%s%s of process %d%s  %s  (CPython %s, %s)\n", p->bold,
                report->core_path, report->core_compression[0] ? " (" : "",
                report->core_compression, report->core_compression[0] ? "-compressed)" : "",
                (int)report->pid, p->reset, report->command, report->python_version,
                report->executable);
    else
        fprintf(out, "%sProcess %d%s  %s  (CPython %s, %s)\n", p->bold, (int)report->pid,
                p->reset, report->command, report->python_version, report->executable);
    const char *tone = is_hang(why->verdict) ? p->red : why->verdict == WHY_NOT_HUNG ? p->green : p->yellow;
    fprintf(out, "%sVerdict: %s%s%s%s\n", p->bold, tone, why_verdict_name(why->verdict), p->reset,
            why->grade == WHY_GRADE_PROBABLE ? " (probable)" : why->grade == WHY_GRADE_CERTAIN ? " (certain)" : "");
    fprintf(out, "  %s\n", why->summary);

    if (why->n_findings) {
        fprintf(out, "\n%sFindings%s\n", p->bold, p->reset);
        for (int k = 0; k < why->n_findings; k++) {
            const struct why_finding *f = &why->findings[k];
            fprintf(out, "  %d. %s%s%s%s\n", k + 1, p->red, why_verdict_name(f->kind), p->reset,
                    f->grade == WHY_GRADE_PROBABLE ? " (probable)" : "");
            /* A probable deadlock's holders are inferred, which only the
             * summary says; elsewhere each thread's wait tells it all. */
            bool summary = f->kind == WHY_GIL_BLOCKED || f->kind == WHY_GIL_HOG || f->kind == WHY_STOPPED ||
                           f->kind == WHY_LOOP_BLOCKED || f->task ||
                           f->with_child ||
                           (f->kind == WHY_DEADLOCK && !f->certain);
            if (summary)
                fprintf(out, "     %s\n", f->summary);
            else
                for (int m = 0; m < f->n_threads; m++)
                    waiting_line(out, report, f->threads[m], "     ");
            for (int m = 0; m < f->n_blocked; m++)
                waiting_line(out, report, f->blocked[m], "     stuck behind it: ");
            for (int m = 0; m < f->n_releasers; m++) {
                const struct report_thread *th = &report->threads[f->releasers[m]];
                fputs("     could still release it: ", out);
                thread_label(out, th);
                fprintf(out, ", which %s", why_live_text(why->threads[f->releasers[m]].live_reason));
                if (th->n_frames)
                    fprintf(out, " (in %s, %s:%d)", th->frames[0].function,
                            stack_report_short_path(th->frames[0].file), th->frames[0].line);
                fputc('\n', out);
            }
        }
    }
    if (why->verbose)
        write_liveness(out, why, p);

    const struct why_progress *pr = &why->progress;
    fprintf(out, "\n%sProgress%s  ", p->bold, p->reset);
    if (!pr->checked && report->core_path[0]) {
        fprintf(out, "cannot be checked: a core holds one moment\n");
        fprintf(out, "Not in a core  ");
        for (size_t k = 0; k < sizeof not_in_a_core / sizeof not_in_a_core[0]; k++)
            fprintf(out, "%s%s", k ? "; " : "", not_in_a_core[k].text);
        fputc('\n', out);
    } else if (!pr->checked) {
        fprintf(out, "not checked (--interval 0)\n");
    } else {
        fprintf(out, "%s over %d ms: %llu GIL hand-offs, %d of %zu threads changed",
                pr->progressing ? "progressing" : "no progress", pr->interval_ms,
                (unsigned long long)pr->gil_switches, pr->threads_changed, report->n_threads);
        if (pr->cpu_ns >= 0)
            fprintf(out, ", %.1f ms CPU", (double)pr->cpu_ns / 1e6);
        if (pr->threads_running)
            fprintf(out, ", %d running", pr->threads_running);
        if (pr->threads_started || pr->threads_gone)
            fprintf(out, ", %d started, %d exited", pr->threads_started, pr->threads_gone);
        if (pr->tasks_moved >= 0)
            fprintf(out, ", %d asyncio task%s moved on", pr->tasks_moved,
                    pr->tasks_moved == 1 ? "" : "s");
        fputc('\n', out);
        fprintf(out, "Watched   %.0f ms, from the first snapshot to the end of the second "
                     "(--interval %d ms; longer with e.g. --interval 2s)\n",
                pr->watched_ms, pr->interval_ms);
    }

    fprintf(out, "\n%sThreads%s\n", p->bold, p->reset);
    for (size_t i = 0; i < report->n_threads; i++) {
        const struct report_thread *th = &report->threads[i];
        fputs(p->bold, out);
        thread_label(out, th);
        fputs(p->reset, out);
        if (th->stopped) {
            char stopped[160];
            wait_stopped_describe(report, th, stopped, sizeof stopped);
            fprintf(out, "  %s%s%s", p->red, stopped, p->reset);
        } else {
            fprintf(out, "  %s", state_text(th));
        }
        if (th->syscall && th->state != THREAD_WAITING_GIL && !th->stopped)
            fprintf(out, " (%s)", th->syscall);
        if (why->threads[i].stuck)
            fprintf(out, "  %s[stuck]%s", p->red, p->reset);
        fputc('\n', out);
        if (th->wait && th->wait->kind != WAIT_NONE) {
            char waiting[1024];
            wait_describe(report, th, waiting, sizeof waiting);
            fprintf(out, "    %swaiting for:%s %s\n", p->yellow, p->reset, waiting);
        }
        for (size_t k = 0; k < th->n_frames && k < TEXT_FRAMES; k++) {
            const struct report_frame *f = &th->frames[k];
            fprintf(out, "    %s (%s:%d)\n", f->function, stack_report_short_path(f->file), f->line);
        }
        if (th->n_frames > TEXT_FRAMES)
            fprintf(out, "    %s... %zu more frames%s\n", p->dim, th->n_frames - TEXT_FRAMES, p->reset);
        if (!th->complete)
            fprintf(out, "    %s<stack incomplete: %s>%s\n", p->red, th->error[0] ? th->error : "unreadable",
                    p->reset);
    }
}

static void json_thread_refs(struct json_writer *w, const char *key, const struct stack_report *report,
                             const int *list, int n)
{
    json_key(w, key);
    json_begin_array(w);
    for (int k = 0; k < n; k++) {
        const struct report_thread *th = &report->threads[list[k]];
        json_begin_object(w);
        if (th->tid)
            json_member_int(w, "tid", th->tid);
        else
            json_member_null(w, "tid");
        json_member_uint(w, "thread_id", th->thread_id);
        json_member_string(w, "name", th->name[0] ? th->name : NULL);
        json_end_object(w);
    }
    json_end_array(w);
}

static void json_progress(struct json_writer *w, const struct why_report *why)
{
    const struct why_progress *p = &why->progress;
    json_key(w, "progress");
    json_begin_object(w);
    json_member_bool(w, "checked", p->checked);
    if (p->checked) {
        json_member_int(w, "interval_ms", p->interval_ms);
        json_member_bool(w, "progressing", p->progressing);
        json_member_uint(w, "gil_switches", p->gil_switches);
        json_key(w, "cpu_ms");
        if (p->cpu_ns >= 0)
            json_double(w, (double)p->cpu_ns / 1e6);
        else
            json_null(w);
        json_member_int(w, "threads_changed", p->threads_changed);
        json_member_int(w, "threads_started", p->threads_started);
        json_member_int(w, "threads_exited", p->threads_gone);
        json_member_int(w, "threads_running", p->threads_running);
        json_key(w, "tasks_moved");
        if (p->tasks_moved >= 0)
            json_int(w, p->tasks_moved);
        else
            json_null(w);
        json_key(w, "watched_ms");
        json_double(w, p->watched_ms);
    } else {
        json_member_null(w, "interval_ms");
        json_member_null(w, "progressing");
        json_member_null(w, "gil_switches");
        json_member_null(w, "cpu_ms");
        json_member_null(w, "threads_changed");
        json_member_null(w, "threads_started");
        json_member_null(w, "threads_exited");
        json_member_null(w, "threads_running");
        json_member_null(w, "tasks_moved");
        json_member_null(w, "watched_ms");
    }
    json_end_object(w);
}

static void json_liveness(struct json_writer *w, const struct why_report *why, int i)
{
    const struct why_thread *t = &why->threads[i];
    json_key(w, "liveness");
    json_begin_object(w);
    json_member_bool(w, "blocked", t->live_reason == WHY_LIVE_BLOCKED);
    json_member_string(w, "reason", why_live_text(t->live_reason));
    json_member_bool(w, "live", t->live);
    json_member_bool(w, "strong", t->strong);
    json_member_string(w, "releasers_are", t->live_reason != WHY_LIVE_BLOCKED ? NULL
                                           : t->owner_edges ? "owner" : "can_reach");
    json_thread_refs(w, "releasers", why->stacks, t->releasers, t->n_releasers);
    json_end_object(w);
}

static void json_signals(struct json_writer *w, const struct why_report *why)
{
    char name[32];
    json_key(w, "signals");
    json_begin_object(w);
    json_member_bool(w, "table_read", why->signals_known);
    json_member_string(w, "source", why->signals_source);
    json_key(w, "python_handlers");
    json_begin_array(w);
    for (int s = 1; s <= 64; s++)
        if (why->python_signals & (1ull << (s - 1)))
            json_string(w, signal_name(s, name, sizeof name));
    json_end_array(w);
    json_end_object(w);
}

void why_report_write_json(FILE *out, const struct why_report *why)
{
    const struct stack_report *report = why->stacks;
    struct json_writer w;
    json_init(&w, out, 2);
    json_begin_object(&w);
    json_member_string(&w, "pyscope_version", PYSCOPE_VERSION);
    json_member_int(&w, "pid", report->pid);
    json_member_string(&w, "command", report->command);
    json_member_string(&w, "executable", report->executable);
    json_member_string(&w, "python_version", report->python_version);
    json_member_string(&w, "verdict", why_verdict_name(why->verdict));
    json_member_bool(&w, "hung", is_hang(why->verdict));
    json_member_string(&w, "grade", why_grade_name(why->grade));
    json_member_string(&w, "summary", why->summary);
    json_progress(&w, why);
    json_key(&w, "core");
    if (why->stacks->core_path[0]) {
        json_begin_object(&w);
        json_member_string(&w, "path", why->stacks->core_path);
        json_key(&w, "compression");
        if (why->stacks->core_compression[0])
            json_string(&w, why->stacks->core_compression);
        else
            json_null(&w);
        json_key(&w, "not_in_a_core");
        json_begin_array(&w);
        for (size_t k = 0; k < sizeof not_in_a_core / sizeof not_in_a_core[0]; k++)
            json_string(&w, not_in_a_core[k].key);
        json_end_array(&w);
        json_end_object(&w);
    } else {
        json_null(&w);
    }
    json_signals(&w, why);
    json_key(&w, "findings");
    json_begin_array(&w);
    for (int k = 0; k < why->n_findings; k++) {
        const struct why_finding *f = &why->findings[k];
        json_begin_object(&w);
        json_member_string(&w, "kind", why_verdict_name(f->kind));
        json_member_bool(&w, "certain", f->grade == WHY_GRADE_CERTAIN);
        json_member_string(&w, "grade", why_grade_name(f->grade));
        json_member_string(&w, "summary", f->summary);
        json_thread_refs(&w, "threads", report, f->threads, f->n_threads);
        json_thread_refs(&w, "blocked_threads", report, f->blocked, f->n_blocked);
        json_thread_refs(&w, "releasers", report, f->releasers, f->n_releasers);
        if (f->object)
            json_member_uint(&w, "object", f->object);
        else
            json_member_null(&w, "object");
        if (f->task)
            json_member_uint(&w, "task", f->task);
        else
            json_member_null(&w, "task");
        if (f->child_pid)
            json_member_int(&w, "child_pid", f->child_pid);
        else
            json_member_null(&w, "child_pid");
        json_end_object(&w);
    }
    json_end_array(&w);
    json_key(&w, "gil");
    json_begin_object(&w);
    const struct report_thread *holder = stack_report_gil_holder(report);
    if (holder && holder->tid)
        json_member_int(&w, "holder_tid", holder->tid);
    else
        json_member_null(&w, "holder_tid");
    json_end_object(&w);
    json_key(&w, "threads");
    json_begin_array(&w);
    for (size_t i = 0; i < report->n_threads; i++) {
        const struct report_thread *th = &report->threads[i];
        const struct why_thread *t = &why->threads[i];
        json_begin_object(&w);
        if (th->tid)
            json_member_int(&w, "tid", th->tid);
        else
            json_member_null(&w, "tid");
        json_member_uint(&w, "thread_id", th->thread_id);
        json_member_string(&w, "name", th->name[0] ? th->name : NULL);
        json_member_string(&w, "state", thread_state_name(th->state));
        json_member_bool(&w, "holds_gil", th->holds_gil);
        json_member_string(&w, "syscall", th->syscall);
        json_member_bool(&w, "stuck", t->stuck);
        if (why->progress.checked)
            json_member_bool(&w, "changed", t->changed);
        else
            json_member_null(&w, "changed");
        json_key(&w, "cpu_ms");
        if (t->cpu_ns >= 0)
            json_double(&w, (double)t->cpu_ns / 1e6);
        else
            json_null(&w);
        json_liveness(&w, why, (int)i);
        wait_write_stopped_json(&w, report, th);
        wait_write_json(&w, report, th);
        json_key(&w, "frames");
        json_begin_array(&w);
        for (size_t k = 0; k < th->n_frames; k++) {
            const struct report_frame *f = &th->frames[k];
            json_begin_object(&w);
            json_member_string(&w, "function", f->function);
            json_member_string(&w, "file", f->file);
            if (f->line >= 0)
                json_member_int(&w, "line", f->line);
            else
                json_member_null(&w, "line");
            json_end_object(&w);
        }
        json_end_array(&w);
        json_member_bool(&w, "frames_complete", th->complete);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_end_object(&w);
    json_finish(&w);
}
