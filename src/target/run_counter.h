/* A cheaper source for run_clock, where BPF may be used (root, or
 * CAP_BPF with CAP_PERFMON): the kernel counts, for each thread group put
 * in a map, every time one of its threads is charged CPU time (each tick
 * it runs through, each switch out, its exit), so "the count did not
 * move" means none of them ran. The process CPU clock answers the same
 * question by summing the group's threads, each one's task cold in the
 * cache at every look on this VM. The program runs at every such
 * charge on the host, watched or not: a map lookup. */
#ifndef PYSCOPE_TARGET_RUN_COUNTER_H
#define PYSCOPE_TARGET_RUN_COUNTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Loads and attaches the program (once per process): 0, or -1 with the
 * reason in why. Everything goes away with run_counter_stop or at exit. */
int run_counter_start(char *why, size_t why_size);
bool run_counter_on(void);
void run_counter_stop(void);

/* Thread groups counted at once; more are looked at through their CPU clocks. */
#define RUN_COUNTER_SLOTS 4096

/* Counts tgid's threads from now on, from zero, in the slot returned, or
 * -1 (no slot free, or the map refused). */
int run_counter_watch(pid_t tgid);
uint64_t run_counter_count(int slot);
void run_counter_unwatch(pid_t tgid, int slot);

#endif
