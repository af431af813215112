/* run_clock: whether a thread group ran since the last look, from the
 * scheduler's total for the group read through its process CPU clock (one
 * clock_gettime each), or from run_counter's count once that is running. */
#include "target/run_clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "target/proc_file.h"
#include "target/run_counter.h"

/* A zombie's threads never run again: its clock, or its count, would
 * stand still for ever. */
static bool zombie(pid_t pid)
{
    char path[48], buf[160];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (proc_read_text(path, buf, sizeof buf) != 0)
        return true;
    const char *end = strrchr(buf, ')');
    return !end || end[1] != ' ' || end[2] == 'Z' || end[2] == 'X';
}

int run_clock_open(struct run_clock *c, pid_t pid)
{
    memset(c, 0, sizeof *c);
    c->pid = pid;
    /* Only for a process that is there: a count kept for none would stand
     * still. A zombie's clock is readable and would stand still too. */
    bool there = (kill(pid, 0) == 0 || errno == EPERM) && !zombie(pid);
    if (run_counter_on() && there && (c->slot = run_counter_watch(pid)) >= 0) {
        c->counted = true;
        c->open = true;
        return 0;
    }
    if (!there) {
        snprintf(c->why_not, sizeof c->why_not, "gone or a zombie");
        return -1;
    }
    int err = clock_getcpuclockid(pid, &c->clock);
    if (err != 0) {
        snprintf(c->why_not, sizeof c->why_not, "clock_getcpuclockid: %s", strerror(err));
        return -1;
    }
    c->open = true;
    return 0;
}

/* The group's total time on a CPU against the last one. The kernel adds
 * to it at every switch out and every tick a thread runs through, and the
 * time of an exited thread stays in it: a thread that ran at all moves it.
 * A clock that cannot be read (the process was reaped) is not still and
 * forgets its total. */
static bool judge_clock(struct run_clock *c)
{
    struct timespec ts;
    if (clock_gettime(c->clock, &ts) != 0) {
        if (!c->why_not[0])
            snprintf(c->why_not, sizeof c->why_not, "clock_gettime: %s", strerror(errno));
        c->known = false;
        return false;
    }
    uint64_t ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    bool still = c->known && ns == c->last_ns;
    c->last_ns = ns;
    c->known = true;
    return still;
}

/* A look at the count the BPF program keeps: it moved if any thread ran.
 * An exit moves it too (the exiting thread's last switch is charged), and
 * the pass it leads to finds the process gone. */
static bool judge_count(struct run_clock *c)
{
    uint64_t n = run_counter_count(c->slot);
    bool still = c->known && n == c->last_count;
    c->last_count = n;
    c->known = true;
    return still;
}

static bool judge(struct run_clock *c)
{
    return c->counted ? judge_count(c) : judge_clock(c);
}

void run_clock_look_all(struct run_clock *const *cs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!cs[i] || !cs[i]->open)
            continue;
        if (cs[i]->ahead)
            cs[i]->known = false; /* its last look was never used */
        cs[i]->ahead = true;
        cs[i]->ahead_still = judge(cs[i]);
    }
}

bool run_clock_still(struct run_clock *c)
{
    if (!c->open)
        return false;
    if (c->ahead) {
        c->ahead = false;
        return c->ahead_still;
    }
    return judge(c);
}

void run_clock_close(struct run_clock *c)
{
    if (c->open && c->counted)
        run_counter_unwatch(c->pid, c->slot);
    c->open = false;
    c->known = false;
}
