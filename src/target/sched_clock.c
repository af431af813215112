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

/* Field 39 of stat (processor) and the state letter. */
static int last_cpu(pid_t pid, pid_t tid, int *cpu, char *state)
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
    /* state is field 3; processor is field 39 */
    for (int field = 3; field < 39; field++) {
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    *cpu = atoi(p);
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
    snprintf(path, sizeof path, "/proc/%d/task/%d/sched", (int)pid, (int)tid);
    /* exec_start is on the clock of the CPU the thread last ran on, and
     * the CPUs' clocks can be far apart (each leaves out its own interrupt
     * and steal time). A thread that ran
     * between the reading of its exec_start and of its CPU would pair one
     * CPU's clock with the other's: the exec_start read again after the CPU
     * must not have moved. */
    bool paired = false;
    for (int tries = 0; tries < 3 && !paired; tries++) {
        if (exec_start_ms(path, &last) != 0) {
            if (access(path, F_OK) != 0 && access("/proc/thread-self/sched", F_OK) != 0)
                c->unavailable = true;
            return -1;
        }
        if (last_cpu(pid, tid, &cpu, &state) != 0 || state == 'R' ||
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
    return now > last ? now - last : 0;
}
