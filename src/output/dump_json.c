/* The --json form of a dump; docs/json.md is its contract, and the
 * integration tests read it field by field. */
#include "output/json_writer.h"
#include "output/stack_report.h"
#include "cmd/commands.h"

static void member_tid(struct json_writer *w, const char *key, const struct report_thread *th)
{
    if (th && th->tid)
        json_member_int(w, key, th->tid);
    else
        json_member_null(w, key);
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
    wait_write_json(w, report, th);
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
        json_end_object(w);
    }
    json_end_array(w);
    json_member_bool(w, "frames_complete", th->complete);
    json_key(w, "errors");
    json_begin_array(w);
    if (th->error[0])
        json_string(w, th->error);
    json_end_array(w);
    json_end_object(w);
}

void stack_report_write_json(FILE *out, const struct stack_report *report)
{
    struct json_writer w;
    json_init(&w, out, 2);
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
    json_key(&w, "threads");
    json_begin_array(&w);
    for (size_t i = 0; i < report->n_threads; i++)
        write_thread(&w, report, &report->threads[i]);
    json_end_array(&w);
    json_end_object(&w);
    json_finish(&w);
}
