/* Building a complete report from a target. Each optional part (locals,
 * --print, native stacks) is added after the Python walk, so the walk itself
 * stays the same for every command. */
#include "cmd/collect.h"

#include <stdio.h>
#include <string.h>

#include "python/locals_report.h"
#include "python/stacks.h"
#include "target/signals.h"

int collect_report(struct target *t, struct py_runtime *rt, const struct collect_request *req,
                   struct stack_report *report, struct pyscope_error *err)
{
    struct stacks_options opts = {.paused = req->paused, .max_retries = 3};
    if (stacks_collect(rt, &opts, report, err) != 0)
        return -1;
    (void)t;
    static const struct repr_limits limits = REPR_DEFAULT_LIMITS;
    report->locals = req->locals || req->locals_thread;
    if (req->print_expr && !(report->print_expr = strdup(req->print_expr)))
        goto oom;
    if (report->locals &&
        frame_locals_fill_report(rt, report, &limits, req->locals ? 0 : req->locals_thread) != 0)
        goto oom;
    if (req->print_expr && frame_locals_eval_print(rt, report, &limits) != 0)
        goto oom;
    return 0;
oom:
    error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
    return -1;
}

void collect_set_signal(struct stack_report *report, int signo, int code, uint64_t addr,
                        int sender_pid, pid_t tid)
{
    struct report_signal *s = &report->signal;
    memset(s, 0, sizeof *s);
    if (signo <= 0)
        return;
    struct signal_facts facts = {signo, code, addr, sender_pid};
    char buf[16];
    s->signo = signo;
    s->code = code;
    s->addr = addr;
    s->tid = tid;
    snprintf(s->name, sizeof s->name, "%s", signal_name(signo, buf, sizeof buf));
    signal_cause(&facts, s->cause, sizeof s->cause);
    for (size_t i = 0; i < report->n_threads; i++)
        if (tid && report->threads[i].tid == tid)
            report->threads[i].crashed = true;
}
