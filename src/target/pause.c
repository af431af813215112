/* ptrace-based pausing. PTRACE_SEIZE + PTRACE_INTERRUPT stops a thread without
 * sending it a signal, and PTRACE_DETACH resumes it; pyscope detaches on every
 * exit path, including every terminating signal (the handlers of
 * target/cleanup.c), because a forgotten stop hangs the user's program. */
#include "target/pause.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target/cleanup.h"
#include "target/process.h"


static pid_t paused[PROCESS_MAX_THREADS];
static volatile sig_atomic_t n_paused;

void process_resume(void)
{
    while (n_paused > 0) {
        pid_t tid = paused[--n_paused];
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        cleanup_thread_released(tid);
    }
}

static bool already_paused(pid_t tid)
{
    for (sig_atomic_t i = 0; i < n_paused; i++)
        if (paused[i] == tid)
            return true;
    return false;
}

static void wait_for_stop(pid_t tid)
{
    /* Until the tracee reports the interrupt stop it may still be leaving
     * its system call, and /proc would describe it as running. The stop
     * comes as soon as the thread is scheduled, which on a loaded machine
     * can take a while: wait up to two seconds (an exiting thread reports
     * its exit instead). Other stops (a signal arriving at the same moment)
     * are re-injected when we detach. */
    for (int tries = 0; tries < 20000; tries++) {
        int status;
        pid_t got = waitpid(tid, &status, __WALL | WNOHANG);
        if (got == tid || (got < 0 && errno != EINTR))
            return;
        usleep(100);
    }
}

int process_pause(pid_t pid, struct pyscope_error *err)
{
    cleanup_install();
    atexit(process_resume);

    pid_t tids[PROCESS_MAX_THREADS];
    /* Threads may start while we seize: repeat until a pass finds none new. */
    for (int round = 0; round < 8; round++) {
        int n = process_list_tids(pid, tids, PROCESS_MAX_THREADS);
        if (n < 0) {
            error_set(err, PYSCOPE_ERR_EXITED, "process %d exited during the dump", (int)pid);
            return -1;
        }
        int added = 0;
        for (int i = 0; i < n && n_paused < PROCESS_MAX_THREADS; i++) {
            if (already_paused(tids[i]))
                continue;
            if (ptrace(PTRACE_SEIZE, tids[i], NULL, NULL) != 0) {
                if (errno == ESRCH)
                    continue;
                if (errno == EPERM) {
                    error_set(err, PYSCOPE_ERR_PERMISSION,
                              "cannot pause thread %d of process %d: %s (is a debugger attached?)",
                              (int)tids[i], (int)pid, strerror(errno));
                    process_resume();
                    return -1;
                }
                continue;
            }
            paused[n_paused++] = tids[i];
            cleanup_thread_traced(tids[i]);
            if (ptrace(PTRACE_INTERRUPT, tids[i], NULL, NULL) == 0)
                wait_for_stop(tids[i]);
            added++;
        }
        if (added == 0)
            return 0;
    }
    return 0;
}
