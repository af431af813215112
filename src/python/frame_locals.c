/* Frame-local variables. Before 3.11 a code object names its fast locals in
 * co_varnames and its cells and free variables in two more tuples, stored in
 * that order in f_localsplus; from 3.11 one tuple co_localsplusnames and a
 * bytes object of kinds describe every slot. The slot counts come from the
 * tuples themselves and are capped: nothing read from the target sizes a loop
 * unchecked. */
#include "python/frame_locals.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/strings.h"

#define CO_VARARGS 0x4
#define CO_VARKEYWORDS 0x8
#define CO_FAST_HIDDEN 0x10
#define CO_FAST_LOCAL 0x20
#define CO_FAST_CELL 0x40
#define CO_FAST_FREE 0x80
#define STACKREF_INT_TAG 3        /* 3.14+: (bits & 3) == 3 is a tagged int */

const char *frame_locals_kind_name(enum frame_local_kind kind)
{
    switch (kind) {
    case FRAME_LOCAL_ARG: return "arg";
    case FRAME_LOCAL_VAR: return "local";
    case FRAME_LOCAL_CELL: return "cell";
    case FRAME_LOCAL_FREE: return "free";
    }
    return "?";
}

/* A tuple's size and item array, checked. */
static int tuple_view(struct py_reader *r, uint64_t tuple, int64_t *size, uint64_t *items)
{
    if (!py_is_type(r, tuple, "tuple") ||
        target_read(r->t, tuple + (uint64_t)r->L->ob_size, size, sizeof *size) != 0 ||
        *size < 0 || *size > FRAME_LOCALS_MAX * 64)
        return -1;
    *items = tuple + (uint64_t)r->L->tuple_items;
    return 0;
}

static int tuple_name(struct py_reader *r, uint64_t items, int64_t i, char *out, size_t outsize)
{
    uint64_t s;
    if (target_read_u64(r->t, items + (uint64_t)i * 8, &s) != 0 || py_str(r, s, out, outsize) != 0) {
        snprintf(out, outsize, "<name %lld>", (long long)i);
        return -1;
    }
    return 0;
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

/* A slot's value: tags removed on 3.14+, cells dereferenced when asked. */
static void load_slot(struct py_reader *r, uint64_t bits, bool maybe_cell, struct frame_local *out)
{
    out->obj = 0;
    out->tagged_int = false;
    if (r->L->stackref_tagged > 0) {
        if ((bits & 3) == STACKREF_INT_TAG) {
            out->tagged_int = true;
            out->int_value = (int64_t)bits >> 2;
            return;
        }
        bits &= ~(uint64_t)3;
    }
    if (bits && maybe_cell && py_is_type(r, bits, "cell")) {
        uint64_t inner = 0;
        if (target_read_u64(r->t, bits + (uint64_t)r->L->cell_ref, &inner) != 0)
            inner = 0;
        bits = inner;
    }
    out->obj = bits;
}

static bool bound(const struct frame_local *l)
{
    return l->obj != 0 || l->tagged_int;
}

static int read_old_model(struct py_reader *r, uint64_t frame, uint64_t code,
                          struct frame_local *out, int max)
{
    const struct py_layout *L = r->L;
    uint64_t varnames, freevars, cellvars;
    int64_t nvars, nfree = 0, ncell = 0;
    uint64_t var_items, free_items = 0, cell_items = 0;
    if (L->code_varnames == PY_OFF_NONE || L->frame_localsplus == PY_OFF_NONE ||
        target_read_u64(r->t, code + (uint64_t)L->code_varnames, &varnames) != 0 ||
        tuple_view(r, varnames, &nvars, &var_items) != 0)
        return -1;
    if (L->code_freevars == PY_OFF_NONE ||
        target_read_u64(r->t, code + (uint64_t)L->code_freevars, &freevars) != 0 ||
        tuple_view(r, freevars, &nfree, &free_items) != 0)
        nfree = 0;
    if (L->code_cellvars == PY_OFF_NONE ||
        target_read_u64(r->t, code + (uint64_t)L->code_cellvars, &cellvars) != 0 ||
        tuple_view(r, cellvars, &ncell, &cell_items) != 0)
        ncell = 0;
    int nargs = argument_slots(r, code);
    int64_t total = nvars + ncell + nfree;
    if (total > FRAME_LOCALS_MAX)
        total = FRAME_LOCALS_MAX;
    uint64_t values[FRAME_LOCALS_MAX];
    if (total > 0 && target_read(r->t, frame + (uint64_t)L->frame_localsplus, values,
                                 (size_t)total * 8) != 0)
        return -1;
    int n = 0;
    for (int64_t i = 0; i < total && n < max; i++) {
        struct frame_local *l = &out[n];
        memset(l, 0, sizeof *l);
        if (i < nvars) {
            tuple_name(r, var_items, i, l->name, sizeof l->name);
            l->kind = i < nargs ? FRAME_LOCAL_ARG : FRAME_LOCAL_VAR;
            load_slot(r, values[i], false, l);
        } else if (i < nvars + ncell) {
            tuple_name(r, cell_items, i - nvars, l->name, sizeof l->name);
            l->kind = FRAME_LOCAL_CELL;
            load_slot(r, values[i], true, l);
            /* A captured argument lives only in its cell: show it as the
             * argument, in the place of its emptied fast slot. */
            for (int64_t k = 0; k < nargs && k < nvars; k++) {
                char arg[128];
                if (tuple_name(r, var_items, k, arg, sizeof arg) == 0 && strcmp(arg, l->name) == 0)
                    l->kind = FRAME_LOCAL_ARG;
            }
        } else {
            tuple_name(r, free_items, i - nvars - ncell, l->name, sizeof l->name);
            l->kind = FRAME_LOCAL_FREE;
            load_slot(r, values[i], true, l);
        }
        if (bound(l))
            n++;
    }
    return n;
}

static int read_new_model(struct py_reader *r, uint64_t frame, uint64_t code,
                          struct frame_local *out, int max)
{
    const struct py_layout *L = r->L;
    uint64_t names, kinds_obj;
    int64_t nslots;
    uint64_t name_items;
    if (L->code_localsplusnames == PY_OFF_NONE || L->iframe_localsplus == PY_OFF_NONE ||
        target_read_u64(r->t, code + (uint64_t)L->code_localsplusnames, &names) != 0 ||
        tuple_view(r, names, &nslots, &name_items) != 0)
        return -1;
    if (nslots > FRAME_LOCALS_MAX)
        nslots = FRAME_LOCALS_MAX;
    unsigned char kinds[FRAME_LOCALS_MAX];
    size_t kinds_len = 0;
    memset(kinds, CO_FAST_LOCAL, sizeof kinds);
    if (L->code_localspluskinds != PY_OFF_NONE &&
        target_read_u64(r->t, code + (uint64_t)L->code_localspluskinds, &kinds_obj) == 0 &&
        py_is_type(r, kinds_obj, "bytes")) {
        ssize_t got = py_read_bytes(r->t, L, kinds_obj, kinds, (size_t)nslots, &kinds_len);
        if (got < 0)
            memset(kinds, CO_FAST_LOCAL, sizeof kinds);
    }
    uint64_t values[FRAME_LOCALS_MAX];
    if (nslots > 0 && target_read(r->t, frame + (uint64_t)L->iframe_localsplus, values,
                                  (size_t)nslots * 8) != 0)
        return -1;
    int nargs = argument_slots(r, code);
    int n = 0;
    for (int64_t i = 0; i < nslots && n < max; i++) {
        unsigned char kind = kinds[i];
        if (kind & CO_FAST_HIDDEN)
            continue;
        struct frame_local *l = &out[n];
        memset(l, 0, sizeof *l);
        tuple_name(r, name_items, i, l->name, sizeof l->name);
        if (i < nargs)
            l->kind = FRAME_LOCAL_ARG;
        else if (kind & CO_FAST_FREE)
            l->kind = FRAME_LOCAL_FREE;
        else if (kind & CO_FAST_CELL)
            l->kind = FRAME_LOCAL_CELL;
        else
            l->kind = FRAME_LOCAL_VAR;
        /* Until MAKE_CELL runs, a cell slot still holds the plain value. */
        load_slot(r, values[i], (kind & (CO_FAST_CELL | CO_FAST_FREE)) != 0, l);
        if (bound(l))
            n++;
    }
    return n;
}

int frame_locals_read(struct py_reader *r, uint64_t frame_addr, uint64_t code_addr,
                      struct frame_local *out, int max)
{
    if (!frame_addr || !code_addr || max <= 0)
        return max <= 0 ? 0 : -1;
    if (max > FRAME_LOCALS_MAX)
        max = FRAME_LOCALS_MAX;
    if (r->L->frames == PY_FRAMES_OBJECTS)
        return read_old_model(r, frame_addr, code_addr, out, max);
    return read_new_model(r, frame_addr, code_addr, out, max);
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
