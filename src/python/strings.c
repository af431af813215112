/* Reading str and bytes objects out of a target and turning PEP 393 text
 * (Latin-1, UCS-2, UCS-4 arrays) into bounded, always valid UTF-8. */
#include "python/strings.h"

#include <string.h>

/* Bytes of characters fetched per target read; bounds the stack buffer. */
#define CHUNK_BYTES 4096

enum {
    STATE_KIND_SHIFT = 2,
    STATE_KIND_MASK = 7,
    STATE_COMPACT_BIT = 5,
    STATE_ASCII_BIT = 6,
};

int py_unicode_layout_of(uint32_t state, struct py_unicode_shape *out)
{
    int kind = (int)((state >> STATE_KIND_SHIFT) & STATE_KIND_MASK);
    int compact = (int)((state >> STATE_COMPACT_BIT) & 1);
    int ascii = (int)((state >> STATE_ASCII_BIT) & 1);
    if (kind != 1 && kind != 2 && kind != 4)
        return -1;
    if (ascii && kind != 1)
        return -1;
    if (out != NULL) {
        out->kind = kind;
        out->compact = compact;
        out->ascii = ascii;
    }
    return 0;
}

static uint32_t code_point_at(const unsigned char *data, size_t index, int kind)
{
    if (kind == 1)
        return data[index];
    if (kind == 2) {
        uint16_t unit;
        memcpy(&unit, data + index * 2, sizeof(unit));
        return unit;
    }
    uint32_t unit;
    memcpy(&unit, data + index * 4, sizeof(unit));
    return unit;
}

static size_t utf8_width(uint32_t cp)
{
    if (cp < 0x80)
        return 1;
    if (cp < 0x800)
        return 2;
    if (cp < 0x10000)
        return 3;
    return 4;
}

/* Appends UTF-8 for up to nchars characters after out[0..pos), keeping room
 * for the NUL; reports how many characters fitted so callers can stop. */
static size_t append_utf8(const unsigned char *data, size_t nchars, int kind, char *out,
                          size_t outsize, size_t pos, size_t *consumed)
{
    size_t i;
    for (i = 0; i < nchars; i++) {
        uint32_t cp = code_point_at(data, i, kind);
        if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            cp = 0xFFFD;
        size_t width = utf8_width(cp);
        if (width > outsize - 1 - pos)
            break;
        unsigned char *o = (unsigned char *)out + pos;
        switch (width) {
        case 1:
            o[0] = (unsigned char)cp;
            break;
        case 2:
            o[0] = (unsigned char)(0xC0 | (cp >> 6));
            o[1] = (unsigned char)(0x80 | (cp & 0x3F));
            break;
        case 3:
            o[0] = (unsigned char)(0xE0 | (cp >> 12));
            o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            o[2] = (unsigned char)(0x80 | (cp & 0x3F));
            break;
        default:
            o[0] = (unsigned char)(0xF0 | (cp >> 18));
            o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            o[3] = (unsigned char)(0x80 | (cp & 0x3F));
            break;
        }
        pos += width;
    }
    out[pos] = '\0';
    *consumed = i;
    return pos;
}

static int valid_kind(int kind)
{
    return kind == 1 || kind == 2 || kind == 4;
}

size_t py_ucs_to_utf8(const void *data, size_t nchars, int kind, char *out, size_t outsize)
{
    if (out == NULL || outsize == 0)
        return 0;
    out[0] = '\0';
    if (!valid_kind(kind) || (data == NULL && nchars != 0))
        return 0;
    size_t consumed;
    return append_utf8(data, nchars, kind, out, outsize, 0, &consumed);
}

/* A layout field usable as an offset into an object header of at most
 * HEADER_MAX bytes (anything larger is a corrupt layout, not a str). */
#define HEADER_MAX 256

static int header_field_ok(long off, size_t width)
{
    return off >= 0 && (size_t)off + width <= HEADER_MAX;
}

static int str_data_address(struct target *t, const struct py_layout *L, uint64_t addr,
                            const struct py_unicode_shape *shape, uint64_t *data)
{
    if (shape->compact) {
        long header = shape->ascii ? L->unicode_ascii_size : L->unicode_compact_size;
        if (header < 0)
            return -1;
        *data = addr + (uint64_t)header;
        return 0;
    }
    /* Legacy (non-compact) strings, e.g. instances of str subclasses, keep
     * their characters in a separate block. */
    uint64_t pointer;
    if (L->unicode_data_any < 0 ||
        target_read(t, addr + (uint64_t)L->unicode_data_any, &pointer, sizeof(pointer)) != 0 ||
        pointer == 0)
        return -1;
    *data = pointer;
    return 0;
}

/* The header of the str at addr: its length, shape and where its characters
 * start. max_length bounds the length accepted as plausible. */
static int str_header(struct target *t, const struct py_layout *L, uint64_t addr,
                      int64_t max_length, int64_t *length, struct py_unicode_shape *shape,
                      uint64_t *data)
{
    if (t == NULL || L == NULL || !header_field_ok(L->unicode_length, sizeof(int64_t)) ||
        !header_field_ok(L->unicode_state, sizeof(uint32_t)))
        return -1;
    /* One read for the header: length and state sit a few bytes apart. */
    unsigned char header[HEADER_MAX];
    size_t header_len = (size_t)L->unicode_length + sizeof(int64_t);
    if ((size_t)L->unicode_state + sizeof(uint32_t) > header_len)
        header_len = (size_t)L->unicode_state + sizeof(uint32_t);
    if (target_read(t, addr, header, header_len) != 0)
        return -1;
    uint32_t state;
    memcpy(length, header + L->unicode_length, sizeof(*length));
    memcpy(&state, header + L->unicode_state, sizeof(state));
    if (py_unicode_layout_of(state, shape) != 0 || *length < 0 || *length > max_length)
        return -1;
    return str_data_address(t, L, addr, shape, data);
}

int py_read_str(struct target *t, const struct py_layout *L, uint64_t addr, char *out,
                size_t outsize)
{
    if (out == NULL || outsize == 0)
        return -1;
    out[0] = '\0';
    int64_t length;
    struct py_unicode_shape shape;
    uint64_t data;
    if (str_header(t, L, addr, PY_STR_MAX_CHARS, &length, &shape, &data) != 0)
        return -1;

    /* Every character needs at least one output byte, so never fetch more
     * characters than the output could hold. */
    size_t wanted = (size_t)length;
    if (wanted > outsize - 1)
        wanted = outsize - 1;
    unsigned char chunk[CHUNK_BYTES];
    size_t per_chunk = sizeof(chunk) / (size_t)shape.kind;
    size_t done = 0, pos = 0;
    while (done < wanted) {
        size_t take = wanted - done < per_chunk ? wanted - done : per_chunk;
        uint64_t from = data + (uint64_t)done * (uint64_t)shape.kind;
        if (target_read(t, from, chunk, take * (size_t)shape.kind) != 0) {
            out[0] = '\0';
            return -1;
        }
        size_t consumed;
        pos = append_utf8(chunk, take, shape.kind, out, outsize, pos, &consumed);
        done += consumed;
        if (consumed < take)
            break; /* out is full */
    }
    return 0;
}

int py_read_str_head(struct target *t, const struct py_layout *L, uint64_t addr, uint32_t *cps,
                     size_t max_chars, size_t *n_read, int64_t *length)
{
    struct py_unicode_shape shape;
    uint64_t data;
    *n_read = 0;
    if (cps == NULL || str_header(t, L, addr, PY_STR_MAX_LENGTH, length, &shape, &data) != 0)
        return -1;
    size_t wanted = (uint64_t)*length < max_chars ? (size_t)*length : max_chars;
    unsigned char chunk[CHUNK_BYTES];
    size_t per_chunk = sizeof(chunk) / (size_t)shape.kind;
    while (*n_read < wanted) {
        size_t take = wanted - *n_read < per_chunk ? wanted - *n_read : per_chunk;
        uint64_t from = data + (uint64_t)*n_read * (uint64_t)shape.kind;
        if (target_read(t, from, chunk, take * (size_t)shape.kind) != 0)
            return -1;
        for (size_t i = 0; i < take; i++)
            cps[*n_read + i] = code_point_at(chunk, i, shape.kind);
        *n_read += take;
    }
    return 0;
}

ssize_t py_read_bytes(struct target *t, const struct py_layout *L, uint64_t addr, void *out,
                      size_t max, size_t *full_len)
{
    if (t == NULL || L == NULL || (out == NULL && max != 0) ||
        !header_field_ok(L->ob_size, sizeof(int64_t)) || L->bytes_sval < 0)
        return -1;
    int64_t size;
    if (target_read(t, addr + (uint64_t)L->ob_size, &size, sizeof(size)) != 0 || size < 0)
        return -1;
    size_t n = (uint64_t)size < max ? (size_t)size : max;
    if (target_read(t, addr + (uint64_t)L->bytes_sval, out, n) != 0)
        return -1;
    if (full_len != NULL)
        *full_len = (size_t)size;
    return (ssize_t)n;
}
