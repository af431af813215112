/* pyscope run's engine as the command line sees it: the program, where the
 * crash report and the flight recording go, and one call that runs the
 * program to its end (run.c). */
#ifndef PYSCOPE_RUN_RUN_H
#define PYSCOPE_RUN_RUN_H

#include <stdbool.h>
#include <stdint.h>

struct profile_format;

struct run_options {
    char **program;            /* NULL-terminated argv, PATH searched */
    const char *core_dir;      /* a core DIR/core.PID at a crash, or NULL */
    const char *report_path;   /* the crash report's file, or NULL: stderr */
    bool json, native;         /* the crash report as JSON; with C frames */
    /* The flight recorder: 0 for none, else the window kept. */
    uint64_t window_ns;
    double rate_hz;
    const struct profile_format *format;
    const char *recording_path;   /* NULL: pyscope-PID.EXT */
    int dump_signal;           /* also written at this signal, not delivered; 0: none */
};

/* Runs the program under ptrace until it ends; signals that would end
 * pyscope are passed on to it. Returns its exit status (128+N when signal N
 * killed it), or PYSCOPE_ERR_OTHER when it could not be started. */
int run_program(const struct run_options *opts);

#endif
