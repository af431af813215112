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

void py_reader_init(struct py_reader *r, struct py_runtime *rt)
{
    memset(r, 0, sizeof *r);
    r->rt = rt;
    r->t = rt->target;
    r->L = &rt->layout;
}

/* A type object inside a mapping of a file (a static type) is never freed
 * or moved; a heap type (a class) may be freed and its address reused. */
static bool static_type(const struct py_reader *r, uint64_t tp)
{
    const struct target_map *m = target_find_map(r->t, tp);
    return m && m->path && m->path[0] == '/';
}

/* The runtime's entry for static type tp, or -1. A few dozen types are
 * common: a search of all of them costs less than re-reading one. */
static int kept_index(const struct py_runtime *rt, uint64_t tp)
{
    size_t n = sizeof rt->static_types.type / sizeof rt->static_types.type[0];
    for (size_t i = 0; tp && i < n; i++)
        if (rt->static_types.type[i] == tp)
            return (int)i;
    return -1;
}

int py_type_name(struct py_reader *r, uint64_t tp, const char **name)
{
    /* Type objects sit a few hundred bytes apart: the address's low bits
     * alone would put common pairs (dict and code, in 3.12) in one slot. */
    size_t slot = (size_t)((tp * 0x9e3779b97f4a7c15ull) >> 58) % PY_TYPE_CACHE_SLOTS;
    int k = r->types.type[slot] != tp && r->rt ? kept_index(r->rt, tp) : -1;
    if (k >= 0) {
        r->types.type[slot] = tp;
        memcpy(r->types.name[slot], r->rt->static_types.name[k], sizeof r->types.name[slot]);
    }
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
        if (r->rt && static_type(r, tp)) {
            struct py_runtime *rt = r->rt;
            size_t n = sizeof rt->static_types.type / sizeof rt->static_types.type[0];
            size_t at = rt->static_types.next++ % n;
            rt->static_types.type[at] = tp;
            memcpy(rt->static_types.name[at], buf, sizeof buf);
        }
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

/* One read of the header up to dk_indices, then each field from the copy. */
static int read_keys_view(struct py_reader *r, uint64_t keys, struct dict_keys_view *v)
{
    const struct py_layout *L = r->L;
    memset(v, 0, sizeof *v);
    unsigned char hdr[64];
    long hdr_size = L->dictkeys_indices;
    if (hdr_size <= 0 || hdr_size > (long)sizeof hdr || L->dictkeys_nentries == PY_OFF_NONE ||
        L->dictkeys_nentries + 8 > hdr_size || target_read(r->t, keys, hdr, (size_t)hdr_size) != 0)
        return -1;
    int64_t nentries;
    memcpy(&nentries, hdr + L->dictkeys_nentries, sizeof nentries);
    if (nentries < 0)
        return -1;
    v->entry_size = (unsigned)L->dictentry_size;
    v->key_offset = (unsigned)L->dictentry_key;
    v->value_offset = (unsigned)L->dictentry_value;
    v->nentries = (uint64_t)nentries;
    if (L->dict_keys_kind == PY_DICT_KEYS_SIZED && L->dictkeys_size != PY_OFF_NONE &&
        L->dictkeys_size + 8 <= hdr_size) {
        int64_t size;
        memcpy(&size, hdr + L->dictkeys_size, sizeof size);
        if (size <= 0 || size > (int64_t)MAX_DICT_ENTRIES * 2 || nentries > size)
            return -1;
        unsigned width = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
        v->entries = keys + (uint64_t)hdr_size + (uint64_t)size * width;
        return 0;
    }
    if (L->dict_keys_kind != PY_DICT_KEYS_LOG2 || L->dictkeys_log2_size == PY_OFF_NONE ||
        L->dictkeys_log2_index_bytes == PY_OFF_NONE || L->dictkeys_kind == PY_OFF_NONE ||
        L->dictkeys_log2_size >= hdr_size || L->dictkeys_log2_index_bytes >= hdr_size ||
        L->dictkeys_kind >= hdr_size)
        return -1;
    uint8_t log2_size = hdr[L->dictkeys_log2_size];
    uint8_t log2_index_bytes = hdr[L->dictkeys_log2_index_bytes];
    uint8_t kind = hdr[L->dictkeys_kind];
    if (log2_size > 24 || log2_index_bytes > 27 || kind > 2 ||
        (uint64_t)nentries > (1ull << log2_size))
        return -1;
    v->entries = keys + (uint64_t)hdr_size + (1ull << log2_index_bytes);
    if (kind != 0) { /* not DICT_KEYS_GENERAL: entries without the hash */
        v->entry_size = (unsigned)L->dictunicode_size;
        v->key_offset = (unsigned)L->dictunicode_key;
        v->value_offset = (unsigned)L->dictunicode_value;
    }
    return 0;
}

/* Where the PyObject *values[] of a split table's values block starts. */
static uint64_t split_values_array(struct py_reader *r, uint64_t values)
{
    return values + (uint64_t)r->L->dictvalues_values;
}

/* The insertion order of a split table's values, as indices into the shared
 * keys. Returns how many, or -1 when the version records no order (3.8-3.10,
 * where a split table only exists while keys were added in key order). */
static int values_order(struct py_reader *r, uint64_t values, uint64_t nentries,
                        uint8_t order[256])
{
    const struct py_layout *L = r->L;
    uint8_t size;
    if (L->dictvalues_size == PY_OFF_NONE ||
        target_read_u8(r->t, values + (uint64_t)L->dictvalues_size, &size) != 0)
        return -1;
    if (L->dictvalues_capacity != PY_OFF_NONE) {
        uint8_t capacity;
        if (target_read_u8(r->t, values + (uint64_t)L->dictvalues_capacity, &capacity) != 0 ||
            size > capacity ||
            target_read(r->t, split_values_array(r, values) + (uint64_t)capacity * 8, order,
                        size) != 0)
            return -1;
    } else {
        /* The order grows downwards from just below the count byte. */
        uint8_t below[256];
        if (target_read(r->t, values + (uint64_t)L->dictvalues_size - size, below, size) != 0)
            return -1;
        for (int i = 0; i < size; i++)
            order[i] = below[size - 1 - i];
    }
    for (int i = 0; i < size; i++)
        if (order[i] >= nentries)
            return -1;
    return size;
}

/* Calls fn for the (key, value) pairs of the entries in v, the values taken
 * from a split table's values block when values is not 0, in insertion order
 * where the version records one. */
static int values_items(struct py_reader *r, const struct dict_keys_view *v, uint64_t values,
                        int limit, int (*fn)(void *ctx, uint64_t key, uint64_t value), void *ctx)
{
    uint8_t order[256];
    int n_order = values ? values_order(r, values, v->nentries, order) : -1;
    uint64_t n = n_order >= 0 ? (uint64_t)n_order : v->nentries;
    uint64_t array = values ? split_values_array(r, values) : 0;
    int count = 0;
    for (uint64_t k = 0; k < n && k < MAX_DICT_ENTRIES && count < limit; k++) {
        uint64_t i = n_order >= 0 ? order[k] : k, key, val;
        uint64_t entry = v->entries + i * v->entry_size;
        if (target_read_u64(r->t, entry + v->key_offset, &key) != 0 ||
            target_read_u64(r->t, values ? array + i * 8 : entry + v->value_offset, &val) != 0)
            return -1;
        if (key == 0 || val == 0)
            continue;
        count++;
        if (fn(ctx, key, val) != 0)
            break;
    }
    return count;
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

/* Whether the entry at index i of v has the str key wanted (0, and its
 * value), another key (-1), a key that is not a str or could not be read
 * as one (-3), or could not be read (-2). */
static int key_at(struct py_reader *r, const struct dict_keys_view *v, uint64_t i,
                  const char *key, size_t keylen, uint64_t *entry_value)
{
    uint64_t entry = v->entries + i * v->entry_size, k;
    char buf[256];
    if (target_read_u64(r->t, entry + v->key_offset, &k) != 0)
        return -2;
    if (k == 0)
        return -1;
    if (py_str(r, k, buf, sizeof buf) != 0)
        return -3;
    if (strlen(buf) != keylen || memcmp(buf, key, keylen))
        return -1;
    return target_read_u64(r->t, entry + v->value_offset, entry_value) != 0 ? -2 : 0;
}

static struct py_dict_hint *hint_of(struct py_reader *r, const struct dict_keys_view *v,
                                    const char *key, size_t keylen)
{
    if (!r->rt || keylen >= sizeof r->rt->dict_hints[0].key)
        return NULL;
    struct py_runtime *rt = r->rt;
    for (size_t i = 0; i < sizeof rt->dict_hints / sizeof rt->dict_hints[0]; i++)
        if (rt->dict_hints[i].entries == v->entries && strcmp(rt->dict_hints[i].key, key) == 0)
            return &rt->dict_hints[i];
    return NULL;
}

/* Where key was found (absent false), or that it is in none of v's
 * entries (absent true, index unused). */
static void hint_keep(struct py_reader *r, const struct dict_keys_view *v, const char *key,
                      size_t keylen, uint64_t index, bool absent)
{
    if (!r->rt || keylen >= sizeof r->rt->dict_hints[0].key || index > UINT32_MAX)
        return;
    struct py_runtime *rt = r->rt;
    struct py_dict_hint *h = hint_of(r, v, key, keylen);
    size_t n = sizeof rt->dict_hints / sizeof rt->dict_hints[0];
    if (!h)
        h = &rt->dict_hints[rt->dict_hint_next++ % n];
    h->entries = v->entries;
    h->index = (uint32_t)index;
    h->absent = absent;
    h->absent_uses = 0;
    h->nentries = v->nentries;
    memcpy(h->key, key, keylen + 1);
}

/* A key found absent stays so while no entry was added: CPython appends
 * each insertion at dk_nentries of the same keys object, or builds a new
 * one. The search is made again after a few such answers all the same, in
 * case a new keys object took the old one's place with as many entries. */
#define ABSENT_USES_MAX 9

static bool known_absent(struct py_reader *r, const struct dict_keys_view *v, const char *key,
                         size_t keylen)
{
    struct py_dict_hint *h = hint_of(r, v, key, keylen);
    if (!h || !h->absent || h->nentries != v->nentries || h->absent_uses >= ABSENT_USES_MAX)
        return false;
    h->absent_uses++;
    return true;
}

static int keys_index_of(struct py_reader *r, const struct dict_keys_view *v, const char *key,
                         uint64_t *index, uint64_t *entry_value)
{
    size_t keylen = strlen(key);
    const struct py_dict_hint *h = hint_of(r, v, key, keylen);
    if (h && !h->absent && h->index < v->nentries) {
        int at = key_at(r, v, h->index, key, keylen, entry_value);
        if (at == 0) {
            *index = h->index;
            return 0;
        }
        if (at == -2)
            return -1;
    }
    if (known_absent(r, v, key, keylen))
        return -1;
    prefetch_keys(r, v);
    uint64_t i = 0;
    bool all_compared = true;
    for (; i < v->nentries && i < MAX_DICT_ENTRIES; i++) {
        int at = key_at(r, v, i, key, keylen, entry_value);
        if (at == -1 || at == -3) {
            all_compared &= at == -1;
            continue;
        }
        if (at != 0)
            return -1;
        *index = i;
        hint_keep(r, v, key, keylen, i, false);
        return 0;
    }
    if (i == v->nentries && all_compared)
        hint_keep(r, v, key, keylen, 0, true);
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
    return values_items(r, &v, values, limit, fn, ctx);
}

/* Where an instance's attributes live: a dict object, or a values block laid
 * out by its type's shared keys. */
struct attr_home {
    uint64_t type;
    uint64_t dict;
    uint64_t values;
};

static int attr_home(struct py_reader *r, uint64_t obj, struct attr_home *home)
{
    const struct py_layout *L = r->L;
    uint64_t flags = 0;
    memset(home, 0, sizeof *home);
    if (py_type_of(r, obj, &home->type, NULL) != 0 ||
        target_read_u64(r->t, home->type + (uint64_t)L->type_flags, &flags) != 0)
        return -1;
    if (L->managed_dict_offset != PY_OFF_NONE && (flags & TPFLAGS_MANAGED_DICT)) {
        uint64_t slot;
        if (target_read_u64(r->t, obj + (uint64_t)L->managed_dict_offset, &slot) != 0)
            return -1;
        if (L->managed_dict_tagged && (slot & 1)) {
            /* An odd word is a values array stored one byte below its address. */
            home->values = slot + 1;
            return 0;
        }
        if (slot) {
            home->dict = slot;
            return 0;
        }
        if (L->managed_values_offset != PY_OFF_NONE)
            return target_read_u64(r->t, obj + (uint64_t)L->managed_values_offset,
                                   &home->values) == 0 && home->values ? 0 : -1;
        if (!L->inline_values || !(flags & TPFLAGS_INLINE_VALUES))
            return -1;
        int64_t basicsize;
        uint8_t valid = 1;
        if (target_read(r->t, home->type + (uint64_t)L->type_basicsize, &basicsize, 8) != 0 ||
            basicsize <= 0 || basicsize > (1 << 20))
            return -1;
        home->values = obj + (uint64_t)basicsize;
        if (L->dictvalues_valid != PY_OFF_NONE &&
            (target_read_u8(r->t, home->values + (uint64_t)L->dictvalues_valid, &valid) != 0 ||
             !valid))
            return -1;
        return 0;
    }
    int64_t dictoffset;
    if (target_read(r->t, home->type + (uint64_t)L->type_dictoffset, &dictoffset, 8) != 0 ||
        dictoffset <= 0 || dictoffset > (1 << 20) ||
        target_read_u64(r->t, obj + (uint64_t)dictoffset, &home->dict) != 0 || home->dict == 0)
        return -1;
    return 0;
}

/* The shared keys of a type whose instances keep split values. */
static int type_shared_keys(struct py_reader *r, uint64_t type, struct dict_keys_view *v)
{
    uint64_t keys;
    if (r->L->heaptype_cached_keys == PY_OFF_NONE ||
        target_read_u64(r->t, type + (uint64_t)r->L->heaptype_cached_keys, &keys) != 0 ||
        keys == 0)
        return -1;
    return read_keys_view(r, keys, v);
}

int py_attr_get(struct py_reader *r, uint64_t obj, const char *name, uint64_t *value)
{
    struct attr_home home;
    if (attr_home(r, obj, &home) != 0)
        return -1;
    if (home.dict)
        return py_dict_get_str(r, home.dict, name, value);
    struct dict_keys_view v;
    uint64_t index, unused;
    if (type_shared_keys(r, home.type, &v) != 0 ||
        keys_index_of(r, &v, name, &index, &unused) != 0 ||
        target_read_u64(r->t, split_values_array(r, home.values) + index * 8, value) != 0 ||
        *value == 0)
        return -1;
    return 0;
}

int py_attr_items(struct py_reader *r, uint64_t obj, int limit,
                  int (*fn)(void *ctx, uint64_t key, uint64_t value), void *ctx)
{
    struct attr_home home;
    if (attr_home(r, obj, &home) != 0)
        return -1;
    if (home.dict)
        return py_dict_items(r, home.dict, limit, fn, ctx);
    struct dict_keys_view v;
    if (type_shared_keys(r, home.type, &v) != 0)
        return -1;
    return values_items(r, &v, home.values, limit, fn, ctx);
}

int py_member_offset(struct py_reader *r, uint64_t type, const char *name, int64_t *offset)
{
    const struct py_layout *L = r->L;
    const struct py_asyncio_layout *A = &L->asyncio;
    if (A->type_dict == PY_OFF_NONE || A->memberdescr_member == PY_OFF_NONE ||
        A->memberdef_offset == PY_OFF_NONE)
        return -1;
    /* The class that declares the member may be a base (BaseTransport's _extra). */
    uint64_t at = type, descr = 0;
    bool found = false;
    for (int depth = 0; at && !found && depth < 16; depth++) {
        uint64_t dict = 0;
        found = target_read_u64(r->t, at + (uint64_t)A->type_dict, &dict) == 0 && dict &&
                py_dict_get_str(r, dict, name, &descr) == 0 &&
                py_is_type(r, descr, "member_descriptor");
        if (!found && target_read_u64(r->t, at + (uint64_t)L->type_base, &at) != 0)
            return -1;
    }
    uint64_t def = 0, off = 0;
    if (!found || target_read_u64(r->t, descr + (uint64_t)A->memberdescr_member, &def) != 0 ||
        !def || target_read_u64(r->t, def + (uint64_t)A->memberdef_offset, &off) != 0 ||
        (int64_t)off < 16 || (int64_t)off > 4096)
        return -1;
    *offset = (int64_t)off;
    return 0;
}
