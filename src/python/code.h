/* Code objects as pyscope needs them (names, file, line table), cached by
 * address so a stack of a thousand frames of one function costs one read. */
#ifndef PYSCOPE_PYTHON_CODE_H
#define PYSCOPE_PYTHON_CODE_H

#include <stdbool.h>
#include <stdint.h>
#include "python/objects.h"

struct py_code {
    uint64_t addr;
    char name[128];
    char qualname[256];      /* co_qualname on 3.11+, else co_name */
    char filename[512];
    int firstlineno;
    uint8_t *linetable;
    size_t linetable_len;
    /* What identifies the object at addr, for py_code_get_verified: a code
     * object compiled anew from the same function (a module reloaded) has
     * the same names but a line table object of its own. */
    uint64_t name_obj, filename_obj, linetable_obj;
    uint64_t serial;         /* distinct for every code object read */
    /* The last line looked up: recursion asks for the same one again and
     * again (offset -1: none yet). */
    long last_offset;
    int last_line;
};

#define PY_CODE_CACHE_SLOTS 1024
#define PY_FUNC_NAME_SLOTS 256

/* A function object whose __qualname__ differs from its code's. */
struct py_func_name {
    uint64_t func, code, qualname_obj;
    bool differs;
    char qualname[256];
};

struct py_code_cache {
    struct py_code *slots[PY_CODE_CACHE_SLOTS];
    struct py_func_name *funcs[PY_FUNC_NAME_SLOTS];
};

/* The code object at addr, read and checked (type "code"), or NULL. */
const struct py_code *py_code_get(struct py_code_cache *cache, struct py_reader *r, uint64_t addr);
/* The same, but a cached entry is first checked against the object now at
 * addr (its name and file objects and first line): for callers that keep the
 * cache while the target may free a code object and reuse its address. */
const struct py_code *py_code_get_verified(struct py_code_cache *cache, struct py_reader *r,
                                           uint64_t addr);
/* The entry cached for addr, if any, without reading the target. */
const struct py_code *py_code_cached(struct py_code_cache *cache, uint64_t addr);
/* The line for the instruction byte_offset bytes into the bytecode; -1 if none. */
int py_code_line(const struct py_code *code, const struct py_layout *L, long byte_offset);
void py_code_cache_clear(struct py_code_cache *cache);

/* The name to show for a frame that runs code through the function object
 * func (3.11+ frames record it; 0 when unknown): the function's __qualname__
 * when it is not the code's and the function is a wrapper made by
 * functools.wraps (it has __wrapped__), as numpy's array_function_dispatch
 * makes them too, else the code's qualname. The function
 * is checked to run this very code first; each call re-reads the two
 * pointers that tell a reused address. */
const char *py_code_function_name(struct py_code_cache *cache, struct py_reader *r,
                                  const struct py_code *code, uint64_t func);

#endif
