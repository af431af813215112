/* Object readers shared by every command: type names (cached per type
 * address), str and int values, and dict and attribute look-ups across the
 * dict layouts of 3.8-3.10 (combined/split tables), 3.11-3.12 (managed dicts)
 * and 3.13+ (inline values). */
#include "python/objects.h"

#include <stdlib.h>
#include <string.h>

#include "python/strings.h"

#define MAX_DICT_ENTRIES (1u << 20)
#define TPFLAGS_INLINE_VALUES (1ul << 2)  /* 3.13+ */
#define TPFLAGS_MANAGED_DICT (1ul << 4)   /* 3.11+ */

static unsigned minor_of(const struct py_reader *r)
{
    return (r->L->version_hex >> 16) & 0xff;
}

void py_reader_init(struct py_reader *r, struct py_runtime *rt)
{
    memset(r, 0, sizeof *r);
    r->rt = rt;
    r->t = rt->target;
    r->L = &rt->layout;
}

int py_type_name(struct py_reader *r, uint64_t tp, const char **name)
{
    size_t slot = (size_t)((tp >> 4) % PY_TYPE_CACHE_SLOTS);
    if (r->types.type[slot] != tp) {
        uint64_t name_ptr;
        char buf[48];
        if (target_read_u64(r->t, tp + (uint64_t)r->L->type_name, &name_ptr) != 0 ||
            name_ptr == 0 || target_read(r->t, name_ptr, buf, 1) != 0)
            return -1;
        /* tp_name is a C string of unknown length: read it byte-wise up to
         * the buffer size, stopping at the first unreadable byte. */
        size_t i = 0;
        for (; i + 1 < sizeof buf; i++) {
            if (target_read(r->t, name_ptr + i, &buf[i], 1) != 0 || buf[i] == '\0')
                break;
        }
        buf[i] = '\0';
        r->types.type[slot] = tp;
        memcpy(r->types.name[slot], buf, sizeof buf);
    }
    *name = r->types.name[slot];
    return 0;
}

int py_type_of(struct py_reader *r, uint64_t obj, uint64_t *type, const char **name)
{
    uint64_t tp;
    if (obj == 0 || target_read_u64(r->t, obj + (uint64_t)r->L->ob_type, &tp) != 0 || tp == 0)
        return -1;
    if (type)
        *type = tp;
    return name ? py_type_name(r, tp, name) : 0;
}

bool py_is_type(struct py_reader *r, uint64_t obj, const char *name)
{
    const char *actual;
    return py_type_of(r, obj, NULL, &actual) == 0 && strcmp(actual, name) == 0;
}

int py_str(struct py_reader *r, uint64_t obj, char *out, size_t outsize)
{
    if (!py_is_type(r, obj, "str"))
        return -1;
    return py_read_str(r->t, r->L, obj, out, outsize);
}

int py_int(struct py_reader *r, uint64_t obj, int64_t *out)
{
    if (!py_is_type(r, obj, "int") && !py_is_type(r, obj, "bool"))
        return -1;
    int64_t ndigits;
    int sign;
    uint64_t word;
    if (r->L->long_tag != PY_OFF_NONE) {
        if (target_read_u64(r->t, obj + (uint64_t)r->L->long_tag, &word) != 0)
            return -1;
        ndigits = (int64_t)(word >> 3);
        sign = 1 - (int)(word & 3);
    } else {
        if (target_read_u64(r->t, obj + (uint64_t)r->L->ob_size, &word) != 0)
            return -1;
        int64_t size = (int64_t)word;
        sign = size < 0 ? -1 : size > 0;
        ndigits = size < 0 ? -size : size;
    }
    /* 30-bit digits: three hold any value pyscope compares (ids, counts). */
    if (ndigits < 0 || ndigits > 3)
        return -1;
    uint32_t digits[3] = {0};
    if (ndigits && target_read(r->t, obj + (uint64_t)r->L->long_digits, digits,
                               (size_t)ndigits * 4) != 0)
        return -1;
    uint64_t value = 0;
    for (int64_t i = ndigits - 1; i >= 0; i--) {
        if (value >> 34)
            return -1;
        value = (value << 30) | (digits[i] & 0x3fffffffu);
    }
    if (value > (uint64_t)INT64_MAX)
        return -1;
    *out = sign < 0 ? -(int64_t)value : (int64_t)value;
    return 0;
}

/* The entries of a PyDictKeysObject, normalised across versions. */
struct dict_keys_view {
    uint64_t entries;       /* address of the first entry */
    uint64_t nentries;
    unsigned entry_size;
    unsigned key_offset, value_offset;  /* within an entry */
};

static int read_keys_view(struct py_reader *r, uint64_t keys, struct dict_keys_view *v)
{
    memset(v, 0, sizeof *v);
    if (minor_of(r) <= 10) {
        int64_t hdr[5]; /* refcnt, size, lookup, usable, nentries */
        if (target_read(r->t, keys, hdr, sizeof hdr) != 0)
            return -1;
        int64_t size = hdr[1], nentries = hdr[4];
        if (size <= 0 || size > (int64_t)MAX_DICT_ENTRIES * 2 || nentries < 0 || nentries > size)
            return -1;
        unsigned width = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
        v->entries = keys + 40 + (uint64_t)size * width;
        v->nentries = (uint64_t)nentries;
        v->entry_size = 24;
        v->key_offset = 8;
        v->value_offset = 16;
        return 0;
    }
    unsigned char hdr[32];
    if (target_read(r->t, keys, hdr, sizeof hdr) != 0)
        return -1;
    uint8_t log2_size = hdr[8], log2_index_bytes = hdr[9], kind = hdr[10];
    int64_t nentries;
    memcpy(&nentries, hdr + 24, sizeof nentries);
    if (log2_size > 24 || log2_index_bytes > 27 || kind > 2 || nentries < 0 ||
        (uint64_t)nentries > (1ull << log2_size))
        return -1;
    v->entries = keys + 32 + (1ull << log2_index_bytes);
    v->nentries = (uint64_t)nentries;
    if (kind == 0) { /* DICT_KEYS_GENERAL: hash, key, value */
        v->entry_size = 24;
        v->key_offset = 8;
        v->value_offset = 16;
    } else {         /* unicode keys: key, value */
        v->entry_size = 16;
        v->key_offset = 0;
        v->value_offset = 8;
    }
    return 0;
}

/* Where the values array of a split table starts: 3.13 put a 4-byte header
 * (capacity, size, embedded, valid) in front of it, padded to 8. */
static uint64_t split_values_array(struct py_reader *r, uint64_t values)
{
    return values + (minor_of(r) >= 13 ? 8 : 0);
}

/* A search compares key after key, each on its own page (sys.modules has
 * hundreds): their pages are fetched together first. */
#define KEYS_PREFETCH_MAX 512

static void prefetch_keys(struct py_reader *r, const struct dict_keys_view *v)
{
    if (v->nentries < 8)
        return;
    struct target_range *ranges = malloc(sizeof *ranges * KEYS_PREFETCH_MAX);
    if (!ranges)
        return;
    size_t n = 0;
    for (uint64_t i = 0; i < v->nentries && i < KEYS_PREFETCH_MAX; i++) {
        uint64_t k;
        if (target_read_u64(r->t, v->entries + i * v->entry_size + v->key_offset, &k) != 0)
            break;
        if (k)
            ranges[n++] = (struct target_range){k, 64};
    }
    target_prefetch(r->t, ranges, n);
    free(ranges);
}

static int keys_index_of(struct py_reader *r, const struct dict_keys_view *v, const char *key,
                         uint64_t *index, uint64_t *entry_value)
{
    size_t keylen = strlen(key);
    prefetch_keys(r, v);
    for (uint64_t i = 0; i < v->nentries && i < MAX_DICT_ENTRIES; i++) {
        uint64_t entry = v->entries + i * v->entry_size;
        uint64_t k;
        if (target_read_u64(r->t, entry + v->key_offset, &k) != 0)
            return -1;
        if (k == 0)
            continue;
        char buf[256];
        if (py_str(r, k, buf, sizeof buf) != 0 || strlen(buf) != keylen || memcmp(buf, key, keylen))
            continue;
        *index = i;
        if (target_read_u64(r->t, entry + v->value_offset, entry_value) != 0)
            return -1;
        return 0;
    }
    return -1;
}

int py_dict_get_str(struct py_reader *r, uint64_t dict, const char *key, uint64_t *value)
{
    uint64_t keys, values;
    if (!py_is_type(r, dict, "dict") ||
        target_read_u64(r->t, dict + (uint64_t)r->L->dict_keys, &keys) != 0 ||
        target_read_u64(r->t, dict + (uint64_t)r->L->dict_values, &values) != 0)
        return -1;
    struct dict_keys_view v;
    uint64_t index, entry_value;
    if (read_keys_view(r, keys, &v) != 0 || keys_index_of(r, &v, key, &index, &entry_value) != 0)
        return -1;
    if (values) {
        if (target_read_u64(r->t, split_values_array(r, values) + index * 8, &entry_value) != 0)
            return -1;
    }
    if (entry_value == 0)
        return -1;
    *value = entry_value;
    return 0;
}

int py_dict_items(struct py_reader *r, uint64_t dict, int limit,
                  int (*fn)(void *ctx, uint64_t key, uint64_t value), void *ctx)
{
    uint64_t keys, values;
    if (!py_is_type(r, dict, "dict") ||
        target_read_u64(r->t, dict + (uint64_t)r->L->dict_keys, &keys) != 0 ||
        target_read_u64(r->t, dict + (uint64_t)r->L->dict_values, &values) != 0)
        return -1;
    struct dict_keys_view v;
    if (read_keys_view(r, keys, &v) != 0)
        return -1;
    int count = 0;
    for (uint64_t i = 0; i < v.nentries && count < limit; i++) {
        uint64_t entry = v.entries + i * v.entry_size, k, val;
        if (target_read_u64(r->t, entry + v.key_offset, &k) != 0)
            return -1;
        if (k == 0)
            continue;
        if (values) {
            if (target_read_u64(r->t, split_values_array(r, values) + i * 8, &val) != 0)
                return -1;
        } else if (target_read_u64(r->t, entry + v.value_offset, &val) != 0) {
            return -1;
        }
        if (val == 0)
            continue;
        count++;
        if (fn(ctx, k, val) != 0)
            break;
    }
    return count;
}

/* Looks name up in split-table values that belong to the type's shared keys. */
static int split_values_get(struct py_reader *r, uint64_t type, uint64_t values, const char *name,
                            uint64_t *value)
{
    uint64_t keys, index, unused;
    struct dict_keys_view v;
    if (r->L->heaptype_cached_keys == PY_OFF_NONE ||
        target_read_u64(r->t, type + (uint64_t)r->L->heaptype_cached_keys, &keys) != 0 ||
        keys == 0 || read_keys_view(r, keys, &v) != 0 ||
        keys_index_of(r, &v, name, &index, &unused) != 0)
        return -1;
    if (target_read_u64(r->t, split_values_array(r, values) + index * 8, value) != 0 || *value == 0)
        return -1;
    return 0;
}

int py_attr_get(struct py_reader *r, uint64_t obj, const char *name, uint64_t *value)
{
    uint64_t type, flags = 0;
    if (py_type_of(r, obj, &type, NULL) != 0 ||
        target_read_u64(r->t, type + (uint64_t)r->L->type_flags, &flags) != 0)
        return -1;
    unsigned minor = minor_of(r);
    if (minor >= 11 && (flags & TPFLAGS_MANAGED_DICT)) {
        uint64_t slot;
        if (target_read_u64(r->t, obj - 24, &slot) != 0)
            return -1;
        if (minor == 11) {
            if (slot)
                return py_dict_get_str(r, slot, name, value);
            uint64_t values;
            if (target_read_u64(r->t, obj - 32, &values) != 0 || values == 0)
                return -1;
            return split_values_get(r, type, values, name, value);
        }
        if (minor == 12) {
            /* An odd word is a values array stored one byte below its address. */
            if (slot & 1)
                return split_values_get(r, type, slot + 1, name, value);
            return slot ? py_dict_get_str(r, slot, name, value) : -1;
        }
        if (slot)
            return py_dict_get_str(r, slot, name, value);
        if (!(flags & TPFLAGS_INLINE_VALUES))
            return -1;
        int64_t basicsize;
        uint8_t valid;
        if (target_read(r->t, type + (uint64_t)r->L->type_basicsize, &basicsize, 8) != 0 ||
            basicsize <= 0 || basicsize > (1 << 20) ||
            target_read_u8(r->t, obj + (uint64_t)basicsize + 3, &valid) != 0 || !valid)
            return -1;
        return split_values_get(r, type, obj + (uint64_t)basicsize, name, value);
    }
    int64_t dictoffset;
    uint64_t dict;
    if (target_read(r->t, type + (uint64_t)r->L->type_dictoffset, &dictoffset, 8) != 0 ||
        dictoffset <= 0 || dictoffset > (1 << 20) ||
        target_read_u64(r->t, obj + (uint64_t)dictoffset, &dict) != 0 || dict == 0)
        return -1;
    return py_dict_get_str(r, dict, name, value);
}

/* Calls fn for each (key, value) of split-table values laid out by the
 * type's shared keys. */
static int split_values_items(struct py_reader *r, uint64_t type, uint64_t values, int limit,
                              int (*fn)(void *ctx, uint64_t key, uint64_t value), void *ctx)
{
    uint64_t keys;
    struct dict_keys_view v;
    if (r->L->heaptype_cached_keys == PY_OFF_NONE ||
        target_read_u64(r->t, type + (uint64_t)r->L->heaptype_cached_keys, &keys) != 0 ||
        keys == 0 || read_keys_view(r, keys, &v) != 0)
        return -1;
    uint64_t array = split_values_array(r, values);
    int count = 0;
    for (uint64_t i = 0; i < v.nentries && count < limit; i++) {
        uint64_t k, val;
        if (target_read_u64(r->t, v.entries + i * v.entry_size + v.key_offset, &k) != 0 ||
            target_read_u64(r->t, array + i * 8, &val) != 0)
            return -1;
        if (k == 0 || val == 0)
            continue;
        count++;
        if (fn(ctx, k, val) != 0)
            break;
    }
    return count;
}

int py_attr_items(struct py_reader *r, uint64_t obj, int limit,
                  int (*fn)(void *ctx, uint64_t key, uint64_t value), void *ctx)
{
    uint64_t type, flags = 0;
    if (py_type_of(r, obj, &type, NULL) != 0 ||
        target_read_u64(r->t, type + (uint64_t)r->L->type_flags, &flags) != 0)
        return -1;
    unsigned minor = minor_of(r);
    if (minor >= 11 && (flags & TPFLAGS_MANAGED_DICT)) {
        uint64_t slot;
        if (target_read_u64(r->t, obj - 24, &slot) != 0)
            return -1;
        if (minor == 11) {
            if (slot)
                return py_dict_items(r, slot, limit, fn, ctx);
            uint64_t values;
            if (target_read_u64(r->t, obj - 32, &values) != 0 || values == 0)
                return -1;
            return split_values_items(r, type, values, limit, fn, ctx);
        }
        if (minor == 12) {
            if (slot & 1)
                return split_values_items(r, type, slot + 1, limit, fn, ctx);
            return slot ? py_dict_items(r, slot, limit, fn, ctx) : -1;
        }
        if (slot)
            return py_dict_items(r, slot, limit, fn, ctx);
        if (!(flags & TPFLAGS_INLINE_VALUES))
            return -1;
        int64_t basicsize;
        uint8_t valid;
        if (target_read(r->t, type + (uint64_t)r->L->type_basicsize, &basicsize, 8) != 0 ||
            basicsize <= 0 || basicsize > (1 << 20) ||
            target_read_u8(r->t, obj + (uint64_t)basicsize + 3, &valid) != 0 || !valid)
            return -1;
        return split_values_items(r, type, obj + (uint64_t)basicsize, limit, fn, ctx);
    }
    int64_t dictoffset;
    uint64_t dict;
    if (target_read(r->t, type + (uint64_t)r->L->type_dictoffset, &dictoffset, 8) != 0 ||
        dictoffset <= 0 || dictoffset > (1 << 20) ||
        target_read_u64(r->t, obj + (uint64_t)dictoffset, &dict) != 0 || dict == 0)
        return -1;
    return py_dict_items(r, dict, limit, fn, ctx);
}
