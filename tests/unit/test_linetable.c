/* Checks the line-table decoders against tables and per-instruction lines
 * dumped from real interpreters (tests/unit/fixtures/linetable, made by
 * tools/gen_fixtures/linetable_fixtures.py), plus crafted and hostile tables. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/linetable.h"
#include "unit.h"

#define DEFAULT_FIXTURE_DIR "tests/unit/fixtures/linetable"

/* The versions whose fixtures must all be present, so a missing file fails
 * the suite instead of silently shrinking it. */
static const char *const fixture_versions[] = {
    "py38", "py39", "py310", "py311", "py312", "py313", "py314", "py315",
};

struct run {
    int offset;
    int line;
};

struct code_fixture {
    char name[256];
    int firstlineno;
    int codelen;
    uint8_t *table; /* exactly table_len bytes, so ASan sees any overread */
    size_t table_len;
    struct run *runs;
    size_t nruns;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static int parse_table(const char *hex, struct code_fixture *fx)
{
    size_t n = strcspn(hex, " \n");
    fx->table = NULL;
    fx->table_len = 0;
    if (n == 1 && hex[0] == '-')
        return 0;
    if (n % 2 != 0)
        return -1;
    fx->table_len = n / 2;
    fx->table = malloc(fx->table_len);
    if (fx->table == NULL)
        return -1;
    for (size_t i = 0; i < fx->table_len; i++) {
        int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        fx->table[i] = (uint8_t)(hi * 16 + lo);
    }
    return 0;
}

static int parse_runs(const char *text, struct code_fixture *fx)
{
    size_t cap = 16;
    fx->runs = malloc(cap * sizeof(*fx->runs));
    fx->nruns = 0;
    if (fx->runs == NULL)
        return -1;
    const char *p = text;
    int offset, line, used;
    while (sscanf(p, " %d:%d%n", &offset, &line, &used) == 2) {
        if (fx->nruns == cap) {
            cap *= 2;
            struct run *grown = realloc(fx->runs, cap * sizeof(*grown));
            if (grown == NULL)
                return -1;
            fx->runs = grown;
        }
        fx->runs[fx->nruns++] = (struct run){ offset, line };
        p += used;
    }
    return fx->nruns > 0 ? 0 : -1;
}

static int expected_line(const struct code_fixture *fx, int offset)
{
    int line = -1;
    for (size_t i = 0; i < fx->nruns && fx->runs[i].offset <= offset; i++)
        line = fx->runs[i].line;
    return line;
}

static void free_fixture(struct code_fixture *fx)
{
    free(fx->table);
    free(fx->runs);
    memset(fx, 0, sizeof(*fx));
}

struct totals {
    long codes;
    long offsets;
    long truncated_probes;
};

/* Decoding is forward-only, so a prefix of a valid table either still holds
 * the entry covering an offset (same answer) or does not (-1). lnotab has no
 * "past the end" notion, so only absence of crashes is checked there. */
static void check_prefixes(enum py_linetable_kind kind, const struct code_fixture *fx,
                           struct totals *totals)
{
    for (size_t cut = 0; cut <= fx->table_len; cut++) {
        uint8_t *prefix = malloc(cut ? cut : 1);
        if (cut)
            memcpy(prefix, fx->table, cut);
        int bad = 0;
        for (int probe = 0; probe < 8; probe++) {
            int offset = fx->codelen ? (int)(next_random() % (uint64_t)fx->codelen) & ~1 : 0;
            int got = py_line_for_offset(kind, cut ? prefix : NULL, cut, fx->firstlineno, offset);
            int full = expected_line(fx, offset);
            if (got < -1)
                bad++;
            else if (kind != PY_LINETABLE_LNOTAB && got != -1 && got != full)
                bad++;
            totals->truncated_probes++;
        }
        free(prefix);
        if (bad) {
            CHECK_EQ_INT(bad, 0);
            fprintf(stderr, "    %s: prefix of %zu bytes\n", fx->name, cut);
            return;
        }
    }
}

static void check_code(enum py_linetable_kind kind, const char *file, const struct code_fixture *fx,
                       struct totals *totals)
{
    int mismatches = 0;
    for (int offset = 0; offset < fx->codelen; offset += 2) {
        int want = expected_line(fx, offset);
        int got = py_line_for_offset(kind, fx->table, fx->table_len, fx->firstlineno, offset);
        if (got != want && mismatches++ < 5)
            fprintf(stderr, "%s: %s offset %d: got %d, want %d\n", file, fx->name, offset, got,
                    want);
        totals->offsets++;
    }
    CHECK_EQ_INT(mismatches, 0);
    /* A frame that has not started yet reports its first line. */
    CHECK_EQ_INT(py_line_for_offset(kind, fx->table, fx->table_len, fx->firstlineno, -2),
                 fx->firstlineno);
    if (kind != PY_LINETABLE_LNOTAB) {
        /* 3.10+ tables cover exactly the bytecode; nothing lies beyond. */
        CHECK_EQ_INT(py_line_for_offset(kind, fx->table, fx->table_len, fx->firstlineno,
                                        fx->codelen),
                     -1);
    }
    check_prefixes(kind, fx, totals);
    totals->codes++;
}

static void check_fixture_file(const char *dir, const char *version, struct totals *totals)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s.txt", dir, version);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f == NULL) {
        fprintf(stderr, "    cannot open %s\n", path);
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    int kind = 0;
    long codes_before = totals->codes;
    struct code_fixture fx;
    memset(&fx, 0, sizeof(fx));
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "# pyscope linetable fixture:", 28) == 0) {
            const char *k = strstr(line, " kind ");
            kind = k ? atoi(k + 6) : 0;
        } else if (strncmp(line, "code ", 5) == 0) {
            free_fixture(&fx);
            if (sscanf(line + 5, "%255s %d %d", fx.name, &fx.firstlineno, &fx.codelen) != 3)
                CHECK(!"malformed code line");
        } else if (strncmp(line, "table ", 6) == 0) {
            CHECK(parse_table(line + 6, &fx) == 0);
        } else if (strncmp(line, "runs ", 5) == 0) {
            CHECK(parse_runs(line + 5, &fx) == 0);
            CHECK(kind >= PY_LINETABLE_LNOTAB && kind <= PY_LINETABLE_LOCATIONS);
            check_code((enum py_linetable_kind)kind, path, &fx, totals);
        }
    }
    free_fixture(&fx);
    free(line);
    fclose(f);
    CHECK(totals->codes > codes_before);
}

static void test_fixtures(const char *dir)
{
    struct totals totals = { 0, 0, 0 };
    for (size_t i = 0; i < sizeof(fixture_versions) / sizeof(fixture_versions[0]); i++)
        check_fixture_file(dir, fixture_versions[i], &totals);
    printf("linetable fixtures: %ld code objects, %ld offsets, %ld truncated-table probes\n",
           totals.codes, totals.offsets, totals.truncated_probes);
}

static void test_crafted_lnotab(void)
{
    /* line 5 at 0..5; +130 lines at 6 (two pairs); then back 200 lines at 300. */
    static const uint8_t t[] = { 6, 127, 0, 3, 255, 0, 39, (uint8_t)-128, 0, (uint8_t)-72 };
    CHECK_EQ_INT(py_line_for_offset_lnotab(t, sizeof(t), 5, 0), 5);
    CHECK_EQ_INT(py_line_for_offset_lnotab(t, sizeof(t), 5, 4), 5);
    CHECK_EQ_INT(py_line_for_offset_lnotab(t, sizeof(t), 5, 6), 135);
    CHECK_EQ_INT(py_line_for_offset_lnotab(t, sizeof(t), 5, 260), 135);
    CHECK_EQ_INT(py_line_for_offset_lnotab(t, sizeof(t), 300, 300), 230);
    CHECK_EQ_INT(py_line_for_offset_lnotab(t, sizeof(t), 5, 100000), -1); /* went negative */
    CHECK_EQ_INT(py_line_for_offset_lnotab(t, sizeof(t) - 1, 300, 300), 302); /* odd tail ignored */
    CHECK_EQ_INT(py_line_for_offset_lnotab(NULL, 0, 42, 10), 42);
    CHECK_EQ_INT(py_line_for_offset_lnotab(NULL, 4, 42, 10), -1);
}

static void test_crafted_310(void)
{
    /* 0..5 line 11; 6..7 no line; 8..9 line 9 (-2); 0-length +127, then 10..13 line 136. */
    static const uint8_t t[] = { 6, 1, 2, (uint8_t)-128, 2, (uint8_t)-2, 0, 127, 4, 0 };
    CHECK_EQ_INT(py_line_for_offset_linetable310(t, sizeof(t), 10, 0), 11);
    CHECK_EQ_INT(py_line_for_offset_linetable310(t, sizeof(t), 10, 4), 11);
    CHECK_EQ_INT(py_line_for_offset_linetable310(t, sizeof(t), 10, 6), -1);
    CHECK_EQ_INT(py_line_for_offset_linetable310(t, sizeof(t), 10, 8), 9);
    CHECK_EQ_INT(py_line_for_offset_linetable310(t, sizeof(t), 10, 10), 136);
    CHECK_EQ_INT(py_line_for_offset_linetable310(t, sizeof(t), 10, 14), -1);
    CHECK_EQ_INT(py_line_for_offset_linetable310(NULL, 0, 10, 0), -1);
    CHECK_EQ_INT(py_line_for_offset_linetable310(NULL, 0, 10, -2), 10);
}

static void test_crafted_locations(void)
{
    static const uint8_t t[] = {
        0xE8, 0x04,                   /* no-columns, 1 unit, line +2        -> 12 */
        0xD2, 0x05, 0x07,             /* one-line0, 3 units                 -> 12 */
        0xF1, 0x0B, 0x00, 0x48, 0x03, 0x05, /* long, 2 units, line -5, col 199 -> 7 */
        0xF8,                         /* none, 1 unit                       -> -1 */
        0x98, 0x12,                   /* short code 3, 1 unit               -> 7 */
        0xE0, 0x01, 0x02,             /* one-line2, 1 unit                  -> 9 */
    };
    CHECK_EQ_INT(py_line_for_offset_locations(t, sizeof(t), 10, 0), 12);
    CHECK_EQ_INT(py_line_for_offset_locations(t, sizeof(t), 10, 2), 12);
    CHECK_EQ_INT(py_line_for_offset_locations(t, sizeof(t), 10, 7), 12);
    CHECK_EQ_INT(py_line_for_offset_locations(t, sizeof(t), 10, 8), 7);
    CHECK_EQ_INT(py_line_for_offset_locations(t, sizeof(t), 10, 10), 7);
    CHECK_EQ_INT(py_line_for_offset_locations(t, sizeof(t), 10, 12), -1);
    CHECK_EQ_INT(py_line_for_offset_locations(t, sizeof(t), 10, 14), 7);
    CHECK_EQ_INT(py_line_for_offset_locations(t, sizeof(t), 10, 16), 9);
    CHECK_EQ_INT(py_line_for_offset_locations(t, sizeof(t), 10, 18), -1);
    CHECK_EQ_INT(py_line_for_offset_locations(t, sizeof(t), 70000, 16), 69999);

    /* A payload byte with bit 7 set means the entry is cut short. */
    static const uint8_t short_payload[] = { 0xD2, 0x05, 0x87 };
    CHECK_EQ_INT(py_line_for_offset_locations(short_payload, sizeof(short_payload), 1, 0), -1);
    /* The table must start on an entry byte. */
    static const uint8_t not_entry[] = { 0x12, 0x98, 0x12 };
    CHECK_EQ_INT(py_line_for_offset_locations(not_entry, sizeof(not_entry), 1, 0), -1);
    /* Seven varint chunks cannot come from CPython's 32-bit writer. */
    static const uint8_t long_varint[] = { 0xE8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x01 };
    CHECK_EQ_INT(py_line_for_offset_locations(long_varint, sizeof(long_varint), 1, 0), -1);
    /* Six chunks are fine: line +2^30 */
    static const uint8_t big_varint[] = { 0xE8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x02 };
    CHECK_EQ_INT(py_line_for_offset_locations(big_varint, sizeof(big_varint), 1, 0),
                 1 + (1 << 30));
    /* ...but pushing the line past INT_MAX is garbage. */
    static const uint8_t huge_line[] = { 0xE8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x08 };
    CHECK_EQ_INT(py_line_for_offset_locations(huge_line, sizeof(huge_line), 1, 0), -1);
    /* A table ending inside a varint. */
    static const uint8_t cut_varint[] = { 0xE8, 0x44 };
    CHECK_EQ_INT(py_line_for_offset_locations(cut_varint, sizeof(cut_varint), 1, 0), -1);
    CHECK_EQ_INT(py_line_for_offset_locations(NULL, 0, 1, 0), -1);
}

static void test_dispatcher(void)
{
    static const uint8_t t[] = { 4, 2 };
    CHECK_EQ_INT(py_line_for_offset(PY_LINETABLE_LNOTAB, t, 2, 1, 4), 3);
    CHECK_EQ_INT(py_line_for_offset(PY_LINETABLE_310, t, 2, 1, 2), 3);
    CHECK_EQ_INT(py_line_for_offset(PY_LINETABLE_310, t, 2, 1, 4), -1);
    CHECK_EQ_INT(py_line_for_offset(PY_LINETABLE_LOCATIONS, t, 2, 1, 0), -1);
    CHECK_EQ_INT(py_line_for_offset((enum py_linetable_kind)0, t, 2, 1, 0), -1);
    CHECK_EQ_INT(py_line_for_offset((enum py_linetable_kind)99, t, 2, 1, 0), -1);
}

/* Random bytes and random offsets: the only requirement is a sane result
 * without reading outside the (exactly sized) buffer. */
static void test_random_tables(void)
{
    long bad = 0;
    for (int round = 0; round < 200000; round++) {
        size_t len = (size_t)(next_random() % 48);
        uint8_t *t = malloc(len ? len : 1);
        for (size_t i = 0; i < len; i++)
            t[i] = (uint8_t)next_random();
        /* Bias half the rounds towards valid-looking 3.11 entry bytes. */
        if (round & 1) {
            for (size_t i = 0; i < len; i += 1 + next_random() % 4)
                t[i] |= 0x80;
        }
        int first = (int)(next_random() % 100000) - 1000;
        int offset = (int)(next_random() % 600) - 10;
        for (int kind = PY_LINETABLE_LNOTAB; kind <= PY_LINETABLE_LOCATIONS; kind++) {
            int got = py_line_for_offset((enum py_linetable_kind)kind, len ? t : NULL, len, first,
                                         offset);
            if (got < -1)
                bad++;
        }
        free(t);
    }
    CHECK_EQ_INT(bad, 0);
}

int main(int argc, char **argv)
{
    test_crafted_lnotab();
    test_crafted_310();
    test_crafted_locations();
    test_dispatcher();
    test_random_tables();
    test_fixtures(argc > 1 ? argv[1] : DEFAULT_FIXTURE_DIR);
    return unit_report("test_linetable");
}
