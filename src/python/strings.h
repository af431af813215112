/* Decoding CPython str and bytes objects: the PEP 393 state bits, UCS-1/2/4
 * to UTF-8 conversion, and bounded reads of both object kinds out of a
 * target. Callers check the object's type first; nothing here does. */
#ifndef PYSCOPE_PYTHON_STRINGS_H
#define PYSCOPE_PYTHON_STRINGS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "python/layout.h"
#include "target/target.h"

/* Strings longer than this many characters are refused as implausible for
 * names, file names and reprs, and most likely a misread object. */
#define PY_STR_MAX_CHARS (1L << 20)
/* Values (reprs) may be any size; past this a length is a misread. */
#define PY_STR_MAX_LENGTH (1LL << 40)

struct py_unicode_shape {
    int kind;    /* bytes per character: 1, 2 or 4 */
    int compact; /* characters follow the header in the same block */
    int ascii;   /* all characters < 128; compact ascii uses the short header */
};

/* Decodes PyASCIIObject.state (interned:2, kind:3, compact:1, ascii:1 from
 * bit 0, identical on 3.8-3.15 default builds; free-threaded 3.13+ builds
 * differ and are not handled). Returns 0, or -1 for a kind that is not
 * 1/2/4 (including 3.8-3.11's not-ready kind 0) or ascii with kind != 1. */
int py_unicode_layout_of(uint32_t state, struct py_unicode_shape *out);

/* Converts nchars characters of the given kind at data (any alignment) to
 * UTF-8 in out. Always NUL-terminates when outsize > 0, stops before a
 * character that would not fit whole, and turns surrogates (lone or paired:
 * CPython never pairs them inside a str) and values past U+10FFFF into
 * U+FFFD. Returns the bytes written, excluding the NUL; 0 for a bad kind. */
size_t py_ucs_to_utf8(const void *data, size_t nchars, int kind, char *out, size_t outsize);

/* Reads the str object at addr as UTF-8 into out (see py_ucs_to_utf8 for
 * truncation). Uses L->unicode_length/state/ascii_size/compact_size/
 * data_any. Returns 0, or -1 when the object is unreadable or implausible
 * (bad state, negative length, more than PY_STR_MAX_CHARS); out is then "". */
int py_read_str(struct target *t, const struct py_layout *L, uint64_t addr, char *out,
                size_t outsize);

/* The first characters of the str at addr, for reprs of values of any size:
 * reads only min(length, max_chars) code points into cps (surrogates kept, so
 * the caller can escape them) and the full length into *length. Returns 0, or
 * -1 when unreadable or implausible (lengths up to PY_STR_MAX_LENGTH pass). */
int py_read_str_head(struct target *t, const struct py_layout *L, uint64_t addr, uint32_t *cps,
                     size_t max_chars, size_t *n_read, int64_t *length);

/* Copies up to max bytes of the bytes object at addr into out (ob_size at
 * L->ob_size, data at L->bytes_sval). Returns how many bytes were copied,
 * or -1 if unreadable or ob_size is negative. When full_len is not NULL it
 * receives ob_size, so callers can tell a truncated copy. */
ssize_t py_read_bytes(struct target *t, const struct py_layout *L, uint64_t addr, void *out,
                      size_t max, size_t *full_len);

#endif
