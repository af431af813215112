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
    /* What tells this code object from another one later allocated at the
     * same address: its type and its name and file objects. */
    uint64_t type_obj, name_obj, filename_obj;
};

#define PY_CODE_CACHE_SLOTS 1024

struct py_code_cache {
    struct py_code *slots[PY_CODE_CACHE_SLOTS];
};

/* The code object at addr, read and checked (type "code"), or NULL. */
const struct py_code *py_code_get(struct py_code_cache *cache, struct py_reader *r, uint64_t addr);
/* The line for the instruction byte_offset bytes into the bytecode; -1 if none. */
int py_code_line(const struct py_code *code, const struct py_layout *L, long byte_offset);
void py_code_cache_clear(struct py_code_cache *cache);

/* The cached entry for addr, without reading anything; NULL if none. */
const struct py_code *py_code_peek(const struct py_code_cache *cache, uint64_t addr);

/* Code objects can be freed and their memory reused for another one. A
 * cached entry is still good when the bytes at addr + *offset (*len of them,
 * at most PY_CODE_ID_MAX) still say what py_code_id_matches checks. */
#define PY_CODE_ID_MAX 256
int py_code_id_span(const struct py_layout *L, long *offset, size_t *len);
bool py_code_id_matches(const struct py_code *code, const struct py_layout *L,
                        const unsigned char *bytes);

#endif
