/* Whether any thread of a process has run at all since the last look, from
 * the scheduler's own accounting, which the kernel keeps for every task
 * anyway (taskstats, asked over generic netlink for the whole thread group):
 * how many times its threads were scheduled in, their time on a CPU, their
 * context switches. A process none of whose threads ran is exactly as it
 * was: its Python state cannot have changed. Nothing is added to the
 * target's own scheduling (a perf counter per thread would be: measured
 * here, it cost a context-switching program a quarter of its speed). */
#ifndef PYSCOPE_TARGET_RUN_CLOCK_H
#define PYSCOPE_TARGET_RUN_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct run_clock {
    pid_t pid;
    bool open;
    uint64_t last[4];          /* the thread group's totals at the last look */
    bool counted;              /* looked at through run_counter instead */
    uint64_t last_count;
    int slot;                  /* its run_counter slot */
    bool known;
    /* A look made ahead by run_clock_look_all, for the next run_clock_still. */
    bool ahead, ahead_still;
    char why_not[96];          /* when the kernel's accounting cannot be had */
};

/* 0, or -1 with why_not set (a kernel without taskstats, a network
 * namespace without it): then run_clock_still always says no. Through
 * run_counter when it was started and has room for the process. */
int run_clock_open(struct run_clock *c, pid_t pid);

/* True when no thread of the process has been scheduled in since the
 * previous look, and none on a CPU all along has been charged a tick (at
 * every pass interval of the agent, many ticks long). The first look, and
 * any that cannot ask, say no. Takes the look made ahead, if any; else one
 * request and one reply. */
bool run_clock_still(struct run_clock *c);

/* Looks at n processes at once (one send and one receive per 64 of them,
 * instead of two system calls each), for their next run_clock_still. A look
 * made ahead and never taken is dropped, and the next cannot say still:
 * "still" always spans the time since a look that was used. */
void run_clock_look_all(struct run_clock *const *cs, size_t n);

void run_clock_close(struct run_clock *c);

#endif
