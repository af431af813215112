/* The --json form of a dump; docs/json.md is its contract, and the
 * integration tests read it field by field. */
#include "output/json_writer.h"
#include "output/dump_writers.h"
#include "output/task_writers.h"
#include "output/wait_writers.h"
#include "util/version.h"

static void member_tid(struct json_writer *w, const char *key, const struct report_thread *th)
{
    if (th && th->tid)
        json_member_int(w, key, th->tid);
    else
        json_member_null(w, key);
}

static void write_locals(struct json_writer *w, const struct report_frame *f)
{
    json_key(w, "locals");
    if (!f->locals_read) {
        json_null(w);
        return;
    }
    json_begin_array(w);
    for (size_t v = 0; v < f->n_locals; v++) {
        const struct report_local *l = &f->locals[v];
        json_begin_object(w);
        json_member_string(w, "name", l->name);
        json_member_string(w, "kind", l->kind);
        json_member_string(w, "type", l->type);
        json_member_string(w, "repr", l->repr);
        if (l->addr)
            json_member_uint(w, "address", l->addr);
        else
            json_member_null(w, "address");
        json_end_object(w);
    }
    json_end_array(w);
}

static void write_native(struct json_writer *w, const struct report_native *native)
{
    json_key(w, "native");
    if (!native) {
        json_null(w);
        return;
    }
    json_begin_object(w);
    json_member_bool(w, "complete", native->complete);
    json_member_bool(w, "merged", native->merged);
    json_member_string(w, "error", native->error[0] ? native->error : NULL);
    json_key(w, "frames");
    json_begin_array(w);
    for (size_t k = 0; k < native->n_frames; k++) {
        const struct report_native_frame *f = &native->frames[k];
        json_begin_object(w);
        json_member_uint(w, "pc", f->pc);
        json_member_string(w, "symbol", f->symbol);
        if (f->symbol)
            json_member_uint(w, "offset", f->offset);
        else
            json_member_null(w, "offset");
        json_member_string(w, "module", f->module);
        json_member_string(w, "file", f->file);
        if (f->file)
            json_member_int(w, "line", f->line);
        else
            json_member_null(w, "line");
        json_member_bool(w, "internal", f->internal);
        json_member_bool(w, "eval", f->is_eval);
        json_end_object(w);
    }
    json_end_array(w);
    json_key(w, "merged_order");
    if (!native->merged) {
        json_null(w);
    } else {
        json_begin_array(w);
        for (size_t e = 0; e < native->n_entries; e++) {
            json_begin_object(w);
            json_member_string(w, "kind", native->entries[e].python ? "python" : "native");
            json_member_uint(w, "index", native->entries[e].index);
            json_end_object(w);
        }
        json_end_array(w);
    }
    json_end_object(w);
}

static void write_os_thread(struct json_writer *w, const struct report_os_thread *ot, bool native)
{
    json_begin_object(w);
    json_member_int(w, "tid", ot->tid);
    json_member_string(w, "name", ot->comm[0] ? ot->comm : NULL);
    json_member_string(w, "state", ot->syscall ? "idle" : ot->run_state == 'R' ? "running"
                                                                                : "unknown");
    json_member_string(w, "syscall", ot->syscall);
    json_member_bool(w, "crashed", ot->crashed);
    if (native)
        write_native(w, ot->native);
    json_end_object(w);
}

static void write_prints(struct json_writer *w, const struct stack_report *report)
{
    json_key(w, "print");
    json_begin_object(w);
    json_member_string(w, "expression", report->print_expr);
    json_key(w, "results");
    json_begin_array(w);
    for (size_t i = 0; i < report->n_prints; i++) {
        const struct report_print *pr = &report->prints[i];
        json_begin_object(w);
        if (pr->tid)
            json_member_int(w, "tid", pr->tid);
        else
            json_member_null(w, "tid");
        json_member_uint(w, "thread_index", pr->thread_index);
        json_member_uint(w, "frame_index", pr->frame_index);
        json_member_string(w, "repr", pr->repr);
        json_member_string(w, "error", pr->error);
        json_end_object(w);
    }
    json_end_array(w);
    json_end_object(w);
}

static void write_thread(struct json_writer *w, const struct stack_report *report,
                         const struct report_thread *th)
{
    json_begin_object(w);
    if (th->tid)
        json_member_int(w, "tid", th->tid);
    else
        json_member_null(w, "tid");
    json_member_uint(w, "thread_id", th->thread_id);
    if (th->name[0])
        json_member_string(w, "name", th->name);
    else
        json_member_null(w, "name");
    json_member_int(w, "interpreter_id", th->interp_id);
    json_member_string(w, "state", thread_state_name(th->state));
    json_member_bool(w, "holds_gil", th->holds_gil);
    json_member_string(w, "syscall", th->syscall);
    json_member_bool(w, "gc", th->gc);
    wait_write_stopped_json(w, report, th);
    wait_write_json(w, report, th);
    json_member_string(w, "c_callable", th->c_callable[0] ? th->c_callable : NULL);
    json_key(w, "frames");
    json_begin_array(w);
    for (size_t k = 0; k < th->n_frames; k++) {
        const struct report_frame *f = &th->frames[k];
        json_begin_object(w);
        json_member_string(w, "function", f->function);
        json_member_string(w, "file", f->file);
        if (f->line >= 0)
            json_member_int(w, "line", f->line);
        else
            json_member_null(w, "line");
        if (report->locals)
            write_locals(w, f);
        json_end_object(w);
    }
    json_end_array(w);
    json_member_bool(w, "frames_complete", th->complete);
    json_member_bool(w, "crashed", th->crashed);
    if (report->native)
        write_native(w, th->native);
    json_key(w, "errors");
    json_begin_array(w);
    if (th->error[0])
        json_string(w, th->error);
    json_end_array(w);
    json_end_object(w);
}

static const char *role_name(enum reentry_role role)
{
    switch (role) {
    case REENTRY_INNER: return "inner";
    case REENTRY_OUTER: return "outer";
    case REENTRY_BETWEEN: return "between";
    }
    return "?";
}

static void write_reentry(struct json_writer *w, const struct report_reentry *re)
{
    json_key(w, "reentry");
    json_begin_object(w);
    json_member_string(w, "function", re->function);
    json_member_string(w, "kind", re->native ? "native" : "python");
    json_member_int(w, "tid", re->tid);
    json_member_uint(w, "hit", re->hit);
    json_member_bool(w, "gc_collecting", re->gc_flag);
    json_member_bool(w, "gc_frames", re->gc_frames);
    json_member_bool(w, "finalizer", re->finalizer);
    json_key(w, "frames");
    json_begin_array(w);
    for (size_t i = 0; i < re->n_marks; i++) {
        const struct report_reentry_mark *m = &re->marks[i];
        json_begin_object(w);
        json_member_string(w, "kind", m->python ? "python" : "native");
        json_member_uint(w, "index", m->index);
        json_member_string(w, "role", role_name(m->role));
        json_member_string(w, "category", m->category);
        json_end_object(w);
    }
    json_end_array(w);
    json_member_string(w, "note", re->note[0] ? re->note : NULL);
    json_end_object(w);
}

void stack_report_write_json(FILE *out, const struct stack_report *report)
{
    stack_report_write_json_indent(out, report, 2);
}

void stack_report_write_json_indent(FILE *out, const struct stack_report *report, int indent)
{
    struct json_writer w;
    json_init(&w, out, indent);
    json_begin_object(&w);
    json_member_string(&w, "pyscope_version", PYSCOPE_VERSION);
    json_member_int(&w, "pid", report->pid);
    json_member_string(&w, "command", report->command);
    json_member_string(&w, "executable", report->executable);
    json_member_string(&w, "python_version", report->python_version);
    json_member_bool(&w, "paused", report->paused);
    json_key(&w, "gil");
    json_begin_object(&w);
    member_tid(&w, "holder_tid", stack_report_gil_holder(report));
    json_end_object(&w);
    json_key(&w, "gc");
    json_begin_object(&w);
    json_member_bool(&w, "collecting", report->gc_collecting);
    member_tid(&w, "tid", stack_report_gc_thread(report));
    json_end_object(&w);
    json_key(&w, "core");
    if (report->core_path[0]) {
        json_begin_object(&w);
        json_member_string(&w, "path", report->core_path);
        json_key(&w, "compression");
        if (report->core_compression[0])
            json_string(&w, report->core_compression);
        else
            json_null(&w);
        json_end_object(&w);
    } else {
        json_null(&w);
    }
    json_key(&w, "signal");
    if (report->signal.signo) {
        const struct report_signal *s = &report->signal;
        json_begin_object(&w);
        json_member_int(&w, "number", s->signo);
        json_member_string(&w, "name", s->name);
        json_member_int(&w, "code", s->code);
        json_member_uint(&w, "address", s->addr);
        json_member_string(&w, "cause", s->cause);
        if (s->tid)
            json_member_int(&w, "tid", s->tid);
        else
            json_member_null(&w, "tid");
        json_end_object(&w);
    } else {
        json_null(&w);
    }
    json_key(&w, "threads");
    json_begin_array(&w);
    for (size_t i = 0; i < report->n_threads; i++)
        write_thread(&w, report, &report->threads[i]);
    json_end_array(&w);
    json_key(&w, "other_threads");
    json_begin_array(&w);
    for (size_t i = 0; i < report->n_os_threads; i++)
        write_os_thread(&w, &report->os_threads[i], report->native);
    json_end_array(&w);
    if (report->print_expr)
        write_prints(&w, report);
    if (report->reentry)
        write_reentry(&w, report->reentry);
    if (report->tasks)
        task_report_write_json(&w, report->tasks);
    json_end_object(&w);
    json_finish(&w);
}
