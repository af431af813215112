/* Frame variables for 3.8-3.15. Before 3.11 a PyFrameObject holds
 * f_localsplus = co_varnames + co_cellvars + co_freevars, then the value
 * stack; from 3.11 a _PyInterpreterFrame holds localsplus named by
 * co_localsplusnames with kinds in co_localspluskinds, then the stack. */
#include "python/locals.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CO_FAST_CELL 0x40
#define CO_FAST_FREE 0x80
#define MAX_NAMES 4096

static void code_vars_free(struct py_code_vars *c)
{
    if (c) {
        free(c->names);
        free(c->is_cell);
        free(c);
    }
}

void py_vars_cache_clear(struct py_vars_cache *cache)
{
    for (size_t i = 0; i < PY_VARS_CACHE_SLOTS; i++) {
        code_vars_free(cache->slots[i]);
        cache->slots[i] = NULL;
    }
}

/* Appends the names of a tuple of str to c; returns how many, or -1. */
static int append_names(struct py_reader *r, uint64_t tuple, struct py_code_vars *c, int at, int limit,
                        bool cell)
{
    int64_t size;
    if (!py_is_type(r, tuple, "tuple") ||
        target_read(r->t, tuple + (uint64_t)r->L->ob_size, &size, sizeof size) != 0 || size < 0 ||
        size > limit - at)
        return -1;
    for (int64_t i = 0; i < size; i++) {
        uint64_t name;
        if (target_read_u64(r->t, tuple + (uint64_t)r->L->tuple_items + (uint64_t)i * 8, &name) != 0)
            return -1;
        if (py_str(r, name, c->names[at + i], PY_VAR_NAME_MAX) != 0)
            snprintf(c->names[at + i], PY_VAR_NAME_MAX, "?");
        c->is_cell[at + i] = cell;
    }
    return (int)size;
}

static struct py_code_vars *code_vars_read(struct py_reader *r, uint64_t code)
{
    const struct py_layout *L = r->L;
    if (!py_is_type(r, code, "code"))
        return NULL;
    struct py_code_vars *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->addr = code;
    int32_t stacksize;
    if (target_read_i32(r->t, code + (uint64_t)L->code_stacksize, &stacksize) != 0 || stacksize < 0 ||
        stacksize > MAX_NAMES)
        goto fail;
    c->stacksize = stacksize;
    if (L->frames == PY_FRAMES_OBJECTS) {
        uint64_t varnames, cellvars, freevars;
        int64_t counts[3];
        if (target_read_u64(r->t, code + (uint64_t)L->code_varnames, &varnames) != 0 ||
            target_read_u64(r->t, code + (uint64_t)L->code_cellvars, &cellvars) != 0 ||
            target_read_u64(r->t, code + (uint64_t)L->code_freevars, &freevars) != 0)
            goto fail;
        uint64_t tuples[3] = {varnames, cellvars, freevars};
        int64_t total = 0;
        for (int i = 0; i < 3; i++) {
            if (target_read(r->t, tuples[i] + (uint64_t)L->ob_size, &counts[i], 8) != 0 ||
                counts[i] < 0 || counts[i] > MAX_NAMES)
                goto fail;
            total += counts[i];
        }
        if (total > MAX_NAMES)
            goto fail;
        c->names = calloc((size_t)(total ? total : 1), sizeof *c->names);
        c->is_cell = calloc((size_t)(total ? total : 1), 1);
        if (!c->names || !c->is_cell)
            goto fail;
        int at = 0;
        for (int i = 0; i < 3; i++) {
            int n = append_names(r, tuples[i], c, at, (int)total, i > 0);
            if (n < 0)
                goto fail;
            at += n;
        }
        c->n_named = at;
        /* co_nlocals counts varnames; a mismatch means torn or odd memory. */
        int32_t nlocals;
        if (target_read_i32(r->t, code + (uint64_t)L->code_nlocals, &nlocals) != 0 ||
            nlocals != counts[0])
            goto fail;
        return c;
    }
    uint64_t names, kinds;
    int32_t nlocalsplus;
    if (target_read_u64(r->t, code + (uint64_t)L->code_localsplusnames, &names) != 0 ||
        target_read_u64(r->t, code + (uint64_t)L->code_localspluskinds, &kinds) != 0 ||
        target_read_i32(r->t, code + (uint64_t)L->code_nlocalsplus, &nlocalsplus) != 0 ||
        nlocalsplus < 0 || nlocalsplus > MAX_NAMES)
        goto fail;
    c->names = calloc((size_t)(nlocalsplus ? nlocalsplus : 1), sizeof *c->names);
    c->is_cell = calloc((size_t)(nlocalsplus ? nlocalsplus : 1), 1);
    if (!c->names || !c->is_cell)
        goto fail;
    if (append_names(r, names, c, 0, nlocalsplus, false) != nlocalsplus)
        goto fail;
    c->n_named = nlocalsplus;
    uint8_t kind_bytes[MAX_NAMES];
    int64_t nkinds;
    if (nlocalsplus > 0) {
        if (!py_is_type(r, kinds, "bytes") ||
            target_read(r->t, kinds + (uint64_t)L->ob_size, &nkinds, 8) != 0 || nkinds != nlocalsplus ||
            target_read(r->t, kinds + (uint64_t)L->bytes_sval, kind_bytes, (size_t)nlocalsplus) != 0)
            goto fail;
        for (int i = 0; i < nlocalsplus; i++)
            c->is_cell[i] = (kind_bytes[i] & (CO_FAST_CELL | CO_FAST_FREE)) != 0;
    }
    return c;
fail:
    code_vars_free(c);
    return NULL;
}

static const struct py_code_vars *code_vars_get(struct py_vars_cache *cache, struct py_reader *r,
                                                uint64_t code)
{
    size_t slot = (size_t)((code >> 4) % PY_VARS_CACHE_SLOTS);
    if (cache->slots[slot] && cache->slots[slot]->addr == code)
        return cache->slots[slot];
    struct py_code_vars *c = code_vars_read(r, code);
    if (!c)
        return NULL;
    code_vars_free(cache->slots[slot]);
    cache->slots[slot] = c;
    return c;
}

/* 3.14+ stack references carry tag bits; a tagged small int is no object. */
static uint64_t untag(const struct py_reader *r, uint64_t bits)
{
    if (!r->L->stackref_tagged)
        return bits;
    if ((bits & 3) == 3)
        return 0;
    return bits & ~(uint64_t)3;
}

int py_frame_vars_read(struct py_vars_cache *cache, struct py_reader *r, uint64_t frame_addr,
                       uint64_t code_addr, struct py_frame_vars *out)
{
    const struct py_layout *L = r->L;
    out->code = NULL;
    out->n_named = out->n_stack = 0;
    out->stack_exact = false;
    out->globals = 0;
    const struct py_code_vars *c = code_vars_get(cache, r, code_addr);
    if (!c || c->n_named > PY_FRAME_MAX_SLOTS)
        return -1;
    out->code = c;
    out->n_named = c->n_named;
    bool old_frames = L->frames == PY_FRAMES_OBJECTS;
    uint64_t base = frame_addr + (uint64_t)(old_frames ? L->frame_localsplus : L->iframe_localsplus);
    int capacity = c->stacksize;
    if (capacity > PY_FRAME_MAX_SLOTS - c->n_named)
        capacity = PY_FRAME_MAX_SLOTS - c->n_named;

    int depth = capacity;
    bool exact = false;
    if (old_frames) {
        /* The stack starts right after the named slots; a frame whose
         * f_valuestack says otherwise is not what we think it is. */
        uint64_t valuestack;
        if (target_read_u64(r->t, frame_addr + (uint64_t)L->frame_valuestack, &valuestack) != 0 ||
            valuestack != base + (uint64_t)c->n_named * 8)
            depth = 0;
    } else if (L->iframe_stackpointer != PY_OFF_NONE) {
        int64_t top = -1;
        if (L->stackpointer_is_pointer) {
            uint64_t sp;
            if (target_read_u64(r->t, frame_addr + (uint64_t)L->iframe_stackpointer, &sp) == 0 &&
                sp >= base && (sp - base) % 8 == 0)
                top = (int64_t)((sp - base) / 8);
        } else {
            int32_t stacktop;
            if (target_read_i32(r->t, frame_addr + (uint64_t)L->iframe_stackpointer, &stacktop) == 0)
                top = stacktop;
        }
        if (top >= c->n_named && top - c->n_named <= capacity) {
            depth = (int)(top - c->n_named);
            exact = true;
        }
    }
    size_t nslots = (size_t)c->n_named + (size_t)depth;
    if (nslots && target_read(r->t, base, out->values, nslots * 8) != 0)
        return -1;
    for (size_t i = 0; i < nslots; i++)
        out->values[i] = untag(r, out->values[i]);
    for (int i = 0; i < c->n_named; i++) {
        uint64_t v = out->values[i];
        if (c->is_cell[i] && v && py_is_type(r, v, "cell")) {
            uint64_t inner = 0;
            if (target_read_u64(r->t, v + (uint64_t)L->cell_ref, &inner) != 0)
                inner = 0;
            out->values[i] = inner;
        }
    }
    out->n_stack = depth;
    out->stack_exact = exact;
    uint64_t globals;
    long globals_off = old_frames ? L->frame_globals : L->iframe_globals;
    if (globals_off != PY_OFF_NONE &&
        target_read_u64(r->t, frame_addr + (uint64_t)globals_off, &globals) == 0 &&
        py_is_type(r, globals, "dict"))
        out->globals = globals;
    return 0;
}

const char *py_frame_var_name(const struct py_frame_vars *vars, int i)
{
    if (!vars->code || i < 0 || i >= vars->n_named)
        return NULL;
    return vars->code->names[i];
}

int py_frame_var_get(const struct py_frame_vars *vars, const char *name, uint64_t *value)
{
    if (!vars->code)
        return -1;
    for (int i = 0; i < vars->n_named; i++) {
        if (strcmp(vars->code->names[i], name) == 0 && vars->values[i]) {
            *value = vars->values[i];
            return 0;
        }
    }
    return -1;
}
