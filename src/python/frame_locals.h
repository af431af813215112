/* The arguments and local variables of one Python frame: names from the code
 * object, values from the frame's fast-locals array (f_localsplus <=3.10,
 * _PyInterpreterFrame.localsplus 3.11+), cells dereferenced. */
#ifndef PYSCOPE_PYTHON_FRAME_LOCALS_H
#define PYSCOPE_PYTHON_FRAME_LOCALS_H

#include <stdbool.h>
#include <stdint.h>
#include "python/objects.h"

#define FRAME_LOCALS_MAX 1024

enum frame_local_kind {
    FRAME_LOCAL_ARG,
    FRAME_LOCAL_VAR,
    FRAME_LOCAL_CELL,     /* a local captured by an inner function */
    FRAME_LOCAL_FREE,     /* a variable of an enclosing function */
};

struct frame_local {
    char name[128];
    enum frame_local_kind kind;
    uint64_t obj;         /* the object, 0 when unbound or a tagged int */
    bool tagged_int;      /* 3.14+: a small int stored in the reference itself */
    int64_t int_value;
};

/* Fills out with up to max bound variables of the frame (unbound ones are
 * left out); returns how many, or -1 when the code object's names cannot be
 * read. frame_addr and code_addr are as struct py_frame holds them. */
int frame_locals_read(struct py_reader *r, uint64_t frame_addr, uint64_t code_addr,
                      struct frame_local *out, int max);

/* The value bound to name in the frame: 0 and *local, or -1. */
int frame_locals_find(struct py_reader *r, uint64_t frame_addr, uint64_t code_addr,
                      const char *name, struct frame_local *local);

const char *frame_locals_kind_name(enum frame_local_kind kind);

#endif
