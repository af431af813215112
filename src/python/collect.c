/* Building a complete report from a target. Each optional part (locals,
 * --print, native stacks) is added after the Python walk, so the walk itself
 * stays the same for every command. */
#include "python/collect.h"
#include "python/asyncio_tasks.h"
#include "python/waits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/process.h"
#include "util/clock.h"
#include "target/syscalls.h"

#include "native/merge.h"
#include "native/unwind.h"
#include "python/variables_report.h"
#include "python/stacks.h"
#include "target/signals.h"


static bool is_python_tid(const struct stack_report *report, pid_t tid)
{
    for (size_t i = 0; i < report->n_threads; i++)
        if (report->threads[i].tid == tid)
            return true;
    return false;
}

/* OS threads with no Python thread state: their name and what they block in. */
static int collect_os_threads(struct target *t, struct stack_report *report)
{
    pid_t *tids = malloc(sizeof *tids * PROCESS_MAX_THREADS);
    if (!tids)
        return -1;
    int n = target_list_threads(t, tids, PROCESS_MAX_THREADS);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (is_python_tid(report, tids[i]))
            continue;
        struct report_os_thread *grown =
            realloc(report->os_threads, (report->n_os_threads + 1) * sizeof *grown);
        if (!grown) {
            rc = -1;
            break;
        }
        report->os_threads = grown;
        struct report_os_thread *ot = &report->os_threads[report->n_os_threads++];
        memset(ot, 0, sizeof *ot);
        ot->tid = tids[i];
        if (target_thread_comm(t, tids[i], ot->comm, sizeof ot->comm) != 0)
            ot->comm[0] = '\0';
        struct thread_activity a;
        if (target_thread_activity(t, tids[i], &a) == 0) {
            ot->run_state = a.run_state;
            if (a.syscall_nr >= 0)
                ot->syscall = syscall_name(a.syscall_nr);
        }
    }
    free(tids);
    return rc;
}

static int collect_native(struct target *t, struct py_runtime *rt,
                          const struct collect_request *req, struct stack_report *report,
                          struct pyscope_error *err)
{
    const char *interp[2];
    int n_interp = native_interp_paths(t, rt ? rt->binary : NULL, interp);
    struct native_unwinder *u = native_open(t, interp, n_interp, req->native_all, err);
    if (!u)
        return -1;
    report->native = true;
    report->native_all = req->native_all;
    for (size_t i = 0; i < report->n_threads; i++) {
        struct report_thread *th = &report->threads[i];
        if (!th->tid)
            continue;
        th->native = native_unwind(u, th->tid);
        if (!th->native || native_merge(th->native, th->frames, th->n_frames) != 0)
            goto oom;
    }
    for (size_t i = 0; i < report->n_os_threads; i++) {
        report->os_threads[i].native = native_unwind(u, report->os_threads[i].tid);
        if (!report->os_threads[i].native)
            goto oom;
    }
    native_close(u);
    return 0;
oom:
    native_close(u);
    error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
    return -1;
}

int collect_report(struct target *t, struct py_runtime *rt, const struct collect_request *req,
                   struct stack_report *report, struct pyscope_error *err)
{
    struct stacks_options opts = {.paused = req->paused, .max_retries = STACKS_LIVE_RETRIES};
    if (!rt) {
        /* No CPython found (yet): native stacks of every thread only. */
        if (collect_os_threads(t, report) != 0)
            goto oom;
        if (req->native && collect_native(t, NULL, req, report, err) != 0)
            return -1;
        return 0;
    }
    struct stacks_raw raw = {0};
    /* The wait analysis explains a wait from the kernel's view of the
     * process (fds, sockets, scheduler); a core does not keep it. */
    bool waits = req->waits && target_can(t, TARGET_CAN_PROC);
    if (waits)
        opts.raw = &raw;
    /* Taken before the stacks: the instant a loop's callback is timed at. */
    double stacks_at = target_can(t, TARGET_CAN_CLOCK) ? monotonic_ms() / 1e3 : NAN;
    if (stacks_collect(rt, &opts, report, err) != 0) {
        stacks_raw_free(&raw);
        return -1;
    }
    /* The waits are read while the threads are still stopped (with
     * --pause), so that they describe the same instant as the stacks. */
    if (waits) {
        struct waits_ctx *ctx = waits_new(rt);
        int rc = ctx ? waits_analyze(ctx, report, &raw) : -1;
        waits_free(ctx);
        stacks_raw_free(&raw);
        if (rc != 0)
            goto oom;
    }
    if (req->tasks != TASKS_NONE)
    {
        report->tasks = asyncio_tasks_read(rt, req->tasks, req->max_tasks);
        asyncio_loop_steps_read(rt, report->tasks, report, stacks_at);
    }
    static const struct repr_limits limits = REPR_DEFAULT_LIMITS;
    report->locals = req->locals || req->locals_thread;
    if (req->print_expr && !(report->print_expr = strdup(req->print_expr)))
        goto oom;
    if (report->locals &&
        frame_locals_fill_report(rt, report, &limits, req->locals ? 0 : req->locals_thread) != 0)
        goto oom;
    if (req->print_expr && frame_locals_eval_print(rt, report, &limits) != 0)
        goto oom;
    if (collect_os_threads(t, report) != 0)
        goto oom;
    if (req->native && collect_native(t, rt, req, report, err) != 0)
        return -1;
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
    for (size_t i = 0; i < report->n_os_threads; i++)
        if (tid && report->os_threads[i].tid == tid)
            report->os_threads[i].crashed = true;
}
