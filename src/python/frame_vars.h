/* The one reader of a Python frame's variables. why's searches use it to
 * locate objects (which variable holds this lock?): every slot, cells
 * dereferenced, the value stack and the globals. --locals, --print and run's
 * uncaught traceback use it to show the bound arguments and locals. */
#ifndef PYSCOPE_PYTHON_FRAME_VARS_H
#define PYSCOPE_PYTHON_FRAME_VARS_H

#include <stdbool.h>
#include <stdint.h>
#include "python/objects.h"

/* Named slots plus value-stack slots read per frame; larger frames are cut. */
#define PY_FRAME_MAX_SLOTS 1024
#define PY_VAR_NAME_MAX 128
#define PY_VARS_CACHE_SLOTS 256

enum frame_local_kind {
    FRAME_LOCAL_ARG,
    FRAME_LOCAL_VAR,
    FRAME_LOCAL_CELL,     /* a local captured by an inner function */
    FRAME_LOCAL_FREE,     /* a variable of an enclosing function */
    FRAME_LOCAL_HIDDEN,   /* 3.12+: an inlined comprehension's slot, never shown */
};

/* A code object's variable names, read once per code object. */
struct py_code_vars {
    uint64_t addr;
    int n_named;             /* locals, then cell and free variables */
    int stacksize;           /* co_stacksize */
    char (*names)[PY_VAR_NAME_MAX];
    uint8_t *is_cell;        /* 1 when the slot may hold a cell to dereference */
    uint8_t *kind;           /* enum frame_local_kind of each slot */
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
    /* 3.14+: a named slot holding a small int in the reference itself
     * (values[i] is then 0). */
    bool is_tagged_int[PY_FRAME_MAX_SLOTS];
    int64_t tagged_int[PY_FRAME_MAX_SLOTS];
    /* 3.14+: the slot holds a reference it does not own (a borrowed one),
     * which the object's reference count does not include. */
    bool uncounted[PY_FRAME_MAX_SLOTS];
};

/* Reads the variables of the frame at frame_addr running code_addr (both as
 * struct py_frame gives them). 0, or -1 when unreadable. */
int py_frame_vars_read(struct py_vars_cache *cache, struct py_reader *r, uint64_t frame_addr,
                       uint64_t code_addr, struct py_frame_vars *out);
/* The object a value-stack or local slot's bits refer to (0: none). */
uint64_t py_stackref_object(const struct py_reader *r, uint64_t bits);
/* The name of named slot i. */
const char *py_frame_var_name(const struct py_frame_vars *vars, int i);
/* The value of the variable called name; -1 when absent or unbound. */
int py_frame_var_get(const struct py_frame_vars *vars, const char *name, uint64_t *value);

void py_vars_cache_clear(struct py_vars_cache *cache);

/* One bound variable as --locals shows it. */
#define FRAME_LOCALS_MAX PY_FRAME_MAX_SLOTS

struct frame_local {
    char name[PY_VAR_NAME_MAX];
    enum frame_local_kind kind;
    uint64_t obj;         /* the object, 0 when unbound or a tagged int */
    bool tagged_int;      /* 3.14+: a small int stored in the reference itself */
    int64_t int_value;
};

/* Fills out with up to max bound variables of the frame (unbound and hidden
 * ones are left out); returns how many, or -1 when the code object's names
 * cannot be read. */
int frame_locals_read(struct py_reader *r, uint64_t frame_addr, uint64_t code_addr,
                      struct frame_local *out, int max);

/* The value bound to name in the frame: 0 and *local, or -1. */
int frame_locals_find(struct py_reader *r, uint64_t frame_addr, uint64_t code_addr,
                      const char *name, struct frame_local *local);

const char *frame_locals_kind_name(enum frame_local_kind kind);

#endif
