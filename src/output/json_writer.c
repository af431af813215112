/* The streaming JSON writer: separator and indentation bookkeeping for
 * nested containers, and string escaping that always yields valid UTF-8. */
#include "output/json_writer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPEN_OBJECT = 1,
    OPEN_ARRAY = 2,
    OPEN_KIND_MASK = 3,
    OPEN_HAS_MEMBERS = 4,
};

void json_init(struct json_writer *w, FILE *out, int indent)
{
    w->out = out;
    w->indent = indent > 0 ? indent : 0;
    w->depth = 0;
    w->key_pending = false;
    w->wrote_top_level = false;
    w->failed = out == NULL;
}

static int fail(struct json_writer *w)
{
    w->failed = true;
    return -1;
}

static void newline_and_indent(struct json_writer *w, int depth)
{
    if (w->indent == 0)
        return;
    static const char spaces[] = "                                                                ";
    fputc_unlocked('\n', w->out);
    int n = depth * w->indent;
    while (n > 0) {
        int chunk = n < (int)sizeof spaces - 1 ? n : (int)sizeof spaces - 1;
        fwrite_unlocked(spaces, 1, (size_t)chunk, w->out);
        n -= chunk;
    }
}

/* Emits whatever must precede the next member of the innermost container
 * (comma, line break) and marks the container non-empty. */
static void start_member(struct json_writer *w)
{
    unsigned char *top = &w->open[w->depth - 1];
    if (*top & OPEN_HAS_MEMBERS)
        fputc_unlocked(',', w->out);
    *top |= OPEN_HAS_MEMBERS;
    newline_and_indent(w, w->depth);
}

/* Checks a value may be written here and writes its leading separator. */
static int before_value(struct json_writer *w)
{
    if (w->failed)
        return -1;
    if (w->depth == 0) {
        if (w->wrote_top_level)
            fputc_unlocked('\n', w->out);
        return 0;
    }
    if ((w->open[w->depth - 1] & OPEN_KIND_MASK) == OPEN_OBJECT) {
        if (!w->key_pending)
            return fail(w);
        w->key_pending = false;
        return 0;
    }
    start_member(w);
    return 0;
}

static void after_value(struct json_writer *w)
{
    if (w->depth == 0)
        w->wrote_top_level = true;
}

static int begin(struct json_writer *w, unsigned char kind, char bracket)
{
    if (before_value(w) != 0)
        return -1;
    if (w->depth == JSON_MAX_DEPTH)
        return fail(w);
    w->open[w->depth++] = kind;
    fputc_unlocked(bracket, w->out);
    return 0;
}

static int end(struct json_writer *w, unsigned char kind, char bracket)
{
    if (w->failed)
        return -1;
    if (w->depth == 0 || (w->open[w->depth - 1] & OPEN_KIND_MASK) != kind || w->key_pending)
        return fail(w);
    int had_members = (w->open[w->depth - 1] & OPEN_HAS_MEMBERS) != 0;
    w->depth--;
    if (had_members)
        newline_and_indent(w, w->depth);
    fputc_unlocked(bracket, w->out);
    after_value(w);
    return 0;
}

int json_begin_object(struct json_writer *w)
{
    return begin(w, OPEN_OBJECT, '{');
}

int json_end_object(struct json_writer *w)
{
    return end(w, OPEN_OBJECT, '}');
}

int json_begin_array(struct json_writer *w)
{
    return begin(w, OPEN_ARRAY, '[');
}

int json_end_array(struct json_writer *w)
{
    return end(w, OPEN_ARRAY, ']');
}

/* Length of the well-formed UTF-8 sequence at p (Unicode Table 3-7), or 0
 * with *bad set to the length of its maximal ill-formed prefix, which is
 * what one U+FFFD replaces (the Unicode "best practice"). */
static size_t utf8_sequence(const unsigned char *p, size_t avail, size_t *bad)
{
    unsigned char lead = p[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (lead >= 0xC2 && lead <= 0xDF) {
        need = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        need = 3;
        if (lead == 0xE0)
            lo = 0xA0; /* no overlong forms */
        if (lead == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        need = 4;
        if (lead == 0xF0)
            lo = 0x90;
        if (lead == 0xF4)
            hi = 0x8F; /* nothing past U+10FFFF */
    } else {
        *bad = 1;
        return 0;
    }
    size_t i = 1;
    for (; i < need && i < avail; i++) {
        unsigned char c = p[i];
        unsigned char min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
        if (c < min || c > max)
            break;
    }
    if (i == need)
        return need;
    *bad = i;
    return 0;
}

static void write_escaped(FILE *out, const unsigned char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    fputc_unlocked('"', out);
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (c >= 0x80) {
            size_t bad = 1;
            size_t n = utf8_sequence(s + i, len - i, &bad);
            if (n) {
                fwrite(s + i, 1, n, out);
                i += n;
            } else {
                fputs("\xEF\xBF\xBD", out);
                i += bad;
            }
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\') {
            /* Plain ASCII runs are the bulk of any dump: copy them whole. */
            size_t run = 1;
            while (i + run < len && s[i + run] >= 0x20 && s[i + run] < 0x80 &&
                   s[i + run] != '"' && s[i + run] != '\\')
                run++;
            fwrite_unlocked(s + i, 1, run, out);
            i += run;
            continue;
        }
        switch (c) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\b':
            fputs("\\b", out);
            break;
        case '\f':
            fputs("\\f", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        default:
            if (c < 0x20) {
                fputs("\\u00", out);
                fputc_unlocked(hex[c >> 4], out);
                fputc_unlocked(hex[c & 15], out);
            } else {
                fputc_unlocked(c, out);
            }
        }
        i++;
    }
    fputc_unlocked('"', out);
}

int json_key(struct json_writer *w, const char *key)
{
    if (w->failed)
        return -1;
    if (w->depth == 0 || (w->open[w->depth - 1] & OPEN_KIND_MASK) != OPEN_OBJECT ||
        w->key_pending || key == NULL)
        return fail(w);
    start_member(w);
    write_escaped(w->out, (const unsigned char *)key, strlen(key));
    fputs(w->indent ? ": " : ":", w->out);
    w->key_pending = true;
    return 0;
}

int json_string_n(struct json_writer *w, const char *s, size_t len)
{
    if (s == NULL)
        return json_null(w);
    if (before_value(w) != 0)
        return -1;
    write_escaped(w->out, (const unsigned char *)s, len);
    after_value(w);
    return 0;
}

int json_string(struct json_writer *w, const char *s)
{
    return json_string_n(w, s, s ? strlen(s) : 0);
}

static int write_literal(struct json_writer *w, const char *text)
{
    if (before_value(w) != 0)
        return -1;
    fputs(text, w->out);
    after_value(w);
    return 0;
}

int json_int(struct json_writer *w, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    return write_literal(w, buf);
}

int json_uint(struct json_writer *w, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    return write_literal(w, buf);
}

int json_double(struct json_writer *w, double v)
{
    if (!isfinite(v))
        return json_null(w);
    char buf[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof(buf), "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    /* A locale with a decimal comma must not leak into JSON. */
    for (char *p = buf; *p; p++) {
        if (*p == ',')
            *p = '.';
    }
    return write_literal(w, buf);
}

int json_bool(struct json_writer *w, bool v)
{
    return write_literal(w, v ? "true" : "false");
}

int json_null(struct json_writer *w)
{
    return write_literal(w, "null");
}

int json_member_string(struct json_writer *w, const char *key, const char *s)
{
    return json_key(w, key) == 0 ? json_string(w, s) : -1;
}

int json_member_int(struct json_writer *w, const char *key, int64_t v)
{
    return json_key(w, key) == 0 ? json_int(w, v) : -1;
}

int json_member_uint(struct json_writer *w, const char *key, uint64_t v)
{
    return json_key(w, key) == 0 ? json_uint(w, v) : -1;
}

int json_member_bool(struct json_writer *w, const char *key, bool v)
{
    return json_key(w, key) == 0 ? json_bool(w, v) : -1;
}

int json_member_null(struct json_writer *w, const char *key)
{
    return json_key(w, key) == 0 ? json_null(w) : -1;
}

int json_finish(struct json_writer *w)
{
    if (w->out == NULL)
        return -1;
    if (!w->failed && w->indent && w->depth == 0 && w->wrote_top_level)
        fputc_unlocked('\n', w->out);
    int io_error = fflush(w->out) != 0 || ferror(w->out);
    if (w->failed || w->depth != 0 || w->key_pending || io_error)
        return -1;
    return 0;
}
