/* A wait's kind from its thread's syscall, and the links between waits:
 * owners, joined threads, waiters, the GIL holder. Reads nothing: frames
 * and kernel state come with the report, the rest through the queries. */
#include "diagnosis/waits.h"

#include "target/syscalls.h"

enum wait_probe waits_classify(const struct report_thread *th, const struct thread_activity *a,
                               struct report_wait *w)
{
    w->syscall = th->state == THREAD_WAITING_GIL ? NULL : syscall_name(a->syscall_nr);
    if (th->state == THREAD_WAITING_GIL) {
        w->kind = WAIT_GIL;
        return WAIT_PROBE_NONE;
    }
    if (a->syscall_nr < 0) {
        if (a->run_state == 'D') {
            w->kind = WAIT_IO;
            w->uninterruptible = true;
        }
        return WAIT_PROBE_NONE;
    }
    w->uninterruptible = a->run_state == 'D';
    switch (a->syscall_nr) {
    case SYSCALL_NR_FUTEX:
        return WAIT_PROBE_FUTEX;
    case NR_NANOSLEEP:
    case NR_CLOCK_NANOSLEEP:
        return WAIT_PROBE_SLEEP;
    case NR_POLL:
    case NR_PPOLL:
    case NR_SELECT:
    case NR_PSELECT6:
    case NR_EPOLL_WAIT:
    case NR_EPOLL_PWAIT:
    case NR_EPOLL_PWAIT2:
        return WAIT_PROBE_SELECT;
    case NR_READ:
    case NR_WRITE:
    case NR_PREAD64:
    case NR_PWRITE64:
    case NR_READV:
    case NR_WRITEV:
    case NR_CONNECT:
    case NR_ACCEPT:
    case NR_ACCEPT4:
    case NR_SENDTO:
    case NR_RECVFROM:
    case NR_SENDMSG:
    case NR_RECVMSG:
    case NR_RECVMMSG:
        return WAIT_PROBE_FD_IO;
    case NR_WAIT4:
        w->kind = WAIT_CHILD;
        w->timeout = WAIT_TIMEOUT_NONE;
        w->child = (pid_t)(int32_t)a->syscall_args[0];
        if (w->child <= 0)
            w->child = -1;
        return WAIT_PROBE_NONE;
    case NR_WAITID:
        w->kind = WAIT_CHILD;
        w->timeout = WAIT_TIMEOUT_NONE;
        /* waitid(P_PID = 1, id, ...); anything else waits for any child. */
        w->child = a->syscall_args[0] == 1 ? (pid_t)a->syscall_args[1] : -1;
        return WAIT_PROBE_NONE;
    default:
        w->kind = w->uninterruptible ? WAIT_IO : WAIT_SYSCALL;
        return WAIT_PROBE_NONE;
    }
}

static int thread_with_ident(const struct stack_report *report, uint64_t ident)
{
    for (size_t i = 0; i < report->n_threads && ident; i++)
        if (report->threads[i].thread_id == ident)
            return (int)i;
    return -1;
}

static void resolve_owner(struct stack_report *report, size_t n, size_t i,
                          const struct diagnosis_queries *q)
{
    struct report_wait *w = report->threads[i].wait;
    if (w->kind != WAIT_LOCK || !w->lock)
        return;
    if (w->lock_locked == 0) {
        w->owner_status = WAIT_OWNER_FREE;
        return;
    }
    if (w->owner_source == WAIT_OWNER_SOURCE_RECORDED) {
        w->owner = thread_with_ident(report, w->owner_ident);
        w->owner_status = w->owner >= 0 ? WAIT_OWNER_ALIVE : WAIT_OWNER_GONE;
        return;
    }
    w->owner_status = WAIT_OWNER_UNKNOWN;
    for (size_t j = 0; j < n; j++) {
        uint64_t locks[DIAGNOSIS_MAX_HELD];
        int frames[DIAGNOSIS_MAX_HELD];
        int count = q->held_locks(q->ctx, j, locks, frames, DIAGNOSIS_MAX_HELD);
        const struct report_wait *wj = report->threads[j].wait;
        bool acquiring = wj && wj->kind == WAIT_LOCK && wj->lock == w->lock;
        for (int k = 0; k < count; k++) {
            /* A thread blocked entering `with lock:` already has the
             * block's __exit__ on its innermost frame's stack (3.8-3.11,
             * 3.14+): that is the acquire in progress, not a hold. */
            if (locks[k] != w->lock || (acquiring && frames[k] == 0))
                continue;
            w->owner = (int)j;
            w->owner_ident = report->threads[j].thread_id;
            w->owner_status = WAIT_OWNER_ALIVE;
            w->owner_source = WAIT_OWNER_SOURCE_WITH;
            return;
        }
    }
}

void waits_link(struct stack_report *report, size_t n, const struct diagnosis_queries *q)
{
    if (n > report->n_threads)
        n = report->n_threads;
    int gil_holder = -1;
    for (size_t i = 0; i < report->n_threads; i++)
        if (report->threads[i].holds_gil && gil_holder < 0)
            gil_holder = (int)i;
    for (size_t i = 0; i < n; i++)
        if (report->threads[i].wait && report->threads[i].wait->kind == WAIT_GIL)
            report->threads[i].wait->gil_holder = gil_holder;
    for (size_t i = 0; i < n; i++) {
        struct report_wait *w = report->threads[i].wait;
        if (!w)
            continue;
        resolve_owner(report, n, i, q);
        if (w->kind == WAIT_JOIN)
            w->join_target = thread_with_ident(report, w->join_ident);
        if (w->kind == WAIT_LOCK || w->kind == WAIT_NOTIFY || w->kind == WAIT_JOIN) {
            for (size_t j = 0; j < n; j++) {
                const struct report_wait *o = report->threads[j].wait;
                if (o && o->kind == w->kind && o->object == w->object && w->object)
                    w->waiters++;
            }
        }
    }
}
