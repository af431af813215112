/* py_dict_get_str (python/objects.c) on in-memory dicts of each layout: a
 * key found once is looked for first where it was found, and a place that
 * now holds another key (the dict rebuilt in another order, or shorter)
 * falls back to the full search: the value returned is always the key's. */
#include <stdint.h>
#include <stdio.h>
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
    memset(&rt, 0, sizeof rt);
    rt.layout = *L;
    rt.version_hex = version;
    rt.target = fake_target_new();
    CHECK_EQ_INT(fake_target_map(rt.target, FAKE_BASE, a.bytes, a.used), 0);

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

    fake_target_free(rt.target);
    fake_image_free(&a);
    fake_image_free(&b);
}

int main(void)
{
    check_version(0x030812f0u);
    check_version(0x030c01f0u);
    check_version(0x030e0af0u);
    return unit_report("test_dict_lookup");
}
