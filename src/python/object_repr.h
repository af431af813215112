/* Safe, bounded reprs of Python objects read out of a target, for --locals and
 * --print: a few builtin types are rendered like repr(), containers show their
 * first items and length, and everything else is "<Class object at 0x...>". */
#ifndef PYSCOPE_PYTHON_OBJECT_REPR_H
#define PYSCOPE_PYTHON_OBJECT_REPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "python/objects.h"

struct repr_limits {
    int max_depth;        /* containers nested deeper show as "[...]" */
    int max_items;        /* items shown per container */
    int max_chars;        /* characters shown per str/bytes, digits per int */
};

#define REPR_DEFAULT_LIMITS {3, 8, 120}
/* The whole repr never exceeds this many bytes (plus NUL). */
#define REPR_MAX_BYTES 1024

/* Writes a repr of the object at obj into out (always NUL-terminated and
 * bounded by outsize). Unreadable memory is shown as "<unreadable 0x...>".
 * Returns 0, or -1 when the object itself could not be read. */
int py_object_repr(struct py_reader *r, uint64_t obj, const struct repr_limits *limits, char *out,
                size_t outsize);

/* The type name of obj ("?" when unreadable), copied into out. */
void locals_type_name(struct py_reader *r, uint64_t obj, char *out, size_t outsize);

/* Decimal text of a CPython int from its 30-bit digits (least significant
 * first); exposed for unit tests. Writes at most max_digits digits, then
 * "...(N digits)". */
void locals_int_digits_to_text(const uint32_t *digits, size_t ndigits, bool negative,
                               int max_digits, char *out, size_t outsize);

/* Shortest text that reads back as the same double, Python-style ("1.0",
 * "1e+16", "inf", "nan"). */
void locals_float_text(double value, char *out, size_t outsize);

#endif
