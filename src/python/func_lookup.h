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
 * "pkg/pool.py" or the full path). QUALNAME matches a qualified name equal
 * to it or ending with "." QUALNAME, so "_append_to_free_list" finds the
 * method Pool._append_to_free_list and make_pool.<locals>._append_to_free_list. */
struct py_func_spec {
    char file[256];           /* "" for any file */
    char qualname[256];
};

/* Returns -1 when text is not a valid spec (empty name, empty FILE). */
int py_func_spec_parse(const char *text, struct py_func_spec *out);
bool py_func_spec_matches_name(const struct py_func_spec *spec, const char *qualname);
bool py_func_spec_matches_file(const struct py_func_spec *spec, const char *filename);

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

/* A match for code (read already) known by qualname. */
void py_func_match_fill(struct py_reader *r, const struct py_code *code, const char *qualname,
                        struct py_func_match *m);

/* The closest names to spec's that exist (for "did you mean"), closest
 * first, at most max (16). Same search as py_find_functions. */
int py_find_similar(struct py_runtime *rt, struct py_code_cache *codes,
                    const struct py_func_spec *spec, struct py_func_match *out, int max);

/* Walking a code object and, recursively, the code objects among its
 * constants, each with its qualified name (co_qualname on 3.11+; built
 * from the parents' names before). */
struct py_code_tree {
    struct py_reader *r;
    uint64_t code_type;       /* the code type's address, once seen */
};

void py_code_tree_init(struct py_code_tree *tree, struct py_reader *r);
/* Calls visit(ctx, code, qualname) for code (qualname NULL: its own name)
 * and every code object below it; visit returns 0 to go on, 1 to skip that
 * one's constants, -1 to stop. Bounded in depth and count. Returns -1 when
 * code is not a code object or the walk was stopped. */
int py_code_tree_walk(struct py_code_tree *tree, uint64_t code, const char *qualname,
                      int (*visit)(void *ctx, uint64_t code, const char *qualname), void *ctx);

#define PY_CO_GENERATOR 0x20
#define PY_CO_COROUTINE 0x80
#define PY_CO_ASYNC_GENERATOR 0x200

#endif
