/* Python objects laid out in one writable image of target memory, as a
 * version's generated layout says (types named by tp_name, compact ASCII
 * strs, code objects, dicts with str keys), for tests that map the image
 * into a fake target (fake_target.h). */
#ifndef PYSCOPE_TESTS_FAKE_PYTHON_H
#define PYSCOPE_TESTS_FAKE_PYTHON_H

#include <stddef.h>
#include <stdint.h>

#include "python/layout.h"

#define FAKE_BASE 0x100000u        /* where the image starts in the target */

struct fake_image {
    const struct py_layout *L;
    unsigned char *bytes;
    size_t used, size;
    uint64_t str_type, bytes_type, code_type, frame_type, dict_type;
};

/* An empty image of size bytes (abort when out of memory), with the types
 * str, bytes, code, frame and dict made. */
void fake_image_init(struct fake_image *img, const struct py_layout *L, size_t size);
void fake_image_free(struct fake_image *img);

/* size bytes, 16-aligned, zeroed; aborts when the image is full. */
uint64_t fake_alloc(struct fake_image *img, size_t size);
/* len bytes at addr + off (off must not be PY_OFF_NONE). */
void fake_put(struct fake_image *img, uint64_t addr, long off, const void *v, size_t len);
void fake_put_u64(struct fake_image *img, uint64_t addr, long off, uint64_t v);
void fake_put_i32(struct fake_image *img, uint64_t addr, long off, int32_t v);
void fake_put_u8(struct fake_image *img, uint64_t addr, long off, uint8_t v);

uint64_t fake_type(struct fake_image *img, const char *name);
/* An object of type with a reference count of 1. */
uint64_t fake_object(struct fake_image *img, uint64_t type, size_t size);
/* A compact ASCII str. */
uint64_t fake_str(struct fake_image *img, const char *text);
/* A code object with an empty line table, in /srv/app.py. */
uint64_t fake_code(struct fake_image *img, const char *name, const char *qualname);
/* A dict of n str keys (a combined table; keys as the version lays them). */
uint64_t fake_dict(struct fake_image *img, const char *const *keys, const uint64_t *values,
                   size_t n);

#endif
