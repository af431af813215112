/* --locals and --print for a built stack report. Locals are read from the
 * frame addresses the walk recorded; --print follows instance attributes,
 * module globals and tuple/list/dict items, nothing that would need running
 * code (properties, __getattr__, __getitem__ of other types). */
#include "python/variables_report.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/frame_vars.h"

#define MAX_STEPS 16

enum step_kind { STEP_ATTR, STEP_INDEX, STEP_KEY };

struct path_step {
    enum step_kind kind;
    char name[128];       /* attribute or str key */
    int64_t index;
};

struct print_path {
    char root[128];
    struct path_step steps[MAX_STEPS];
    int n_steps;
};

static int parse_ident(const char **p, char *out, size_t outsize)
{
    const char *s = *p;
    size_t n = 0;
    /* Identifiers may be non-ASCII: accept any byte >= 0x80 as part of one. */
    if (!(isalpha((unsigned char)*s) || *s == '_' || (unsigned char)*s >= 0x80))
        return -1;
    while (isalnum((unsigned char)s[n]) || s[n] == '_' || (unsigned char)s[n] >= 0x80)
        n++;
    if (n >= outsize)
        return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    *p = s + n;
    return 0;
}

static int parse_path(const char *expr, struct print_path *path, char *why, size_t whysize)
{
    memset(path, 0, sizeof *path);
    const char *p = expr;
    if (parse_ident(&p, path->root, sizeof path->root) != 0) {
        snprintf(why, whysize, "it must start with a variable name");
        return -1;
    }
    while (*p) {
        if (path->n_steps >= MAX_STEPS) {
            snprintf(why, whysize, "more than %d steps", MAX_STEPS);
            return -1;
        }
        struct path_step *st = &path->steps[path->n_steps];
        if (*p == '.') {
            p++;
            if (parse_ident(&p, st->name, sizeof st->name) != 0) {
                snprintf(why, whysize, "an attribute name must follow '.'");
                return -1;
            }
            st->kind = STEP_ATTR;
        } else if (*p == '[') {
            p++;
            if (*p == '\'' || *p == '"') {
                char q = *p++;
                const char *end = strchr(p, q);
                if (!end || end[1] != ']' || (size_t)(end - p) >= sizeof st->name) {
                    snprintf(why, whysize, "a quoted key must be closed by %c]", q);
                    return -1;
                }
                memcpy(st->name, p, (size_t)(end - p));
                st->name[end - p] = '\0';
                st->kind = STEP_KEY;
                p = end + 2;
            } else {
                char *end;
                errno = 0;
                long long v = strtoll(p, &end, 10);
                if (end == p || *end != ']' || errno) {
                    snprintf(why, whysize, "an index must be an integer or a quoted key");
                    return -1;
                }
                st->index = v;
                st->kind = STEP_INDEX;
                p = end + 1;
            }
        } else {
            snprintf(why, whysize, "unexpected '%c': use .attr, [0] or ['key']", *p);
            return -1;
        }
        path->n_steps++;
    }
    return 0;
}

int frame_locals_parse_check(const char *expr, char *why, size_t whysize)
{
    struct print_path path;
    return parse_path(expr, &path, why, whysize);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void tagged_int_text(int64_t v, char *out, size_t outsize)
{
    snprintf(out, outsize, "%" PRId64, v);
}

static int fill_frame(struct py_reader *r, const struct repr_limits *limits, struct report_frame *f,
                      struct frame_local *scratch)
{
    f->locals_tried = true;
    int n = frame_locals_read(r, f->frame_addr, f->code_addr, scratch, FRAME_LOCALS_MAX);
    if (n < 0)
        return 0;
    f->locals_read = true;
    if (n == 0)
        return 0;
    f->locals = calloc((size_t)n, sizeof *f->locals);
    if (!f->locals)
        return -1;
    char *text = malloc(REPR_MAX_BYTES + 1);
    if (!text)
        return -1;
    for (int i = 0; i < n; i++) {
        struct report_local *out = &f->locals[f->n_locals];
        char type[64];
        if (scratch[i].tagged_int) {
            tagged_int_text(scratch[i].int_value, text, REPR_MAX_BYTES + 1);
            snprintf(type, sizeof type, "int");
        } else {
            py_object_repr(r, scratch[i].obj, limits, text, REPR_MAX_BYTES + 1);
            locals_type_name(r, scratch[i].obj, type, sizeof type);
        }
        out->name = strdup(scratch[i].name);
        out->kind = frame_locals_kind_name(scratch[i].kind);
        out->type = strdup(type);
        out->repr = strdup(text);
        out->addr = scratch[i].obj;
        if (!out->name || !out->type || !out->repr) {
            free(out->name);
            free(out->type);
            free(out->repr);
            free(text);
            return -1;
        }
        f->n_locals++;
    }
    free(text);
    return 0;
}

int frame_locals_fill_report(struct py_runtime *rt, struct stack_report *report,
                             const struct repr_limits *limits, pid_t only_thread)
{
    struct py_reader reader;
    py_reader_init(&reader, rt);
    struct frame_local *scratch = malloc(sizeof *scratch * FRAME_LOCALS_MAX);
    if (!scratch)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < report->n_threads && rc == 0; i++) {
        struct report_thread *th = &report->threads[i];
        if (only_thread && th->tid != only_thread)
            continue;
        for (size_t k = 0; k < th->n_frames && rc == 0; k++)
            rc = fill_frame(&reader, limits, &th->frames[k], scratch);
    }
    free(scratch);
    return rc;
}

/* Follows one step from obj; 0 and *next, or -1 with why filled in. */
static int follow(struct py_reader *r, uint64_t obj, const struct path_step *st, uint64_t *next,
                  char *why, size_t whysize)
{
    const char *tname;
    char type[64] = "?";
    if (py_type_of(r, obj, NULL, &tname) == 0)
        snprintf(type, sizeof type, "%s", tname);
    if (st->kind == STEP_ATTR) {
        uint64_t dict;
        if (strcmp(type, "module") == 0) {
            if (target_read_u64(r->t, obj + (uint64_t)r->L->module_dict, &dict) == 0 &&
                py_dict_get_str(r, dict, st->name, next) == 0)
                return 0;
        } else if (py_attr_get(r, obj, st->name, next) == 0) {
            return 0;
        }
        snprintf(why, whysize, "'%s' object has no instance attribute '%s' (only __dict__ "
                 "attributes are followed)", type, st->name);
        return -1;
    }
    if (st->kind == STEP_KEY) {
        if (strcmp(type, "dict") == 0 && py_dict_get_str(r, obj, st->name, next) == 0)
            return 0;
        snprintf(why, whysize, strcmp(type, "dict") == 0 ? "key '%s' not found"
                                                         : "'%s' is not a dict", 
                 strcmp(type, "dict") == 0 ? st->name : type);
        return -1;
    }
    const struct py_layout *L = r->L;
    if (strcmp(type, "tuple") == 0 || strcmp(type, "list") == 0) {
        int64_t size;
        uint64_t items = obj + (uint64_t)L->tuple_items;
        if (target_read(r->t, obj + (uint64_t)L->ob_size, &size, sizeof size) != 0 || size < 0 ||
            (strcmp(type, "list") == 0 &&
             target_read_u64(r->t, obj + (uint64_t)L->list_items, &items) != 0)) {
            snprintf(why, whysize, "the %s is unreadable", type);
            return -1;
        }
        int64_t index = st->index < 0 ? st->index + size : st->index;
        if (index < 0 || index >= size) {
            snprintf(why, whysize, "index %" PRId64 " out of range (len=%" PRId64 ")",
                     st->index, size);
            return -1;
        }
        if (target_read_u64(r->t, items + (uint64_t)index * 8, next) != 0 || *next == 0) {
            snprintf(why, whysize, "item %" PRId64 " is unreadable", index);
            return -1;
        }
        return 0;
    }
    snprintf(why, whysize, "'%s' object cannot be indexed by pyscope (tuple and list only; "
             "use ['key'] for dicts)", type);
    return -1;
}

static int add_print(struct stack_report *report, size_t ti, size_t fi, const char *repr,
                     const char *error)
{
    struct report_print *grown = realloc(report->prints,
                                         (report->n_prints + 1) * sizeof *grown);
    if (!grown)
        return -1;
    report->prints = grown;
    struct report_print *p = &report->prints[report->n_prints];
    memset(p, 0, sizeof *p);
    p->tid = report->threads[ti].tid;
    p->thread_index = ti;
    p->frame_index = fi;
    p->repr = dup_or_null(repr);
    p->error = dup_or_null(error);
    if ((repr && !p->repr) || (error && !p->error)) {
        free(p->repr);
        free(p->error);
        return -1;
    }
    report->n_prints++;
    return 0;
}

int frame_locals_eval_print(struct py_runtime *rt, struct stack_report *report,
                            const struct repr_limits *limits)
{
    struct print_path path;
    char why[256];
    if (!report->print_expr || parse_path(report->print_expr, &path, why, sizeof why) != 0)
        return 0;
    struct py_reader reader;
    py_reader_init(&reader, rt);
    char *text = malloc(REPR_MAX_BYTES + 1);
    if (!text)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < report->n_threads && rc == 0; i++) {
        struct report_thread *th = &report->threads[i];
        for (size_t k = 0; k < th->n_frames && rc == 0; k++) {
            struct frame_local root;
            if (frame_locals_find(&reader, th->frames[k].frame_addr, th->frames[k].code_addr,
                                  path.root, &root) != 0)
                continue;
            if (root.tagged_int) {
                if (path.n_steps > 0) {
                    rc = add_print(report, i, k, NULL, "an int has no attributes or items");
                } else {
                    tagged_int_text(root.int_value, text, REPR_MAX_BYTES + 1);
                    rc = add_print(report, i, k, text, NULL);
                }
                continue;
            }
            uint64_t obj = root.obj;
            bool ok = true;
            for (int s = 0; s < path.n_steps && ok; s++)
                ok = follow(&reader, obj, &path.steps[s], &obj, why, sizeof why) == 0;
            if (ok) {
                py_object_repr(&reader, obj, limits, text, REPR_MAX_BYTES + 1);
                rc = add_print(report, i, k, text, NULL);
            } else {
                rc = add_print(report, i, k, NULL, why);
            }
        }
    }
    free(text);
    return rc;
}
