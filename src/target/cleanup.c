/* The signal-safe undo of pyscope's changes to a target. The tables are
 * fixed arrays written with plain stores, so a handler that interrupts an
 * update sees at worst an entry twice or one entry late; the undo only
 * makes system calls (pwrite, ptrace, waitpid, nanosleep), each bounded. */
#include "target/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "target/process.h"

#ifndef TRAP_PERF
#define TRAP_PERF 6            /* a perf event's sigtrap (Linux 5.13), e.g. hwbreak_open's */
#endif

#define MAX_CODE 512
/* How long the undo waits for one thread to stop, and for all of them. */
#define THREAD_STOP_NS 200000000L
#define TOTAL_STOP_NS 3000000000L

struct code_change {
    int fd;
    uint64_t addr;
    uint8_t original;
};

struct held_thread {
    pid_t tid;
    volatile sig_atomic_t debugregs;
};

static struct code_change code[MAX_CODE];
static volatile sig_atomic_t n_code;
static struct held_thread held[PROCESS_MAX_THREADS];
static volatile sig_atomic_t n_held;
static volatile sig_atomic_t undoing;
/* Open perf events by descriptor number (numbers past the table are rare:
 * they are counted, and the undo then closes every descriptor from the
 * table's end up to the highest seen). */
#define MAX_PERF_FD 65536
static volatile unsigned char perf_open[MAX_PERF_FD];
static volatile sig_atomic_t perf_beyond, perf_highest;

void cleanup_terminating_signals(sigset_t *set)
{
    static const int named[] = {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1,
                                SIGUSR2, SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF,
                                SIGIO, SIGPWR};
    sigemptyset(set);
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        sigaddset(set, named[i]);
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        sigaddset(set, sig);
}

/* The terminating signals ignored when pyscope was started: nohup's SIGHUP,
 * the SIGINT and SIGQUIT of a command that a shell without job control put
 * in the background. Noted before main runs and left ignored for the whole
 * run: taking them over later made what such a signal does depend on when
 * it came (ignored, and lost, during start-up; a stop once the handlers
 * were in). */
static sigset_t ignored_at_start;

__attribute__((constructor)) static void note_ignored_at_start(void)
{
    sigset_t set;
    cleanup_terminating_signals(&set);
    sigemptyset(&ignored_at_start);
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction now;
        if (sigismember(&set, sig) == 1 && sigaction(sig, NULL, &now) == 0 &&
            now.sa_handler == SIG_IGN)
            sigaddset(&ignored_at_start, sig);
    }
}

void cleanup_without_ignored(sigset_t *set)
{
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&ignored_at_start, sig) == 1)
            sigdelset(set, sig);
}

/* ---- the tables ---- */

void cleanup_code_changed(int fd, uint64_t addr, uint8_t original)
{
    for (sig_atomic_t i = 0; i < n_code; i++) {
        if (code[i].addr == addr) {
            code[i].fd = fd;
            code[i].original = original;
            return;
        }
    }
    if (n_code >= MAX_CODE)
        return;
    code[n_code] = (struct code_change){fd, addr, original};
    n_code++;
}

void cleanup_code_restored(uint64_t addr)
{
    for (sig_atomic_t i = 0; i < n_code; i++) {
        if (code[i].addr == addr) {
            code[i] = code[n_code - 1];
            n_code--;
            return;
        }
    }
}

void cleanup_code_forget(int fd)
{
    for (sig_atomic_t i = n_code - 1; i >= 0; i--) {
        if (code[i].fd == fd) {
            code[i] = code[n_code - 1];
            n_code--;
        }
    }
}

void cleanup_perf_opened(int fd)
{
    if (fd < 0)
        return;
    if (fd < MAX_PERF_FD)
        perf_open[fd] = 1;
    else
        perf_beyond = 1;
    if (fd > perf_highest)
        perf_highest = fd;
}

void cleanup_perf_closed(int fd)
{
    if (fd >= 0 && fd < MAX_PERF_FD)
        perf_open[fd] = 0;
}

static struct held_thread *find_held(pid_t tid)
{
    for (sig_atomic_t i = 0; i < n_held; i++)
        if (held[i].tid == tid)
            return &held[i];
    return NULL;
}

void cleanup_thread_traced(pid_t tid)
{
    if (find_held(tid) || n_held >= PROCESS_MAX_THREADS)
        return;
    held[n_held].tid = tid;
    held[n_held].debugregs = 0;
    n_held++;
}

void cleanup_thread_released(pid_t tid)
{
    for (sig_atomic_t i = 0; i < n_held; i++) {
        if (held[i].tid == tid) {
            held[i].tid = held[n_held - 1].tid;
            held[i].debugregs = held[n_held - 1].debugregs;
            n_held--;
            return;
        }
    }
}

void cleanup_debugregs_armed(pid_t tid)
{
    cleanup_thread_traced(tid);
    struct held_thread *h = find_held(tid);
    if (h)
        h->debugregs = 1;
}

void cleanup_debugregs_cleared(pid_t tid)
{
    struct held_thread *h = find_held(tid);
    if (h)
        h->debugregs = 0;
}

/* ---- the undo ---- */

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void nap(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* Waits until tid is in a ptrace stop. *status is its wait status when
 * the stop was reported now (-1 when pyscope had taken it before). False
 * when the thread is gone or did not stop in time. */
static bool wait_stopped(pid_t tid, int *status, long deadline)
{
    *status = -1;
    for (;;) {
        int st;
        pid_t got = waitpid(tid, &st, __WALL | WNOHANG);
        if (got == tid) {
            if (!WIFSTOPPED(st))
                return false;
            *status = st;
            return true;
        }
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0)
            return true;
        if ((got < 0 && errno == ECHILD) || now_ns() > deadline)
            return false;
        nap();
    }
}

/* Is SIGTRAP pending for tid (raised by its last instruction, not yet
 * delivered)? Parsed by hand: no stdio in a signal handler. */
static bool trap_pending(pid_t tid)
{
    char path[48];
    snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[4096];
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return false;
    buf[len] = '\0';
    const char *at = strstr(buf, "SigPnd:");
    if (!at)
        return false;
    at += 7;
    while (*at == ' ' || *at == '\t')
        at++;
    unsigned long long mask = 0;
    for (; (*at >= '0' && *at <= '9') || (*at >= 'a' && *at <= 'f'); at++)
        mask = mask * 16 + (unsigned)(*at <= '9' ? *at - '0' : *at - 'a' + 10);
    return (mask >> (SIGTRAP - 1)) & 1;
}

static bool is_our_code(uint64_t addr)
{
    for (sig_atomic_t i = 0; i < n_code; i++)
        if (code[i].addr == addr)
            return true;
    return false;
}

/* The signal to detach tid with: our breakpoints' SIGTRAPs are dropped
 * (a thread that executed one of our int3s goes back to the instruction),
 * another signal the thread stopped with is delivered. */
static int settle(pid_t tid, int status)
{
    siginfo_t si;
    if (ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) == 0 && si.si_signo == SIGTRAP &&
        (si.si_code == SI_KERNEL || si.si_code == TRAP_HWBKPT || si.si_code == TRAP_TRACE ||
         si.si_code == TRAP_BRKPT || si.si_code == TRAP_PERF)) {
        struct user_regs_struct regs;
        if (si.si_code == SI_KERNEL && ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0 &&
            is_our_code(regs.rip - 1)) {
            regs.rip--;
            ptrace(PTRACE_SETREGS, tid, NULL, &regs);
        }
        return 0;
    }
    if (status != -1 && WIFSTOPPED(status) && (status >> 16) == 0 && WSTOPSIG(status) != SIGTRAP)
        return WSTOPSIG(status);
    return 0;
}

static void release(pid_t tid, long deadline)
{
    int status;
    if (!wait_stopped(tid, &status, deadline))
        return;
    struct held_thread *h = find_held(tid);
    if (h && h->debugregs)
        ptrace(PTRACE_POKEUSER, tid, (void *)offsetof(struct user, u_debugreg[7]), NULL);
    int sig = settle(tid, status);
    if (sig == 0 && trap_pending(tid)) {
        /* Let the trap come: the thread stops again before it runs. */
        ptrace(PTRACE_CONT, tid, NULL, NULL);
        if (wait_stopped(tid, &status, deadline < now_ns() + THREAD_STOP_NS
                                           ? deadline : now_ns() + THREAD_STOP_NS))
            sig = settle(tid, status);
    }
    ptrace(PTRACE_DETACH, tid, NULL, (void *)(long)sig);
}

void cleanup_run(void)
{
    if (undoing)
        return;
    undoing = 1;
    /* Kernel-owned breakpoints first: one left open would send SIGTRAP to a
     * thread after it is let go. */
    for (int fd = 0; fd < MAX_PERF_FD && fd <= perf_highest; fd++) {
        if (perf_open[fd]) {
            close(fd);
            perf_open[fd] = 0;
        }
    }
    if (perf_beyond)
        for (int fd = MAX_PERF_FD; fd <= perf_highest; fd++)
            close(fd);
    /* The code next: running threads stop meeting our int3s at once. */
    for (sig_atomic_t i = 0; i < n_code; i++)
        pwrite(code[i].fd, &code[i].original, 1, (off_t)code[i].addr);
    for (sig_atomic_t i = 0; i < n_held; i++)
        ptrace(PTRACE_INTERRUPT, held[i].tid, NULL, NULL);
    long total = now_ns() + TOTAL_STOP_NS;
    for (sig_atomic_t i = 0; i < n_held; i++) {
        long one = now_ns() + THREAD_STOP_NS;
        release(held[i].tid, one < total ? one : total);
    }
    n_held = 0;
    n_code = 0;
    undoing = 0;
}

static void undo_and_die(int sig)
{
    cleanup_run();
    cleanup_die_of(sig);
}

void cleanup_die_of(int sig)
{
    signal(sig, SIG_DFL);
    sigset_t just;
    sigemptyset(&just);
    sigaddset(&just, sig);
    sigprocmask(SIG_UNBLOCK, &just, NULL);
    raise(sig);
}

void cleanup_install(void)
{
    static bool installed;
    if (installed)
        return;
    installed = true;
    sigset_t set;
    cleanup_terminating_signals(&set);
    cleanup_without_ignored(&set);
    static const int crashes[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof crashes / sizeof crashes[0]; i++)
        sigaddset(&set, crashes[i]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = undo_and_die;
    sigfillset(&sa.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&set, sig) == 1)
            sigaction(sig, &sa, NULL);
}
