/* Session control for record and top: starting or attaching, finding Python
 * children, pacing passes on an absolute clock (a late pass is skipped, not
 * made up in a burst), and stopping cleanly however the recording ends. */
#include "sampling/session.h"

#include "native/native_sampler.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "target/process.h"
#include "target/proctree.h"

#define START_TIMEOUT_NS 15000000000ull
#define CHILD_SCAN_NS 200000000ull

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void reap_child(struct session *s, bool block)
{
    if (!s->started_child || s->child_exited)
        return;
    int status;
    pid_t got = waitpid(s->root, &status, block ? 0 : WNOHANG);
    if (got == s->root) {
        s->child_exited = true;
        s->child_status = status;
    }
}

/* Names a newly sampled process after its place in the tree: its depth
 * below the root, and whether it is a forked copy of its parent. */
static void describe_process(struct session *s, struct sampler *sampler)
{
    if (sampler->profile_process >= s->profile->n_processes)
        return;
    struct profile_process *proc = &s->profile->processes[sampler->profile_process];
    int depth = 0;
    pid_t ppid = sampler->pid == s->root ? 0 : proctree_parent(sampler->pid);
    if (ppid) {
        /* Children are only added once their parent is sampled: count the
         * steps up to the root. */
        depth = 1;
        for (pid_t up = ppid; up && up != s->root && depth < 64; up = proctree_parent(up))
            depth++;
    }
    proc->ppid = ppid;
    proctree_role(depth, ppid && proctree_forked(sampler->pid, ppid), proc->role,
                  sizeof proc->role);
    target_cmdline(sampler->target, proc->command, sizeof proc->command);
}

static int enable_native(struct session *s, struct sampler *sampler, struct pyscope_error *err)
{
    char note[PROFILE_NATIVE_NOTE_MAX];
    if (sampler_enable_native(sampler, s->opts.native_mode, s->opts.native_all, s->opts.rate_hz,
                              note, sizeof note, err) != 0)
        return -1;
    struct profile_meta *meta = &s->profile->meta;
    bool ptrace_mode = native_sampler_mode(sampler->native) == NATIVE_PTRACE;
    /* The threads are stopped through the pass: nothing to look at twice. */
    if (ptrace_mode)
        sampler->recheck_running = false;
    if (ptrace_mode && (s->opts.rate_hz <= 0 || s->opts.rate_hz > NATIVE_PTRACE_MAX_HZ)) {
        s->opts.rate_hz = NATIVE_PTRACE_MAX_HZ;
        meta->rate_hz = NATIVE_PTRACE_MAX_HZ;
    }
    if (!meta->native_mode[0]) {
        snprintf(meta->native_mode, sizeof meta->native_mode, "%s",
                 ptrace_mode ? "ptrace" : "perf_event");
        snprintf(meta->native_note, sizeof meta->native_note, "%s", note);
        if (note[0] && !s->opts.quiet_native)
            fprintf(stderr, "pyscope: %s\n", note);
    }
    return 0;
}

static int add_process(struct session *s, pid_t pid, struct pyscope_error *err)
{
    for (int i = 0; i < SESSION_MAX_PROCESSES; i++) {
        if (s->active[i])
            continue;
        if (sampler_open(&s->samplers[i], pid, s->profile, s->start_ns, err) != 0)
            return -1;
        describe_process(s, &s->samplers[i]);
        s->samplers[i].profile_sink.timeline = s->opts.record_timeline;
        if (s->opts.async_tasks && sampler_enable_tasks(&s->samplers[i]) == 0)
            s->samplers[i].tasks_waiting = s->opts.async_waiting;
        /* Re-looking costs up to half a millisecond a pass: worth it at the
         * usual rates, not when sampling flat out. */
        s->samplers[i].recheck_running = s->opts.rate_hz > 0 && s->opts.rate_hz <= 1000;
        /* Likewise re-checking cached code objects on every pass: flat out,
         * the two-second cache lifetime bounds a stale name instead. */
        s->samplers[i].verify_codes = s->opts.rate_hz > 0 && s->opts.rate_hz <= 1000;
        if (s->opts.native_mode != NATIVE_OFF && enable_native(s, &s->samplers[i], err) != 0) {
            sampler_close(&s->samplers[i], s->start_ns);
            return -1;
        }
        s->active[i] = true;
        return 0;
    }
    error_set(err, PYSCOPE_ERR_OTHER, "more than %d processes", SESSION_MAX_PROCESSES);
    return -1;
}

static pid_t start_command(char **argv, struct pyscope_error *err)
{
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        error_set(err, PYSCOPE_ERR_OTHER, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        error_set(err, PYSCOPE_ERR_OTHER, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        close(ready[0]);
        signal(SIGINT, SIG_DFL);
        execvp(argv[0], argv);
        /* Tell the parent why, through the close-on-exec pipe. */
        int e = errno;
        if (write(ready[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    close(ready[1]);
    int e = 0;
    ssize_t n = read(ready[0], &e, sizeof e);
    close(ready[0]);
    if (n == (ssize_t)sizeof e) {
        waitpid(pid, NULL, 0);
        error_set(err, PYSCOPE_ERR_OTHER, "cannot run %s: %s", argv[0], strerror(e));
        return -1;
    }
    return pid;
}

int session_start(struct session *s, pid_t pid, const struct session_options *opts,
                  struct profile *profile, struct pyscope_error *err)
{
    memset(s, 0, sizeof *s);
    s->opts = *opts;
    s->profile = profile;
    s->start_ns = monotonic_ns();
    profile->meta.start_unix_ns = wall_ns();
    profile->meta.rate_hz = opts->rate_hz;
    if (opts->command) {
        pid = start_command(opts->command, err);
        if (pid < 0)
            return -1;
        s->started_child = true;
    }
    s->root = pid;
    /* A started interpreter needs a moment before _PyRuntime exists and its
     * main thread is registered; an attached one is ready at once. */
    for (;;) {
        struct pyscope_error attempt = {0};
        if (add_process(s, pid, &attempt) == 0)
            break;
        reap_child(s, false);
        bool retry = s->started_child && !s->child_exited &&
                     monotonic_ns() - s->start_ns < START_TIMEOUT_NS &&
                     attempt.status != PYSCOPE_ERR_PERMISSION;
        if (!retry) {
            *err = attempt;
            if (s->started_child && s->child_exited)
                error_set(err, PYSCOPE_ERR_EXITED, "%s exited before Python started (%s)",
                          opts->command[0], attempt.message);
            session_finish(s, true);
            return -1;
        }
        usleep(2000);
    }
    profile->meta.pid = pid;
    target_cmdline(s->samplers[0].target, profile->meta.command, sizeof profile->meta.command);
    snprintf(profile->meta.python_version, sizeof profile->meta.python_version, "%s",
             s->samplers[0].rt.version);
    /* Passes are timed from here, once the target is ready. */
    s->start_ns = monotonic_ns();
    for (int i = 0; i < SESSION_MAX_PROCESSES; i++)
        if (s->active[i])
            s->samplers[i].start_ns = s->start_ns;
    return 0;
}

static bool tracked(const struct session *s, pid_t pid)
{
    for (int i = 0; i < SESSION_MAX_PROCESSES; i++)
        if (s->active[i] && s->samplers[i].pid == pid)
            return true;
    for (int i = 0; i < s->n_ignored; i++)
        if (s->ignored[i] == pid)
            return true;
    return false;
}

/* Adds Python processes whose parent is already being sampled. Children of
 * children are found on later scans, once their parent is tracked. */
static void scan_children(struct session *s)
{
    DIR *d = opendir("/proc");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        if (tracked(s, pid))
            continue;
        pid_t parent = proctree_parent(pid);
        bool ours = false;
        for (int i = 0; i < SESSION_MAX_PROCESSES && !ours; i++)
            ours = s->active[i] && s->samplers[i].pid == parent;
        if (!ours)
            continue;
        struct pyscope_error err = {0};
        if (add_process(s, pid, &err) != 0 && err.status == PYSCOPE_ERR_NOT_PYTHON &&
            s->n_ignored < (int)(sizeof s->ignored / sizeof s->ignored[0]))
            s->ignored[s->n_ignored++] = pid;
    }
    closedir(d);
}

static void sleep_until(uint64_t deadline_ns)
{
    struct timespec ts = {(time_t)(deadline_ns / 1000000000ull),
                          (long)(deadline_ns % 1000000000ull)};
    /* Interrupted by a signal: return, so the caller looks at its stop flag. */
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

/* The sampled process exec'd: its layout, runtime and perhaps its Python
 * version are new, so it is opened again as a new image and sampled on into
 * the same profile, or its recording ends with the reason. 0 when followed. */
static int follow_exec(struct session *s, pid_t pid)
{
    char exe[256] = "?";
    process_exe(pid, exe, sizeof exe);
    struct pyscope_error err = {0};
    /* process_open waits out the loader; a runtime whose libpython is not
     * mapped yet (or not at all) takes a few more looks. */
    uint64_t started = monotonic_ns();
    int rc;
    while ((rc = add_process(s, pid, &err)) != 0 && err.status != PYSCOPE_ERR_PERMISSION &&
           !process_gone(pid) &&
           monotonic_ns() - started < (err.status == PYSCOPE_ERR_NOT_PYTHON ? 200000000ull
                                                                             : 2000000000ull)) {
        memset(&err, 0, sizeof err);
        usleep(5000);
    }
    process_exe(pid, exe, sizeof exe);
    if (rc == 0) {
        for (int i = 0; i < SESSION_MAX_PROCESSES; i++)
            if (s->active[i] && s->samplers[i].pid == pid)
                fprintf(stderr, "pyscope: process %d exec'd %s (Python %s): following the new "
                        "program\n", (int)pid, exe, s->samplers[i].rt.version);
        return 0;
    }
    if (process_gone(pid))
        return -1;
    if (err.status == PYSCOPE_ERR_NOT_PYTHON)
        fprintf(stderr, "pyscope: process %d exec'd %s: its recording ends here (the new program "
                "is not Python)\n", (int)pid, exe);
    else
        fprintf(stderr, "pyscope: process %d exec'd %s: its recording ends here (%s)\n",
                (int)pid, exe, err.message[0] ? err.message : "it could not be read");
    return -1;
}

void session_run(struct session *s, volatile int *stop,
                 void (*on_tick)(struct session *s, void *ctx), void *ctx)
{
    uint64_t interval = s->opts.rate_hz > 0 ? (uint64_t)(1e9 / s->opts.rate_hz) : 0;
    uint64_t duration = s->opts.duration_s > 0 ? (uint64_t)(s->opts.duration_s * 1e9) : 0;
    uint64_t next = s->start_ns, last_tick = s->start_ns;
    /* The kernel may run a sleeper's timer up to its slack late, with
     * whatever other timer fires then, a target thread's among them: a
     * wake-up on time is not tied to theirs. Children were started before
     * this, so they keep the default. */
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
    for (;;) {
        if (stop && *stop)
            break;
        uint64_t now = monotonic_ns();
        if (duration && now - s->start_ns >= duration)
            break;
        int alive = 0;
        for (int i = 0; i < SESSION_MAX_PROCESSES; i++) {
            if (!s->active[i])
                continue;
            if (sampler_pass(&s->samplers[i], now) != 0) {
                bool exec_seen = s->samplers[i].exec_seen;
                pid_t pid = s->samplers[i].pid;
                s->fds_exhausted |= s->samplers[i].fds_exhausted;
                sampler_close(&s->samplers[i], now);
                s->active[i] = false;
                if (!exec_seen || follow_exec(s, pid) != 0)
                    continue;
            }
            alive++;
        }
        reap_child(s, false);
        if (s->opts.subprocesses && now - s->last_scan_ns > CHILD_SCAN_NS) {
            scan_children(s);
            s->last_scan_ns = now;
            for (int i = 0; i < SESSION_MAX_PROCESSES; i++)
                alive += s->active[i] && s->samplers[i].pid != s->root;
        }
        if (alive == 0)
            break;
        bool redraw = s->redraw_request && *s->redraw_request;
        if (on_tick && (now - last_tick >= 1000000000ull || redraw)) {
            s->redraw_only = now - last_tick < 1000000000ull;
            if (s->redraw_request)
                *s->redraw_request = 0;
            on_tick(s, ctx);
            if (!s->redraw_only)
                last_tick = now;
        }
        if (interval) {
            next += interval;
            now = monotonic_ns();
            if (next + interval < now)
                next = now; /* fell behind: skip rather than burst */
            else
                sleep_until(next);
        }
    }
    if (slack > 0)
        prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
}

void session_stop(struct session *s)
{
    if (s->stopped)
        return;
    s->stopped = true;
    uint64_t now = monotonic_ns();
    for (int i = 0; i < SESSION_MAX_PROCESSES; i++) {
        if (s->active[i]) {
            s->fds_exhausted |= s->samplers[i].fds_exhausted;
            sampler_close(&s->samplers[i], now);
            s->active[i] = false;
        }
    }
    if (s->profile && now > s->start_ns)
        s->profile->meta.duration_ns = now - s->start_ns;
}

void session_wait_command(struct session *s, volatile sig_atomic_t *forward)
{
    while (s->started_child && !s->child_exited) {
        if (forward && *forward) {
            int sig = *forward;
            *forward = 0;
            kill(s->root, sig);
        }
        int status;
        pid_t got = waitpid(s->root, &status, 0);
        if (got == s->root) {
            s->child_exited = true;
            s->child_status = status;
        } else if (got < 0 && errno != EINTR) {
            break; /* not ours to wait for any more */
        }
    }
}

void session_finish(struct session *s, bool kill_child)
{
    session_stop(s);
    if (s->started_child && !s->child_exited && kill_child)
        kill(s->root, SIGTERM);
    session_wait_command(s, NULL);
}

int session_exit_status(const struct session *s)
{
    if (!s->started_child || !s->child_exited)
        return 0;
    if (WIFEXITED(s->child_status))
        return WEXITSTATUS(s->child_status);
    if (WIFSIGNALED(s->child_status))
        return 128 + WTERMSIG(s->child_status);
    return 1;
}

struct target *session_target(struct session *s, pid_t pid)
{
    for (int i = 0; i < SESSION_MAX_PROCESSES; i++)
        if (s->active[i] && s->samplers[i].pid == pid)
            return s->samplers[i].target;
    return NULL;
}
