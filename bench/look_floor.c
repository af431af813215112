/* The agent's look and nothing else, for bench_agent.py --floor: whether
 * each of the given processes ran, read from its CPU clock the way the
 * agent reads it (target/run_clock.c, all of them at each tick), RATE times
 * a second until killed. Its CPU, measured over the agent's span, is the
 * part of the agent's cost that no change to the agent around the look can
 * remove, on the machine as it is at that moment.
 *
 * On SIGTERM it prints how many looks it made and how many found a
 * process still.
 *
 * usage: look_floor RATE PID... */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "target/run_clock.h"

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: look_floor RATE PID...\n");
        return 2;
    }
    double rate = atof(argv[1]);
    if (!(rate > 0 && rate <= 1000)) {
        fprintf(stderr, "look_floor: RATE must be in (0, 1000]\n");
        return 2;
    }
    size_t n = (size_t)(argc - 2);
    struct run_clock *clocks = calloc(n, sizeof *clocks);
    struct run_clock **each = calloc(n, sizeof *each);
    if (!clocks || !each)
        return 1;
    size_t open = 0;
    for (size_t i = 0; i < n; i++) {
        if (run_clock_open(&clocks[i], (pid_t)atoi(argv[i + 2])) != 0) {
            fprintf(stderr, "look_floor: %s: %s\n", argv[i + 2], clocks[i].why_not);
            continue;
        }
        each[open++] = &clocks[i];
    }
    if (open == 0)
        return 1;
    /* As the agent keeps its ticks: on an absolute schedule, so that a slow
     * look does not shift the rest. */
    long long period = (long long)(1e9 / rate);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    signal(SIGTERM, on_term);
    size_t still = 0, looks = 0;
    while (!stop) {
        run_clock_look_all(each, open);
        for (size_t i = 0; i < open; i++)
            still += run_clock_still(each[i]);
        looks += open;
        long long ns = next.tv_nsec + period;
        next.tv_sec += ns / 1000000000;
        next.tv_nsec = ns % 1000000000;
        while (!stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
            ;
    }
    printf("looks %zu still %zu\n", looks, still);
    for (size_t i = 0; i < open; i++)
        run_clock_close(each[i]);
    free(each);
    free(clocks);
    return 0;
}
