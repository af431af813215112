/* py_dict_get_str (python/objects.c) on in-memory dicts of each layout: a
 * key found once is looked for first where it was found, and a place that
 * now holds another key (the dict rebuilt in another order, or shorter)
 * falls back to the full search: the value returned is always the key's. A
 * key found in none of the entries is known absent until one is added.
 * And type names, kept across readers for the static types only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_python.h"
#include "fake_target.h"
#include "python/layout.h"
#include "python/objects.h"
#include "python/runtime.h"
#include "unit.h"

#define NKEYS 200
#define VALUE(i) (0x7f0000000000ull + (uint64_t)(i) * 16)

/* A dict of NKEYS modules, "m000".., at the image's first allocations, with
 * the keys in order or reversed: the same addresses, the keys moved. */
static uint64_t build(struct fake_image *img, const struct py_layout *L, bool reversed)
{
    static char names[NKEYS][8];
    const char *keys[NKEYS];
    uint64_t values[NKEYS];
    fake_image_init(img, L, 1 << 20);
    for (int i = 0; i < NKEYS; i++) {
        int k = reversed ? NKEYS - 1 - i : i;
        snprintf(names[i], sizeof names[i], "m%03d", k);
        keys[i] = names[i];
        values[i] = VALUE(k);
    }
    return fake_dict(img, keys, values, NKEYS);
}

/* A runtime of this version reading img, mapped at FAKE_BASE. */
static void runtime_over(struct py_runtime *rt, const struct py_layout *L, unsigned version,
                         const struct fake_image *img)
{
    memset(rt, 0, sizeof *rt);
    rt->layout = *L;
    rt->version_hex = version;
    rt->target = fake_target_new();
    CHECK_EQ_INT(fake_target_map(rt->target, FAKE_BASE, img->bytes, img->used), 0);
}

static uint64_t lookup(struct py_runtime *rt, uint64_t dict, const char *key, uint64_t *reads,
                       int *status)
{
    struct py_reader r;
    py_reader_init(&r, rt);
    uint64_t before = rt->target->stats.reads, value = 0;
    *status = py_dict_get_str(&r, dict, key, &value);
    *reads = rt->target->stats.reads - before;
    return value;
}

static void check_version(unsigned version)
{
    const struct py_layout *L = py_layout_for_version(version);
    CHECK(L != NULL);
    if (!L)
        return;
    struct fake_image a, b;
    uint64_t dict = build(&a, L, false);
    CHECK(build(&b, L, true) == dict);

    struct py_runtime rt;
    runtime_over(&rt, L, version, &a);

    int status;
    uint64_t first_reads, again_reads;
    CHECK(lookup(&rt, dict, "m150", &first_reads, &status) == VALUE(150));
    CHECK_EQ_INT(status, 0);
    CHECK(lookup(&rt, dict, "m150", &again_reads, &status) == VALUE(150));
    CHECK_EQ_INT(status, 0);
    /* The search read 150 keys; the second look reads one. */
    CHECK(first_reads >= 150);
    CHECK(again_reads * 10 < first_reads);
    lookup(&rt, dict, "absent", &first_reads, &status);
    CHECK_EQ_INT(status, -1);

    /* The same dict rebuilt reversed: where m150 was is now m049. */
    fake_target_free(rt.target);
    rt.target = fake_target_new();
    CHECK_EQ_INT(fake_target_map(rt.target, FAKE_BASE, b.bytes, b.used), 0);
    CHECK(lookup(&rt, dict, "m150", &first_reads, &status) == VALUE(150));
    CHECK_EQ_INT(status, 0);
    CHECK(lookup(&rt, dict, "m049", &first_reads, &status) == VALUE(49));
    CHECK_EQ_INT(status, 0);
    CHECK(lookup(&rt, dict, "m150", &again_reads, &status) == VALUE(150));
    CHECK(again_reads * 10 < first_reads || first_reads < 10);

    /* Shorter: the hinted place past its entries is not read. */
    uint64_t n = 10;
    uint64_t keys;
    CHECK_EQ_INT(target_read_u64(rt.target, dict + (uint64_t)L->dict_keys, &keys), 0);
    fake_put_u64(&b, keys, L->dictkeys_nentries, n);
    fake_target_free(rt.target);
    rt.target = fake_target_new();
    CHECK_EQ_INT(fake_target_map(rt.target, FAKE_BASE, b.bytes, b.used), 0);
    lookup(&rt, dict, "m150", &first_reads, &status);
    CHECK_EQ_INT(status, -1);
    CHECK(lookup(&rt, dict, "m195", &first_reads, &status) == VALUE(195));
    CHECK_EQ_INT(status, 0);

    /* A key in none of the entries: found absent without reading them
     * again while the keys object has as many entries, for a few look-ups;
     * an entry appended (CPython's insertion) is searched and found. The
     * in-order dict with its last entry not yet counted: m199 absent. */
    CHECK_EQ_INT(target_read_u64(rt.target, dict + (uint64_t)L->dict_keys, &keys), 0);
    fake_put_u64(&a, keys, L->dictkeys_nentries, NKEYS - 1);
    fake_target_free(rt.target);
    rt.target = fake_target_new();
    CHECK_EQ_INT(fake_target_map(rt.target, FAKE_BASE, a.bytes, a.used), 0);
    lookup(&rt, dict, "m199", &first_reads, &status);
    CHECK_EQ_INT(status, -1);
    CHECK(first_reads >= NKEYS - 1);
    int cheap = 0;
    for (int i = 0; i < 12; i++) {
        lookup(&rt, dict, "m199", &again_reads, &status);
        CHECK_EQ_INT(status, -1);
        cheap += again_reads * 10 < first_reads;
    }
    /* Nine answered from memory, then one search, then nine again. */
    CHECK_EQ_INT(cheap, 11);
    fake_put_u64(&a, keys, L->dictkeys_nentries, NKEYS);
    fake_target_free(rt.target);
    rt.target = fake_target_new();
    CHECK_EQ_INT(fake_target_map(rt.target, FAKE_BASE, a.bytes, a.used), 0);
    CHECK(lookup(&rt, dict, "m199", &first_reads, &status) == VALUE(199));
    CHECK_EQ_INT(status, 0);

    fake_target_free(rt.target);
    fake_image_free(&a);
    fake_image_free(&b);
}

static uint64_t reads_to_check_str(struct py_runtime *rt, uint64_t obj)
{
    struct py_reader r;
    py_reader_init(&r, rt);
    uint64_t before = rt->target->stats.reads;
    CHECK(py_is_type(&r, obj, "str"));
    return rt->target->stats.reads - before;
}

/* A type's name is read again by each reader, unless the type lies in a
 * mapping of a file (a static type, never freed): then the runtime keeps it
 * and a later reader reads only the object's type pointer. */
static void check_type_names(unsigned version)
{
    const struct py_layout *L = py_layout_for_version(version);
    CHECK(L != NULL);
    if (!L)
        return;
    struct fake_image img;
    fake_image_init(&img, L, 1 << 16);
    uint64_t s = fake_str(&img, "hello");
    struct py_runtime rt;
    runtime_over(&rt, L, version, &img);
    /* Anonymous memory, as a class made at run time lives in. */
    uint64_t first = reads_to_check_str(&rt, s), again = reads_to_check_str(&rt, s);
    CHECK(first > 2);
    CHECK(again == first);
    rt.target->maps[0].path = strdup("/usr/lib/x86_64-linux-gnu/libpython3.so");
    CHECK(rt.target->maps[0].path != NULL);
    first = reads_to_check_str(&rt, s);
    again = reads_to_check_str(&rt, s);
    CHECK(first > 2);
    CHECK(again == 1);
    fake_target_free(rt.target);
    fake_image_free(&img);
}

int main(void)
{
    check_type_names(0x030812f0u);
    check_type_names(0x030e0af0u);
    check_version(0x030812f0u);
    check_version(0x030c01f0u);
    check_version(0x030e0af0u);
    return unit_report("test_dict_lookup");
}
