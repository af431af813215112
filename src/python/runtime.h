/* Finding CPython inside a target: which ELF file holds _PyRuntime, where it
 * is, which version it is, and the layout to read it with. */
#ifndef PYSCOPE_PYTHON_RUNTIME_H
#define PYSCOPE_PYTHON_RUNTIME_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include "python/layout.h"
#include "target/target.h"
#include "util/error.h"

struct py_runtime {
    struct target *target;
    struct py_layout layout;
    uint64_t runtime_addr;          /* &_PyRuntime in the target */
    unsigned version_hex;           /* as precise as could be found */
    char version[32];               /* "3.11.7", or "3.9" when the patch level is unknown */
    char binary[PATH_MAX];          /* the ELF file holding _PyRuntime, as the target sees it */
    uint64_t binary_bias;           /* its load bias */
    /* Where the signal module's handler table was found (python/
     * signal_handlers.c): its address, 0 until found; in _PyRuntime (its
     * shape checked again at each read) or at its symbol; and the source
     * named in reports. A table does not move: the search is made once. */
    uint64_t signal_table;
    bool signal_table_in_runtime;
    char signal_table_source[96];
    /* 3.14+: the asyncio offsets, checked against the _asyncio module's own
     * AsyncioDebug section once one was found (python/asyncio_tasks.c):
     * where it was, or why the tasks cannot be read. */
    bool asyncio_checked;
    bool asyncio_mismatch;
    char asyncio_offsets[PATH_MAX + 200];
    /* Where str-keyed look-ups last found their key in a dict's entries
     * (python/objects.c), tried first the next time: a look-up in
     * sys.modules otherwise reads every key, each on its own page. A hint
     * is only a place to look; the key found there is compared again. A
     * key found in none of the entries is remembered as absent while the
     * keys object has as many entries (CPython only appends to them) and
     * for at most a few look-ups: the agent asks each process for
     * asyncio.tasks at every why, and most never import it. */
    struct py_dict_hint {
        uint64_t entries;  /* the keys object's entries, 0 for none */
        uint32_t index;
        bool absent;       /* no such key among the first nentries */
        uint8_t absent_uses;
        uint64_t nentries;
        char key[36];
    } dict_hints[16];
    unsigned dict_hint_next;
    /* The names of types defined in a mapped file (CPython's and C
     * extensions' static types), which stay at their address for the
     * process's life, kept across readers: each reader would otherwise read
     * every type object's page and name again (python/objects.c). */
    struct {
        uint64_t type[32];
        char name[32][48];
        unsigned next;
    } static_types;
};

/* Locates the runtime and picks the layout. Fails with PYSCOPE_ERR_NOT_PYTHON,
 * PYSCOPE_ERR_UNSUPPORTED (naming the version) or another status. */
int py_runtime_find(struct target *t, struct py_runtime *rt, struct pyscope_error *err);
/* The same, looking once: for a caller that knows when the maps change (watch
 * stops a program at its exec and breaks on the dynamic linker's hook), the
 * waiting above is time the program stands stopped. */
int py_runtime_find_now(struct target *t, struct py_runtime *rt, struct pyscope_error *err);

/* The head of the interpreter list, validated; 0 when Python is not
 * initialised (yet, or any more). */
uint64_t py_runtime_first_interpreter(struct py_runtime *rt);

/* Formats a PY_VERSION_HEX as "3.11.7" (or "3.13.0rc2"). */
void py_version_format(unsigned version_hex, char *out, size_t outsize);

#endif
