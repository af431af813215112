/* The data a dump shows: per process, per thread, per frame. Commands build
 * it; writers print it as text or JSON. */
#ifndef PYSCOPE_OUTPUT_STACK_REPORT_H
#define PYSCOPE_OUTPUT_STACK_REPORT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "output/wait_report.h"
#include "python/thread_state.h"

struct report_frame {
    char *function;
    char *file;
    int line;                    /* -1: unknown */
};

struct report_thread {
    pid_t tid;                   /* 0: unknown */
    uint64_t thread_id;
    char name[64];               /* "" when not a threading.Thread */
    int64_t interp_id;
    enum thread_run_state state;
    const char *syscall;         /* NULL unless blocked in a syscall */
    bool holds_gil;
    bool gc;
    struct report_frame *frames; /* innermost first */
    size_t n_frames;
    bool complete;
    char error[160];
    struct report_wait *wait;    /* what it waits for; NULL when not analysed */
};

struct stack_report {
    pid_t pid;
    char command[1024];
    char executable[PATH_MAX];
    char python_version[32];
    bool paused;
    bool gc_collecting;
    struct report_thread *threads;
    size_t n_threads;
};

void stack_report_free(struct stack_report *report);
/* The thread holding the GIL in the main interpreter, or NULL. */
const struct report_thread *stack_report_gil_holder(const struct stack_report *report);
const struct report_thread *stack_report_gc_thread(const struct stack_report *report);

/* A frame's file as the text outputs show it: standard-library and
 * installed-package paths from the package root, others unchanged. */
const char *stack_report_short_path(const char *path);

void stack_report_write_text(FILE *out, const struct stack_report *report, bool color);
void stack_report_write_json(FILE *out, const struct stack_report *report);

#endif
