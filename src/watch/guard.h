/* watch's guard process (guard.c): the process the user started passes
 * signals on to the tracer, its child, and exits as the tracer does; a
 * kill -9 of it makes the tracer clean up instead of killing the target. */
#ifndef PYSCOPE_WATCH_GUARD_H
#define PYSCOPE_WATCH_GUARD_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* Forks. Returns in the child, the tracer, 0 (-1 without a guard: fork
 * failed, said on stderr); the calling process never returns from it.
 * wait_set (blocked by the caller): the signals the guard passes on, and
 * SIGCHLD. own_group: the tracer leaves the guard's process group (not
 * when it starts a program, which must stay in the terminal's group). */
int watch_guard_start(const sigset_t *wait_set, bool own_group);
/* The signal the tracer receives when the guard dies (to block and wait for). */
int watch_guard_signal(void);
/* The guard's pid (0: none), and whether it is gone. */
pid_t watch_guard_pid(void);
bool watch_guard_gone(void);

#endif
