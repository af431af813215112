/* Python objects laid out in a test's image of target memory (see
 * fake_python.h). */
#include "fake_python.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fake_image_init(struct fake_image *img, const struct py_layout *L, size_t size)
{
    memset(img, 0, sizeof *img);
    img->L = L;
    img->size = size;
    img->bytes = calloc(1, size);
    if (!img->bytes) {
        fprintf(stderr, "fake_image_init: out of memory\n");
        abort();
    }
    img->str_type = fake_type(img, "str");
    img->bytes_type = fake_type(img, "bytes");
    img->code_type = fake_type(img, "code");
    img->frame_type = fake_type(img, "frame");
    img->dict_type = fake_type(img, "dict");
}

void fake_image_free(struct fake_image *img)
{
    free(img->bytes);
    img->bytes = NULL;
}

uint64_t fake_alloc(struct fake_image *img, size_t size)
{
    size_t at = (img->used + 15) & ~(size_t)15;
    if (at + size > img->size) {
        fprintf(stderr, "fake_alloc: the image of %zu bytes is full\n", img->size);
        abort();
    }
    img->used = at + size;
    return FAKE_BASE + at;
}

void fake_put(struct fake_image *img, uint64_t addr, long off, const void *v, size_t len)
{
    if (off == PY_OFF_NONE) {
        fprintf(stderr, "fake_put: a field the layout lacks\n");
        abort();
    }
    memcpy(img->bytes + (addr - FAKE_BASE) + off, v, len);
}

void fake_put_u64(struct fake_image *img, uint64_t addr, long off, uint64_t v)
{
    fake_put(img, addr, off, &v, 8);
}

void fake_put_i32(struct fake_image *img, uint64_t addr, long off, int32_t v)
{
    fake_put(img, addr, off, &v, 4);
}

void fake_put_u8(struct fake_image *img, uint64_t addr, long off, uint8_t v)
{
    fake_put(img, addr, off, &v, 1);
}

uint64_t fake_type(struct fake_image *img, const char *name)
{
    uint64_t text = fake_alloc(img, strlen(name) + 1);
    memcpy(img->bytes + (text - FAKE_BASE), name, strlen(name) + 1);
    uint64_t type = fake_alloc(img, 1024);
    fake_put_u64(img, type, 0, 1);
    fake_put_u64(img, type, img->L->type_name, text);
    return type;
}

uint64_t fake_object(struct fake_image *img, uint64_t type, size_t size)
{
    uint64_t obj = fake_alloc(img, size);
    fake_put_u64(img, obj, 0, 1); /* ob_refcnt */
    fake_put_u64(img, obj, img->L->ob_type, type);
    return obj;
}

/* state: kind 1, compact, ascii (docs/layouts.md) */
uint64_t fake_str(struct fake_image *img, const char *text)
{
    const struct py_layout *L = img->L;
    size_t len = strlen(text);
    uint64_t s = fake_object(img, img->str_type, (size_t)L->unicode_ascii_size + len + 1);
    fake_put_u64(img, s, L->unicode_length, len);
    fake_put_i32(img, s, L->unicode_state, (1 << 2) | (1 << 5) | (1 << 6));
    memcpy(img->bytes + (s - FAKE_BASE) + L->unicode_ascii_size, text, len + 1);
    return s;
}

uint64_t fake_code(struct fake_image *img, const char *name, const char *qualname)
{
    const struct py_layout *L = img->L;
    uint64_t code = fake_object(img, img->code_type, (size_t)L->code_size + 64);
    uint64_t table = fake_object(img, img->bytes_type, (size_t)L->bytes_sval + 1);
    fake_put_u64(img, table, L->ob_size, 0);
    fake_put_u64(img, code, L->code_name, fake_str(img, name));
    fake_put_u64(img, code, L->code_filename, fake_str(img, "/srv/app.py"));
    fake_put_u64(img, code, L->code_linetable, table);
    fake_put_i32(img, code, L->code_firstlineno, 10);
    if (L->code_qualname != PY_OFF_NONE)
        fake_put_u64(img, code, L->code_qualname, fake_str(img, qualname));
    return code;
}

uint64_t fake_dict(struct fake_image *img, const char *const *keys, const uint64_t *values,
                   size_t n)
{
    const struct py_layout *L = img->L;
    size_t slots = 8;
    while (slots < 2 * n)
        slots *= 2;
    /* indices as wide as CPython makes them for the table's size; entries
     * after them: {hash, key, value} or, for a str-keyed table of 3.11+,
     * {key, value} */
    unsigned log2_width = slots <= 0xff ? 0 : slots <= 0xffff ? 1 : 2;
    size_t width = (size_t)1 << log2_width;
    bool unicode = L->dict_keys_kind == PY_DICT_KEYS_LOG2;
    size_t esize = unicode ? (size_t)L->dictunicode_size : (size_t)L->dictentry_size;
    uint64_t k = fake_alloc(img, (size_t)L->dictkeys_indices + slots * width + n * esize + 16);
    fake_put_u64(img, k, L->dictkeys_nentries, n);
    if (L->dict_keys_kind == PY_DICT_KEYS_SIZED) {
        fake_put_u64(img, k, L->dictkeys_size, slots);
    } else {
        uint8_t log2 = 0;
        while ((1u << log2) < slots)
            log2++;
        fake_put_u8(img, k, L->dictkeys_log2_size, log2);
        fake_put_u8(img, k, L->dictkeys_log2_index_bytes, log2 + log2_width);
        fake_put_u8(img, k, L->dictkeys_kind, 1);                 /* DICT_KEYS_UNICODE */
    }
    uint64_t entries = k + (uint64_t)L->dictkeys_indices + slots * width;
    for (size_t i = 0; i < n; i++) {
        uint64_t e = entries + i * esize;
        fake_put_u64(img, e, unicode ? L->dictunicode_key : L->dictentry_key, fake_str(img, keys[i]));
        fake_put_u64(img, e, unicode ? L->dictunicode_value : L->dictentry_value, values[i]);
    }
    uint64_t d = fake_object(img, img->dict_type, 64);
    fake_put_u64(img, d, L->dict_keys, k);
    fake_put_u64(img, d, L->dict_values, 0);
    return d;
}
