/* A minimal protocol-buffers encoder into a growable byte buffer: varints,
 * length-delimited fields, nested messages and packed repeated scalars,
 * which is all profile.proto needs. A failed allocation marks the buffer
 * failed and later calls do nothing. */
#ifndef PYSCOPE_OUTPUT_PROTOBUF_H
#define PYSCOPE_OUTPUT_PROTOBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pb_buf {
    uint8_t *data;
    size_t len, cap;
    bool failed;
};

void pb_init(struct pb_buf *b);
void pb_free(struct pb_buf *b);
/* Empties the buffer, keeping its memory (and its failed state). */
void pb_reset(struct pb_buf *b);

/* Bytes a value takes as a varint. */
size_t pb_varint_size(uint64_t v);

/* Singular scalar fields: omitted when zero, the proto3 default. Negative
 * int64 values take ten bytes, as the wire format requires. */
void pb_uint64(struct pb_buf *b, uint32_t field, uint64_t v);
void pb_int64(struct pb_buf *b, uint32_t field, int64_t v);
/* Length-delimited fields, always written (a repeated string keeps its
 * empty entries). */
void pb_bytes(struct pb_buf *b, uint32_t field, const void *data, size_t len);
void pb_string(struct pb_buf *b, uint32_t field, const char *s);
void pb_message(struct pb_buf *b, uint32_t field, const struct pb_buf *inner);
/* Packed repeated scalars; nothing is written for an empty list. */
void pb_packed_uint64(struct pb_buf *b, uint32_t field, const uint64_t *v, size_t n);
void pb_packed_int64(struct pb_buf *b, uint32_t field, const int64_t *v, size_t n);

#endif
