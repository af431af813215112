/* Checks str/bytes decoding: the pure UTF-8 conversion, and py_read_str /
 * py_read_bytes over object images captured from live 3.8-3.15 interpreters
 * (tests/unit/fixtures/strings, made by tools/gen_fixtures/str_fixtures.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_target.h"
#include "python/strings.h"
#include "unit.h"

#define DEFAULT_FIXTURE_DIR "tests/unit/fixtures/strings"

static const struct {
    const char *file;
    int minor;
} fixture_versions[] = {
    { "py38", 8 },   { "py39", 9 },   { "py310", 10 }, { "py311", 11 },
    { "py312", 12 }, { "py313", 13 }, { "py314", 14 }, { "py315", 15 },
};

/* The str/bytes offsets layout.h is expected to carry for a 3.minor build;
 * the fixtures were only written after the generator confirmed them live. */
static struct py_layout layout_for_minor(int minor)
{
    struct py_layout L;
    memset(&L, 0, sizeof(L));
    L.unicode_length = 16;
    L.unicode_state = 32;
    L.unicode_ascii_size = minor <= 11 ? 48 : 40;
    L.unicode_compact_size = minor <= 11 ? 72 : 56;
    L.unicode_data_any = L.unicode_compact_size;
    L.ob_size = 16;
    L.bytes_sval = 32;
    return L;
}

static size_t utf8_char_len(unsigned char lead)
{
    if (lead < 0x80)
        return 1;
    if (lead < 0xE0)
        return 2;
    if (lead < 0xF0)
        return 3;
    return 4;
}

static int unhex(const char *hex, unsigned char **out, size_t *len)
{
    size_t n = strcspn(hex, " \n");
    *out = NULL;
    *len = 0;
    if (n == 1 && hex[0] == '-') {
        *out = malloc(1);
        return *out ? 0 : -1;
    }
    if (n % 2)
        return -1;
    *out = malloc(n / 2 + 1);
    if (*out == NULL)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        (*out)[i] = (unsigned char)v;
    }
    *len = n / 2;
    return 0;
}

/* A truncated read must be the longest whole-character prefix that fits. */
static void check_truncations(struct target *t, const struct py_layout *L, uint64_t addr,
                              const unsigned char *want, size_t want_len, const char *name)
{
    char out[64];
    for (size_t outsize = 1; outsize <= sizeof(out); outsize++) {
        memset(out, 'X', sizeof(out));
        if (py_read_str(t, L, addr, out, outsize) != 0) {
            CHECK(!"truncated read failed");
            return;
        }
        size_t fit = 0;
        while (fit < want_len && fit + utf8_char_len(want[fit]) <= outsize - 1)
            fit += utf8_char_len(want[fit]);
        if (memcmp(out, want, fit) != 0 || out[fit] != '\0') {
            CHECK(!"truncated read is not the longest fitting prefix");
            fprintf(stderr, "    %s with outsize %zu\n", name, outsize);
            return;
        }
    }
    CHECK(1);
}

static void check_str_record(struct target *t, const struct py_layout *L, const char *line)
{
    char name[64], hex_tail[8];
    unsigned long long addr;
    int kind, compact, ascii, used;
    if (sscanf(line, "str %63s %llx %d %d %d %n%7s", name, &addr, &kind, &compact, &ascii, &used,
               hex_tail) < 5) {
        CHECK(!"malformed str record");
        return;
    }
    unsigned char *want;
    size_t want_len;
    CHECK(unhex(line + used, &want, &want_len) == 0);

    /* The state word in the image decodes to what Python said the string is. */
    uint32_t state;
    struct py_unicode_shape shape;
    CHECK(target_read(t, addr + (uint64_t)L->unicode_state, &state, sizeof(state)) == 0);
    CHECK(py_unicode_layout_of(state, &shape) == 0);
    CHECK_EQ_INT(shape.kind, kind);
    CHECK_EQ_INT(shape.compact, compact);
    CHECK_EQ_INT(shape.ascii, ascii);

    size_t cap = want_len * 2 + 16;
    char *out = malloc(cap);
    CHECK_EQ_INT(py_read_str(t, L, addr, out, cap), 0);
    int same = memcmp(out, want, want_len) == 0 && out[want_len] == '\0';
    CHECK(same);
    if (!same)
        fprintf(stderr, "    %s decoded as \"%s\"\n", name, out);
    check_truncations(t, L, addr, want, want_len, name);
    free(out);
    free(want);
}

static void check_bytes_record(struct target *t, const struct py_layout *L, const char *line)
{
    char name[64];
    unsigned long long addr;
    int used;
    if (sscanf(line, "bytes %63s %llx %n", name, &addr, &used) < 2) {
        CHECK(!"malformed bytes record");
        return;
    }
    unsigned char *want;
    size_t want_len;
    CHECK(unhex(line + used, &want, &want_len) == 0);
    unsigned char out[1024];
    size_t full = 12345;
    CHECK_EQ_INT(py_read_bytes(t, L, addr, out, sizeof(out), &full), (long long)want_len);
    CHECK_EQ_INT(full, want_len);
    CHECK(memcmp(out, want, want_len) == 0);
    size_t short_max = want_len < 3 ? want_len : 3;
    CHECK_EQ_INT(py_read_bytes(t, L, addr, out, 3, NULL), (long long)short_max);
    CHECK(memcmp(out, want, short_max) == 0);
    CHECK_EQ_INT(py_read_bytes(t, L, addr, NULL, 0, &full), 0);
    CHECK_EQ_INT(full, want_len);
    free(want);
}

/* Runs every record of one version's file, twice: without and with the
 * target page cache, since both paths serve py_read_str in pyscope. */
static void check_fixture_file(const char *dir, const char *file, int minor, int *objects)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s.txt", dir, file);
    for (int cached = 0; cached <= 1; cached++) {
        FILE *f = fopen(path, "r");
        CHECK(f != NULL);
        if (f == NULL) {
            fprintf(stderr, "    cannot open %s\n", path);
            return;
        }
        struct target *t = fake_target_new();
        if (cached)
            CHECK(target_cache_enable(t) == 0);
        struct py_layout L = layout_for_minor(minor);
        char *line = NULL;
        size_t cap = 0;
        /* Memory first: records come before the mem lines in the file. */
        while (getline(&line, &cap, f) > 0) {
            unsigned long long addr;
            int used;
            if (sscanf(line, "mem %llx %n", &addr, &used) >= 1) {
                unsigned char *bytes;
                size_t len;
                CHECK(unhex(line + used, &bytes, &len) == 0);
                CHECK(fake_target_map(t, addr, bytes, len) == 0);
                free(bytes);
            } else if (strncmp(line, "header ", 7) == 0) {
                long ascii_size, compact_size;
                CHECK(sscanf(line + 7, "%ld %ld", &ascii_size, &compact_size) == 2);
                CHECK_EQ_INT(ascii_size, L.unicode_ascii_size);
                CHECK_EQ_INT(compact_size, L.unicode_compact_size);
            }
        }
        rewind(f);
        while (getline(&line, &cap, f) > 0) {
            if (strncmp(line, "str ", 4) == 0) {
                check_str_record(t, &L, line);
                *objects += !cached;
            } else if (strncmp(line, "bytes ", 6) == 0) {
                check_bytes_record(t, &L, line);
                *objects += !cached;
            }
        }
        free(line);
        fclose(f);
        fake_target_free(t);
    }
}

static void test_fixtures(const char *dir)
{
    int objects = 0;
    for (size_t i = 0; i < sizeof(fixture_versions) / sizeof(fixture_versions[0]); i++)
        check_fixture_file(dir, fixture_versions[i].file, fixture_versions[i].minor, &objects);
    CHECK(objects >= 8 * 19);
    printf("string fixtures: %d objects across %zu versions\n", objects,
           sizeof(fixture_versions) / sizeof(fixture_versions[0]));
}

static uint32_t make_state(unsigned interned, unsigned kind, unsigned compact, unsigned ascii,
                           unsigned bit7)
{
    return interned | kind << 2 | compact << 5 | ascii << 6 | bit7 << 7;
}

static void test_layout_of(void)
{
    struct py_unicode_shape s;
    CHECK_EQ_INT(py_unicode_layout_of(make_state(0, 1, 1, 1, 1), &s), 0);
    CHECK(s.kind == 1 && s.compact == 1 && s.ascii == 1);
    CHECK_EQ_INT(py_unicode_layout_of(make_state(3, 2, 1, 0, 0), &s), 0);
    CHECK(s.kind == 2 && s.compact == 1 && s.ascii == 0);
    CHECK_EQ_INT(py_unicode_layout_of(make_state(1, 4, 0, 0, 1), &s), 0);
    CHECK(s.kind == 4 && s.compact == 0 && s.ascii == 0);
    CHECK_EQ_INT(py_unicode_layout_of(make_state(0, 1, 0, 1, 1) | 0xFFFFFF00u, &s), 0);
    CHECK(s.kind == 1 && s.compact == 0 && s.ascii == 1);
    static const unsigned bad_kinds[] = { 0, 3, 5, 6, 7 };
    for (size_t i = 0; i < sizeof(bad_kinds) / sizeof(bad_kinds[0]); i++)
        CHECK_EQ_INT(py_unicode_layout_of(make_state(0, bad_kinds[i], 1, 0, 1), &s), -1);
    CHECK_EQ_INT(py_unicode_layout_of(make_state(0, 2, 1, 1, 1), &s), -1);
    CHECK_EQ_INT(py_unicode_layout_of(make_state(0, 4, 1, 1, 1), NULL), -1);
    CHECK_EQ_INT(py_unicode_layout_of(make_state(0, 4, 1, 0, 1), NULL), 0);
}

static void test_ucs_to_utf8(void)
{
    char out[64];
    static const uint8_t latin1[] = { 'f', 0xF3, 'n' };
    CHECK_EQ_INT(py_ucs_to_utf8(latin1, 3, 1, out, sizeof(out)), 4);
    CHECK_EQ_STR(out, "f\xC3\xB3n");

    static const uint16_t ucs2[] = { 0x65E5, 0x672C, 0x8A9E };
    CHECK_EQ_INT(py_ucs_to_utf8(ucs2, 3, 2, out, sizeof(out)), 9);
    CHECK_EQ_STR(out, "日本語");
    /* Truncation stops before a character that does not fit whole. */
    CHECK_EQ_INT(py_ucs_to_utf8(ucs2, 3, 2, out, 7), 6);
    CHECK_EQ_STR(out, "日本");
    CHECK_EQ_INT(py_ucs_to_utf8(ucs2, 3, 2, out, 6), 3);
    CHECK_EQ_STR(out, "日");
    CHECK_EQ_INT(py_ucs_to_utf8(ucs2, 3, 2, out, 3), 0);
    CHECK_EQ_STR(out, "");
    CHECK_EQ_INT(py_ucs_to_utf8(ucs2, 3, 2, out, 1), 0);
    CHECK_EQ_STR(out, "");
    out[0] = 'Z';
    CHECK_EQ_INT(py_ucs_to_utf8(ucs2, 3, 2, out, 0), 0);
    CHECK(out[0] == 'Z');

    static const uint32_t ucs4[] = { 0x1F600, 0x10FFFF, 0x110000, 0xD800, 0xDFFF, 0x7F, 0x80,
                                     0x7FF, 0x800, 0xFFFF, 0x10000 };
    CHECK_EQ_INT(py_ucs_to_utf8(ucs4, 11, 4, out, sizeof(out)), 4 + 4 + 3 + 3 + 3 + 1 + 2 + 2 + 3 + 3 + 4);
    CHECK_EQ_STR(out, "\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\x7F"
                      "\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBF\xF0\x90\x80\x80");
    /* Surrogates in UCS-2 are never combined: CPython keeps them as separate
     * characters, so each is replaced. */
    static const uint16_t pair[] = { 0xD83D, 0xDE00, 'x' };
    CHECK_EQ_INT(py_ucs_to_utf8(pair, 3, 2, out, sizeof(out)), 7);
    CHECK_EQ_STR(out, "\xEF\xBF\xBD\xEF\xBF\xBDx");

    /* Characters need not be aligned in the caller's buffer. */
    unsigned char unaligned[1 + 2 * sizeof(uint32_t)];
    memcpy(unaligned + 1, ucs4, 2 * sizeof(uint32_t));
    CHECK_EQ_INT(py_ucs_to_utf8(unaligned + 1, 2, 4, out, sizeof(out)), 8);

    CHECK_EQ_INT(py_ucs_to_utf8(latin1, 3, 3, out, sizeof(out)), 0);
    CHECK_EQ_STR(out, "");
    CHECK_EQ_INT(py_ucs_to_utf8(latin1, 3, 0, out, sizeof(out)), 0);
    CHECK_EQ_INT(py_ucs_to_utf8(NULL, 3, 1, out, sizeof(out)), 0);
    CHECK_EQ_INT(py_ucs_to_utf8(NULL, 0, 1, out, sizeof(out)), 0);
    CHECK_EQ_STR(out, "");
}

/* Builds a 3.12-shaped str header at addr: length, state, then (for the
 * non-compact case) the data pointer. */
static void put_str_header(struct target *t, uint64_t addr, int64_t length, uint32_t state,
                           uint64_t data_any)
{
    unsigned char obj[64];
    memset(obj, 0, sizeof(obj));
    memcpy(obj + 16, &length, sizeof(length));
    memcpy(obj + 32, &state, sizeof(state));
    memcpy(obj + 56, &data_any, sizeof(data_any));
    CHECK(fake_target_map(t, addr, obj, sizeof(obj)) == 0);
}

static void test_hostile_objects(void)
{
    struct target *t = fake_target_new();
    struct py_layout L = layout_for_minor(12);
    char out[32];

    put_str_header(t, 0x1000, 3, make_state(0, 3, 1, 0, 0), 0);
    strcpy(out, "junk");
    CHECK_EQ_INT(py_read_str(t, &L, 0x1000, out, sizeof(out)), -1);
    CHECK_EQ_STR(out, "");

    put_str_header(t, 0x2000, PY_STR_MAX_CHARS + 1, make_state(0, 1, 1, 1, 0), 0);
    CHECK_EQ_INT(py_read_str(t, &L, 0x2000, out, sizeof(out)), -1);
    put_str_header(t, 0x3000, -1, make_state(0, 1, 1, 1, 0), 0);
    CHECK_EQ_INT(py_read_str(t, &L, 0x3000, out, sizeof(out)), -1);

    /* Length claims more characters than are mapped after the header. */
    put_str_header(t, 0x4000, 100, make_state(0, 1, 1, 1, 0), 0);
    CHECK_EQ_INT(py_read_str(t, &L, 0x4000, out, sizeof(out)), -1);
    CHECK_EQ_STR(out, "");
    /* ...but if only what fits in out is mapped, the read succeeds. */
    unsigned char partial[40 + 24];
    int64_t claimed = 100;
    uint32_t ascii_state = make_state(0, 1, 1, 1, 0);
    memset(partial, 'a', sizeof(partial));
    memcpy(partial + 16, &claimed, sizeof(claimed));
    memcpy(partial + 32, &ascii_state, sizeof(ascii_state));
    CHECK(fake_target_map(t, 0x5000, partial, sizeof(partial)) == 0);
    CHECK_EQ_INT(py_read_str(t, &L, 0x5000, out, 25), 0);
    CHECK_EQ_STR(out, "aaaaaaaaaaaaaaaaaaaaaaaa");
    CHECK_EQ_INT(py_read_str(t, &L, 0x5000, out, 26), -1);

    /* Non-compact with a NULL or unmapped data pointer. */
    put_str_header(t, 0x6000, 2, make_state(0, 1, 0, 1, 0), 0);
    CHECK_EQ_INT(py_read_str(t, &L, 0x6000, out, sizeof(out)), -1);
    put_str_header(t, 0x7000, 2, make_state(0, 1, 0, 1, 0), 0xdead0000);
    CHECK_EQ_INT(py_read_str(t, &L, 0x7000, out, sizeof(out)), -1);
    static const uint16_t chars[] = { 'o', 'k' };
    CHECK(fake_target_map(t, 0xdead0000, chars, sizeof(chars)) == 0);
    put_str_header(t, 0x8000, 2, make_state(0, 2, 0, 0, 0), 0xdead0000);
    CHECK_EQ_INT(py_read_str(t, &L, 0x8000, out, sizeof(out)), 0);
    CHECK_EQ_STR(out, "ok");

    /* Unmapped object, bad arguments, unusable layout. */
    CHECK_EQ_INT(py_read_str(t, &L, 0x9000, out, sizeof(out)), -1);
    CHECK_EQ_INT(py_read_str(t, &L, 0x8000, out, 0), -1);
    CHECK_EQ_INT(py_read_str(t, &L, 0x8000, NULL, 10), -1);
    CHECK_EQ_INT(py_read_str(t, NULL, 0x8000, out, sizeof(out)), -1);
    struct py_layout broken = L;
    broken.unicode_length = PY_OFF_NONE;
    CHECK_EQ_INT(py_read_str(t, &broken, 0x8000, out, sizeof(out)), -1);
    broken = L;
    broken.unicode_data_any = PY_OFF_NONE;
    CHECK_EQ_INT(py_read_str(t, &broken, 0x8000, out, sizeof(out)), -1);
    broken = L;
    broken.unicode_state = 1L << 40;
    CHECK_EQ_INT(py_read_str(t, &broken, 0x8000, out, sizeof(out)), -1);

    /* bytes: negative size, unmapped, truncated data. */
    unsigned char obj[40];
    memset(obj, 0, sizeof(obj));
    int64_t size = -5;
    memcpy(obj + 16, &size, sizeof(size));
    CHECK(fake_target_map(t, 0xA000, obj, sizeof(obj)) == 0);
    unsigned char buf[16];
    CHECK_EQ_INT(py_read_bytes(t, &L, 0xA000, buf, sizeof(buf), NULL), -1);
    size = 20; /* only 8 data bytes are mapped */
    memcpy(obj + 16, &size, sizeof(size));
    CHECK(fake_target_map(t, 0xB000, obj, sizeof(obj)) == 0);
    CHECK_EQ_INT(py_read_bytes(t, &L, 0xB000, buf, sizeof(buf), NULL), -1);
    CHECK_EQ_INT(py_read_bytes(t, &L, 0xB000, buf, 8, NULL), 8);
    CHECK_EQ_INT(py_read_bytes(t, &L, 0xC000, buf, sizeof(buf), NULL), -1);
    CHECK_EQ_INT(py_read_bytes(t, &L, 0xB000, NULL, 4, NULL), -1);
    fake_target_free(t);
}

/* py_read_str_head reads the start of a value of any length: a header that
 * claims 5,000,000 characters with only the first few mapped still gives
 * those, and surrogates come back as themselves for the repr to escape. */
static void test_str_head(void)
{
    struct target *t = fake_target_new();
    struct py_layout L = layout_for_minor(12);
    unsigned char big[40 + 16];
    int64_t claimed = 5000000;
    uint32_t ascii_state = make_state(0, 1, 1, 1, 0);
    memset(big, 'a', sizeof(big));
    memcpy(big + 16, &claimed, sizeof(claimed));
    memcpy(big + 32, &ascii_state, sizeof(ascii_state));
    CHECK(fake_target_map(t, 0x1000, big, sizeof(big)) == 0);
    uint32_t cps[32];
    size_t n = 99;
    int64_t length = 0;
    CHECK_EQ_INT(py_read_str_head(t, &L, 0x1000, cps, 16, &n, &length), 0);
    CHECK_EQ_INT((long)n, 16);
    CHECK(length == 5000000);
    CHECK(cps[0] == 'a' && cps[15] == 'a');
    /* More than is mapped fails instead of inventing characters. */
    CHECK_EQ_INT(py_read_str_head(t, &L, 0x1000, cps, 17, &n, &length), -1);
    /* py_read_str still refuses such a length as a name. */
    char out[8];
    CHECK_EQ_INT(py_read_str(t, &L, 0x1000, out, sizeof(out)), -1);

    /* 'b\udcff' as a compact UCS-2 string (header of 56 bytes on 3.12). */
    unsigned char wide[56 + 4];
    int64_t two = 2;
    uint32_t ucs2_state = make_state(0, 2, 1, 0, 0);
    uint16_t chars[2] = {'b', 0xdcff};
    memset(wide, 0, sizeof(wide));
    memcpy(wide + 16, &two, sizeof(two));
    memcpy(wide + 32, &ucs2_state, sizeof(ucs2_state));
    memcpy(wide + 56, chars, sizeof(chars));
    CHECK(fake_target_map(t, 0x2000, wide, sizeof(wide)) == 0);
    CHECK_EQ_INT(py_read_str_head(t, &L, 0x2000, cps, 32, &n, &length), 0);
    CHECK_EQ_INT((long)n, 2);
    CHECK(cps[0] == 'b' && cps[1] == 0xdcff);
    /* Implausible lengths are still refused. */
    put_str_header(t, 0x3000, -1, ascii_state, 0);
    CHECK_EQ_INT(py_read_str_head(t, &L, 0x3000, cps, 4, &n, &length), -1);
    put_str_header(t, 0x4000, PY_STR_MAX_LENGTH + 1, ascii_state, 0);
    CHECK_EQ_INT(py_read_str_head(t, &L, 0x4000, cps, 4, &n, &length), -1);
    fake_target_free(t);
}

int main(int argc, char **argv)
{
    test_str_head();
    test_layout_of();
    test_ucs_to_utf8();
    test_hostile_objects();
    test_fixtures(argc > 1 ? argv[1] : DEFAULT_FIXTURE_DIR);
    return unit_report("test_strings");
}
