/* The exception a thread is about to report as uncaught: read from its
 * thread state (curexc_* on 3.8-3.11, current_exception on 3.12+) while the
 * thread is stopped at the entry of the interpreter's printing function, with
 * the frames of its traceback and, when printed, their locals. */
#ifndef PYSCOPE_PYTHON_UNCAUGHT_H
#define PYSCOPE_PYTHON_UNCAUGHT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "python/object_repr.h"
#include "python/runtime.h"

#define PY_TRACEBACK_MAX 4096

struct py_tb_frame {
    char function[256];       /* qualified name on 3.11+ */
    char file[512];
    int line;                 /* -1 when unknown */
    uint64_t frame_addr;      /* as struct py_frame holds it: for reading locals */
    uint64_t code_addr;
};

struct py_uncaught {
    pid_t tid;
    char thread_name[64];
    char type_name[128];      /* "ValueError", "mypkg.Error" */
    char message[512];        /* str() of it, as far as pyscope can tell */
    bool system_exit;         /* SystemExit: an exit, not an error */
    struct py_tb_frame *frames;   /* outermost first, as Python prints them */
    size_t n_frames;
    bool truncated;           /* more than PY_TRACEBACK_MAX frames, or a broken link */
};

/* Reads the exception pending in thread tid of rt's target. Returns 0, or
 * -1 with why (a sentence) when there is none or it cannot be read. */
int py_uncaught_read(struct py_runtime *rt, pid_t tid, struct py_uncaught *out,
                     char *why, size_t whysize);

/* Prints it the way Python will, innermost frame last, with every frame's
 * locals (read now: the thread must still be stopped). */
void py_uncaught_print(FILE *out, struct py_runtime *rt, const struct py_uncaught *u,
                       const struct repr_limits *limits);

void py_uncaught_free(struct py_uncaught *u);

#endif
