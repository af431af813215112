/* run's engine: a program under ptrace, stopped only for signals; on a crash,
 * every thread's stacks (and optionally a core); with a window, a flight
 * recording of the last seconds, written when it fails. Its status passes
 * through. The command line is cmd/run.c. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "python/collect.h"
#include "elf/elf_image.h"
#include "output/profile_formats.h"
#include "output/dump_writers.h"
#include "report/stack_report.h"
#include "python/runtime.h"
#include "python/uncaught.h"
#include "run/run.h"
#include "sampling/flight.h"
#include "target/cleanup.h"
#include "target/core_write.h"
#include "target/hwbreak.h"
#include "target/kernelbp.h"
#include "target/process.h"
#include "target/signals.h"
#include "target/tracer.h"
#include "util/outfile.h"

static pid_t child_pid;
static volatile sig_atomic_t forwarded_signal;

/* Signals sent to pyscope alone (kill PID) are passed on to the program;
 * those from the terminal already reach it, as it shares our process group.
 * A SIGPIPE of our own write (the kernel sends it as if from ourselves) is
 * not the program's business: the write fails with EPIPE. */
static void forward_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    if (child_pid > 0 && (info->si_code == SI_USER || info->si_code == SI_QUEUE) &&
        info->si_pid != getpid()) {
        kill(child_pid, sig);
        forwarded_signal = sig;
    }
}

/* Every thread is stopped for the report (the crashing one is already);
 * a thread that stops for another reason meanwhile keeps that event for
 * the event loop. */
static void report_crash(struct tracer *tr, pid_t crashing, int sig, const char *core_dir,
                         const char *output, bool json, bool native)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (ptrace(PTRACE_GETSIGINFO, crashing, NULL, &info) != 0)
        info.si_signo = sig;
    tracer_stop_all(tr);

    FILE *out = stderr;
    struct outfile file;
    bool to_file = false;
    struct pyscope_error err = {0};
    if (output && outfile_open(&file, output, OUTFILE_REPLACE, 0666, &err) != 0)
        error_report(&err);
    else if (output)
        to_file = true, out = file.fp;
    struct target *t = process_open(child_pid, &err);
    if (!t) {
        error_report(&err);
        goto done;
    }
    target_cache_enable(t);
    struct py_runtime rt;
    struct py_runtime *rtp = &rt;
    if (py_runtime_find(t, &rt, &err) != 0) {
        fprintf(stderr, "pyscope: no Python stacks: %s\n", err.message);
        rtp = NULL;
    }
    struct stack_report report = {0};
    report.pid = child_pid;
    report.paused = true;
    target_cmdline(t, report.command, sizeof report.command);
    target_exe(t, report.executable, sizeof report.executable);
    snprintf(report.python_version, sizeof report.python_version, "%s", rtp ? rt.version : "?");
    struct collect_request req = {.paused = true, .locals_thread = crashing, .native = native};
    memset(&err, 0, sizeof err);
    if (collect_report(t, rtp, &req, &report, &err) != 0) {
        error_report(&err);
    } else {
        uint64_t addr = (uint64_t)(uintptr_t)info.si_addr;
        collect_set_signal(&report, sig, info.si_code, addr, info.si_pid, crashing);
        if (json)
            stack_report_write_json(out, &report);
        else {
            fprintf(out, "\npyscope: the program received a crash signal; every thread, at that "
                         "moment:\n\n");
            stack_report_write_text(out, &report, false);
        }
        fflush(out);
    }
    stack_report_free(&report);
    if (core_dir) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/core.%d", core_dir, (int)child_pid);
        /* The crashing thread first, as the kernel does. */
        pid_t *order = malloc(sizeof *order * (size_t)(tr->n ? tr->n : 1));
        if (order) {
            int n = 0;
            order[n++] = crashing;
            for (int i = 0; i < tr->n; i++)
                if (tr->threads[i].tid != crashing)
                    order[n++] = tr->threads[i].tid;
            memset(&err, 0, sizeof err);
            if (core_write(t, order, n, &info, path, &err) == 0)
                fprintf(stderr, "pyscope: core written to %s\n", path);
            else
                error_report(&err);
            free(order);
        }
    }
    target_close(t);
done:
    memset(&err, 0, sizeof err);
    if (to_file && outfile_close(&file, &err) != 0)
        error_report(&err);
    /* Let the others go; the signal then ends the process as it would have. */
    tracer_resume_all(tr, crashing);
}

/* ---- the flight recorder (--record-last) ---- */

/* The exception breakpoints of one thread. */
struct armed_thread {
    pid_t tid;
    bool armed;                  /* it has them (or could not get them) */
    int events[HWBREAK_MAX];     /* ... as perf events: their descriptors */
    int n_events;
    bool uprobes;                /* the events are uprobes */
};

struct recorder {
    struct flight flight;
    const struct profile_format *format;
    char path[PATH_MAX];
    int dump_signal;             /* --dump-on, 0 when not given */
    bool failure_recorded;       /* written for a crash, exception or exit: final */
    bool written;                /* written at all (a --dump-on counts) */
    uint64_t breakpoints[HWBREAK_MAX];
    int n_breakpoints;
    bool arming;                 /* addresses known: arm each thread at its next stop */
    bool arm_failed_said;
    bool ptrace_said;            /* said that perf events were refused */
    struct armed_thread *threads;   /* PROCESS_MAX_THREADS */
    int n_threads;
    /* Uprobes whose thread hit them or exited: closed once the program is
     * gone. Closing one waits for the kernel to unregister it (tens of
     * milliseconds and more under load), which at a thread's exit held up
     * the passes of the last moments before the program's own exit. */
    int *deferred;
    int n_deferred, cap_deferred;
};

static struct armed_thread *armed_find(struct recorder *rec, pid_t tid)
{
    for (int i = 0; i < rec->n_threads; i++)
        if (rec->threads[i].tid == tid)
            return &rec->threads[i];
    return NULL;
}

static struct armed_thread *armed_get(struct recorder *rec, pid_t tid)
{
    struct armed_thread *at = armed_find(rec, tid);
    if (at || rec->n_threads >= PROCESS_MAX_THREADS)
        return at;
    at = &rec->threads[rec->n_threads++];
    *at = (struct armed_thread){.tid = tid};
    return at;
}

static void armed_close_events(struct armed_thread *at)
{
    /* kbp_close also forgets a uprobe's descriptor in target/cleanup.c. */
    while (at->n_events > 0)
        kbp_close(at->events[--at->n_events]);
}

/* The tracer's on_gone: a thread that exited takes its events along. */
/* A thread's uprobes kept for closing later (see struct recorder); its
 * debug-register events closed at once (one left open would trap the
 * thread again at the same instruction). */
static void armed_drop_events(struct recorder *rec, struct armed_thread *at)
{
    if (at->uprobes && at->n_events > 0 &&
        rec->n_deferred + at->n_events > rec->cap_deferred) {
        int cap = rec->cap_deferred ? rec->cap_deferred * 2 : 64;
        while (cap < rec->n_deferred + at->n_events)
            cap *= 2;
        int *more = realloc(rec->deferred, sizeof *more * (size_t)cap);
        if (more) {
            rec->deferred = more;
            rec->cap_deferred = cap;
        }
    }
    if (at->uprobes && rec->n_deferred + at->n_events <= rec->cap_deferred) {
        while (at->n_events > 0)
            rec->deferred[rec->n_deferred++] = at->events[--at->n_events];
        return;
    }
    armed_close_events(at);
}

static void armed_gone(void *ctx, pid_t tid)
{
    struct recorder *rec = ctx;
    struct armed_thread *at = armed_find(rec, tid);
    if (!at)
        return;
    armed_drop_events(rec, at);
    *at = rec->threads[--rec->n_threads];
}

/* The entries of the interpreter's uncaught-exception printer, outermost
 * first. Which one a build reaches depends on inlining: pyenv's builds call
 * PyErr_Print, Debian's 3.11 PyErr_PrintEx (PyErr_Print inlined into its
 * caller), Debian's 3.13-3.15 PyErr_Print; all are exported. They are not
 * reached for SystemExit on 3.12+, and on 3.8-3.11 only to exit. */
static int printer_entries(struct py_runtime *rt, uint64_t *addrs)
{
    static const char *const names[] = {"PyErr_Print", "PyErr_PrintEx", "_PyErr_Print"};
    struct elf_image *img = elf_image_open_fd(target_open_file(rt->target, rt->binary));
    if (!img)
        return 0;
    int n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && n < HWBREAK_MAX; i++) {
        uint64_t value;
        if (elf_image_dynamic_symbol(img, names[i], &value, NULL) == 0 && value)
            addrs[n++] = value + rt->binary_bias;
    }
    elf_image_close(img);
    return n;
}

/* The runtime was just found: from now on every thread gets the
 * breakpoints at its next ptrace stop; those running are asked to stop. */
static void recorder_attached(struct recorder *rec, struct tracer *tr)
{
    struct py_runtime *rt = flight_runtime(&rec->flight);
    rec->n_breakpoints = rt ? printer_entries(rt, rec->breakpoints) : 0;
    if (rec->n_breakpoints == 0) {
        fprintf(stderr, "pyscope: warning: PyErr_Print not found in %s: uncaught exceptions will "
                        "be recorded at the exit, without their traceback\n",
                rt ? rt->binary : "the program");
        return;
    }
    rec->arming = true;
    for (int i = 0; i < tr->n; i++) {
        struct armed_thread *at = armed_find(rec, tr->threads[i].tid);
        if (!at || !at->armed)
            tracer_interrupt(tr, tr->threads[i].tid);
    }
}

/* Where debug registers never trap (some hypervisors), a uprobe at the
 * printer's entry: the kernel's breakpoint, which stops the thread with the
 * same SIGTRAP after the first instruction. */
static int uprobe_at(struct recorder *rec, pid_t tid, uint64_t addr)
{
    struct py_runtime *rt = flight_runtime(&rec->flight);
    const struct target_map *map = rt ? target_find_map(rt->target, addr) : NULL;
    if (!map || !map->path || map->path[0] != '/') {
        errno = ENOENT;
        return -1;
    }
    return kbp_uprobe_open(tid, map->path, addr - map->start + map->offset, KBP_TAG_UPROBE);
}

/* Perf events when the kernel allows them: they go when pyscope goes,
 * even by SIGKILL. The debug registers otherwise, which would stay armed
 * in the program after a SIGKILL of pyscope. */
static bool arm_with_events(struct recorder *rec, struct armed_thread *at)
{
    bool uprobes = kbp_debug_registers_trap() == 0;
    at->uprobes = uprobes;
    for (int b = 0; b < rec->n_breakpoints; b++) {
        int fd = uprobes ? uprobe_at(rec, at->tid, rec->breakpoints[b])
                         : hwbreak_open(at->tid, rec->breakpoints[b]);
        if (fd >= 0 && !uprobes)
            cleanup_perf_opened(fd);
        if (fd < 0 && uprobes) {
            int why = errno;
            armed_close_events(at);
            if (!rec->arm_failed_said) {
                rec->arm_failed_said = true;
                fprintf(stderr, "pyscope: warning: this machine's debug registers never trap "
                                "and the kernel refused a uprobe (%s): uncaught exceptions will "
                                "be recorded at the exit, without their traceback\n",
                        strerror(why));
            }
            return true;           /* ptrace's debug registers would not trap either */
        }
        if (fd < 0) {
            int why = errno;
            armed_close_events(at);
            if (!rec->ptrace_said) {
                rec->ptrace_said = true;
                fprintf(stderr, "pyscope: note: perf_event_open refused a breakpoint (%s): using "
                                "ptrace's debug registers, which stay armed if pyscope is killed "
                                "with SIGKILL\n", strerror(why));
            }
            return false;
        }
        at->events[at->n_events++] = fd;
    }
    return true;
}

static void arm_thread(struct recorder *rec, pid_t tid)
{
    struct armed_thread *at = rec->arming ? armed_get(rec, tid) : NULL;
    if (!at || at->armed)
        return;
    at->armed = true;
    if (arm_with_events(rec, at))
        return;
    if (hwbreak_arm(tid, rec->breakpoints, rec->n_breakpoints) != 0 && !rec->arm_failed_said) {
        rec->arm_failed_said = true;
        fprintf(stderr, "pyscope: warning: cannot set breakpoints in thread %d (%s): uncaught "
                        "exceptions will be recorded at the exit, without their traceback\n",
                (int)tid, strerror(errno));
    }
}

static void recorder_exec(struct recorder *rec)
{
    /* A new program image: new addresses, and exec cleared the registers. */
    rec->arming = false;
    rec->n_breakpoints = 0;
    for (int i = 0; i < rec->n_threads; i++) {
        rec->threads[i].armed = false;
        armed_close_events(&rec->threads[i]);
    }
    flight_watch(&rec->flight, child_pid);
}

static void recorder_write(struct recorder *rec, uint64_t end_ns, const char *before_what,
                           bool failure)
{
    if (flight_write(&rec->flight, end_ns, rec->path, rec->format, before_what) == 0)
        rec->written = true;
    if (failure)
        rec->failure_recorded = true;
}

/* The traceback as the failing thread's last stack, the exception on top
 * as a pseudo-frame, so that the recording ends where it was raised. */
static void record_traceback(struct recorder *rec, const struct py_uncaught *u)
{
    struct profile_frame *frames = calloc(u->n_frames + 1, sizeof *frames);
    if (!frames)
        return;
    for (size_t i = 0; i < u->n_frames; i++)
        frames[i] = (struct profile_frame){.function = (char *)u->frames[i].function,
                                           .file = (char *)u->frames[i].file,
                                           .line = u->frames[i].line};
    char top[160];
    snprintf(top, sizeof top, "<uncaught %s>", u->type_name);
    frames[u->n_frames] = (struct profile_frame){.function = top, .file = "<exception>",
                                                 .line = -1, .synthetic = true};
    flight_set_last_stack(&rec->flight, u->tid, frames, u->n_frames + 1, PROFILE_HOLDING_GIL);
    free(frames);
}

/* tid stopped at the entry of the exception printer. */
static void on_breakpoint(struct recorder *rec, pid_t tid)
{
    /* One stop per thread is enough; the resume flag covers a failed disarm. */
    struct armed_thread *at = armed_find(rec, tid);
    if (at && at->n_events > 0) {
        armed_drop_events(rec, at);
    } else if (at && at->uprobes) {
        /* Its uprobes wait to be closed and trap again: the kernel has run
         * the instruction, nothing to step over. */
    } else {
        hwbreak_which(tid);
        hwbreak_disarm(tid);
        hwbreak_step_over(tid);
    }
    struct py_runtime *rt = flight_runtime(&rec->flight);
    if (rec->failure_recorded || !rt)
        return;
    flight_pass_now(&rec->flight);
    uint64_t end = flight_now(&rec->flight);
    struct py_uncaught u;
    char why[256];
    if (py_uncaught_read(rt, tid, &u, why, sizeof why) != 0) {
        fprintf(stderr, "pyscope: thread %d is printing an uncaught exception, but %s\n",
                (int)tid, why);
        return;
    }
    if (!u.system_exit) {
        struct repr_limits limits = REPR_DEFAULT_LIMITS;
        py_uncaught_print(stderr, rt, &u, &limits);
        record_traceback(rec, &u);
        char what[256];
        snprintf(what, sizeof what, "the uncaught %s in thread %d", u.type_name, (int)tid);
        recorder_write(rec, end, what, true);
    }
    py_uncaught_free(&u);
}

static bool is_breakpoint_stop(pid_t tid)
{
    siginfo_t info;
    return ptrace(PTRACE_GETSIGINFO, tid, NULL, &info) == 0 && info.si_signo == SIGTRAP &&
           (info.si_code == HWBREAK_SI_CODE || info.si_code == HWBREAK_PERF_SI_CODE);
}

static void on_exit_status(struct recorder *rec, int status)
{
    if (rec->failure_recorded)
        return;
    char what[128], name[32];
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if (!rec->written)
            fprintf(stderr, "pyscope: the program exited with status 0; no flight recording "
                            "written\n");
        return;
    }
    if (WIFEXITED(status))
        snprintf(what, sizeof what, "the exit with status %d", WEXITSTATUS(status));
    else
        snprintf(what, sizeof what, "the %s that ended the program",
                 signal_name(WTERMSIG(status), name, sizeof name));
    recorder_write(rec, flight_now(&rec->flight), what, true);
}

/* waitpid for any traced thread, taking the recorder's passes while there
 * is no event: SIGCHLD (blocked, so it stays pending) ends each wait. */
static pid_t wait_sampling(struct recorder *rec, struct tracer *tr, int *status)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (;;) {
        uint64_t now = monotonic_ns(), deadline = flight_deadline(&rec->flight);
        if (now >= deadline && flight_tick(&rec->flight, now))
            recorder_attached(rec, tr);
        /* Even when the next tick is due already (an attempt to attach can
         * outlast the pause before the next): the program, stopped at its
         * exec, waits for us. */
        pid_t got = tracer_poll(tr, status);
        if (got != 0)
            return got;
        now = monotonic_ns();
        deadline = flight_deadline(&rec->flight);
        if (now >= deadline)
            continue;
        uint64_t wait_ns = deadline - now;
        if (wait_ns > 1000000000ull)
            wait_ns = 1000000000ull;
        struct timespec ts = {(time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull)};
        sigtimedwait(&chld, NULL, &ts);
    }
}

int run_program(const struct run_options *o)
{
    bool recording = o->window_ns != 0;
    const char *core_dir = o->core_dir, *report_path = o->report_path;
    bool json = o->json, native = o->native;
    int dump_signal = o->dump_signal;
    const struct profile_format *format = o->format;
    /* Every signal that would end pyscope goes to the program instead, so
     * pyscope stays until the program ends; its own crashes undo what it
     * armed (target/cleanup.h). */
    cleanup_install();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigset_t forwarded;
    cleanup_terminating_signals(&forwarded);
    if (dump_signal)
        sigaddset(&forwarded, dump_signal);
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&forwarded, sig) == 1)
            sigaction(sig, &sa, NULL);

    struct recorder *rec = NULL;
    if (recording) {
        rec = calloc(1, sizeof *rec);
        struct flight_options fo = {.window_ns = o->window_ns, .rate_hz = o->rate_hz,
                                    .native = o->record_native,
                                    .native_all = o->record_native_all};
        if (rec)
            rec->threads = calloc(PROCESS_MAX_THREADS, sizeof *rec->threads);
        if (!rec || !rec->threads || flight_init(&rec->flight, &fo) != 0) {
            fprintf(stderr, "pyscope: out of memory\n");
            if (rec)
                free(rec->threads);
            free(rec);
            return PYSCOPE_ERR_OTHER;
        }
        rec->format = format;
        rec->dump_signal = dump_signal;
    }
    /* The recorder's waits end on SIGCHLD, which must stay pending to be
     * seen: blocked here, unblocked again in the program. */
    sigset_t old_mask, chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(recording ? SIG_BLOCK : SIG_SETMASK, recording ? &chld : NULL, &old_mask);
    /* A signal sent to pyscope while the program starts waits, blocked,
     * until there is a program to pass it on to (a handler that ran before
     * child_pid was set would drop it). */
    sigset_t spawning;
    sigprocmask(SIG_BLOCK, &forwarded, &spawning);
    /* The terminal's Ctrl-C is for the program: it decides what to do. */
    struct tracer tr;
    struct pyscope_error err = {0};
    if (tracer_spawn(&tr, o->program, &old_mask, PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC,
                     &err) != 0) {
        sigprocmask(SIG_SETMASK, &spawning, NULL);
        error_report(&err);
        if (rec) {
            flight_free(&rec->flight);
            free(rec->threads);
            free(rec);
        }
        return PYSCOPE_ERR_OTHER;
    }
    child_pid = tr.pid;
    sigprocmask(SIG_SETMASK, &spawning, NULL);
    if (rec) {
        tr.on_gone = armed_gone;
        tr.gone_ctx = rec;
    }
    if (rec) {
        if (o->recording_path)
            snprintf(rec->path, sizeof rec->path, "%s", o->recording_path);
        else
            snprintf(rec->path, sizeof rec->path, "pyscope-%d.%s", (int)child_pid,
                     format->extension);
        flight_watch(&rec->flight, child_pid);
    }

    bool reported = false;
    int exit_status = PYSCOPE_ERR_OTHER;
    for (;;) {
        int status;
        pid_t tid = rec ? wait_sampling(rec, &tr, &status) : tracer_wait(&tr, &status);
        if (tid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            if (tid == child_pid) {
                exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                if (rec)
                    on_exit_status(rec, status);
                break;
            }
            continue;
        }
        if (!WIFSTOPPED(status))
            continue;
        int sig = WSTOPSIG(status);
        int event = status >> 16;
        if (event == PTRACE_EVENT_STOP) {
            /* New threads, and those interrupted to be armed, stop here. */
            if (rec)
                arm_thread(rec, tid);
            /* A group stop (SIGSTOP, Ctrl-Z) must stay a stop: listen
             * instead of resuming. Other event stops just continue. */
            if (tracer_is_group_stop(status))
                tracer_listen(&tr, tid);
            else
                tracer_cont(&tr, tid, 0);
            continue;
        }
        if (event == PTRACE_EVENT_EXEC && rec)
            recorder_exec(rec);
        /* The tracer has noted a new thread (PTRACE_EVENT_CLONE). */
        if (event != 0) {
            tracer_cont(&tr, tid, 0);
            continue;
        }
        /* A signal for the program. */
        if (rec && sig == SIGTRAP && is_breakpoint_stop(tid)) {
            on_breakpoint(rec, tid);
            tracer_cont(&tr, tid, 0);
            continue;
        }
        if (rec && sig == rec->dump_signal) {
            /* Meant for pyscope: written, and not delivered. */
            flight_pass_now(&rec->flight);
            char what[64], name[32];
            snprintf(what, sizeof what, "%s", signal_name(sig, name, sizeof name));
            recorder_write(rec, flight_now(&rec->flight), what, false);
            tracer_cont(&tr, tid, 0);
            continue;
        }
        if (signal_is_crash(sig) && !reported) {
            reported = true;
            bool record = rec && !rec->failure_recorded;
            uint64_t end = 0;
            if (record) {
                flight_pass_now(&rec->flight);
                end = flight_now(&rec->flight);
            }
            report_crash(&tr, tid, sig, core_dir, report_path, json, native);
            if (record) {
                char what[96], name[32];
                snprintf(what, sizeof what, "the %s in thread %d",
                         signal_name(sig, name, sizeof name), (int)tid);
                recorder_write(rec, end, what, true);
            }
        }
        tracer_cont(&tr, tid, sig);
    }
    /* What is left went with the program (tracer_wait's ECHILD). */
    tr.on_gone = NULL;
    tracer_free(&tr);
    if (rec) {
        for (int i = 0; i < rec->n_threads; i++)
            armed_close_events(&rec->threads[i]);
        while (rec->n_deferred > 0)
            kbp_close(rec->deferred[--rec->n_deferred]);
        free(rec->deferred);
        flight_free(&rec->flight);
        free(rec->threads);
        free(rec);
    }
    return exit_status;
}
