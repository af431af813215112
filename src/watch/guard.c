/* watch in two processes, so that a kill -9 of pyscope cannot kill the
 * target: the process the user started stays as a guard that only passes
 * signals on and exits as the tracer does; its child is the tracer. When the
 * guard dies, even by SIGKILL, the kernel tells the tracer (PR_SET_PDEATHSIG),
 * which then stops watching and lets the target go as on any other signal. */
#include "watch/guard.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target/cleanup.h"

static pid_t guard_pid;

int watch_guard_signal(void)
{
    /* Used by nothing else in pyscope, and waited for (blocked) by the
     * tracer, so that it comes even if it was ignored at start. */
    return SIGRTMAX;
}

/* The guard: passes signals on to the tracer and ends as it ends. */
static void guard(pid_t tracer, const sigset_t *wait_set, bool own_group)
{
    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(wait_set, &info);
        if (sig < 0)
            continue;
        if (sig != SIGCHLD) {
            /* In one process group with the tracer, a terminal's signal
             * reached it too; only one sent to the guard alone is passed. */
            if (own_group || info.si_code <= 0)
                kill(tracer, sig);
            continue;
        }
        int status;
        pid_t got = waitpid(tracer, &status, WNOHANG);
        if (got != tracer || !(WIFEXITED(status) || WIFSIGNALED(status)))
            continue;
        if (WIFEXITED(status))
            _exit(WEXITSTATUS(status));
        /* Dies of the tracer's signal, as pyscope would have. */
        cleanup_die_of(WTERMSIG(status));
        _exit(128 + WTERMSIG(status));
    }
}

int watch_guard_start(const sigset_t *wait_set, bool own_group)
{
    fflush(NULL);
    pid_t first = getpid();
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "pyscope: note: cannot start the tracer process (%s): a kill -9 of "
                        "pyscope would now leave the target as the README says\n",
                strerror(errno));
        return -1;
    }
    if (child > 0)
        guard(child, wait_set, own_group);
    /* The tracer. Its own process group keeps a kill -9 of pyscope's group
     * (timeout -s KILL, kill -9 -PGID) from reaching it; a program it starts
     * must stay in the terminal's group, so then it does not move. */
    if (own_group) {
        setpgid(0, 0);
        /* Out of the terminal's foreground group, writing to it under
         * `stty tostop` would stop the tracer, and with it the target. */
        signal(SIGTTOU, SIG_IGN);
    }
    if (prctl(PR_SET_PDEATHSIG, watch_guard_signal()) != 0 || getppid() != first)
        raise(watch_guard_signal());   /* gone already (or not to be told): stop now */
    guard_pid = first;
    return 0;
}

pid_t watch_guard_pid(void)
{
    return guard_pid;
}

bool watch_guard_gone(void)
{
    return guard_pid > 0 && getppid() != guard_pid;
}
