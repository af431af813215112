/* Finding a Python function's code object in a target by its qualified
 * name (optionally with the file it is defined in), without running any
 * code there: from sys.modules through module and class dictionaries. */
#ifndef PYSCOPE_PYTHON_FUNC_LOOKUP_H
#define PYSCOPE_PYTHON_FUNC_LOOKUP_H

#include <stdbool.h>
#include <stdint.h>
#include "python/code.h"
#include "python/runtime.h"

/* "[FILE:]QUALNAME", e.g. "pool.py:Pool._append_to_free_list". FILE matches
 * the end of the code's file name at a path separator ("pool.py",
 * "pkg/pool.py" or the full path). */
struct py_func_spec {
    char file[256];           /* "" for any file */
    char qualname[256];
};

/* Returns -1 when text is not a valid spec (empty name, empty FILE). */
int py_func_spec_parse(const char *text, struct py_func_spec *out);

struct py_func_match {
    uint64_t code;            /* the code object */
    char qualname[256];
    char filename[512];
    int firstlineno;
    uint32_t flags;           /* co_flags (CO_GENERATOR etc.) */
};

/* Searches the functions of every module in sys.modules of the main
 * interpreter, the methods of their classes (staticmethod, classmethod and
 * property accessors included) and of classes nested in those. Each code
 * object is reported once. Returns the number found (at most max), or -1
 * when the interpreter has no module table yet (starting up). Reads are
 * bounded; a running target may make a pass miss things, never invent
 * them (every code object is checked to be one). */
int py_find_functions(struct py_runtime *rt, struct py_code_cache *codes,
                      const struct py_func_spec *spec, struct py_func_match *out, int max);

#define PY_CO_GENERATOR 0x20
#define PY_CO_COROUTINE 0x80
#define PY_CO_ASYNC_GENERATOR 0x200

#endif
