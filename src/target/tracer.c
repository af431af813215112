/* The ptrace bookkeeping of a traced process: which threads exist, which are
 * stopped, and which stopped with an event nobody has handled yet, so that
 * stopping everything for a look never loses a breakpoint hit or a signal.
 * Every thread it holds is recorded with target/cleanup.c, which lets them
 * go on every way out of pyscope. */
#include "target/tracer.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "target/cleanup.h"
#include "target/process.h"

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* The stop PTRACE_INTERRUPT causes (not a group stop)? */
static bool is_interrupt_stop(int status)
{
    return WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP && WSTOPSIG(status) == SIGTRAP;
}

bool tracer_is_group_stop(int status)
{
    if (!WIFSTOPPED(status) || (status >> 16) != PTRACE_EVENT_STOP)
        return false;
    int sig = WSTOPSIG(status);
    return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

struct tracer_thread *tracer_thread(struct tracer *tr, pid_t tid)
{
    for (int i = 0; i < tr->n; i++)
        if (tr->threads[i].tid == tid)
            return &tr->threads[i];
    return NULL;
}

/* Adds tid (no-op if known); NULL when the table is full. */
static struct tracer_thread *tracer_add(struct tracer *tr, pid_t tid)
{
    struct tracer_thread *th = tracer_thread(tr, tid);
    if (th)
        return th;
    if (!tr->threads) {
        tr->threads = calloc(TRACER_MAX_THREADS, sizeof *tr->threads);
        if (!tr->threads)
            return NULL;
    }
    if (tr->n >= TRACER_MAX_THREADS)
        return NULL;
    th = &tr->threads[tr->n++];
    memset(th, 0, sizeof *th);
    th->tid = tid;
    cleanup_thread_traced(tid);
    return th;
}

static void tracer_remove(struct tracer *tr, pid_t tid)
{
    for (int i = 0; i < tr->n; i++) {
        if (tr->threads[i].tid == tid) {
            tr->threads[i] = tr->threads[--tr->n];
            cleanup_thread_released(tid);
            if (tr->on_gone)
                tr->on_gone(tr->gone_ctx, tid);
            return;
        }
    }
}

/* A stopped task we have not met: one of our threads, or a child process
 * (fork) that the kernel attached for us. */
static pid_t thread_group_of(pid_t tid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    pid_t tgid = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Tgid: %d", &tgid) == 1)
            break;
    fclose(f);
    return tgid;
}

/* Records what a wait status says about tid; returns false when tid is not
 * one of our threads (a forked child stopping: kept aside for the owner). */
static bool note(struct tracer *tr, pid_t tid, int status)
{
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        tracer_remove(tr, tid);
        if (tid == tr->pid) {
            tr->leader_exited = true;
            tr->leader_status = status;
        }
        return true;
    }
    if (!WIFSTOPPED(status))
        return true;
    struct tracer_thread *th = tracer_thread(tr, tid);
    if (!th) {
        if (tid != tr->pid && thread_group_of(tid) != tr->pid)
            return false;
        if (!(th = tracer_add(tr, tid)))
            return true;
        th->fresh = true;
    }
    th->stopped = true;
    if ((status >> 16) == PTRACE_EVENT_CLONE) {
        unsigned long new_tid = 0;
        if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &new_tid) == 0 && new_tid > 0 &&
            !tracer_thread(tr, (pid_t)new_tid)) {
            struct tracer_thread *born = tracer_add(tr, (pid_t)new_tid);
            if (born)
                born->fresh = true;
        }
    }
    return true;
}

static pid_t saved_event(struct tracer *tr, int *status)
{
    for (int i = 0; i < tr->n; i++) {
        struct tracer_thread *th = &tr->threads[i];
        if (th->has_event) {
            th->has_event = false;
            *status = th->event;
            return th->tid;
        }
    }
    return 0;
}

static pid_t next_event(struct tracer *tr, int *status, int flags)
{
    pid_t saved = saved_event(tr, status);
    if (saved)
        return saved;
    for (;;) {
        pid_t tid = waitpid(-1, status, __WALL | flags);
        if (tid <= 0)
            return tid;
        if (note(tr, tid, *status))
            return tid;
        /* A forked child's first stop: the owner asks for it by pid. */
        if (tr->n_foreign < TRACER_MAX_FOREIGN)
            tr->foreign[tr->n_foreign++] = tid;
    }
}

pid_t tracer_wait(struct tracer *tr, int *status)
{
    return next_event(tr, status, 0);
}

pid_t tracer_poll(struct tracer *tr, int *status)
{
    return next_event(tr, status, WNOHANG);
}

int tracer_wait_thread(struct tracer *tr, pid_t tid, int *status, int timeout_ms)
{
    long deadline = now_ms() + timeout_ms;
    for (;;) {
        pid_t got = waitpid(tid, status, timeout_ms < 0 ? __WALL : __WALL | WNOHANG);
        if (got == tid) {
            note(tr, tid, *status);
            return 0;
        }
        if (got < 0 && errno != EINTR) {
            tracer_remove(tr, tid);
            return -1;
        }
        if (timeout_ms >= 0) {
            if (now_ms() > deadline)
                return -1;
            struct timespec pause = {0, 50000};
            nanosleep(&pause, NULL);
        }
    }
}

int tracer_wait_foreign(struct tracer *tr, pid_t pid, int timeout_ms)
{
    for (int i = 0; i < tr->n_foreign; i++) {
        if (tr->foreign[i] == pid) {
            tr->foreign[i] = tr->foreign[--tr->n_foreign];
            return 0;
        }
    }
    long deadline = now_ms() + timeout_ms;
    for (;;) {
        int status;
        pid_t got = waitpid(pid, &status, __WALL | WNOHANG);
        if (got == pid)
            return WIFSTOPPED(status) ? 0 : -1;
        if ((got < 0 && errno != EINTR) || now_ms() > deadline)
            return -1;
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
}

int tracer_cont(struct tracer *tr, pid_t tid, int sig)
{
    struct tracer_thread *th = tracer_thread(tr, tid);
    if (th)
        th->stopped = false;
    return (int)ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig);
}

int tracer_listen(struct tracer *tr, pid_t tid)
{
    struct tracer_thread *th = tracer_thread(tr, tid);
    if (th)
        th->stopped = false;
    return (int)ptrace(PTRACE_LISTEN, tid, NULL, NULL);
}

int tracer_interrupt(struct tracer *tr, pid_t tid)
{
    (void)tr;
    return (int)ptrace(PTRACE_INTERRUPT, tid, NULL, NULL);
}

void tracer_stop_all(struct tracer *tr)
{
    /* New threads can appear while we wait (a clone event of a thread we
     * stop): go round until every known thread is stopped. */
    for (int round = 0; round < 16; round++) {
        int running = 0;
        for (int i = 0; i < tr->n; i++) {
            if (!tr->threads[i].stopped) {
                running++;
                ptrace(PTRACE_INTERRUPT, tr->threads[i].tid, NULL, NULL);
            }
        }
        if (running == 0)
            return;
        for (int i = 0; i < tr->n; i++) {
            struct tracer_thread *th = &tr->threads[i];
            if (th->stopped)
                continue;
            pid_t tid = th->tid;
            int status;
            /* A thread that cannot stop within the time is left as it is:
             * better an incomplete look than a hang. */
            if (tracer_wait_thread(tr, tid, &status, 2000) != 0) {
                if (!tracer_thread(tr, tid))
                    i--;
                continue;
            }
            if (!WIFSTOPPED(status)) {
                i--;                       /* removed: the slot holds another thread now */
                continue;
            }
            th = tracer_thread(tr, tid);
            if (th && !is_interrupt_stop(status)) {
                th->has_event = true;
                th->event = status;
            }
        }
    }
}

void tracer_resume_all(struct tracer *tr, pid_t except)
{
    for (int i = 0; i < tr->n; i++) {
        struct tracer_thread *th = &tr->threads[i];
        if (th->stopped && !th->has_event && th->tid != except)
            tracer_cont(tr, th->tid, 0);
    }
}

/* The signal a saved event would deliver: signal-delivery stops only. */
static int signal_of_event(int status)
{
    if (!WIFSTOPPED(status) || (status >> 16) != 0)
        return 0;
    return WSTOPSIG(status);
}

static bool signal_pending(pid_t pid, pid_t tid, int sig)
{
    char path[96], line[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    unsigned long long mask = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "SigPnd: %llx", &mask) == 1;
    fclose(f);
    return found && sig >= 1 && sig <= 64 && (mask & (1ull << (sig - 1)));
}

void tracer_collect_pending(struct tracer *tr, int sig)
{
    for (int i = 0; i < tr->n; i++) {
        struct tracer_thread *th = &tr->threads[i];
        if (!th->stopped || th->has_event || !signal_pending(tr->pid, th->tid, sig))
            continue;
        pid_t tid = th->tid;
        int status;
        tracer_cont(tr, tid, 0);
        if (tracer_wait_thread(tr, tid, &status, 2000) != 0)
            continue;
        if (!WIFSTOPPED(status)) {
            i--;                           /* it exited: the slot holds another thread */
            continue;
        }
        th = tracer_thread(tr, tid);
        if (th && !is_interrupt_stop(status)) {
            th->has_event = true;
            th->event = status;
        }
    }
}

void tracer_detach_all(struct tracer *tr, bool leave_stopped)
{
    tracer_stop_all(tr);
    if (leave_stopped)
        kill(tr->pid, SIGSTOP);
    while (tr->n > 0) {
        struct tracer_thread *th = &tr->threads[tr->n - 1];
        int sig = th->has_event ? signal_of_event(th->event) : 0;
        ptrace(PTRACE_DETACH, th->tid, NULL, (void *)(long)sig);
        cleanup_thread_released(th->tid);
        tr->n--;
    }
    for (int i = 0; i < tr->n_foreign; i++)
        ptrace(PTRACE_DETACH, tr->foreign[i], NULL, NULL);
    tr->n_foreign = 0;
}

void tracer_free(struct tracer *tr)
{
    /* Threads still in the table are gone with their process. */
    for (int i = 0; i < tr->n; i++)
        cleanup_thread_released(tr->threads[i].tid);
    free(tr->threads);
    tr->threads = NULL;
    tr->n = 0;
}

int tracer_spawn(struct tracer *tr, char *const *argv, const sigset_t *child_mask, long options,
                 struct pyscope_error *err)
{
    memset(tr, 0, sizeof *tr);
    cleanup_install();
    pid_t pid = fork();
    if (pid < 0) {
        error_set(err, PYSCOPE_ERR_OTHER, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, child_mask ? child_mask : &none, NULL);
        /* Wait for the tracer to attach before running anything. */
        raise(SIGSTOP);
        execvp(argv[0], argv);
        fprintf(stderr, "pyscope: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, WUNTRACED) != pid || !WIFSTOPPED(status)) {
        error_set(err, PYSCOPE_ERR_OTHER, "the program did not start");
        return -1;
    }
    if (ptrace(PTRACE_SEIZE, pid, NULL, (void *)options) != 0) {
        error_set(err, PYSCOPE_ERR_OTHER, "cannot trace the program: %s", strerror(errno));
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return -1;
    }
    tr->pid = pid;
    tr->options = options;
    if (!tracer_add(tr, pid)) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        kill(pid, SIGKILL);
        return -1;
    }
    kill(pid, SIGCONT);
    return 0;
}

/* Is tid traced by pyscope already (a thread a seized one started, which
 * TRACECLONE attached before its clone event was waited for)? */
static bool traced_by_us(pid_t pid, pid_t tid)
{
    char state;
    pid_t tracer = 0;
    return process_thread_stopped(pid, tid, &state, &tracer) == 0 && tracer == getpid();
}

/* Seizes the threads of pid not in the table yet. The number seized, or -1
 * with err set (NO_PROCESS when the process is gone before any was). */
static int seize_new(struct tracer *tr, pid_t *tids, const char *verb, struct pyscope_error *err)
{
    int n = process_list_tids(tr->pid, tids, TRACER_MAX_THREADS);
    if (n <= 0) {
        if (tr->n == 0) {
            error_set(err, PYSCOPE_ERR_NO_PROCESS, "no process %d", (int)tr->pid);
            return -1;
        }
        return 0;
    }
    int added = 0;
    for (int i = 0; i < n; i++) {
        if (tracer_thread(tr, tids[i]))
            continue;
        if (ptrace(PTRACE_SEIZE, tids[i], NULL, (void *)tr->options) != 0) {
            if (errno == ESRCH)
                continue;
            if (errno == EPERM && traced_by_us(tr->pid, tids[i])) {
                if (tracer_add(tr, tids[i]))
                    added++;
                continue;
            }
            error_set(err, errno == EPERM ? PYSCOPE_ERR_PERMISSION : PYSCOPE_ERR_OTHER,
                      "cannot %s thread %d of process %d: %s%s", verb, (int)tids[i],
                      (int)tr->pid, strerror(errno),
                      errno == EPERM ? " (is a debugger attached?)" : "");
            return -1;
        }
        if (!tracer_add(tr, tids[i])) {
            ptrace(PTRACE_DETACH, tids[i], NULL, NULL);   /* the table is full */
            break;
        }
        added++;
    }
    return added;
}

int tracer_attach(struct tracer *tr, pid_t pid, long options, struct pyscope_error *err)
{
    memset(tr, 0, sizeof *tr);
    tr->pid = pid;
    tr->options = options;
    cleanup_install();
    pid_t *tids = malloc(sizeof *tids * TRACER_MAX_THREADS);
    if (!tids) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        return -1;
    }
    /* Threads may start while we seize: repeat until a pass finds none new
     * (a thread started by a seized one is attached by TRACECLONE). */
    for (int round = 0; round < 8; round++) {
        int added = seize_new(tr, tids, "trace", err);
        if (added < 0) {
            tracer_detach_all(tr, false);
            free(tids);
            return -1;
        }
        if (added == 0)
            break;
    }
    free(tids);
    return 0;
}

int tracer_pause(struct tracer *tr, pid_t pid, struct pyscope_error *err)
{
    memset(tr, 0, sizeof *tr);
    tr->pid = pid;
    cleanup_install();
    static bool at_exit;
    if (!at_exit && atexit(cleanup_run) == 0)
        at_exit = true;
    pid_t *tids = malloc(sizeof *tids * TRACER_MAX_THREADS);
    if (!tids) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        return -1;
    }
    /* Without TRACECLONE (a snapshot follows no thread): the threads are
     * stopped as they are seized, and the list is read again until a pass
     * finds none new, which stopped threads can no longer start. */
    for (int round = 0; round < 8; round++) {
        int added = seize_new(tr, tids, "pause", err);
        if (added < 0) {
            tracer_release(tr);
            free(tids);
            return -1;
        }
        if (added == 0)
            break;
        tracer_stop_all(tr);
    }
    free(tids);
    return 0;
}

void tracer_release(struct tracer *tr)
{
    if (tr->n > 0)
        tracer_detach_all(tr, false);
    tracer_free(tr);
}
