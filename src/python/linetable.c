/* Decoders for co_lnotab (3.8-3.9), the PEP 626 co_linetable (3.10) and the
 * 3.11+ location table. Tables come from a possibly corrupt target, so every
 * decoder is bounded by len and turns anything unexpected into -1. */
#include "python/linetable.h"

#include <limits.h>

/* Line arithmetic is done in 64 bits so that a hostile table cannot overflow
 * it; anything that leaves the int range is garbage, not a line. */
static int as_line(long long line)
{
    if (line < 0 || line > INT_MAX)
        return -1;
    return (int)line;
}

int py_line_for_offset_lnotab(const uint8_t *table, size_t len, int firstlineno, int byte_offset)
{
    if (table == NULL && len != 0)
        return -1;
    if (byte_offset < 0)
        return as_line(firstlineno);
    /* Mirrors PyCode_Addr2Line of 3.8/3.9: a pair's line increment belongs to
     * the instructions at and after its address, so stop once the running
     * address passes the offset. A trailing odd byte is ignored, as there. */
    long long addr = 0;
    long long line = firstlineno;
    for (size_t i = 0; i + 1 < len; i += 2) {
        addr += table[i];
        if (addr > byte_offset)
            break;
        line += (int8_t)table[i + 1];
    }
    return as_line(line);
}

/* 3.10 marks "no line" with this line delta; it leaves the running line as is. */
#define LINETABLE310_NO_LINE (-128)

int py_line_for_offset_linetable310(const uint8_t *table, size_t len, int firstlineno,
                                    int byte_offset)
{
    if (table == NULL && len != 0)
        return -1;
    if (byte_offset < 0)
        return as_line(firstlineno);
    /* Each pair is (bytes covered, line delta); zero-length pairs only carry
     * a line delta too big for one byte, and can never contain the offset. */
    long long start = 0;
    long long line = firstlineno;
    for (size_t i = 0; i + 1 < len; i += 2) {
        long long end = start + table[i];
        int delta = (int8_t)table[i + 1];
        int has_line = delta != LINETABLE310_NO_LINE;
        if (has_line)
            line += delta;
        if (byte_offset >= start && byte_offset < end)
            return has_line ? as_line(line) : -1;
        start = end;
    }
    return -1;
}

/* Location-table entry codes (Objects/locations.md). */
enum {
    LOC_SHORT_LAST = 9,       /* 0-9: same line, one byte of columns */
    LOC_ONE_LINE_FIRST = 10,  /* 10-12: line delta is code - 10, two column bytes */
    LOC_ONE_LINE_LAST = 12,
    LOC_NO_COLUMNS = 13,      /* svarint line delta */
    LOC_LONG = 14,            /* svarint line delta, then 3 varints */
    LOC_NONE = 15,            /* no location at all */
};

/* Bytes after an entry's first byte never have bit 7 set; seeing one means
 * the entry is shorter than its code claims, i.e. the table is corrupt. */
static int take_plain_bytes(const uint8_t *table, size_t len, size_t *pos, size_t count)
{
    if (count > len - *pos)
        return -1;
    for (size_t k = 0; k < count; k++) {
        if (table[*pos + k] & 0x80)
            return -1;
    }
    *pos += count;
    return 0;
}

/* Little-endian 6-bit chunks, bit 6 = more follow. CPython writes 32-bit
 * values, so more than six chunks is corruption. */
static int read_varint(const uint8_t *table, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t value = 0;
    for (unsigned shift = 0;; shift += 6) {
        if (*pos >= len || shift > 30)
            return -1;
        uint8_t b = table[(*pos)++];
        if (b & 0x80)
            return -1;
        value |= (uint64_t)(b & 63) << shift;
        if (!(b & 64))
            break;
    }
    *out = value;
    return 0;
}

/* Sign in the lowest bit, magnitude above it. */
static int read_svarint(const uint8_t *table, size_t len, size_t *pos, long long *out)
{
    uint64_t raw;
    if (read_varint(table, len, pos, &raw) != 0)
        return -1;
    long long magnitude = (long long)(raw >> 1);
    *out = (raw & 1) ? -magnitude : magnitude;
    return 0;
}

/* Consumes one entry's payload after its first byte and yields its line delta. */
static int read_location_payload(const uint8_t *table, size_t len, size_t *pos, int code,
                                 long long *line_delta)
{
    uint64_t ignored;
    *line_delta = 0;
    if (code <= LOC_SHORT_LAST)
        return take_plain_bytes(table, len, pos, 1);
    if (code <= LOC_ONE_LINE_LAST) {
        *line_delta = code - LOC_ONE_LINE_FIRST;
        return take_plain_bytes(table, len, pos, 2);
    }
    if (code == LOC_NO_COLUMNS)
        return read_svarint(table, len, pos, line_delta);
    if (code == LOC_LONG) {
        if (read_svarint(table, len, pos, line_delta) != 0)
            return -1;
        for (int k = 0; k < 3; k++) { /* end line delta, column+1, end column+1 */
            if (read_varint(table, len, pos, &ignored) != 0)
                return -1;
        }
        return 0;
    }
    return 0; /* LOC_NONE has no payload */
}

int py_line_for_offset_locations(const uint8_t *table, size_t len, int firstlineno,
                                 int byte_offset)
{
    if (table == NULL && len != 0)
        return -1;
    if (byte_offset < 0)
        return as_line(firstlineno);
    long long start = 0; /* in bytes; entry lengths are in 2-byte code units */
    long long line = firstlineno;
    size_t pos = 0;
    while (pos < len) {
        uint8_t first = table[pos++];
        if (!(first & 0x80))
            return -1;
        int code = (first >> 3) & 15;
        long long end = start + 2 * ((first & 7) + 1);
        long long delta;
        if (read_location_payload(table, len, &pos, code, &delta) != 0)
            return -1;
        line += delta;
        if (line < INT_MIN || line > INT_MAX)
            return -1;
        if (byte_offset >= start && byte_offset < end)
            return code == LOC_NONE ? -1 : as_line(line);
        start = end;
    }
    return -1;
}

int py_line_for_offset(enum py_linetable_kind kind, const uint8_t *table, size_t len,
                       int firstlineno, int byte_offset)
{
    switch (kind) {
    case PY_LINETABLE_LNOTAB:
        return py_line_for_offset_lnotab(table, len, firstlineno, byte_offset);
    case PY_LINETABLE_310:
        return py_line_for_offset_linetable310(table, len, firstlineno, byte_offset);
    case PY_LINETABLE_LOCATIONS:
        return py_line_for_offset_locations(table, len, firstlineno, byte_offset);
    }
    return -1;
}
