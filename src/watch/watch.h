/* pyscope watch's engine as the command line sees it: what to watch, how to
 * report, and one call that watches until the end (watch.c; the detectors
 * share watch/session.h among themselves). */
#ifndef PYSCOPE_WATCH_WATCH_H
#define PYSCOPE_WATCH_WATCH_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#define WATCH_MAX_FUNCS 16

struct watch_options {
    const char *funcs[WATCH_MAX_FUNCS];   /* --reentry arguments, each watch_func_valid */
    int n_funcs;
    pid_t pid;                 /* a running process, or 0 and: */
    char **program;            /* a program to start (NULL-terminated argv) */
    bool all, stop, json, native_all, locals, exact, verbose;
    unsigned max_hits;
    const char *core_path;     /* a core at each report, or NULL */
    FILE *out;                 /* the reports */
    bool out_is_file;          /* out is --output's file, not stdout */
};

/* Is arg a FUNC watch understands: [py:|native:][FILE:]QUALNAME or a symbol? */
bool watch_func_valid(const char *arg);

/* Watches until the hits are reached, the process exits or a terminating
 * signal arrives, then lets the process go without any breakpoint (or left
 * stopped, with stop). The exit status: the program's with a program,
 * else 0 or an error's. */
int watch_run(const struct watch_options *opts);

#endif
