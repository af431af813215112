/* Finding functions by the name a user types, through what imports leave
 * behind: sys.modules -> module __dict__ -> functions and classes -> class
 * __dict__, and from each code object the code objects in its constants
 * (nested functions, methods of classes not created yet). */
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
#define MAX_CONST_DEPTH 8
#define MAX_CONSTS_PER_CODE 4096
#define MAX_CODES_PER_TREE 20000
/* co_flags of a function body; a class body or a module has neither. */
#define CO_OPTIMIZED_NEWLOCALS 0x3

struct lookup {
    struct py_reader r;
    struct py_code_cache *codes;
    const struct py_func_spec *spec;
    struct py_func_match *out;
    int max, n;
    long visits;
    int depth;
    uint64_t *seen;            /* classes and code objects already walked (0 = empty) */
    struct py_code_tree tree;
    /* "did you mean": the closest names instead of the matches */
    bool similar;
    int *distance;             /* per entry of out */
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

static bool qualname_matches(const char *want, const char *qualname)
{
    if (strcmp(want, qualname) == 0)
        return true;
    size_t wl = strlen(want), ql = strlen(qualname);
    return ql > wl && qualname[ql - wl - 1] == '.' && strcmp(qualname + ql - wl, want) == 0;
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

bool py_func_spec_matches_name(const struct py_func_spec *spec, const char *qualname)
{
    return qualname_matches(spec->qualname, qualname);
}

bool py_func_spec_matches_file(const struct py_func_spec *spec, const char *filename)
{
    return file_matches(spec->file, filename);
}

/* Levenshtein distance, for "did you mean"; names are short. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 255 || lb > 255)
        return 1 << 20;
    int row[256];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* How far qualname is from what the user typed: the whole name, or its
 * tail with as many components as the typed name has. */
static int name_distance(const char *want, const char *qualname)
{
    int best = edit_distance(want, qualname);
    int parts = 1;
    for (const char *p = want; *p; p++)
        parts += *p == '.';
    const char *tail = qualname + strlen(qualname);
    while (tail > qualname && parts > 0) {
        tail--;
        if (*tail == '.' && --parts == 0) {
            tail++;
            break;
        }
    }
    int d = edit_distance(want, tail);
    return d < best ? d : best;
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

static void add_match(struct lookup *lk, uint64_t code_addr, const char *qualname, int distance)
{
    const struct py_code *code = py_code_get(lk->codes, &lk->r, code_addr);
    if (!code || !file_matches(lk->spec->file, code->filename))
        return;
    for (int i = 0; i < lk->n; i++)
        if (lk->out[i].code == code_addr)
            return;
    int at = lk->n;
    if (lk->similar) {
        /* Sorted by distance, the closest first. */
        while (at > 0 && lk->distance[at - 1] > distance)
            at--;
        if (at >= lk->max)
            return;
        int last = lk->n < lk->max ? lk->n : lk->max - 1;
        memmove(&lk->out[at + 1], &lk->out[at], sizeof lk->out[0] * (size_t)(last - at));
        memmove(&lk->distance[at + 1], &lk->distance[at], sizeof lk->distance[0] * (size_t)(last - at));
        lk->distance[at] = distance;
        if (lk->n < lk->max)
            lk->n++;
    } else {
        if (lk->n >= lk->max)
            return;
        lk->n++;
    }
    py_func_match_fill(&lk->r, code, qualname, &lk->out[at]);
}

void py_func_match_fill(struct py_reader *r, const struct py_code *code, const char *qualname,
                        struct py_func_match *m)
{
    memset(m, 0, sizeof *m);
    m->code = code->addr;
    snprintf(m->qualname, sizeof m->qualname, "%s", qualname);
    snprintf(m->filename, sizeof m->filename, "%s", code->filename);
    m->firstlineno = code->firstlineno;
    int32_t flags = 0;
    if (r->L->code_flags != PY_OFF_NONE &&
        target_read_i32(r->t, code->addr + (uint64_t)r->L->code_flags, &flags) == 0)
        m->flags = (uint32_t)flags;
}

static void consider(struct lookup *lk, uint64_t code_addr, const char *qualname)
{
    if (!lk->similar) {
        if (qualname_matches(lk->spec->qualname, qualname))
            add_match(lk, code_addr, qualname, 0);
        return;
    }
    size_t wl = strlen(lk->spec->qualname);
    int limit = wl < 8 ? 2 : (int)(wl / 4);
    int d = name_distance(lk->spec->qualname, qualname);
    if (d <= limit)
        add_match(lk, code_addr, qualname, d);
}

static int tree_visit(void *ctx, uint64_t code, const char *qualname)
{
    struct lookup *lk = ctx;
    if (!first_visit(lk, code))
        return 1;                  /* walked already: not its constants again */
    consider(lk, code, qualname);
    return 0;
}

static void check_function(struct lookup *lk, uint64_t func)
{
    uint64_t qualname_obj, code_addr;
    char qualname[256];
    if (target_read_u64(lk->r.t, func + (uint64_t)lk->r.L->func_qualname, &qualname_obj) != 0 ||
        py_str(&lk->r, qualname_obj, qualname, sizeof qualname) != 0 ||
        target_read_u64(lk->r.t, func + (uint64_t)lk->r.L->func_code, &code_addr) != 0)
        return;
    py_code_tree_walk(&lk->tree, code_addr, qualname, tree_visit, lk);
}

/* ---- code objects and the code objects in their constants ---- */

void py_code_tree_init(struct py_code_tree *tree, struct py_reader *r)
{
    memset(tree, 0, sizeof *tree);
    tree->r = r;
}

static bool is_code(struct py_code_tree *tree, uint64_t obj)
{
    uint64_t type;
    if (target_read_u64(tree->r->t, obj + (uint64_t)tree->r->L->ob_type, &type) != 0 || !type)
        return false;
    if (tree->code_type)
        return type == tree->code_type;
    if (!py_is_type(tree->r, obj, "code"))
        return false;
    tree->code_type = type;
    return true;
}

static int read_name(struct py_code_tree *tree, uint64_t code, long off, char *out, size_t size)
{
    uint64_t obj;
    if (off == PY_OFF_NONE || target_read_u64(tree->r->t, code + (uint64_t)off, &obj) != 0)
        return -1;
    return py_str(tree->r, obj, out, size);
}

static int walk_tree(struct py_code_tree *tree, uint64_t code, const char *qualname, int depth,
                     int (*visit)(void *, uint64_t, const char *), void *ctx, int *budget)
{
    if (--*budget < 0)
        return -1;
    int rc = visit(ctx, code, qualname);
    if (rc != 0 || depth >= MAX_CONST_DEPTH)
        return rc < 0 ? -1 : 0;
    const struct py_layout *L = tree->r->L;
    uint64_t consts;
    uint64_t count = 0;
    int32_t flags = 0;
    if (L->code_consts == PY_OFF_NONE ||
        target_read_u64(tree->r->t, code + (uint64_t)L->code_consts, &consts) != 0 || !consts ||
        target_read_u64(tree->r->t, consts + (uint64_t)L->ob_size, &count) != 0 ||
        count == 0 || count > MAX_CONSTS_PER_CODE)
        return 0;
    uint64_t *items = malloc(sizeof *items * (size_t)count);
    if (!items || target_read(tree->r->t, consts + (uint64_t)L->tuple_items, items,
                              sizeof *items * (size_t)count) != 0) {
        free(items);
        return 0;
    }
    /* Up to 3.10 a code object knows only its own name: a nested one's
     * qualified name is its parent's, then ".<locals>." under a function
     * and "." under a class body; a module's children are top level. */
    char prefix[256] = "";
    if (L->code_qualname == PY_OFF_NONE && strcmp(qualname, "<module>") != 0) {
        if (L->code_flags != PY_OFF_NONE)
            target_read_i32(tree->r->t, code + (uint64_t)L->code_flags, &flags);
        snprintf(prefix, sizeof prefix, "%s%s", qualname,
                 (flags & CO_OPTIMIZED_NEWLOCALS) ? ".<locals>." : ".");
    }
    for (uint64_t i = 0; i < count && rc == 0; i++) {
        if (!items[i] || items[i] == code || !is_code(tree, items[i]))
            continue;
        char name[256], child[256];
        if (L->code_qualname != PY_OFF_NONE) {
            if (read_name(tree, items[i], L->code_qualname, child, sizeof child) != 0)
                continue;
        } else {
            if (read_name(tree, items[i], L->code_name, name, sizeof name) != 0)
                continue;
            if ((size_t)snprintf(child, sizeof child, "%s%s", prefix, name) >= sizeof child)
                continue;
        }
        rc = walk_tree(tree, items[i], child, depth + 1, visit, ctx, budget);
    }
    free(items);
    return rc;
}

int py_code_tree_walk(struct py_code_tree *tree, uint64_t code, const char *qualname,
                      int (*visit)(void *ctx, uint64_t code, const char *qualname), void *ctx)
{
    char own[256];
    if (!qualname) {
        long off = tree->r->L->code_qualname != PY_OFF_NONE ? tree->r->L->code_qualname
                                                             : tree->r->L->code_name;
        if (read_name(tree, code, off, own, sizeof own) != 0)
            return -1;
        qualname = own;
    }
    if (!is_code(tree, code))
        return -1;
    int budget = MAX_CODES_PER_TREE;
    return walk_tree(tree, code, qualname, 0, visit, ctx, &budget);
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
        if (target_read_u64(lk->r.t, value + (uint64_t)lk->r.L->staticmethod_callable, &callable) == 0 &&
            py_is_type(&lk->r, callable, "function"))
            check_function(lk, callable);
    } else if (strcmp(name, "property") == 0) {
        for (int k = 0; k < 3; k++) {
            uint64_t accessor;
            if (target_read_u64(lk->r.t, value + (uint64_t)lk->r.L->property_get + 8 * (uint64_t)k, &accessor) == 0 &&
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

static int find(struct py_runtime *rt, struct py_code_cache *codes,
                const struct py_func_spec *spec, struct py_func_match *out, int max,
                int *distance)
{
    struct lookup lk;
    memset(&lk, 0, sizeof lk);
    py_reader_init(&lk.r, rt);
    py_code_tree_init(&lk.tree, &lk.r);
    lk.similar = distance != NULL;
    lk.distance = distance;
    const struct py_layout *L = lk.r.L;
    if (L->interp_modules == PY_OFF_NONE || L->module_dict == PY_OFF_NONE ||
        L->type_dictoffset == PY_OFF_NONE || L->type_flags == PY_OFF_NONE)
        return -1;
    lk.codes = codes;
    lk.spec = spec;
    lk.out = out;
    lk.max = max;
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

int py_find_functions(struct py_runtime *rt, struct py_code_cache *codes,
                      const struct py_func_spec *spec, struct py_func_match *out, int max)
{
    return find(rt, codes, spec, out, max, NULL);
}

int py_find_similar(struct py_runtime *rt, struct py_code_cache *codes,
                    const struct py_func_spec *spec, struct py_func_match *out, int max)
{
    int distance[16];
    if (max > 16)
        max = 16;
    return find(rt, codes, spec, out, max, distance);
}
