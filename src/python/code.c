/* Code-object decoding and its cache. A cache slot is keyed by address only;
 * callers that keep it across samples must clear it when the target may have
 * freed and reused code objects (pyscope dump reads each once). */
#include "python/code.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/linetable.h"
#include "python/strings.h"

#define MAX_LINETABLE_BYTES (1u << 20)

static void code_free(struct py_code *c)
{
    if (c) {
        free(c->linetable);
        free(c);
    }
}

void py_code_cache_clear(struct py_code_cache *cache)
{
    for (size_t i = 0; i < PY_CODE_CACHE_SLOTS; i++) {
        code_free(cache->slots[i]);
        cache->slots[i] = NULL;
    }
    for (size_t i = 0; i < PY_FUNC_NAME_SLOTS; i++) {
        free(cache->funcs[i]);
        cache->funcs[i] = NULL;
    }
}

const char *py_code_function_name(struct py_code_cache *cache, struct py_reader *r,
                                  const struct py_code *code, uint64_t func)
{
    const struct py_layout *L = r->L;
    uint64_t func_code, qualname_obj;
    if (!code || func == 0 || L->func_code == PY_OFF_NONE || L->func_qualname == PY_OFF_NONE ||
        target_read_u64(r->t, func + (uint64_t)L->func_code, &func_code) != 0 ||
        func_code != code->addr ||
        target_read_u64(r->t, func + (uint64_t)L->func_qualname, &qualname_obj) != 0)
        return code ? code->qualname : NULL;
    struct py_func_name **slot = &cache->funcs[(func >> 4) % PY_FUNC_NAME_SLOTS];
    struct py_func_name *f = *slot;
    if (!f || f->func != func || f->code != code->addr || f->qualname_obj != qualname_obj) {
        if (!f && !(f = *slot = calloc(1, sizeof *f)))
            return code->qualname;
        f->func = func;
        f->code = code->addr;
        f->qualname_obj = qualname_obj;
        /* Only wrappers made by functools.wraps (update_wrapper sets
         * __wrapped__): a code object renamed in place (code.replace) keeps
         * its own name, as tracebacks show it. */
        uint64_t wrapped;
        f->differs = py_str(r, qualname_obj, f->qualname, sizeof f->qualname) == 0 &&
                     f->qualname[0] && strcmp(f->qualname, code->qualname) != 0 &&
                     py_attr_get(r, func, "__wrapped__", &wrapped) == 0;
    }
    return f->differs ? f->qualname : code->qualname;
}

static int read_bytes_object(struct py_reader *r, uint64_t obj, uint8_t **out, size_t *len)
{
    int64_t size;
    if (!py_is_type(r, obj, "bytes") ||
        target_read(r->t, obj + (uint64_t)r->L->ob_size, &size, sizeof size) != 0 || size < 0 ||
        size > (int64_t)MAX_LINETABLE_BYTES)
        return -1;
    uint8_t *buf = malloc((size_t)size + 1);
    if (!buf)
        return -1;
    if (size && target_read(r->t, obj + (uint64_t)r->L->bytes_sval, buf, (size_t)size) != 0) {
        free(buf);
        return -1;
    }
    *out = buf;
    *len = (size_t)size;
    return 0;
}

static struct py_code *code_read(struct py_reader *r, uint64_t addr)
{
    const struct py_layout *L = r->L;
    if (!py_is_type(r, addr, "code"))
        return NULL;
    struct py_code *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->addr = addr;
    uint64_t name, qualname = 0, filename, linetable;
    int32_t firstlineno;
    if (target_read_u64(r->t, addr + (uint64_t)L->code_name, &name) != 0 ||
        target_read_u64(r->t, addr + (uint64_t)L->code_filename, &filename) != 0 ||
        target_read_u64(r->t, addr + (uint64_t)L->code_linetable, &linetable) != 0 ||
        target_read_i32(r->t, addr + (uint64_t)L->code_firstlineno, &firstlineno) != 0 ||
        (L->code_qualname != PY_OFF_NONE &&
         target_read_u64(r->t, addr + (uint64_t)L->code_qualname, &qualname) != 0))
        goto fail;
    if (py_str(r, name, c->name, sizeof c->name) != 0 ||
        py_str(r, filename, c->filename, sizeof c->filename) != 0)
        goto fail;
    if (qualname == 0 || py_str(r, qualname, c->qualname, sizeof c->qualname) != 0)
        snprintf(c->qualname, sizeof c->qualname, "%s", c->name);
    c->firstlineno = firstlineno;
    c->last_offset = -1;
    c->name_obj = name;
    c->filename_obj = filename;
    c->linetable_obj = linetable;
    static uint64_t serials;
    c->serial = ++serials;
    /* A missing line table leaves lines unknown rather than failing the frame. */
    if (read_bytes_object(r, linetable, &c->linetable, &c->linetable_len) != 0) {
        c->linetable = NULL;
        c->linetable_len = 0;
    }
    return c;
fail:
    code_free(c);
    return NULL;
}

/* Code objects of one module are often allocated a power of two apart;
 * hashed, and with two places to go, two hot ones never keep evicting each
 * other (which cost a full re-read of both on every sample). */
static size_t code_slot(uint64_t addr)
{
    return (size_t)(((addr >> 4) * 0x9e3779b97f4a7c15ull) >> 40) % PY_CODE_CACHE_SLOTS & ~(size_t)1;
}

static struct py_code **cached_code(struct py_code_cache *cache, uint64_t addr)
{
    size_t slot = code_slot(addr);
    for (size_t way = 0; way < 2; way++)
        if (cache->slots[slot + way] && cache->slots[slot + way]->addr == addr)
            return &cache->slots[slot + way];
    return NULL;
}

const struct py_code *py_code_cached(struct py_code_cache *cache, uint64_t addr)
{
    struct py_code **hit = cached_code(cache, addr);
    return hit ? *hit : NULL;
}

const struct py_code *py_code_get(struct py_code_cache *cache, struct py_reader *r, uint64_t addr)
{
    struct py_code **hit = cached_code(cache, addr);
    if (hit) {
        /* Most recently used first, so that the other way is evicted next. */
        size_t slot = code_slot(addr);
        if (hit != &cache->slots[slot]) {
            struct py_code *swap = cache->slots[slot];
            cache->slots[slot] = *hit;
            *hit = swap;
        }
        return cache->slots[slot];
    }
    struct py_code *c = code_read(r, addr);
    if (!c)
        return NULL;
    size_t slot = code_slot(addr);
    code_free(cache->slots[slot + 1]);
    cache->slots[slot + 1] = cache->slots[slot];
    cache->slots[slot] = c;
    return c;
}

const struct py_code *py_code_get_verified(struct py_code_cache *cache, struct py_reader *r,
                                           uint64_t addr)
{
    struct py_code **hit = cached_code(cache, addr);
    struct py_code *c = hit ? *hit : NULL;
    if (c) {
        const struct py_layout *L = r->L;
        uint64_t name, filename, linetable;
        int32_t firstlineno;
        if (target_read_u64(r->t, addr + (uint64_t)L->code_name, &name) == 0 &&
            target_read_u64(r->t, addr + (uint64_t)L->code_filename, &filename) == 0 &&
            target_read_u64(r->t, addr + (uint64_t)L->code_linetable, &linetable) == 0 &&
            target_read_i32(r->t, addr + (uint64_t)L->code_firstlineno, &firstlineno) == 0 &&
            name == c->name_obj && filename == c->filename_obj && linetable == c->linetable_obj &&
            firstlineno == c->firstlineno)
            return c;
        code_free(c);
        *hit = NULL;
    }
    return py_code_get(cache, r, addr);
}

int py_code_line(const struct py_code *code, const struct py_layout *L, long byte_offset)
{
    /* Before its first instruction a frame reports its definition line. */
    if (byte_offset < 0)
        return code->firstlineno;
    if (!code->linetable || byte_offset > (long)INT32_MAX)
        return -1;
    if (byte_offset == code->last_offset)
        return code->last_line;
    int line = py_line_for_offset(L->linetable, code->linetable, code->linetable_len,
                                  code->firstlineno, (int)byte_offset);
    /* The memo belongs to the cache entry, which is not const. */
    struct py_code *memo = (struct py_code *)code;
    memo->last_offset = byte_offset;
    memo->last_line = line;
    return line;
}
