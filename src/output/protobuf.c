/* The protocol-buffers wire format, encoding side only: tags, base-128
 * varints and length prefixes into a growable buffer (for the pprof writer). */
#include "output/protobuf.h"

#include <stdlib.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

void pb_init(struct pb_buf *b)
{
    memset(b, 0, sizeof *b);
}

void pb_free(struct pb_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void pb_reset(struct pb_buf *b)
{
    b->len = 0;
}

static bool reserve(struct pb_buf *b, size_t more)
{
    if (b->failed)
        return false;
    if (more <= b->cap - b->len)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < more) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    uint8_t *grown = realloc(b->data, cap);
    if (!grown) {
        b->failed = true;
        return false;
    }
    b->data = grown;
    b->cap = cap;
    return true;
}

size_t pb_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void put_varint(struct pb_buf *b, uint64_t v)
{
    if (!reserve(b, 10))
        return;
    while (v >= 0x80) {
        b->data[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->data[b->len++] = (uint8_t)v;
}

static void put_tag(struct pb_buf *b, uint32_t field, unsigned wire_type)
{
    put_varint(b, ((uint64_t)field << 3) | wire_type);
}

void pb_uint64(struct pb_buf *b, uint32_t field, uint64_t v)
{
    if (v == 0)
        return;
    put_tag(b, field, WIRE_VARINT);
    put_varint(b, v);
}

void pb_int64(struct pb_buf *b, uint32_t field, int64_t v)
{
    pb_uint64(b, field, (uint64_t)v);
}

void pb_bytes(struct pb_buf *b, uint32_t field, const void *data, size_t len)
{
    put_tag(b, field, WIRE_LEN);
    put_varint(b, len);
    if (len && reserve(b, len)) {
        memcpy(b->data + b->len, data, len);
        b->len += len;
    }
}

void pb_string(struct pb_buf *b, uint32_t field, const char *s)
{
    pb_bytes(b, field, s, strlen(s));
}

void pb_message(struct pb_buf *b, uint32_t field, const struct pb_buf *inner)
{
    if (inner->failed) {
        b->failed = true;
        return;
    }
    pb_bytes(b, field, inner->data, inner->len);
}

void pb_packed_uint64(struct pb_buf *b, uint32_t field, const uint64_t *v, size_t n)
{
    if (n == 0)
        return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += pb_varint_size(v[i]);
    put_tag(b, field, WIRE_LEN);
    put_varint(b, len);
    for (size_t i = 0; i < n; i++)
        put_varint(b, v[i]);
}

void pb_packed_int64(struct pb_buf *b, uint32_t field, const int64_t *v, size_t n)
{
    if (n == 0)
        return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += pb_varint_size((uint64_t)v[i]);
    put_tag(b, field, WIRE_LEN);
    put_varint(b, len);
    for (size_t i = 0; i < n; i++)
        put_varint(b, (uint64_t)v[i]);
}
