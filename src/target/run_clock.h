/* Whether any thread of a process has run at all since the last look, from
 * the scheduler's own accounting, which the kernel keeps for every task
 * anyway: the thread group's CPU clock (clock_getcpuclockid), the time its
 * threads, live and exited, have been charged on a CPU. The kernel charges
 * a thread when it is switched out and at every tick it runs through (4 ms
 * at HZ 250), so a clock that did not move means that no thread ran since
 * one tick before the last look; the process is then exactly as it was
 * then, and its Python state cannot have changed. Nothing is added to the
 * target's own scheduling (a perf counter per thread would be: measured
 * here, it cost a context-switching program a quarter of its speed), and
 * no permission is needed beyond seeing the process. */
#ifndef PYSCOPE_TARGET_RUN_CLOCK_H
#define PYSCOPE_TARGET_RUN_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct run_clock {
    pid_t pid;
    bool open;
    clockid_t clock;           /* the process's CPU clock */
    uint64_t last_ns;          /* its reading at the last look */
    bool counted;              /* looked at through run_counter instead */
    uint64_t last_count;
    int slot;                  /* its run_counter slot */
    bool known;
    /* A look made ahead by run_clock_look_all, for the next run_clock_still. */
    bool ahead, ahead_still;
    char why_not[96];          /* when the kernel's accounting cannot be had */
};

/* 0, or -1 with why_not set (the process is gone or a zombie, whose clock
 * would stand still for ever): then run_clock_still always says no.
 * Through run_counter when it was started and has room for the process. */
int run_clock_open(struct run_clock *c, pid_t pid);

/* True when the clock (or the count) has not moved since the previous look:
 * no thread of the process ran from one tick before that look until one
 * tick before this one. The first look, and any that cannot read, say no.
 * Takes the look made ahead, if any; else reads now. */
bool run_clock_still(struct run_clock *c);

/* Looks at n processes one after the other, for their next run_clock_still
 * (so that each pass is compared with a look made just before the tick's
 * reads began). A look made ahead and never taken is dropped, and the next
 * cannot say still: "still" always spans the time since a look that was
 * used. */
void run_clock_look_all(struct run_clock *const *cs, size_t n);

void run_clock_close(struct run_clock *c);

#endif
