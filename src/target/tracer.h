/* Tracing every thread of one process with ptrace: starting a program under
 * it or seizing a running process, following new threads, stopping all
 * threads for a consistent look and letting them go again. The one thread
 * control of pyscope: `dump --pause` (tracer_pause), `run` and `watch` (and
 * its breakpoints). Every thread it holds is recorded in target/cleanup.c,
 * so that any terminating signal lets the process go unchanged. */
#ifndef PYSCOPE_TARGET_TRACER_H
#define PYSCOPE_TARGET_TRACER_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>
#include "target/process.h"
#include "util/error.h"

#define TRACER_MAX_THREADS PROCESS_MAX_THREADS
#define TRACER_MAX_FOREIGN 64

struct tracer_thread {
    pid_t tid;
    bool stopped;          /* in a ptrace stop that we have waited for */
    bool has_event;        /* ... whose wait status nobody has handled yet */
    int event;             /* that wait status */
    bool fresh;            /* started after the owner last looked at the table */
};

struct tracer {
    pid_t pid;             /* the process (its thread-group leader) */
    long options;          /* PTRACE_O_* given to every thread */
    struct tracer_thread *threads;
    int n;
    bool leader_exited;
    int leader_status;     /* the leader's wait status once it has exited */
    /* Child processes (PTRACE_O_TRACEFORK) whose first stop came before the
     * owner asked for them. */
    pid_t foreign[TRACER_MAX_FOREIGN];
    int n_foreign;
    /* Called whenever a thread leaves the table (it exited, or was found
     * gone while waiting for it), so that the owner can drop what it keeps
     * per thread. */
    void (*on_gone)(void *ctx, pid_t tid);
    void *gone_ctx;
};

/* Forks and runs argv[0] (PATH searched) under ptrace: the child waits for
 * the seize before it execs, so nothing of the program runs untraced. The
 * exec is reported as PTRACE_EVENT_EXEC when options include TRACEEXEC.
 * The program starts with the signal mask child_mask (NULL: none blocked),
 * whatever the caller blocks. Installs the cleanup handlers (a command that
 * takes some terminating signals itself sets its handlers after them). */
int tracer_spawn(struct tracer *tr, char *const *argv, const sigset_t *child_mask, long options,
                 struct pyscope_error *err);

/* Seizes every thread of pid, including threads started meanwhile, and
 * leaves them running. Installs the cleanup handlers (cleanup_install). */
int tracer_attach(struct tracer *tr, pid_t pid, long options, struct pyscope_error *err);

/* Seizes and stops every thread of pid, including threads started
 * meanwhile, for an exact snapshot (dump --pause); tracer_release lets them
 * go. Installs the cleanup handlers, and releases the threads at exit() too.
 * NO_PROCESS when the process is gone. */
int tracer_pause(struct tracer *tr, pid_t pid, struct pyscope_error *err);
/* Detaches from every thread and frees the table; safe to call twice. */
void tracer_release(struct tracer *tr);

struct tracer_thread *tracer_thread(struct tracer *tr, pid_t tid);

/* The next event: a saved one first, else waitpid(-1, __WALL). Returns the
 * tid, with its wait status; -1 with errno EINTR when a signal interrupted
 * the wait, ECHILD when nothing is traced any more. The thread is marked
 * stopped (or removed when it exited; the leader's exit is recorded), new
 * threads are added and marked fresh. */
pid_t tracer_wait(struct tracer *tr, int *status);
/* tracer_wait without blocking: 0 when no event is ready. */
pid_t tracer_poll(struct tracer *tr, int *status);
/* Waits for one thread's next stop, bounded by timeout_ms; the status, or -1. */
int tracer_wait_thread(struct tracer *tr, pid_t tid, int *status, int timeout_ms);

/* Waits (bounded) for the first stop of a child process the kernel attached
 * (PTRACE_EVENT_FORK/VFORK gave its pid). 0 once it is stopped. */
int tracer_wait_foreign(struct tracer *tr, pid_t pid, int timeout_ms);

/* PTRACE_CONT with a signal to deliver (0 for none); clears stopped. */
int tracer_cont(struct tracer *tr, pid_t tid, int sig);
/* PTRACE_LISTEN: stays in a group stop (SIGSTOP, Ctrl-Z) without us. */
int tracer_listen(struct tracer *tr, pid_t tid);
/* PTRACE_INTERRUPT: tid reports a PTRACE_EVENT_STOP soon (for tracer_wait). */
int tracer_interrupt(struct tracer *tr, pid_t tid);

/* Interrupts every running thread and waits until each is stopped. A thread
 * that stops for another reason (a signal, a breakpoint, a new thread)
 * keeps that status as a saved event for tracer_wait. */
void tracer_stop_all(struct tracer *tr);
/* Continues every stopped thread that has no saved event, except one
 * (0: none). */
void tracer_resume_all(struct tracer *tr, pid_t except);

/* Detaches from every thread. Saved signals are delivered on the way out
 * (SIGTRAPs of the owner's breakpoints must be cleared by the owner first);
 * with leave_stopped the process is first sent SIGSTOP so that it stays in
 * a group stop (resumed by SIGCONT). Stops all threads first if needed. */
void tracer_detach_all(struct tracer *tr, bool leave_stopped);

/* Frees the table; threads still in it are taken as gone (their process
 * exited), not detached. */
void tracer_free(struct tracer *tr);

/* For each stopped thread with sig pending (its own pending set, from
 * /proc/PID/task/TID/status) and no saved event: a thread can report
 * PTRACE_INTERRUPT's stop before a signal its last instruction raised (an
 * int3, a watchpoint) is delivered, which is still to come. Lets the
 * signal come (the thread stops again before running any instruction) and
 * keeps that stop as its saved event. */
void tracer_collect_pending(struct tracer *tr, int sig);

/* For a stop status: a group stop (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU)? */
bool tracer_is_group_stop(int status);

#endif
