/* Helpers the profile writers share so that every format filters, labels and
 * times a profile the same way. Internal to src/output/. */
#ifndef PYSCOPE_OUTPUT_PROFILE_COMMON_H
#define PYSCOPE_OUTPUT_PROFILE_COMMON_H

#include <stdbool.h>
#include <stdio.h>

#include "output/profile_writers.h"
#include "profile/profile.h"

/* Fits "process 4194304 thread 4194304 \"<63 bytes>\"". */
#define THREAD_LABEL_MAX 128

/* Whether samples in this state survive --idle / --gil (o may be NULL). */
bool profile_state_kept(const struct profile_write_options *o, enum profile_state state);

/* Whether the threads come from more than one process. */
bool profile_several_pids(const struct profile *p);
/* The rate one process was sampled at, from its first to its last pass. */
double profile_process_rate_hz(const struct profile_process *pr);

/* "thread 4250 \"worker-2\"", or "thread 4250" when the thread has no name. */
void thread_label(char buf[THREAD_LABEL_MAX], const struct profile_thread *t);
/* "process 17" */
void process_label(char buf[THREAD_LABEL_MAX], pid_t pid);
/* The name a per-thread view (a speedscope profile, a summary row) goes by:
 * the thread label, after the process label when there are several pids. */
void thread_view_name(char buf[THREAD_LABEL_MAX], const struct profile *p,
                      const struct profile_thread *t);

/* "function (file:line)" like py-spy's raw output; "(file)" when the line is
 * unknown, the bare function for a synthetic frame or one without a file. NULL when out of memory. */
char *frame_label(const struct profile_frame *f);

/* A distinct stack (with its thread under --threads) and its samples. */
struct folded_line {
    uint32_t thread;          /* UINT32_MAX when threads are not told apart */
    uint32_t stack;
    uint64_t samples;
};

/* The kept samples folded into one line per stack (per thread and stack
 * under thread_roots), in no particular order; the caller frees *lines.
 * 0, or -1 out of memory. */
int profile_fold(const struct profile *p, const struct profile_write_options *o,
                 struct folded_line **lines, size_t *n);

/* Nanoseconds between sampling passes: from the requested rate, or the mean
 * measured interval when the rate was "as fast as possible"; 0 when unknown. */
double profile_period_ns(const struct profile *p);

/* Rounds to two decimals, for percentages in JSON: the float noise past them
 * only makes files harder to read and to compare. */
double round_2dp(double v);

#endif
