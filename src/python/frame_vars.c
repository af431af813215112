/* The one reader of a frame's variables, for why's searches and for
 * --locals/--print. Before 3.11 a PyFrameObject holds f_localsplus =
 * co_varnames + co_cellvars + co_freevars, then the value stack; from 3.11 a
 * _PyInterpreterFrame holds localsplus named by co_localsplusnames with kinds
 * in co_localspluskinds, then the stack. Names and kinds are read once per
 * code object; every count read from the target is capped before it sizes
 * a loop or an allocation. */
#include "python/frame_vars.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CO_VARARGS 0x4
#define CO_VARKEYWORDS 0x8
#define CO_FAST_HIDDEN 0x10
#define CO_FAST_CELL 0x40
#define CO_FAST_FREE 0x80
#define MAX_NAMES 4096
#define STACKREF_INT_TAG 3        /* 3.14+: (bits & 3) == 3 is a tagged int */
#define STACKREF_UNCOUNTED_TAG 1  /* 3.14+: a reference the slot does not own (borrowed,
                                     or to an object whose count is not kept) */

const char *frame_locals_kind_name(enum frame_local_kind kind)
{
    switch (kind) {
    case FRAME_LOCAL_ARG: return "arg";
    case FRAME_LOCAL_VAR: return "local";
    case FRAME_LOCAL_CELL: return "cell";
    case FRAME_LOCAL_FREE: return "free";
    case FRAME_LOCAL_HIDDEN: return "hidden";
    }
    return "?";
}

static void code_vars_free(struct py_code_vars *c)
{
    if (c) {
        free(c->names);
        free(c->is_cell);
        free(c->kind);
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
            snprintf(c->names[at + i], PY_VAR_NAME_MAX, "<name %lld>", (long long)i);
        c->is_cell[at + i] = cell;
    }
    return (int)size;
}

/* How many leading slots are arguments: -1 when the counts are unknown. */
static int argument_slots(struct py_reader *r, uint64_t code)
{
    const struct py_layout *L = r->L;
    int32_t argcount, kwonly, flags;
    if (L->code_argcount == PY_OFF_NONE || L->code_flags == PY_OFF_NONE ||
        L->code_kwonlyargcount == PY_OFF_NONE ||
        target_read_i32(r->t, code + (uint64_t)L->code_argcount, &argcount) != 0 ||
        target_read_i32(r->t, code + (uint64_t)L->code_kwonlyargcount, &kwonly) != 0 ||
        target_read_i32(r->t, code + (uint64_t)L->code_flags, &flags) != 0 || argcount < 0 ||
        kwonly < 0 || argcount > 65535 || kwonly > 65535)
        return -1;
    return argcount + kwonly + ((flags & CO_VARARGS) != 0) + ((flags & CO_VARKEYWORDS) != 0);
}

static bool alloc_slots(struct py_code_vars *c, int n)
{
    size_t count = (size_t)(n ? n : 1);
    c->names = calloc(count, sizeof *c->names);
    c->is_cell = calloc(count, 1);
    c->kind = calloc(count, 1);
    return c->names && c->is_cell && c->kind;
}

/* <=3.10: co_varnames, co_cellvars, co_freevars in slot order. */
static int code_vars_old(struct py_reader *r, uint64_t code, struct py_code_vars *c, int nargs)
{
    const struct py_layout *L = r->L;
    uint64_t varnames, cellvars, freevars;
    int64_t counts[3];
    if (L->code_varnames == PY_OFF_NONE || L->code_cellvars == PY_OFF_NONE ||
        L->code_freevars == PY_OFF_NONE ||
        target_read_u64(r->t, code + (uint64_t)L->code_varnames, &varnames) != 0 ||
        target_read_u64(r->t, code + (uint64_t)L->code_cellvars, &cellvars) != 0 ||
        target_read_u64(r->t, code + (uint64_t)L->code_freevars, &freevars) != 0)
        return -1;
    uint64_t tuples[3] = {varnames, cellvars, freevars};
    int64_t total = 0;
    for (int i = 0; i < 3; i++) {
        if (target_read(r->t, tuples[i] + (uint64_t)L->ob_size, &counts[i], 8) != 0 ||
            counts[i] < 0 || counts[i] > MAX_NAMES)
            return -1;
        total += counts[i];
    }
    if (total > MAX_NAMES || !alloc_slots(c, (int)total))
        return -1;
    int at = 0;
    for (int i = 0; i < 3; i++) {
        int n = append_names(r, tuples[i], c, at, (int)total, i > 0);
        if (n < 0)
            return -1;
        at += n;
    }
    c->n_named = at;
    /* co_nlocals counts varnames; a mismatch means torn or odd memory. */
    int32_t nlocals;
    if (target_read_i32(r->t, code + (uint64_t)L->code_nlocals, &nlocals) != 0 ||
        nlocals != counts[0])
        return -1;
    int nvars = (int)counts[0], ncell = (int)counts[1];
    for (int i = 0; i < c->n_named; i++) {
        if (i < nvars) {
            c->kind[i] = i < nargs ? FRAME_LOCAL_ARG : FRAME_LOCAL_VAR;
        } else if (i < nvars + ncell) {
            c->kind[i] = FRAME_LOCAL_CELL;
            /* A captured argument lives only in its cell: show it as the
             * argument, in the place of its emptied fast slot. */
            for (int k = 0; k < nargs && k < nvars; k++)
                if (strcmp(c->names[k], c->names[i]) == 0)
                    c->kind[i] = FRAME_LOCAL_ARG;
        } else {
            c->kind[i] = FRAME_LOCAL_FREE;
        }
    }
    return 0;
}

/* 3.11+: co_localsplusnames with a kind byte per slot. */
static int code_vars_new(struct py_reader *r, uint64_t code, struct py_code_vars *c, int nargs)
{
    const struct py_layout *L = r->L;
    uint64_t names, kinds;
    int32_t nlocalsplus;
    if (L->code_localsplusnames == PY_OFF_NONE || L->code_localspluskinds == PY_OFF_NONE ||
        L->code_nlocalsplus == PY_OFF_NONE ||
        target_read_u64(r->t, code + (uint64_t)L->code_localsplusnames, &names) != 0 ||
        target_read_u64(r->t, code + (uint64_t)L->code_localspluskinds, &kinds) != 0 ||
        target_read_i32(r->t, code + (uint64_t)L->code_nlocalsplus, &nlocalsplus) != 0 ||
        nlocalsplus < 0 || nlocalsplus > MAX_NAMES || !alloc_slots(c, nlocalsplus))
        return -1;
    if (append_names(r, names, c, 0, nlocalsplus, false) != nlocalsplus)
        return -1;
    c->n_named = nlocalsplus;
    uint8_t kind_bytes[MAX_NAMES];
    int64_t nkinds;
    if (nlocalsplus > 0 &&
        (!py_is_type(r, kinds, "bytes") ||
         target_read(r->t, kinds + (uint64_t)L->ob_size, &nkinds, 8) != 0 || nkinds != nlocalsplus ||
         target_read(r->t, kinds + (uint64_t)L->bytes_sval, kind_bytes, (size_t)nlocalsplus) != 0))
        return -1;
    for (int i = 0; i < nlocalsplus; i++) {
        uint8_t k = kind_bytes[i];
        c->is_cell[i] = (k & (CO_FAST_CELL | CO_FAST_FREE)) != 0;
        if (k & CO_FAST_HIDDEN)
            c->kind[i] = FRAME_LOCAL_HIDDEN;
        else if (i < nargs)
            c->kind[i] = FRAME_LOCAL_ARG;
        else if (k & CO_FAST_FREE)
            c->kind[i] = FRAME_LOCAL_FREE;
        else if (k & CO_FAST_CELL)
            c->kind[i] = FRAME_LOCAL_CELL;
        else
            c->kind[i] = FRAME_LOCAL_VAR;
    }
    return 0;
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
    int nargs = argument_slots(r, code);
    int rc = L->frames == PY_FRAMES_OBJECTS ? code_vars_old(r, code, c, nargs)
                                            : code_vars_new(r, code, c, nargs);
    if (rc == 0)
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
uint64_t py_stackref_object(const struct py_reader *r, uint64_t bits)
{
    if (!r->L->stackref_tagged)
        return bits;
    if ((bits & 3) == STACKREF_INT_TAG)
        return 0;
    return bits & ~(uint64_t)3;
}

/* The value stack's live depth, or its capacity when that is all we know. */
static int stack_depth(struct py_reader *r, uint64_t frame_addr, uint64_t base,
                       const struct py_code_vars *c, int capacity, bool *exact)
{
    const struct py_layout *L = r->L;
    *exact = false;
    if (L->frames == PY_FRAMES_OBJECTS) {
        /* The stack starts right after the named slots; a frame whose
         * f_valuestack says otherwise is not what we think it is. */
        uint64_t valuestack;
        if (target_read_u64(r->t, frame_addr + (uint64_t)L->frame_valuestack, &valuestack) != 0 ||
            valuestack != base + (uint64_t)c->n_named * 8)
            return 0;
        return capacity;
    }
    if (L->iframe_stackpointer == PY_OFF_NONE)
        return capacity;
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
        *exact = true;
        return (int)(top - c->n_named);
    }
    return capacity;
}

static int read_frame(struct py_vars_cache *cache, struct py_reader *r, uint64_t frame_addr,
                      uint64_t code_addr, bool with_stack, struct py_frame_vars *out)
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
    bool exact = false;
    int depth = with_stack ? stack_depth(r, frame_addr, base, c, capacity, &exact) : 0;
    size_t nslots = (size_t)c->n_named + (size_t)depth;
    if (nslots && target_read(r->t, base, out->values, nslots * 8) != 0)
        return -1;
    for (int i = 0; i < c->n_named; i++) {
        uint64_t bits = out->values[i];
        out->is_tagged_int[i] = L->stackref_tagged && (bits & 3) == STACKREF_INT_TAG;
        out->tagged_int[i] = out->is_tagged_int[i] ? (int64_t)bits >> 2 : 0;
    }
    for (size_t i = 0; i < nslots; i++) {
        out->uncounted[i] = L->stackref_tagged && (out->values[i] & 3) == STACKREF_UNCOUNTED_TAG;
        out->values[i] = py_stackref_object(r, out->values[i]);
    }
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
    if (!with_stack)
        return 0;
    uint64_t globals;
    long globals_off = old_frames ? L->frame_globals : L->iframe_globals;
    if (globals_off != PY_OFF_NONE &&
        target_read_u64(r->t, frame_addr + (uint64_t)globals_off, &globals) == 0 &&
        py_is_type(r, globals, "dict"))
        out->globals = globals;
    return 0;
}

int py_frame_vars_read(struct py_vars_cache *cache, struct py_reader *r, uint64_t frame_addr,
                       uint64_t code_addr, struct py_frame_vars *out)
{
    return read_frame(cache, r, frame_addr, code_addr, true, out);
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

int frame_locals_read(struct py_reader *r, uint64_t frame_addr, uint64_t code_addr,
                      struct frame_local *out, int max)
{
    if (!frame_addr || !code_addr || max <= 0)
        return max <= 0 ? 0 : -1;
    /* A private cache: the caller walks many frames of one code object
     * rarely, and the names are read once per call as they always were. */
    struct py_vars_cache *cache = calloc(1, sizeof *cache);
    struct py_frame_vars *vars = malloc(sizeof *vars);
    int n = -1;
    if (cache && vars && read_frame(cache, r, frame_addr, code_addr, false, vars) == 0) {
        n = 0;
        for (int i = 0; i < vars->n_named && n < max; i++) {
            enum frame_local_kind kind = (enum frame_local_kind)vars->code->kind[i];
            if (kind == FRAME_LOCAL_HIDDEN || (!vars->values[i] && !vars->is_tagged_int[i]))
                continue;
            struct frame_local *l = &out[n++];
            memset(l, 0, sizeof *l);
            snprintf(l->name, sizeof l->name, "%s", vars->code->names[i]);
            l->kind = kind;
            l->obj = vars->values[i];
            l->tagged_int = vars->is_tagged_int[i];
            l->int_value = vars->tagged_int[i];
        }
    }
    if (cache)
        py_vars_cache_clear(cache);
    free(cache);
    free(vars);
    return n;
}

int frame_locals_find(struct py_reader *r, uint64_t frame_addr, uint64_t code_addr,
                      const char *name, struct frame_local *local)
{
    struct frame_local *all = malloc(sizeof *all * FRAME_LOCALS_MAX);
    if (!all)
        return -1;
    int n = frame_locals_read(r, frame_addr, code_addr, all, FRAME_LOCALS_MAX);
    int rc = -1;
    for (int i = 0; i < n && rc != 0; i++) {
        if (strcmp(all[i].name, name) == 0) {
            *local = all[i];
            rc = 0;
        }
    }
    free(all);
    return rc;
}
