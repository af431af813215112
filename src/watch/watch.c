/* The watch engine: the ptrace event loop, the reports (--core, --stop), and
 * the promise that every breakpoint and watchpoint is gone when pyscope lets
 * the process go. The detectors are watch_python.c and watch_native.c. */
#include "watch/session.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "python/collect.h"
#include "output/dump_writers.h"
#include "report/stack_report.h"
#include "diagnosis/reentry_marks.h"
#include "target/cleanup.h"
#include "target/core_write.h"
#include "target/kernelbp.h"
#include "target/process.h"
#include "watch/guard.h"

#define POLL_MS 200
#define EVENTS_PER_TURN 256
/* The longest the event loop goes without looking at signals: a report at
 * every trap (--all) takes tens of ms on a loaded machine, and 256 events
 * in a row kept a signal waiting for seconds (5.3 s seen at load 17). */
#define TURN_MS 50

/* ---- per-thread state ---- */

struct watch_thread *watch_thread_get(struct watch_session *s, pid_t tid)
{
    for (int i = 0; i < s->n_threads; i++)
        if (s->threads[i].tid == tid)
            return &s->threads[i];
    if (s->n_threads >= TRACER_MAX_THREADS)
        return NULL;
    struct watch_thread *grown = realloc(s->threads, (size_t)(s->n_threads + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    s->threads = grown;
    struct watch_thread *wt = &s->threads[s->n_threads++];
    memset(wt, 0, sizeof *wt);
    wt->tid = tid;
    return wt;
}

void watch_thread_forget(struct watch_session *s, pid_t tid)
{
    for (int i = 0; i < s->n_threads; i++) {
        if (s->threads[i].tid == tid) {
            s->threads[i] = s->threads[--s->n_threads];
            return;
        }
    }
}

void watch_note_signal(struct watch_session *s, pid_t tid, int sig)
{
    struct watch_thread *wt = watch_thread_get(s, tid);
    if (wt)
        wt->pending_signal = sig;
}

int watch_take_signal(struct watch_session *s, pid_t tid)
{
    struct watch_thread *wt = watch_thread_get(s, tid);
    if (!wt)
        return 0;
    int sig = wt->pending_signal;
    wt->pending_signal = 0;
    return sig;
}

bool watch_stop_requested(const struct watch_session *s)
{
    sigset_t pending;
    if (sigpending(&pending) != 0)
        return false;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGCHLD && sigismember(&pending, sig) == 1 &&
            sigismember(&s->stop_signals, sig) == 1)
            return true;
    return false;
}

static long turn_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* ---- breakpoints ---- */

struct sw_breakpoint *watch_breakpoint_at(struct watch_session *s, uint64_t addr)
{
    if (s->eval_bp_used && s->eval_bp.inserted && s->eval_bp.addr == addr)
        return &s->eval_bp;
    if (s->dl_bp_used && s->dl_bp.inserted && s->dl_bp.addr == addr)
        return &s->dl_bp;
    for (int i = 0; i < s->n_start_bp; i++)
        if (s->start_bp[i].inserted && s->start_bp[i].addr == addr)
            return &s->start_bp[i];
    for (int i = 0; i < s->n_native; i++)
        if (s->native[i].bp.inserted && s->native[i].bp.addr == addr)
            return &s->native[i].bp;
    return NULL;
}

static void for_each_breakpoint(struct watch_session *s, void (*fn)(struct watch_session *,
                                                                     struct sw_breakpoint *))
{
    if (s->eval_bp_used)
        fn(s, &s->eval_bp);
    if (s->dl_bp_used)
        fn(s, &s->dl_bp);
    for (int i = 0; i < s->n_start_bp; i++)
        fn(s, &s->start_bp[i]);
    for (int i = 0; i < s->n_native; i++)
        fn(s, &s->native[i].bp);
}

int watch_insert_breakpoint(struct watch_session *s, struct sw_breakpoint *bp, bool needs_args,
                            struct pyscope_error *err)
{
    const struct target_map *map = s->uprobes ? target_find_map(s->t, bp->addr) : NULL;
    if (map && map->path && map->path[0] == '/') {
        pid_t *tids = malloc(sizeof *tids * (size_t)(s->tr.n + 1));
        int n = 0;
        for (int i = 0; tids && i < s->tr.n; i++)
            tids[n++] = s->tr.threads[i].tid;
        int rc = tids ? bp_insert_uprobe(&s->mem, bp, map->path,
                                         bp->addr - map->start + map->offset, tids, n)
                      : -1;
        int saved = errno;
        free(tids);
        /* Stopped after the first instruction, the thread must still hold
         * the arguments pyscope reads there. */
        if (rc == 0 && needs_args && !insn_keeps_args(&bp->first)) {
            bp_remove(&s->mem, bp);
            rc = -1;
            saved = EINVAL;
        }
        if (rc == 0)
            return 0;
        bp->uprobe = false;
        s->int3_fallbacks++;
        if (!s->int3_said) {
            s->int3_said = true;
            fprintf(stderr, "pyscope: note: an int3 written into the process instead of a uprobe "
                            "at 0x%llx (%s): it stays if pyscope is killed with SIGKILL\n",
                    (unsigned long long)bp->addr, saved == EINVAL ? "its first instruction "
                    "changes the arguments pyscope reads" : strerror(saved));
        }
    } else if (s->uprobes) {
        s->int3_fallbacks++;
    }
    return bp_insert(&s->mem, bp, err);
}

static void remove_one(struct watch_session *s, struct sw_breakpoint *bp)
{
    bp_remove(&s->mem, bp);
}

static void forget_one(struct watch_session *s, struct sw_breakpoint *bp)
{
    (void)s;
    bp_forget(bp);
}

static void reinsert_one(struct watch_session *s, struct sw_breakpoint *bp)
{
    struct pyscope_error err = {0};
    if (!bp->inserted && bp->addr)
        watch_insert_breakpoint(s, bp, false, &err);
}

int watch_single_step(struct watch_session *s, pid_t tid)
{
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) != 0)
        return -1;
    int sig = 0, rc;
    struct sw_breakpoint *bp = watch_breakpoint_at(s, regs.rip);
    if (bp && !bp->uprobe) {
        bool window = false;
        rc = bp_step_over(&s->tr, &s->mem, tid, bp, &window, &sig);
        s->stats.single_step_windows += window;
    } else {
        rc = bp_single_step(&s->tr, tid, &sig);
    }
    if (sig)
        watch_note_signal(s, tid, sig);
    return rc;
}

/* ---- threads and processes ---- */

static pid_t event_tid;

static void add_thread_events(struct watch_session *s, struct sw_breakpoint *bp)
{
    (void)s;
    if (bp->uprobe && bp->inserted)
        bp_uprobe_add_thread(bp, event_tid);
}

static void drop_thread_events(struct watch_session *s, struct sw_breakpoint *bp)
{
    (void)s;
    bp_uprobe_drop_thread(bp, event_tid);
}

/* A new thread, before it runs: it gets its own uprobe events (they are per
 * thread) and, where needed, watchpoints. */
static void thread_started(struct watch_session *s, pid_t tid)
{
    watch_thread_get(s, tid);
    event_tid = tid;
    for_each_breakpoint(s, add_thread_events);
    watch_python_thread_started(s, tid);
}

static void thread_gone(struct watch_session *s, pid_t tid)
{
    event_tid = tid;
    for_each_breakpoint(s, drop_thread_events);
    dr_forget(tid);
    watch_thread_forget(s, tid);
}

void watch_resume_others(struct watch_session *s, pid_t except)
{
    for (int i = 0; i < s->tr.n; i++) {
        struct tracer_thread *th = &s->tr.threads[i];
        if (th->fresh && th->stopped) {
            th->fresh = false;
            thread_started(s, th->tid);
        }
    }
    tracer_resume_all(&s->tr, except);
}

/* A forked child has a copy of our int3s in its memory: put its code back
 * and let it go (a vfork child shares the parent's memory, which must keep
 * them). Uprobes and watchpoints are per-thread perf events, which a child
 * does not inherit; the kernel takes a uprobe's int3 out of a child's
 * copy of the code at its first hit, without stopping it. */
static void release_child(struct watch_session *s, pid_t child, bool shares_memory)
{
    if (!shares_memory) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/mem", (int)child);
        struct bp_memory m;
        struct pyscope_error err = {0};
        if (bp_memory_open(&m, child, &err) == 0) {
            struct sw_breakpoint *all[WATCH_MAX_NATIVE + 4];
            int n = 0;
            if (s->eval_bp_used)
                all[n++] = &s->eval_bp;
            if (s->dl_bp_used)
                all[n++] = &s->dl_bp;
            for (int i = 0; i < s->n_start_bp; i++)
                all[n++] = &s->start_bp[i];
            for (int i = 0; i < s->n_native; i++)
                all[n++] = &s->native[i].bp;
            for (int i = 0; i < n; i++)
                if (all[i]->inserted && !all[i]->uprobe)
                    pwrite(m.fd, all[i]->original, 1, (off_t)all[i]->addr);
            bp_memory_close(&m);
        }
    }
    ptrace(PTRACE_DETACH, child, NULL, NULL);
}

static void handle_child(struct watch_session *s, pid_t parent, bool vfork)
{
    unsigned long child = 0;
    if (ptrace(PTRACE_GETEVENTMSG, parent, NULL, &child) != 0 || child == 0)
        return;
    if (tracer_wait_foreign(&s->tr, (pid_t)child, 2000) == 0)
        release_child(s, (pid_t)child, vfork);
}

static int reopen_target(struct watch_session *s)
{
    struct pyscope_error err = {0};
    if (s->t)
        target_close(s->t);
    bp_memory_close(&s->mem);
    s->t = process_open(s->tr.pid, &err);
    if (!s->t || bp_memory_open(&s->mem, s->tr.pid, &err) != 0) {
        error_report(&err);
        return -1;
    }
    target_cache_enable(s->t);
    return 0;
}

/* The program replaced its image: every breakpoint and watchpoint went
 * with the old one. Start over on the new image. */
static void handle_exec(struct watch_session *s, pid_t tid)
{
    for_each_breakpoint(s, forget_one);
    dr_forget_all();
    watch_python_reset(s);
    watch_native_reset(s);
    s->awaiting_exec = false;
    if (reopen_target(s) != 0) {
        s->done = true;
        return;
    }
    watch_native_resolve(s);
    watch_python_resolve(s, tid);
}

static void rewind_to(pid_t tid, uint64_t addr)
{
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0 && regs.rip == addr + 1) {
        regs.rip = addr;
        ptrace(PTRACE_SETREGS, tid, NULL, &regs);
    }
}

static void handle_breakpoint(struct watch_session *s, pid_t tid, struct sw_breakpoint *bp,
                              const struct user_regs_struct *regs)
{
    bool moved = false;
    if (bp == &s->eval_bp) {
        moved = watch_python_eval_entry(s, tid, regs);
    } else if (s->n_start_bp > 0 && (bp == &s->start_bp[0] || bp == &s->start_bp[1])) {
        watch_python_frame_start(s, tid);
    } else if (bp == &s->dl_bp) {
        watch_native_resolve(s);
        watch_python_resolve(s, tid);
    } else {
        for (int i = 0; i < s->n_native; i++) {
            if (bp == &s->native[i].bp) {
                watch_native_entry(s, tid, i, regs);
                break;
            }
        }
    }
    if (bp->uprobe) {
        /* The kernel has run the first instruction: nothing to step over. */
        if (!s->done)
            tracer_cont(&s->tr, tid, watch_take_signal(s, tid));
        return;
    }
    if (s->done) {
        if (!moved)
            rewind_to(tid, bp->addr);
        return;
    }
    if (!moved && !bp->inserted) {
        /* Removed meanwhile (waiting is over): run the code as it is. */
        rewind_to(tid, bp->addr);
    } else if (!moved) {
        bool window = false;
        int sig = 0;
        struct user_regs_struct now = *regs;
        if (bp_step_over_regs(&s->tr, &s->mem, tid, bp, &now, &window, &sig) != 0)
            rewind_to(tid, bp->addr);
        s->stats.single_step_windows += window;
        if (sig)
            watch_note_signal(s, tid, sig);
    }
    tracer_cont(&s->tr, tid, watch_take_signal(s, tid));
}

static void handle_stop(struct watch_session *s, pid_t tid, int status)
{
    struct tracer_thread *th = tracer_thread(&s->tr, tid);
    if (!th)
        return;
    if (th->fresh) {
        th->fresh = false;
        thread_started(s, tid);
    }
    int event = status >> 16, sig = WSTOPSIG(status);
    switch (event) {
    case 0:
        break;
    case PTRACE_EVENT_FORK:
    case PTRACE_EVENT_VFORK:
        handle_child(s, tid, event == PTRACE_EVENT_VFORK);
        tracer_cont(&s->tr, tid, 0);
        return;
    case PTRACE_EVENT_EXEC:
        handle_exec(s, tid);
        if (!s->done)
            tracer_cont(&s->tr, tid, 0);
        return;
    case PTRACE_EVENT_STOP:
        if (tracer_is_group_stop(status))
            tracer_listen(&s->tr, tid);
        else
            tracer_cont(&s->tr, tid, 0);
        return;
    default:
        tracer_cont(&s->tr, tid, 0);
        return;
    }
    if (sig == SIGTRAP) {
        /* Kernel-owned breakpoints and watchpoints say which they are in
         * the siginfo's cookie. */
        siginfo_t si;
        bool have_si = ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) == 0;
        uint64_t cookie = have_si ? kbp_cookie(&si) : 0;
        if ((cookie & KBP_TAG_MASK) == KBP_TAG_WATCH ||
            (have_si && si.si_code == TRAP_HWBKPT && s->n_py)) {
            watch_python_dr_trap(s, tid, &si);
            if (!s->done)
                tracer_cont(&s->tr, tid, watch_take_signal(s, tid));
            return;
        }
        if ((cookie & KBP_TAG_MASK) == KBP_TAG_UPROBE) {
            struct sw_breakpoint *bp = watch_breakpoint_at(s, cookie & ~KBP_TAG_MASK);
            struct user_regs_struct regs;
            if (bp && bp->uprobe && ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0)
                handle_breakpoint(s, tid, bp, &regs);
            else if (!s->done)
                tracer_cont(&s->tr, tid, 0);   /* from a uprobe removed since */
            return;
        }
        /* Our int3s by the address alone: otherwise by far the most
         * frequent stop, they need no siginfo (only our int3 can leave a
         * thread just past its address with SIGTRAP). */
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0) {
            struct sw_breakpoint *bp = watch_breakpoint_at(s, regs.rip - 1);
            if (bp && !bp->uprobe && have_si && si.si_code == SI_KERNEL) {
                handle_breakpoint(s, tid, bp, &regs);
                return;
            }
        }
    }
    /* The program's own signal. */
    tracer_cont(&s->tr, tid, sig);
}

static void handle_event(struct watch_session *s, pid_t tid, int status)
{
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        thread_gone(s, tid);
        return;
    }
    if (WIFSTOPPED(status))
        handle_stop(s, tid, status);
}

/* ---- reports ---- */

static int outer_python(const struct report_thread *th, uint64_t code, size_t *inner)
{
    bool have_inner = false;
    for (size_t i = 0; i < th->n_frames; i++) {
        if (th->frames[i].code_addr != code)
            continue;
        if (!have_inner) {
            *inner = i;
            have_inner = true;
        } else {
            return (int)i;
        }
    }
    return -1;
}

static int outer_native(const struct report_thread *th, const struct native_watch *w,
                        size_t *inner)
{
    const struct report_native *native = th->native;
    bool have_inner = false;
    for (size_t k = 0; native && k < native->n_frames; k++) {
        uint64_t pc = native->frames[k].pc - (k > 0 ? 1 : 0);
        if (pc < w->bp.addr || pc >= w->bp.addr + w->size)
            continue;
        if (!have_inner) {
            *inner = k;
            have_inner = true;
        } else {
            return (int)k;
        }
    }
    return -1;
}

static void write_core(struct watch_session *s, pid_t tid)
{
    char path[4096];
    if (s->hits == 1)
        snprintf(path, sizeof path, "%s", s->core_path);
    else
        snprintf(path, sizeof path, "%s.%u", s->core_path, s->hits);
    pid_t *order = malloc(sizeof *order * (size_t)(s->tr.n + 1));
    if (!order)
        return;
    int n = 0;
    order[n++] = tid;
    for (int i = 0; i < s->tr.n; i++)
        if (s->tr.threads[i].tid != tid && s->tr.threads[i].stopped)
            order[n++] = s->tr.threads[i].tid;
    /* The core shows the program's own code, not our int3s. */
    for_each_breakpoint(s, remove_one);
    struct pyscope_error err = {0};
    if (core_write(s->t, order, n, NULL, path, &err) == 0)
        fprintf(stderr, "pyscope: core written to %s\n", path);
    else
        error_report(&err);
    for_each_breakpoint(s, reinsert_one);
    free(order);
}

/* Threads that stopped on one of our int3s (a saved event) have their pc
 * one byte into the function: show them at its entry for the report, and
 * put them back afterwards so that their event is handled as it came. */
struct rewound {
    pid_t tid;
    uint64_t rip;
};

static int rewind_saved_hits(struct watch_session *s, struct rewound *out, int max)
{
    int n = 0;
    for (int i = 0; i < s->tr.n && n < max; i++) {
        const struct tracer_thread *th = &s->tr.threads[i];
        if (!th->has_event || (th->event >> 16) != 0 || WSTOPSIG(th->event) != SIGTRAP)
            continue;
        struct user_regs_struct regs;
        struct sw_breakpoint *bp = NULL;
        if (ptrace(PTRACE_GETREGS, th->tid, NULL, &regs) != 0 ||
            !(bp = watch_breakpoint_at(s, regs.rip - 1)) || bp->uprobe)
            continue;
        out[n++] = (struct rewound){th->tid, regs.rip};
        regs.rip--;
        ptrace(PTRACE_SETREGS, th->tid, NULL, &regs);
    }
    return n;
}

static void restore_saved_hits(const struct rewound *list, int n)
{
    for (int i = 0; i < n; i++) {
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, list[i].tid, NULL, &regs) == 0) {
            regs.rip = list[i].rip;
            ptrace(PTRACE_SETREGS, list[i].tid, NULL, &regs);
        }
    }
}

#define MAX_REWOUND 256

void watch_report(struct watch_session *s, pid_t tid, int py_index, int native_index)
{
    s->hits++;
    tracer_stop_all(&s->tr);
    tracer_collect_pending(&s->tr, SIGTRAP);
    struct rewound rewound[MAX_REWOUND];
    int n_rewound = rewind_saved_hits(s, rewound, MAX_REWOUND);
    target_cache_invalidate(s->t);
    target_refresh_maps(s->t);
    struct stack_report report;
    memset(&report, 0, sizeof report);
    report.pid = s->tr.pid;
    report.paused = true;
    target_cmdline(s->t, report.command, sizeof report.command);
    target_exe(s->t, report.executable, sizeof report.executable);
    snprintf(report.python_version, sizeof report.python_version, "%s",
             s->have_rt ? s->rt.version : "?");
    struct collect_request req = {.paused = true, .native = true, .native_all = s->native_all,
                                  .locals_thread = s->locals ? tid : 0};
    struct pyscope_error err = {0};
    if (collect_report(s->t, s->have_rt ? &s->rt : NULL, &req, &report, &err) != 0) {
        error_report(&err);
    } else if ((report.reentry = calloc(1, sizeof *report.reentry)) != NULL) {
        struct report_reentry *re = report.reentry;
        re->native = native_index >= 0;
        re->tid = tid;
        re->hit = s->hits;
        snprintf(re->function, sizeof re->function, "%s",
                 re->native ? s->native[native_index].label : s->py[py_index].label);
        const struct report_thread *th = NULL;
        for (size_t i = 0; i < report.n_threads; i++)
            if (report.threads[i].tid == tid)
                th = &report.threads[i];
        size_t inner = 0;
        int outer = -1;
        if (th)
            outer = re->native ? outer_native(th, &s->native[native_index], &inner)
                               : outer_python(th, s->py[py_index].code, &inner);
        if (th && outer > 0)
            reentry_mark_frames(&report, th, inner, (size_t)outer);
        else
            snprintf(re->note, sizeof re->note, "%s",
                     th ? "the two activations could not both be found in the stack read for "
                          "the report"
                        : "the thread has no Python thread state; its C stack is listed with "
                          "the threads Python does not know");
        if (s->json) {
            stack_report_write_json_indent(s->out, &report, 0);
            fputc('\n', s->out);
        } else {
            stack_report_write_text(s->out, &report, isatty(fileno(s->out)));
            fputc('\n', s->out);
        }
        fflush(s->out);
        fprintf(stderr, "pyscope: re-entry #%u of %s in thread %d\n", s->hits, re->function,
                (int)tid);
    }
    stack_report_free(&report);
    if (s->core_path)
        write_core(s, tid);
    restore_saved_hits(rewound, n_rewound);
    if (s->stop || s->hits >= s->max_hits)
        s->done = true;
    else
        watch_resume_others(s, tid);
}

/* ---- leaving ---- */

/* A thread stopped with an event of ours not handled yet: undo it. */
static void settle_saved_event(struct watch_session *s, struct tracer_thread *th)
{
    int status = th->event;
    int event = status >> 16;
    if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK) {
        handle_child(s, th->tid, event == PTRACE_EVENT_VFORK);
        th->has_event = false;
        return;
    }
    if (event != 0) {
        th->has_event = false;
        return;
    }
    if (WSTOPSIG(status) != SIGTRAP)
        return;                    /* the program's signal: delivered at detach */
    /* SIGTRAPs of ours are dropped; one the program got otherwise is kept. */
    siginfo_t si;
    if (ptrace(PTRACE_GETSIGINFO, th->tid, NULL, &si) != 0)
        return;
    if (kbp_cookie(&si) & KBP_TAG_MASK) {
        th->has_event = false;     /* a kernel-owned breakpoint's or watchpoint's */
        return;
    }
    if (si.si_code == SI_KERNEL) {
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, th->tid, NULL, &regs) == 0) {
            struct sw_breakpoint *bp = watch_breakpoint_at(s, regs.rip - 1);
            if (bp && !bp->uprobe) {
                regs.rip = bp->addr;
                ptrace(PTRACE_SETREGS, th->tid, NULL, &regs);
                th->has_event = false;
            }
        }
    } else if (si.si_code == TRAP_HWBKPT || si.si_code == TRAP_TRACE) {
        th->has_event = false;
    }
}

/* Removes every breakpoint and watchpoint and lets the process go. */
static void finish(struct watch_session *s, bool leave_stopped)
{
    if (s->tr.n == 0)
        return;
    tracer_stop_all(&s->tr);
    /* A trap of ours still on its way would kill the process once we are
     * gone: take it now, then undo it with the others. */
    tracer_collect_pending(&s->tr, SIGTRAP);
    for (int i = 0; i < s->tr.n; i++)
        if (s->tr.threads[i].has_event)
            settle_saved_event(s, &s->tr.threads[i]);
    for_each_breakpoint(s, remove_one);
    watch_python_disarm_all(s);
    for (int i = 0; i < s->tr.n_foreign; i++)
        release_child(s, s->tr.foreign[i], false);
    s->tr.n_foreign = 0;
    /* A signal that came while we stepped a thread goes with the detach. */
    for (int i = 0; i < s->tr.n; i++) {
        struct tracer_thread *th = &s->tr.threads[i];
        int sig = watch_take_signal(s, th->tid);
        if (sig && !th->has_event) {
            th->has_event = true;
            th->event = (sig << 8) | 0x7f;
        }
    }
    tracer_detach_all(&s->tr, leave_stopped);
    s->left_stopped = leave_stopped;
}

/* After detaching with SIGSTOP pending, each thread enters the group stop
 * when it next runs: wait for that (bounded), so that "left stopped" is
 * true when it is printed. */
static bool wait_group_stopped(pid_t pid)
{
    for (int tries = 0; tries < 400; tries++) {
        pid_t tids[512];
        int n = process_list_tids(pid, tids, 512);
        if (n <= 0)
            return false;
        int stopped = 0;
        for (int i = 0; i < n; i++) {
            char path[64], buf[512];
            snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tids[i]);
            FILE *f = fopen(path, "r");
            size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
            if (f)
                fclose(f);
            buf[len] = '\0';
            const char *paren = strrchr(buf, ')');
            stopped += paren && paren[1] == ' ' && (paren[2] == 'T' || paren[2] == 't');
        }
        if (stopped == n)
            return true;
        struct timespec pause = {0, 5000000};
        nanosleep(&pause, NULL);
    }
    return false;
}

/* ---- setup ---- */

static int parse_func(const char *arg, struct watch_func *wf)
{
    memset(wf, 0, sizeof *wf);
    wf->arg = arg;
    const char *rest = arg;
    if (strncmp(arg, "py:", 3) == 0) {
        wf->want_python = true;
        rest = arg + 3;
    } else if (strncmp(arg, "native:", 7) == 0) {
        wf->want_native = true;
        rest = arg + 7;
    } else if (strpbrk(arg, ":./<")) {
        wf->want_python = true;
    } else {
        wf->want_python = wf->want_native = true;
    }
    if (wf->want_python && py_func_spec_parse(rest, &wf->spec) != 0)
        return -1;
    if (wf->want_native) {
        if (!rest[0] || strlen(rest) >= sizeof wf->symbol || strpbrk(rest, " \t:/"))
            return -1;
        snprintf(wf->symbol, sizeof wf->symbol, "%s", rest);
    }
    return 0;
}

static void report_pending(struct watch_session *s)
{
    for (int f = 0; f < s->n_funcs; f++) {
        struct watch_func *wf = &s->funcs[f];
        if (wf->found_python || wf->found_native || wf->warned)
            continue;
        wf->warned = true;
        if (wf->want_python && s->waiting)
            fprintf(stderr, "pyscope: %s not found yet; watching for its definition (every "
                            "code object Python starts to run is searched)\n", wf->arg);
        else
            fprintf(stderr, "pyscope: %s not found yet; looking for it every %.1f s%s\n",
                    wf->arg, POLL_MS / 1000.0,
                    wf->want_native ? " and whenever a library is loaded" : "");
    }
}

static bool found(const struct watch_func *wf)
{
    return wf->found_python || wf->found_native;
}

/* The program ended: each FUNC that never existed in it is said to be so. */
static int report_never_found(const struct watch_session *s)
{
    int n = 0;
    for (int f = 0; f < s->n_funcs; f++) {
        const struct watch_func *wf = &s->funcs[f];
        if (found(wf))
            continue;
        n++;
        fprintf(stderr, "pyscope: process %d exited; %s was never found, so nothing was "
                        "watched%s%s%s\n", (int)s->tr.pid, wf->arg,
                wf->hint[0] ? " (did you mean " : "", wf->hint, wf->hint[0] ? "?)" : "");
    }
    return n;
}

static bool all_found(const struct watch_session *s)
{
    for (int f = 0; f < s->n_funcs; f++)
        if (s->funcs[f].want_python && !s->funcs[f].found_python &&
            !(s->funcs[f].want_native && s->funcs[f].found_native))
            return false;
    return true;
}

/* Which breakpoints the kernel will let pyscope use, decided once. */
static void choose_mechanism(struct watch_session *s)
{
    const char *why_up = "", *why_wp = "";
    s->uprobes = kbp_probe_uprobes(s->tr.pid, &why_up);
    s->watch_kernel = kbp_probe_watchpoints(s->tr.pid, &why_wp);
    /* PYSCOPE_WATCH_NO_DR=1 takes the way of such machines anywhere, so
     * that it can be tested where debug registers work. */
    const char *force = getenv("PYSCOPE_WATCH_NO_DR");
    s->no_dr = (force && strcmp(force, "1") == 0) || kbp_debug_registers_trap() == 0;
    snprintf(s->mechanism_why, sizeof s->mechanism_why, "%s%s%s%s%s",
             s->uprobes ? "" : "uprobes: ", s->uprobes ? "" : why_up,
             !s->uprobes && !s->watch_kernel ? "; " : "",
             s->watch_kernel ? "" : "perf-event watchpoints: ", s->watch_kernel ? "" : why_wp);
}

/* The start-up line: what a SIGKILL of pyscope would leave behind. */
static void say_mechanism(const struct watch_session *s)
{
    pid_t guard = watch_guard_pid();
    char what[512];
    snprintf(what, sizeof what, "%s%s%s", s->uprobes ? "" : "int3s written into the process",
             !s->uprobes && !s->watch_kernel ? ", and watchpoints are " : "",
             s->watch_kernel ? "" : "debug registers set with ptrace");
    if (s->uprobes && s->watch_kernel && guard)
        fprintf(stderr, "pyscope: breakpoints are uprobes and perf-event watchpoints, which the "
                        "kernel removes when pyscope dies; after a kill -9 of pyscope (process "
                        "%d) its tracer, process %d, lets the process go; only a kill -9 of "
                        "process %d itself just as a thread traps kills the process (SIGTRAP)\n",
                (int)guard, (int)getpid(), (int)getpid());
    else if (s->uprobes && s->watch_kernel)
        fprintf(stderr, "pyscope: breakpoints are uprobes and perf-event watchpoints, which the "
                        "kernel removes when watching ends or pyscope dies, even by kill -9\n");
    else if (guard)
        fprintf(stderr, "pyscope: %s %s (%s): removed when watching ends, on any signal and "
                        "after a kill -9 of pyscope (process %d), by its tracer, process %d; "
                        "after a kill -9 of process %d itself they stay and the process dies of "
                        "SIGTRAP at the next hit\n", s->uprobes ? "watchpoints are" :
                        "breakpoints are", what, s->mechanism_why, (int)guard, (int)getpid(),
                (int)getpid());
    else
        fprintf(stderr, "pyscope: %s %s (%s): removed when watching ends and on any signal but "
                        "SIGKILL; after kill -9 of pyscope they stay and the process dies of "
                        "SIGTRAP at the next hit\n", s->uprobes ? "watchpoints are" :
                        "breakpoints are", what, s->mechanism_why);
}

static int start_watching(struct watch_session *s, pid_t pid, char **argv)
{
    struct pyscope_error err = {0};
    long options = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEFORK |
                   PTRACE_O_TRACEVFORK;
    if (argv) {
        if (tracer_spawn(&s->tr, argv, NULL, options, &err) != 0)
            return error_report(&err);
        s->awaiting_exec = true;
        choose_mechanism(s);
        return 0;
    }
    struct target *probe = process_open(pid, &err);
    if (!probe)
        return error_report(&err);
    target_close(probe);
    if (tracer_attach(&s->tr, pid, options, &err) != 0)
        return error_report(&err);
    choose_mechanism(s);
    tracer_stop_all(&s->tr);
    if (reopen_target(s) != 0) {
        finish(s, false);
        return PYSCOPE_ERR_OTHER;
    }
    for (int i = 0; i < s->tr.n; i++)
        watch_thread_get(s, s->tr.threads[i].tid);
    bool wants_python = false, python_only = true;
    for (int f = 0; f < s->n_funcs; f++) {
        wants_python |= s->funcs[f].want_python;
        python_only &= !s->funcs[f].want_native;
    }
    if (wants_python && python_only) {
        struct py_runtime rt;
        if (py_runtime_find(s->t, &rt, &err) != 0) {
            finish(s, false);
            return error_report(&err);
        }
    }
    watch_native_resolve(s);
    watch_python_resolve(s, 0);
    report_pending(s);
    watch_resume_others(s, 0);
    return 0;
}

/* In `-- PROGRAM` mode, after watching: wait for the program, passing
 * signals sent to pyscope on to it, and return its exit status. */
static int wait_for_program(struct watch_session *s, const sigset_t *wait_set)
{
    pid_t pid = s->tr.pid;
    if (s->tr.leader_exited) {
        int st = s->tr.leader_status;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    for (;;) {
        int status;
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid && (WIFEXITED(status) || WIFSIGNALED(status)))
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (got < 0 && errno != EINTR)
            return PYSCOPE_ERR_OTHER;
        siginfo_t info;
        struct timespec ts = {1, 0};
        int sig = sigtimedwait(wait_set, &info, &ts);
        if (sig > 0 && sig != SIGCHLD && info.si_code == SI_USER)
            kill(pid, sig);
    }
}

bool watch_func_valid(const char *arg)
{
    struct watch_func wf;
    return parse_func(arg, &wf) == 0;
}

static void free_session(struct watch_session *s)
{
    for_each_breakpoint(s, forget_one);
    dr_forget_all();
    if (s->unwinder)
        native_close(s->unwinder);
    for (int i = 0; i < s->n_searched; i++)
        free(s->searched[i]);
    if (s->t)
        target_close(s->t);
    bp_memory_close(&s->mem);
    if (s->codes) {
        py_code_cache_clear(s->codes);
        free(s->codes);
    }
    free(s->frames);
    watch_filter_close(s);
    free(s->scanned);
    free(s->fast);
    free(s->threads);
    tracer_free(&s->tr);
    free(s);
}

int watch_run(const struct watch_options *o)
{
    struct watch_session *s = calloc(1, sizeof *s);
    if (!s)
        return PYSCOPE_ERR_OTHER;
    s->mem.fd = -1;
    s->all = o->all;
    s->stop = o->stop;
    s->json = o->json;
    s->native_all = o->native_all;
    s->locals = o->locals;
    s->exact = o->exact;
    s->verbose = o->verbose;
    s->max_hits = o->max_hits;
    s->core_path = o->core_path;
    s->out = o->out;
    for (int i = 0; i < o->n_funcs && i < WATCH_MAX_FUNCS; i++)
        if (parse_func(o->funcs[i], &s->funcs[s->n_funcs]) == 0)
            s->n_funcs++;
    char **program = o->program;
    int status = 0;
    s->codes = calloc(1, sizeof *s->codes);
    s->frames = calloc(PY_MAX_FRAMES, sizeof *s->frames);
    if (!s->codes || !s->frames) {
        free_session(s);
        return PYSCOPE_ERR_OTHER;
    }
    /* Every terminating signal is taken synchronously (sigtimedwait), so
     * that no system call of ours is ever interrupted halfway through a
     * breakpoint; a broken pipe is then an EPIPE and a pending SIGPIPE.
     * pyscope's own crashes undo the breakpoints from target/cleanup.c. */
    sigset_t wait_set;
    cleanup_terminating_signals(&wait_set);
    cleanup_without_ignored(&wait_set);
    sigaddset(&wait_set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &wait_set, NULL);
    cleanup_install();
    /* From here on pyscope is two processes: this one stays as the guard
     * (watch/guard.c) and a kill -9 of it ends watching cleanly. */
    watch_guard_start(&wait_set, program == NULL);
    sigaddset(&wait_set, watch_guard_signal());
    sigprocmask(SIG_BLOCK, &wait_set, NULL);
    s->stop_signals = wait_set;
    sigdelset(&s->stop_signals, SIGCHLD);

    if ((status = start_watching(s, o->pid, program)) != 0)
        goto out;
    say_mechanism(s);
    if (program)
        fprintf(stderr, "pyscope: started %s as process %d\n", program[0], (int)s->tr.pid);

    int stop_signal = 0;
    bool stop_from_kill = false;
    struct timespec last_poll;
    clock_gettime(CLOCK_MONOTONIC, &last_poll);
    long turn_start = turn_clock_ms();
    while (!s->done) {
        int st, handled = 0;
        pid_t tid = 0;
        /* A target that traps all the time always has another stop ready:
         * every so many, or every TURN_MS, the signals and the periodic
         * work get their turn. */
        long turn_end = turn_start + TURN_MS;
        bool more = false;
        while (!s->done && (tid = tracer_poll(&s->tr, &st)) > 0) {
            handle_event(s, tid, st);
            /* A lone thread, just resumed, has no other stop waiting: its
             * next one comes with a SIGCHLD of its own, so the wait4 that
             * would find nothing is skipped (a stop of a second thread
             * could have shared the SIGCHLD taken before this one). */
            if (s->tr.n == 1 && s->tr.n_foreign == 0 && !s->tr.threads[0].stopped &&
                !s->tr.threads[0].has_event)
                break;
            if (++handled >= EVENTS_PER_TURN || turn_clock_ms() >= turn_end) {
                more = true;
                break;
            }
        }
        if (s->done || s->tr.leader_exited || (tid < 0 && errno == ECHILD))
            break;
        siginfo_t info;
        struct timespec ts = {POLL_MS / 1000, (POLL_MS % 1000) * 1000000L};
        if (more)
            ts = (struct timespec){0, 0};
        int sig = ferror(s->out) ? SIGPIPE : sigtimedwait(&wait_set, &info, &ts);
        if (sig == SIGPIPE && (ferror(s->out) || info.si_pid == getpid())) {
            fprintf(stderr, "pyscope: cannot write the report%s; stopped watching\n",
                    o->out_is_file ? "" : " (standard output closed)");
            status = PYSCOPE_ERR_OTHER;
            break;
        }
        if (sig > 0 && sig != SIGCHLD) {
            stop_signal = sig;
            stop_from_kill = info.si_code == SI_USER;
            if (watch_guard_gone()) {
                /* Not the program's business: it runs on, as it would have. */
                fprintf(stderr, "pyscope: process %d, which started this watch, was killed; "
                                "stopped watching\n", (int)watch_guard_pid());
                stop_from_kill = false;
                program = NULL;
            }
            break;
        }
        /* Looked for again every POLL_MS, also when traps keep coming. */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        turn_start = now.tv_sec * 1000L + now.tv_nsec / 1000000L;
        long since = (now.tv_sec - last_poll.tv_sec) * 1000 +
                     (now.tv_nsec - last_poll.tv_nsec) / 1000000;
        if (since >= POLL_MS && (!all_found(s) || watch_python_wants_more(s))) {
            last_poll = now;
            watch_native_resolve(s);
            watch_python_resolve(s, 0);
            if (!s->awaiting_exec) {
                report_pending(s);
                watch_python_hint(s);
            }
        }
    }
    bool gone = s->tr.leader_exited || s->tr.n == 0;
    finish(s, s->stop && s->hits > 0 && !gone);
    struct ufilter_state fc;
    if (s->verbose && watch_filter_counts(s, &fc) == 0)
        fprintf(stderr, "pyscope: the kernel filter ran at %llu breakpoint hits and stopped the "
                        "thread at %llu: %llu where a watched function was running further "
                        "down, %llu for code not searched yet, %llu where it could not tell, "
                        "%llu while pyscope needed them all\n",
                (unsigned long long)fc.runs,
                (unsigned long long)(fc.stops_again + fc.stops_unseen + fc.stops_undecided +
                                     fc.stops_all),
                (unsigned long long)fc.stops_again, (unsigned long long)fc.stops_unseen,
                (unsigned long long)fc.stops_undecided, (unsigned long long)fc.stops_all);
    if (s->verbose)
        fprintf(stderr, "pyscope: handled %lu C-to-Python entries, %lu watchpoint traps, "
                        "%lu frame-start breakpoints, %lu native entries (%lu unwound), %lu "
                        "candidates confirmed by %lu single steps, %lu steps with the "
                        "breakpoint out\n",
                s->stats.eval_entries, s->stats.dr_traps, s->stats.frame_starts,
                s->stats.native_entries,
                s->stats.unwinds, s->stats.candidates, s->stats.steps,
                s->stats.single_step_windows);
    int never_found = gone ? report_never_found(s) : 0;
    if (never_found)
        ;                          /* said above */
    else if (s->blind)
        fprintf(stderr, "pyscope: nothing was watched; process %d continues\n", (int)s->tr.pid);
    else if (gone)
        fprintf(stderr, "pyscope: process %d exited; %u re-entr%s reported\n", (int)s->tr.pid,
                s->hits, s->hits == 1 ? "y" : "ies");
    else if (s->left_stopped && !wait_group_stopped(s->tr.pid))
        fprintf(stderr, "pyscope: warning: process %d was sent SIGSTOP but not every thread "
                        "has stopped yet; resume it with: kill -CONT %d\n", (int)s->tr.pid,
                (int)s->tr.pid);
    else if (s->left_stopped)
        fprintf(stderr, "pyscope: process %d is left stopped at re-entry #%u, all breakpoints "
                        "removed. Inspect it (gdb -p %d, pyscope dump --locals %d), then resume "
                        "it with: kill -CONT %d\n", (int)s->tr.pid, s->hits, (int)s->tr.pid,
                (int)s->tr.pid, (int)s->tr.pid);
    else
        fprintf(stderr, "pyscope: %u re-entr%s reported; breakpoints removed, process %d "
                        "continues\n", s->hits, s->hits == 1 ? "y" : "ies", (int)s->tr.pid);
    if (program) {
        if (stop_signal && stop_from_kill && !gone)
            kill(s->tr.pid, stop_signal);
        status = wait_for_program(s, &wait_set);
    }
    /* Nothing was watched: that must not read as "no re-entry". */
    if ((never_found || s->blind) && status == 0)
        status = PYSCOPE_ERR_OTHER;
out:
    free_session(s);
    return status;
}
