/* Bounded reprs of target objects. Every read is checked, every loop has a
 * limit from struct repr_limits, and containers on the current path are
 * remembered so that a cycle prints as "[...]" the way repr() does, instead of
 * recursing. Nothing here trusts a length or pointer read from the target. */
#include "python/object_repr.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/strings.h"

#define MAX_INT_DIGITS 120          /* 30-bit digits converted: ~1080 decimal digits */
#define MAX_CONTAINER_ITEMS (1 << 28)
#define MAX_PATH_DEPTH 16
#define TPFLAGS_HEAPTYPE (1ul << 9)       /* classes made by a class statement (3.8-3.15) */

struct sb {
    char *buf;
    size_t cap;        /* usable bytes, excluding the NUL */
    size_t len;
    bool full;
};

static void sb_put(struct sb *s, const char *text, size_t n)
{
    if (s->full)
        return;
    if (n > s->cap - s->len) {
        n = s->cap - s->len;
        s->full = true;
    }
    memcpy(s->buf + s->len, text, n);
    s->len += n;
    s->buf[s->len] = '\0';
}

static void sb_str(struct sb *s, const char *text)
{
    sb_put(s, text, strlen(text));
}

__attribute__((format(printf, 2, 3)))
static void sb_printf(struct sb *s, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        sb_put(s, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

struct repr_ctx {
    struct py_reader *r;
    const struct repr_limits *lim;
    uint64_t path[MAX_PATH_DEPTH];   /* containers being printed, outermost first */
    int depth;
};

static void repr_object(struct repr_ctx *c, struct sb *s, uint64_t obj);

void locals_type_name(struct py_reader *r, uint64_t obj, char *out, size_t outsize)
{
    const char *name;
    if (py_type_of(r, obj, NULL, &name) != 0)
        name = "?";
    snprintf(out, outsize, "%s", name);
}

static void unreadable(struct sb *s, uint64_t obj)
{
    sb_printf(s, "<unreadable 0x%" PRIx64 ">", obj);
}

static void opaque(struct sb *s, const char *type, uint64_t obj)
{
    sb_printf(s, "<%s object at 0x%" PRIx64 ">", type, obj);
}

void locals_float_text(double value, char *out, size_t outsize)
{
    if (isnan(value)) {
        snprintf(out, outsize, "nan");
        return;
    }
    if (isinf(value)) {
        snprintf(out, outsize, value < 0 ? "-inf" : "inf");
        return;
    }
    char buf[64];
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(buf, sizeof buf, "%.*g", precision, value);
        if (strtod(buf, NULL) == value)
            break;
    }
    /* repr(1e16) is '1e+16' and repr(1.0) is '1.0': %g drops the point. */
    if (!strpbrk(buf, ".e"))
        strncat(buf, ".0", sizeof buf - strlen(buf) - 1);
    snprintf(out, outsize, "%s", buf);
}

void locals_int_digits_to_text(const uint32_t *digits, size_t ndigits, bool negative,
                               int max_digits, char *out, size_t outsize)
{
    if (outsize == 0)
        return;
    if (ndigits > MAX_INT_DIGITS) {
        snprintf(out, outsize, "<int with %zu 30-bit digits>", ndigits);
        return;
    }
    /* Repeated division by 10^9 of the base-2^30 number: at most
     * MAX_INT_DIGITS * 30 bits, so about 1100 decimal digits. */
    uint32_t work[MAX_INT_DIGITS];
    for (size_t i = 0; i < ndigits; i++)
        work[i] = digits[i] & 0x3fffffffu;
    size_t n = ndigits;
    while (n > 0 && work[n - 1] == 0)
        n--;
    uint32_t chunks[(MAX_INT_DIGITS * 30) / 29 + 2];
    size_t nchunks = 0;
    while (n > 0 && nchunks < sizeof chunks / sizeof chunks[0]) {
        uint64_t rem = 0;
        for (size_t i = n; i-- > 0;) {
            uint64_t cur = (rem << 30) | work[i];
            work[i] = (uint32_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        chunks[nchunks++] = (uint32_t)rem;
        while (n > 0 && work[n - 1] == 0)
            n--;
    }
    char text[(sizeof chunks / sizeof chunks[0]) * 9 + 2];
    size_t len = 0;
    if (nchunks == 0) {
        text[len++] = '0';
    } else {
        len += (size_t)snprintf(text, sizeof text, "%" PRIu32, chunks[nchunks - 1]);
        for (size_t i = nchunks - 1; i-- > 0;)
            len += (size_t)snprintf(text + len, sizeof text - len, "%09" PRIu32, chunks[i]);
    }
    text[len] = '\0';
    if (max_digits > 0 && len > (size_t)max_digits)
        snprintf(out, outsize, "%s%.*s...(%zu digits)", negative ? "-" : "", max_digits, text,
                 len);
    else
        snprintf(out, outsize, "%s%s", negative ? "-" : "", text);
}

static void repr_int(struct repr_ctx *c, struct sb *s, uint64_t obj, bool is_bool)
{
    const struct py_layout *L = c->r->L;
    uint64_t word;
    int64_t ndigits;
    bool negative;
    if (L->long_tag != PY_OFF_NONE) {
        if (target_read_u64(c->r->t, obj + (uint64_t)L->long_tag, &word) != 0)
            { unreadable(s, obj); return; }
        ndigits = (int64_t)(word >> 3);
        negative = (word & 3) == 2;
    } else {
        if (target_read_u64(c->r->t, obj + (uint64_t)L->ob_size, &word) != 0)
            { unreadable(s, obj); return; }
        int64_t size = (int64_t)word;
        negative = size < 0;
        ndigits = size < 0 ? -size : size;
    }
    if (ndigits < 0 || ndigits > (1 << 24))
        { unreadable(s, obj); return; }
    if (ndigits > MAX_INT_DIGITS) {
        sb_printf(s, "<int with %" PRId64 " 30-bit digits>", ndigits);
        return;
    }
    uint32_t digits[MAX_INT_DIGITS];
    if (ndigits && target_read(c->r->t, obj + (uint64_t)L->long_digits, digits,
                               (size_t)ndigits * 4) != 0)
        { unreadable(s, obj); return; }
    if (is_bool) {
        bool truth = ndigits > 0 && (digits[0] & 0x3fffffffu) != 0;
        sb_str(s, truth ? "True" : "False");
        return;
    }
    char text[MAX_INT_DIGITS * 10 + 64];
    locals_int_digits_to_text(digits, (size_t)ndigits, negative, c->lim->max_chars, text,
                              sizeof text);
    sb_str(s, text);
}

/* 5000000 -> "5,000,000": a length users can read at a glance. */
static void put_count(struct sb *s, int64_t n)
{
    char digits[24], out[32];
    int len = snprintf(digits, sizeof digits, "%" PRId64, n), o = 0;
    for (int i = 0; i < len; i++) {
        if (i > 0 && digits[i - 1] != '-' && (len - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    sb_str(s, out);
}

/* str.isprintable() is false for the categories Cc, Cf, Cs, Co, Zl, Zp, Zs
 * (except the space) and unassigned code points. Without the Unicode
 * database this covers the first six and the noncharacters; unassigned code
 * points print as themselves. */
static bool printable(uint32_t cp)
{
    static const uint32_t ranges[][2] = {
        {0x7f, 0xa0}, {0xad, 0xad}, {0x600, 0x605}, {0x61c, 0x61c}, {0x6dd, 0x6dd},
        {0x70f, 0x70f}, {0x1680, 0x1680}, {0x180e, 0x180e}, {0x2000, 0x200f},
        {0x2028, 0x202f}, {0x205f, 0x2064}, {0x2066, 0x206f}, {0x3000, 0x3000},
        {0xd800, 0xf8ff}, {0xfdd0, 0xfdef}, {0xfeff, 0xfeff}, {0xfff9, 0xfffb},
        {0x110bd, 0x110bd}, {0x1d173, 0x1d17a}, {0xe0001, 0xe0001}, {0xe0020, 0xe007f},
        {0xf0000, 0x10ffff},
    };
    if (cp < 0x20)
        return false;
    if ((cp & 0xfffe) == 0xfffe)
        return false;
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (cp >= ranges[i][0] && cp <= ranges[i][1])
            return false;
    return cp <= 0x10ffff;
}

/* Appends code points as the body of a Python string literal quoted by q,
 * escaped the way repr() escapes them (lone surrogates become \udcff). */
static void put_escaped_code_points(struct sb *s, const uint32_t *cps, size_t n, char q)
{
    for (size_t i = 0; i < n && !s->full; i++) {
        uint32_t cp = cps[i];
        char esc[16];
        if (cp == '\\' || cp == (uint32_t)(unsigned char)q) {
            esc[0] = '\\';
            esc[1] = (char)cp;
            sb_put(s, esc, 2);
        } else if (cp == '\n') {
            sb_str(s, "\\n");
        } else if (cp == '\r') {
            sb_str(s, "\\r");
        } else if (cp == '\t') {
            sb_str(s, "\\t");
        } else if (!printable(cp)) {
            if (cp <= 0xff)
                snprintf(esc, sizeof esc, "\\x%02x", cp);
            else if (cp <= 0xffff)
                snprintf(esc, sizeof esc, "\\u%04x", cp);
            else
                snprintf(esc, sizeof esc, "\\U%08x", cp);
            sb_str(s, esc);
        } else {
            char utf8[8];
            size_t len = py_ucs_to_utf8(&cp, 1, 4, utf8, sizeof utf8);
            sb_put(s, utf8, len);
        }
    }
}

/* A str of any length: only its first max_chars characters are read, and a
 * cut one ends in an ellipsis with its length, 'aaaa…' (5,000,000 chars).
 * The quote is chosen from the characters shown. */
static void repr_str(struct repr_ctx *c, struct sb *s, uint64_t obj)
{
    size_t max = (size_t)c->lim->max_chars, n = 0;
    int64_t length;
    uint32_t *cps = malloc(max * sizeof *cps);
    if (!cps || py_read_str_head(c->r->t, c->r->L, obj, cps, max, &n, &length) != 0) {
        free(cps);
        unreadable(s, obj);
        return;
    }
    bool has_single = false, has_double = false;
    for (size_t i = 0; i < n; i++) {
        has_single |= cps[i] == '\'';
        has_double |= cps[i] == '"';
    }
    char q = has_single && !has_double ? '"' : '\'';
    sb_put(s, &q, 1);
    put_escaped_code_points(s, cps, n, q);
    if ((uint64_t)length > n)
        sb_str(s, "\xe2\x80\xa6");
    sb_put(s, &q, 1);
    if ((uint64_t)length > n) {
        sb_str(s, " (");
        put_count(s, length);
        sb_str(s, " chars)");
    }
    free(cps);
}

static void repr_bytes(struct repr_ctx *c, struct sb *s, uint64_t obj)
{
    size_t full = 0, max = (size_t)c->lim->max_chars;
    unsigned char *data = malloc(max ? max : 1);
    ssize_t n = data ? py_read_bytes(c->r->t, c->r->L, obj, data, max, &full) : -1;
    if (n < 0) {
        free(data);
        { unreadable(s, obj); return; }
    }
    bool has_single = memchr(data, '\'', (size_t)n) != NULL;
    bool has_double = memchr(data, '"', (size_t)n) != NULL;
    char q = has_single && !has_double ? '"' : '\'';
    sb_str(s, "b");
    sb_put(s, &q, 1);
    for (ssize_t i = 0; i < n && !s->full; i++) {
        unsigned char ch = data[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != (unsigned char)q) {
            sb_put(s, (const char *)&ch, 1);
        } else {
            char esc[8];
            if (ch == '\\' || ch == (unsigned char)q)
                snprintf(esc, sizeof esc, "\\%c", ch);
            else if (ch == '\n')
                snprintf(esc, sizeof esc, "\\n");
            else if (ch == '\r')
                snprintf(esc, sizeof esc, "\\r");
            else if (ch == '\t')
                snprintf(esc, sizeof esc, "\\t");
            else
                snprintf(esc, sizeof esc, "\\x%02x", ch);
            sb_str(s, esc);
        }
    }
    if (full > max)
        sb_str(s, "\xe2\x80\xa6");
    sb_put(s, &q, 1);
    if (full > max) {
        sb_str(s, " (");
        put_count(s, (int64_t)full);
        sb_str(s, " bytes)");
    }
    free(data);
}

static bool on_path(const struct repr_ctx *c, uint64_t obj)
{
    for (int i = 0; i < c->depth; i++)
        if (c->path[i] == obj)
            return true;
    return false;
}

/* tuple and list: n items from an array of object pointers. */
static void repr_sequence(struct repr_ctx *c, struct sb *s, uint64_t obj, bool is_tuple)
{
    const struct py_layout *L = c->r->L;
    int64_t size;
    uint64_t items = obj + (uint64_t)L->tuple_items;
    if (target_read(c->r->t, obj + (uint64_t)L->ob_size, &size, sizeof size) != 0 || size < 0 ||
        size > MAX_CONTAINER_ITEMS)
        { unreadable(s, obj); return; }
    if (!is_tuple && target_read_u64(c->r->t, obj + (uint64_t)L->list_items, &items) != 0)
        { unreadable(s, obj); return; }
    const char *open = is_tuple ? "(" : "[", *close = is_tuple ? ")" : "]";
    if (on_path(c, obj)) {
        sb_str(s, open);
        sb_str(s, "...");
        sb_str(s, close);
        return;
    }
    if (c->depth >= c->lim->max_depth || c->depth >= MAX_PATH_DEPTH) {
        sb_printf(s, "<%s len=%" PRId64 ">", is_tuple ? "tuple" : "list", size);
        return;
    }
    c->path[c->depth++] = obj;
    sb_str(s, open);
    int64_t shown = size < c->lim->max_items ? size : c->lim->max_items;
    for (int64_t i = 0; i < shown && !s->full; i++) {
        uint64_t item;
        if (i > 0)
            sb_str(s, ", ");
        if (target_read_u64(c->r->t, items + (uint64_t)i * 8, &item) != 0 || item == 0) {
            unreadable(s, items + (uint64_t)i * 8);
            continue;
        }
        repr_object(c, s, item);
    }
    if (shown < size)
        sb_str(s, ", ...");
    else if (is_tuple && size == 1)
        sb_str(s, ",");
    sb_str(s, close);
    if (shown < size)
        sb_printf(s, " (len=%" PRId64 ")", size);
    c->depth--;
}

struct dict_walk {
    struct repr_ctx *c;
    struct sb *s;
    int shown;
};

static int dict_item(void *vctx, uint64_t key, uint64_t value)
{
    struct dict_walk *w = vctx;
    if (w->shown >= w->c->lim->max_items || w->s->full)
        return 1;
    if (w->shown > 0)
        sb_str(w->s, ", ");
    repr_object(w->c, w->s, key);
    sb_str(w->s, ": ");
    repr_object(w->c, w->s, value);
    w->shown++;
    return 0;
}

static void repr_dict(struct repr_ctx *c, struct sb *s, uint64_t obj)
{
    int64_t used;
    if (target_read(c->r->t, obj + (uint64_t)c->r->L->dict_used, &used, sizeof used) != 0 ||
        used < 0 || used > MAX_CONTAINER_ITEMS)
        { unreadable(s, obj); return; }
    if (on_path(c, obj)) {
        sb_str(s, "{...}");
        return;
    }
    if (c->depth >= c->lim->max_depth || c->depth >= MAX_PATH_DEPTH) {
        sb_printf(s, "<dict len=%" PRId64 ">", used);
        return;
    }
    c->path[c->depth++] = obj;
    sb_str(s, "{");
    struct dict_walk w = {c, s, 0};
    /* One extra item is visited only to learn that there are more. */
    int visited = py_dict_items(c->r, obj, c->lim->max_items + 1, dict_item, &w);
    if (visited < 0 && w.shown == 0) {
        sb_str(s, "<unreadable>");
    } else if (w.shown < used) {
        sb_str(s, w.shown ? ", ..." : "...");
    }
    sb_str(s, "}");
    if (w.shown < used)
        sb_printf(s, " (len=%" PRId64 ")", used);
    c->depth--;
}

static void repr_set(struct repr_ctx *c, struct sb *s, uint64_t obj, bool frozen)
{
    struct target *t = c->r->t;
    int64_t used, mask;
    uint64_t table;
    if (target_read(t, obj + (uint64_t)c->r->L->set_used, &used, 8) != 0 ||
        target_read(t, obj + (uint64_t)c->r->L->set_mask, &mask, 8) != 0 ||
        target_read_u64(t, obj + (uint64_t)c->r->L->set_table, &table) != 0 || used < 0 || mask < 0 ||
        mask > MAX_CONTAINER_ITEMS || used > mask + 1 || table == 0)
        { unreadable(s, obj); return; }
    const char *prefix = frozen ? "frozenset(" : "";
    if (used == 0) {
        sb_str(s, frozen ? "frozenset()" : "set()");
        return;
    }
    if (on_path(c, obj)) {
        sb_printf(s, "%s{...}%s", prefix, frozen ? ")" : "");
        return;
    }
    if (c->depth >= c->lim->max_depth || c->depth >= MAX_PATH_DEPTH) {
        sb_printf(s, "<%s len=%" PRId64 ">", frozen ? "frozenset" : "set", used);
        return;
    }
    c->path[c->depth++] = obj;
    sb_str(s, prefix);
    sb_str(s, "{");
    int shown = 0;
    for (int64_t i = 0; i <= mask && shown < c->lim->max_items && !s->full; i++) {
        uint64_t key;
        if (target_read_u64(t, table + (uint64_t)i * 16, &key) != 0)
            break;
        const char *type;
        /* Deleted slots hold a dummy object of this static type. */
        if (key == 0 || py_type_of(c->r, key, NULL, &type) != 0 ||
            strcmp(type, "<dummy key> type") == 0)
            continue;
        if (shown > 0)
            sb_str(s, ", ");
        repr_object(c, s, key);
        shown++;
    }
    if (shown < used)
        sb_str(s, shown ? ", ..." : "...");
    sb_str(s, "}");
    if (frozen)
        sb_str(s, ")");
    if (shown < used)
        sb_printf(s, " (len=%" PRId64 ")", used);
    c->depth--;
}

struct attr_walk {
    struct repr_ctx *c;
    struct sb *s;
    int shown;
    bool more;
};

static int attr_item(void *vctx, uint64_t key, uint64_t value)
{
    struct attr_walk *w = vctx;
    if (w->shown >= w->c->lim->max_items || w->s->full) {
        w->more = true;
        return 1;
    }
    char name[128];
    if (py_str(w->c->r, key, name, sizeof name) != 0)
        return 0;
    if (w->shown > 0)
        sb_str(w->s, ", ");
    sb_str(w->s, name);
    sb_str(w->s, "=");
    repr_object(w->c, w->s, value);
    w->shown++;
    return 0;
}

/* An instance of a class defined in Python, summarised the way gdb's
 * libpython does, Node(depth=500, child=None): its first attributes, from
 * its __dict__ or inline values. Returns false when it has none, or none
 * readable, so the caller falls back to <Node object at 0x...>. */
static bool repr_instance(struct repr_ctx *c, struct sb *s, uint64_t obj, const char *name)
{
    uint64_t type, flags;
    if (py_type_of(c->r, obj, &type, NULL) != 0 ||
        target_read_u64(c->r->t, type + (uint64_t)c->r->L->type_flags, &flags) != 0 ||
        !(flags & TPFLAGS_HEAPTYPE))
        return false;
    if (on_path(c, obj)) {
        sb_printf(s, "%s(...)", name);
        return true;
    }
    if (c->depth >= c->lim->max_depth || c->depth >= MAX_PATH_DEPTH)
        return false;
    /* Written to a scratch buffer first: an unreadable instance must not
     * leave a half-written "Node(" behind. */
    char *scratch = malloc(REPR_MAX_BYTES + 1);
    if (!scratch)
        return false;
    struct sb inner = {scratch, s->cap - s->len, 0, false};
    scratch[0] = '\0';
    c->path[c->depth++] = obj;
    struct attr_walk w = {c, &inner, 0, false};
    int visited = py_attr_items(c->r, obj, c->lim->max_items + 1, attr_item, &w);
    c->depth--;
    /* No attribute to show (a C type's instance without a __dict__, an
     * empty object): its address says more than "Task()". */
    if (visited <= 0) {
        free(scratch);
        return false;
    }
    sb_str(s, name);
    sb_str(s, "(");
    sb_put(s, scratch, inner.len);
    if (w.more || inner.full)
        sb_str(s, w.shown ? ", ..." : "...");
    sb_str(s, ")");
    free(scratch);
    return true;
}

static void repr_object(struct repr_ctx *c, struct sb *s, uint64_t obj)
{
    if (s->full)
        return;
    const char *type;
    if (obj == 0 || py_type_of(c->r, obj, NULL, &type) != 0)
        { unreadable(s, obj); return; }
    /* py_type_of's name lives in a cache slot that nested reads may reuse. */
    char name[48];
    snprintf(name, sizeof name, "%s", type);
    if (strcmp(name, "NoneType") == 0)
        sb_str(s, "None");
    else if (strcmp(name, "bool") == 0)
        repr_int(c, s, obj, true);
    else if (strcmp(name, "int") == 0)
        repr_int(c, s, obj, false);
    else if (strcmp(name, "float") == 0) {
        double v;
        char text[64];
        if (c->r->L->float_value == PY_OFF_NONE ||
            target_read(c->r->t, obj + (uint64_t)c->r->L->float_value, &v, sizeof v) != 0)
            { unreadable(s, obj); return; }
        locals_float_text(v, text, sizeof text);
        sb_str(s, text);
    } else if (strcmp(name, "str") == 0)
        repr_str(c, s, obj);
    else if (strcmp(name, "bytes") == 0)
        repr_bytes(c, s, obj);
    else if (strcmp(name, "tuple") == 0)
        repr_sequence(c, s, obj, true);
    else if (strcmp(name, "list") == 0)
        repr_sequence(c, s, obj, false);
    else if (strcmp(name, "dict") == 0)
        repr_dict(c, s, obj);
    else if (strcmp(name, "set") == 0)
        repr_set(c, s, obj, false);
    else if (strcmp(name, "frozenset") == 0)
        repr_set(c, s, obj, true);
    else if (!repr_instance(c, s, obj, name))
        opaque(s, name, obj);
}

int py_object_repr(struct py_reader *r, uint64_t obj, const struct repr_limits *limits, char *out,
                size_t outsize)
{
    static const struct repr_limits defaults = REPR_DEFAULT_LIMITS;
    if (!out || outsize < 16)
        return -1;
    struct repr_limits lim = limits ? *limits : defaults;
    if (lim.max_depth < 1)
        lim.max_depth = 1;
    if (lim.max_items < 0)
        lim.max_items = 0;
    if (lim.max_chars < 1)
        lim.max_chars = 1;
    struct repr_ctx c = {.r = r, .lim = &lim, .depth = 0};
    size_t cap = outsize - 1;
    if (cap > REPR_MAX_BYTES)
        cap = REPR_MAX_BYTES;
    struct sb s = {out, cap, 0, false};
    out[0] = '\0';
    repr_object(&c, &s, obj);
    if (s.full) {
        /* Never leave half a UTF-8 character, and say the text was cut. */
        size_t keep = s.len > 3 ? s.len - 3 : 0;
        while (keep > 0 && ((unsigned char)out[keep] & 0xc0) == 0x80)
            keep--;
        memcpy(out + keep, "...", 4);
    }
    const char *type;
    return obj && py_type_of(r, obj, NULL, &type) == 0 ? 0 : -1;
}
