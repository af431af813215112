/* Finding functions by qualified name through what imports leave behind:
 * sys.modules -> module __dict__ -> functions and classes -> class __dict__.
 * Function objects give the qualified name (every version) and the code. */
#include "python/func_lookup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/objects.h"

#define MAX_ITEMS_PER_DICT 200000
#define MAX_VISITS 2000000
#define MAX_CLASS_DEPTH 4
#define SEEN_SLOTS 65536u
#define TPFLAGS_TYPE_SUBCLASS (1ul << 31)

struct lookup {
    struct py_reader r;
    struct py_code_cache *codes;
    const struct py_func_spec *spec;
    struct py_func_match *out;
    int max, n;
    long visits;
    int depth;
    long func_code_off, func_qualname_off;
    uint64_t *seen;            /* classes already walked (open addressing, 0 = empty) */
};

int py_func_spec_parse(const char *text, struct py_func_spec *out)
{
    memset(out, 0, sizeof *out);
    const char *colon = strrchr(text, ':');
    const char *name = colon ? colon + 1 : text;
    if (colon) {
        size_t flen = (size_t)(colon - text);
        if (flen == 0 || flen >= sizeof out->file)
            return -1;
        memcpy(out->file, text, flen);
    }
    if (!name[0] || strlen(name) >= sizeof out->qualname)
        return -1;
    snprintf(out->qualname, sizeof out->qualname, "%s", name);
    return 0;
}

static bool file_matches(const char *want, const char *filename)
{
    if (!want[0])
        return true;
    size_t wl = strlen(want), fl = strlen(filename);
    if (wl > fl || strcmp(filename + fl - wl, want) != 0)
        return false;
    return wl == fl || want[0] == '/' || filename[fl - wl - 1] == '/';
}

/* Marks addr seen; false when it already was (or the table is full). */
static bool first_visit(struct lookup *lk, uint64_t addr)
{
    size_t slot = (size_t)((addr >> 4) * 0x9e3779b97f4a7c15ull >> 48) & (SEEN_SLOTS - 1);
    for (unsigned probe = 0; probe < 64; probe++) {
        size_t i = (slot + probe) & (SEEN_SLOTS - 1);
        if (lk->seen[i] == addr)
            return false;
        if (lk->seen[i] == 0) {
            lk->seen[i] = addr;
            return true;
        }
    }
    return false;
}

static void check_function(struct lookup *lk, uint64_t func)
{
    uint64_t qualname_obj, code_addr;
    char qualname[256];
    if (target_read_u64(lk->r.t, func + (uint64_t)lk->func_qualname_off, &qualname_obj) != 0 ||
        py_str(&lk->r, qualname_obj, qualname, sizeof qualname) != 0 ||
        strcmp(qualname, lk->spec->qualname) != 0)
        return;
    if (target_read_u64(lk->r.t, func + (uint64_t)lk->func_code_off, &code_addr) != 0)
        return;
    const struct py_code *code = py_code_get(lk->codes, &lk->r, code_addr);
    if (!code || !file_matches(lk->spec->file, code->filename))
        return;
    for (int i = 0; i < lk->n; i++)
        if (lk->out[i].code == code_addr)
            return;
    if (lk->n >= lk->max)
        return;
    struct py_func_match *m = &lk->out[lk->n++];
    memset(m, 0, sizeof *m);
    m->code = code_addr;
    snprintf(m->qualname, sizeof m->qualname, "%s", qualname);
    snprintf(m->filename, sizeof m->filename, "%s", code->filename);
    m->firstlineno = code->firstlineno;
    int32_t flags = 0;
    if (lk->r.L->code_flags != PY_OFF_NONE &&
        target_read_i32(lk->r.t, code_addr + (uint64_t)lk->r.L->code_flags, &flags) == 0)
        m->flags = (uint32_t)flags;
}

static int visit_value(void *ctx, uint64_t key, uint64_t value);

static void walk_class(struct lookup *lk, uint64_t cls)
{
    /* tp_dict sits three pointers before tp_dictoffset in every version. */
    uint64_t dict;
    if (lk->depth >= MAX_CLASS_DEPTH || !first_visit(lk, cls) ||
        target_read_u64(lk->r.t, cls + (uint64_t)(lk->r.L->type_dictoffset - 24), &dict) != 0 ||
        !dict)
        return;
    lk->depth++;
    py_dict_items(&lk->r, dict, MAX_ITEMS_PER_DICT, visit_value, lk);
    lk->depth--;
}

static bool is_class(struct lookup *lk, uint64_t type)
{
    uint64_t flags;
    return target_read_u64(lk->r.t, type + (uint64_t)lk->r.L->type_flags, &flags) == 0 &&
           (flags & TPFLAGS_TYPE_SUBCLASS);
}

static int visit_value(void *ctx, uint64_t key, uint64_t value)
{
    (void)key;
    struct lookup *lk = ctx;
    if (++lk->visits > MAX_VISITS)
        return -1;
    uint64_t type;
    const char *name;
    if (!value || py_type_of(&lk->r, value, &type, &name) != 0)
        return 0;
    if (strcmp(name, "function") == 0) {
        check_function(lk, value);
    } else if (strcmp(name, "staticmethod") == 0 || strcmp(name, "classmethod") == 0) {
        uint64_t callable;
        if (target_read_u64(lk->r.t, value + 16, &callable) == 0 &&
            py_is_type(&lk->r, callable, "function"))
            check_function(lk, callable);
    } else if (strcmp(name, "property") == 0) {
        for (int k = 0; k < 3; k++) {
            uint64_t accessor;
            if (target_read_u64(lk->r.t, value + 16 + 8 * (uint64_t)k, &accessor) == 0 &&
                accessor && py_is_type(&lk->r, accessor, "function"))
                check_function(lk, accessor);
        }
    } else if (is_class(lk, type)) {
        walk_class(lk, value);
    }
    return 0;
}

static int visit_module(void *ctx, uint64_t key, uint64_t value)
{
    (void)key;
    struct lookup *lk = ctx;
    uint64_t dict;
    if (!value || !py_is_type(&lk->r, value, "module") ||
        target_read_u64(lk->r.t, value + (uint64_t)lk->r.L->module_dict, &dict) != 0 || !dict)
        return 0;
    lk->depth = 0;
    py_dict_items(&lk->r, dict, MAX_ITEMS_PER_DICT, visit_value, lk);
    return lk->visits > MAX_VISITS ? -1 : 0;
}

int py_find_functions(struct py_runtime *rt, struct py_code_cache *codes,
                      const struct py_func_spec *spec, struct py_func_match *out, int max)
{
    struct lookup lk;
    memset(&lk, 0, sizeof lk);
    py_reader_init(&lk.r, rt);
    const struct py_layout *L = lk.r.L;
    if (L->interp_modules == PY_OFF_NONE || L->module_dict == PY_OFF_NONE ||
        L->type_dictoffset == PY_OFF_NONE || L->type_flags == PY_OFF_NONE)
        return -1;
    lk.codes = codes;
    lk.spec = spec;
    lk.out = out;
    lk.max = max;
    /* PyFunctionObject: 3.8/3.9 start with func_code and keep the qualified
     * name far down; 3.10 put globals, builtins, name, qualname, code first. */
    unsigned minor = (rt->version_hex >> 16) & 0xff;
    lk.func_code_off = minor < 10 ? 16 : 48;
    lk.func_qualname_off = minor < 10 ? 104 : 40;
    uint64_t interp = py_runtime_first_interpreter(rt), modules = 0;
    if (!interp ||
        target_read_u64(rt->target, interp + (uint64_t)L->interp_modules, &modules) != 0 ||
        !modules)
        return -1;
    lk.seen = calloc(SEEN_SLOTS, sizeof *lk.seen);
    if (!lk.seen)
        return -1;
    int rc = py_dict_items(&lk.r, modules, MAX_ITEMS_PER_DICT, visit_module, &lk);
    free(lk.seen);
    if (rc < 0 && lk.n == 0 && lk.visits == 0)
        return -1;
    return lk.n;
}
