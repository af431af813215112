/* Finding a native function by symbol name in the files a target has
 * mapped (the executable, libpython, extension modules, libraries), and
 * where it was loaded. */
#ifndef PYSCOPE_NATIVE_SYMBOL_FIND_H
#define PYSCOPE_NATIVE_SYMBOL_FIND_H

#include <limits.h>
#include <stdint.h>
#include "target/target.h"

struct native_symbol {
    uint64_t addr;             /* the function's entry in the target */
    uint64_t size;             /* from the symbol table; at least 1 */
    char module[PATH_MAX];     /* the file, as the target maps it */
};

/* Looks name up (.dynsym, then .symtab) in every file t maps executable,
 * except files already listed in skip (paths; n_skip of them). A match
 * counts only when its address falls in an executable mapping of the file.
 * Returns the number of matches written to out (at most max). */
int native_find_symbol(struct target *t, const char *name, const char *const *skip, int n_skip,
                       struct native_symbol *out, int max);

/* The files t maps executable (distinct paths, at most max), for callers
 * that remember which files were already searched. */
int native_code_files(const struct target *t, const char **paths, int max);

/* The function covering addr in the file t maps executable there (its
 * .symtab, else .dynsym): 0 and its name, or -1. *module, when asked, is the
 * file's base name (valid while t's maps are). */
int native_function_at(struct target *t, uint64_t addr, char *name, size_t name_size,
                       const char **module);

#endif
