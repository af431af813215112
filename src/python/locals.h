/* Finding values by name in a Python frame: its local variables, cell and
 * free variables (dereferenced), its value stack and its globals. This is
 * about locating objects (which variable holds this lock?), not about
 * printing them. */
#ifndef PYSCOPE_PYTHON_LOCALS_H
#define PYSCOPE_PYTHON_LOCALS_H

#include <stdbool.h>
#include <stdint.h>
#include "python/objects.h"

/* Named slots plus value-stack slots read per frame; larger frames are cut. */
#define PY_FRAME_MAX_SLOTS 512
#define PY_VAR_NAME_MAX 64
#define PY_VARS_CACHE_SLOTS 256

/* A code object's variable names, read once per code object. */
struct py_code_vars {
    uint64_t addr;
    int n_named;             /* locals, then cell and free variables */
    int stacksize;           /* co_stacksize */
    char (*names)[PY_VAR_NAME_MAX];
    uint8_t *is_cell;        /* 1 when the slot may hold a cell to dereference */
};

struct py_vars_cache {
    struct py_code_vars *slots[PY_VARS_CACHE_SLOTS];
};

struct py_frame_vars {
    const struct py_code_vars *code;
    int n_named;
    int n_stack;             /* value-stack slots in values[] after the named ones */
    bool stack_exact;        /* n_stack is the live depth (else the capacity, may hold stale slots) */
    uint64_t globals;        /* the frame's globals dict; 0 when unknown */
    /* Object addresses: named slots first (cells dereferenced, 0 when
     * unbound), then the value stack bottom-up. Tag bits are removed. */
    uint64_t values[PY_FRAME_MAX_SLOTS];
};

/* Reads the variables of the frame at frame_addr running code_addr (both as
 * struct py_frame gives them). 0, or -1 when unreadable. */
int py_frame_vars_read(struct py_vars_cache *cache, struct py_reader *r, uint64_t frame_addr,
                       uint64_t code_addr, struct py_frame_vars *out);
/* The name of named slot i. */
const char *py_frame_var_name(const struct py_frame_vars *vars, int i);
/* The value of the variable called name; -1 when absent or unbound. */
int py_frame_var_get(const struct py_frame_vars *vars, const char *name, uint64_t *value);

void py_vars_cache_clear(struct py_vars_cache *cache);

#endif
