/* The decisions of the wait analysis that need no reads: what kind of wait
 * a thread's syscall is, and the facts across threads (who holds the GIL,
 * which live thread owns a lock, which one a join waits for, how many wait
 * on the same object). python/waits.c reads the rest: the objects in the
 * frames, the fds, the timeouts. */
#ifndef PYSCOPE_DIAGNOSIS_WAITS_H
#define PYSCOPE_DIAGNOSIS_WAITS_H

#include <stddef.h>

#include "diagnosis/queries.h"
#include "report/stack_report.h"
#include "target/process.h"

/* What must be read to say more about a wait. */
enum wait_probe {
    WAIT_PROBE_NONE = 0,      /* the classification is all there is */
    WAIT_PROBE_FUTEX,         /* a futex: which lock or primitive in the frames */
    WAIT_PROBE_SLEEP,         /* nanosleep: the time asked for */
    WAIT_PROBE_SELECT,        /* select/poll/epoll: the fds and the timeout */
    WAIT_PROBE_FD_IO,         /* I/O on one fd: a socket, a pipe, a file */
};

/* Fills w's kind and syscall from the thread's state and the syscall it is
 * blocked in (w from wait_report_init); returns what to read next. */
enum wait_probe waits_classify(const struct report_thread *th, const struct thread_activity *a,
                               struct report_wait *w);

/* The facts across the first n threads of report, whose waits are
 * analysed: the GIL holder of each GIL wait, a lock's owner (recorded by
 * the lock, else a thread holding it in a `with` block, as q answers), the
 * thread a join waits for, and the waiters of each object. */
void waits_link(struct stack_report *report, size_t n, const struct diagnosis_queries *q);

#endif
