/* How long a thread has been off the CPU, from the scheduler's own record:
 * se.exec_start of /proc/PID/task/TID/sched is the run-queue clock of the
 * CPU it last ran on, at the moment it last ran. That clock differs from
 * one CPU to the next (it leaves out interrupt and steal time), so "now" is
 * read on the same CPU: our own exec_start, after moving there. */
#ifndef PYSCOPE_TARGET_SCHED_CLOCK_H
#define PYSCOPE_TARGET_SCHED_CLOCK_H

#include <stdbool.h>
#include <sys/types.h>

#define SCHED_CLOCK_MAX_CPUS 256

struct sched_clock {
    double now_ms[SCHED_CLOCK_MAX_CPUS];   /* per CPU, 0 when not read yet */
    bool failed[SCHED_CLOCK_MAX_CPUS];
    bool unavailable;                      /* no sched files (kernel without SCHED_DEBUG) */
};

void sched_clock_init(struct sched_clock *c);

/* Milliseconds since the thread last ran, or -1 when the kernel does not
 * say (no sched file, unreadable, or the thread is on a CPU now). */
double sched_clock_off_cpu_ms(struct sched_clock *c, pid_t pid, pid_t tid);

#endif
