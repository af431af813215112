/* Off-CPU time of a thread from /proc/PID/task/TID/{sched,stat}. The cost
 * is two small reads per thread, and one CPU migration of our own thread
 * per CPU the targets last ran on. */
#include "target/sched_clock.h"
#include "target/proc_file.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void sched_clock_init(struct sched_clock *c)
{
    memset(c, 0, sizeof *c);
}

static int exec_start_ms(const char *path, double *ms)
{
    char buf[4096];
    if (proc_read_text(path, buf, sizeof buf) != 0)
        return -1;
    const char *at = strstr(buf, "se.exec_start");
    if (!at || !(at = strchr(at, ':')))
        return -1;
    char *end;
    *ms = strtod(at + 1, &end);
    return end == at + 1 ? -1 : 0;
}

/* Field 39 of stat (processor), the state letter, and the thread's age in
 * ms from field 22 (starttime, clock ticks after boot). */
static int last_cpu(pid_t pid, pid_t tid, int *cpu, char *state, double *age_ms)
{
    char path[96], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    if (proc_read_text(path, buf, sizeof buf) != 0)
        return -1;
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return -1;
    p += 2;
    *state = *p;
    /* state is field 3; starttime field 22; processor field 39 */
    unsigned long long start = 0;
    for (int field = 3; field < 39; field++) {
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
        if (field + 1 == 22)
            start = strtoull(p, NULL, 10);
    }
    *cpu = atoi(p);
    struct timespec now;
    long tick = sysconf(_SC_CLK_TCK);
    *age_ms = -1;
    if (tick > 0 && clock_gettime(CLOCK_BOOTTIME, &now) == 0)
        *age_ms = ((double)now.tv_sec + (double)now.tv_nsec / 1e9 - (double)start / (double)tick) *
                  1e3;
    return 0;
}

static double now_on(struct sched_clock *c, int cpu)
{
    if (cpu < 0 || cpu >= SCHED_CLOCK_MAX_CPUS || c->failed[cpu])
        return -1;
    if (c->now_ms[cpu] > 0)
        return c->now_ms[cpu];
    cpu_set_t old, one;
    if (sched_getaffinity(0, sizeof old, &old) != 0)
        return c->failed[cpu] = true, -1;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    double ms = -1;
    if (sched_setaffinity(0, sizeof one, &one) == 0) {
        /* The affinity call returns on the new CPU: our exec_start is now
         * that CPU's clock at the moment we started running there. */
        if (sched_getcpu() != cpu || exec_start_ms("/proc/thread-self/sched", &ms) != 0)
            ms = -1;
        sched_setaffinity(0, sizeof old, &old);
    }
    if (ms <= 0)
        c->failed[cpu] = true;
    else
        c->now_ms[cpu] = ms;
    return ms;
}

double sched_clock_off_cpu_ms(struct sched_clock *c, pid_t pid, pid_t tid)
{
    if (c->unavailable || tid <= 0)
        return -1;
    char path[96];
    double last = 0, again = 0;
    int cpu = -1;
    char state = 0;
    double age_ms = -1;
    snprintf(path, sizeof path, "/proc/%d/task/%d/sched", (int)pid, (int)tid);
    /* exec_start is on the clock of the CPU the thread last ran on, and
     * the CPUs' clocks can be far apart (each leaves out its own interrupt
     * and steal time). A thread that ran between the reading of its
     * exec_start and of its CPU would pair one CPU's clock with the
     * other's: the exec_start read again after the CPU must not have
     * moved. */
    bool paired = false;
    for (int tries = 0; tries < 3 && !paired; tries++) {
        if (exec_start_ms(path, &last) != 0) {
            if (access(path, F_OK) != 0 && access("/proc/thread-self/sched", F_OK) != 0)
                c->unavailable = true;
            return -1;
        }
        if (last_cpu(pid, tid, &cpu, &state, &age_ms) != 0 || state == 'R' ||
            exec_start_ms(path, &again) != 0)
            return -1;
        paired = again == last;
    }
    if (!paired)
        return -1;
    double now = now_on(c, cpu);
    if (now < 0)
        return -1;
    /* Our own clock was read once per CPU, possibly before this thread's:
     * a thread that ran since then shows a few negative milliseconds. */
    double off = now > last ? now - last : 0;
    /* Longer than the thread has lived (a tick of slack, and a second for
     * clocks that jumped, as a paused VM's do): these clocks cannot be
     * compared, and no figure is better than a wrong one. */
    if (age_ms >= 0 && off > age_ms + 1000)
        return -1;
    return off;
}
