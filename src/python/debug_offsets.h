/* Decoding of the _Py_DebugOffsets block that CPython 3.13+ keeps at the start
 * of _PyRuntime. Its own layout differs per minor version. */
#ifndef PYSCOPE_PYTHON_DEBUG_OFFSETS_H
#define PYSCOPE_PYTHON_DEBUG_OFFSETS_H

#include <stddef.h>
#include "python/layout.h"

/* How many bytes at _PyRuntime to read before decoding: larger than any
 * known _Py_DebugOffsets. */
#define PY_DEBUG_OFFSETS_READ_SIZE 4096

/* Returns the PY_VERSION_HEX recorded in the block, or 0 when the block does
 * not start with the "xdebugpy" cookie. */
unsigned py_debug_offsets_version(const unsigned char *buf, size_t len);

/* Fills *out from the block: the fields _Py_DebugOffsets carries come from the
 * target, the rest from compiled-in facts for that minor version. Every offset
 * is checked against the structure size it lives in. Returns 0, or -1 with a
 * message naming the problem in err (unknown minor version, free-threaded
 * build, a bad size or offset). */
int py_debug_offsets_decode(const unsigned char *buf, size_t len,
                            struct py_layout *out, char *err, size_t errlen);

/* 3.14+: checks the asyncio offsets of A against the _asyncio module's
 * own (the Py_AsyncioModuleDebugOffsets of its AsyncioDebug section, buf):
 * the Task object's fields must agree with the tables (the others of the
 * struct come from them too); where each thread and the interpreter keep
 * their tasks and running loop and task are then taken from the section.
 * 0, or -1 with what is wrong in err (A unchanged). */
int py_asyncio_debug_decode(const unsigned char *buf, size_t len, struct py_asyncio_layout *A,
                            char *err, size_t errlen);

#endif
