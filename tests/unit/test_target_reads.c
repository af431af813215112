/* Checks the target layer's batched reads: scattered spans that share or
 * adjoin pages are read as fewer pieces yet each gets exactly its own bytes,
 * a piece that fails gives its readable members a second chance, a
 * prefetch fills the page cache so later reads cost no system call, and two
 * targets sharing one cache never see each other's pages. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_target.h"
#include "target/target.h"
#include "unit.h"

#define REGION_A 0x100000ull
#define REGION_B 0x200000ull
#define HOLE 0x300000ull

static unsigned char expected_byte(uint64_t addr)
{
    return (unsigned char)(addr * 7 + (addr >> 8));
}

static struct target *make_target(void)
{
    struct target *t = fake_target_new();
    static unsigned char a[3 * 4096], b[4096];
    for (size_t i = 0; i < sizeof a; i++)
        a[i] = expected_byte(REGION_A + i);
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = expected_byte(REGION_B + i);
    CHECK(fake_target_map(t, REGION_A, a, sizeof a) == 0);
    CHECK(fake_target_map(t, REGION_B, b, sizeof b) == 0);
    fake_target_enable_spans(t);
    return t;
}

static int bytes_match(const struct target_span *s)
{
    const unsigned char *buf = s->buf;
    for (size_t i = 0; i < s->len; i++)
        if (buf[i] != expected_byte(s->addr + i))
            return 0;
    return 1;
}

static void test_merged_spans(void)
{
    struct target *t = make_target();
    static unsigned char bufs[8][512];
    memset(bufs, 0, sizeof bufs);
    /* Out of order, overlapping, on one page and the next, and far away. */
    struct target_span spans[] = {
        {REGION_A + 4096 + 16, bufs[0], 64, false},  /* next page */
        {REGION_A + 8, bufs[1], 8, false},
        {REGION_A + 200, bufs[2], 100, false},
        {REGION_A + 250, bufs[3], 200, false},       /* overlaps the one before */
        {REGION_B + 100, bufs[4], 300, false},       /* another region */
        {REGION_A + 3 * 4096 - 8, bufs[5], 8, false} /* two pages on: its own piece */
    };
    size_t n = sizeof spans / sizeof spans[0];
    CHECK_EQ_INT(target_read_spans(t, spans, n), n);
    for (size_t i = 0; i < n; i++) {
        CHECK(spans[i].ok);
        CHECK(bytes_match(&spans[i]));
    }
    size_t calls, pieces;
    fake_target_span_counts(t, &calls, &pieces);
    CHECK_EQ_INT(calls, 1);
    CHECK_EQ_INT(pieces, 3); /* A's first two pages, A's third page, B */
    fake_target_free(t);
}

/* More spans than the short sort takes, in falling order: the same pieces. */
static void test_many_spans(void)
{
    struct target *t = make_target();
    enum { N = 100 };
    static unsigned char bufs[N][16];
    struct target_span spans[N];
    for (size_t i = 0; i < N; i++)
        spans[i] = (struct target_span){REGION_A + 3 * 4096 - 32 * (i + 1), bufs[i], 16, false};
    CHECK_EQ_INT(target_read_spans(t, spans, N), N);
    for (size_t i = 0; i < N; i++)
        CHECK(spans[i].ok && bytes_match(&spans[i]));
    size_t calls, pieces;
    fake_target_span_counts(t, &calls, &pieces);
    CHECK_EQ_INT(calls, 1);
    CHECK_EQ_INT(pieces, 1);
    fake_target_free(t);
}

/* A framed read: its head and tail are read first and last, each alone,
 * whatever their addresses; the spans between are merged as ever. */
static void test_framed_spans(void)
{
    struct target *t = make_target();
    static unsigned char bufs[6][64];
    struct target_span spans[] = {
        {REGION_B + 8, bufs[0], 8, false},       /* head, the highest address */
        {REGION_A + 4096, bufs[1], 16, false},
        {REGION_A + 64, bufs[2], 16, false},
        {REGION_A + 128, bufs[3], 16, false},
        {REGION_A + 16, bufs[4], 8, false},      /* tail, the lowest, on a merged page */
        {REGION_B + 8, bufs[5], 8, false},       /* tail, the head's address again */
    };
    CHECK_EQ_INT(target_read_spans_framed(t, spans, 6, 1, 2), 6);
    for (size_t i = 0; i < 6; i++)
        CHECK(spans[i].ok && bytes_match(&spans[i]));
    uint64_t order[16];
    size_t n = fake_target_last_pieces(t, order, 16);
    CHECK_EQ_INT(n, 4); /* head, A's first two pages as one, then the tail's two */
    CHECK(order[0] == REGION_B + 8);
    CHECK(order[1] == REGION_A + 64);
    CHECK(order[2] == REGION_A + 16);
    CHECK(order[3] == REGION_B + 8);
    fake_target_free(t);
}

static void test_failed_piece(void)
{
    struct target *t = make_target();
    static unsigned char bufs[3][64];
    /* The last span runs off the end of region A into nothing: the merged
     * piece fails, its first two members are read again on their own. */
    struct target_span spans[] = {
        {REGION_A + 2 * 4096 + 100, bufs[0], 16, false},
        {REGION_A + 2 * 4096 + 200, bufs[1], 16, false},
        {REGION_A + 3 * 4096 - 8, bufs[2], 64, false},
    };
    CHECK_EQ_INT(target_read_spans(t, spans, 3), 2);
    CHECK(spans[0].ok && bytes_match(&spans[0]));
    CHECK(spans[1].ok && bytes_match(&spans[1]));
    CHECK(!spans[2].ok);
    size_t calls, pieces;
    fake_target_span_counts(t, &calls, &pieces);
    CHECK_EQ_INT(calls, 2);
    CHECK_EQ_INT(pieces, 1 + 3);

    /* A lone unreadable span is not tried twice. */
    unsigned char one[8];
    struct target_span alone[] = {{HOLE, one, 8, false}, {REGION_B, bufs[0], 8, false}};
    CHECK_EQ_INT(target_read_spans(t, alone, 2), 1);
    CHECK(!alone[0].ok && alone[1].ok && bytes_match(&alone[1]));
    fake_target_span_counts(t, &calls, &pieces);
    CHECK_EQ_INT(calls, 3);
    fake_target_free(t);
}

static void test_prefetch(void)
{
    struct target *t = make_target();
    CHECK(target_cache_enable(t) == 0);
    struct target_range ranges[] = {
        {REGION_A + 10, 5000},   /* two pages */
        {REGION_B + 4000, 200},  /* runs past region B: its own page is still read */
        {HOLE + 5, 10},          /* unreadable: left to target_read to report */
    };
    target_prefetch(t, ranges, 3);
    size_t calls, pieces;
    fake_target_span_counts(t, &calls, &pieces);
    CHECK_EQ_INT(calls, 2); /* the merged piece fails on the hole, then one by one */
    uint64_t raw_before = t->stats.reads;
    unsigned char buf[64];
    CHECK(target_read(t, REGION_A + 4096 + 3, buf, sizeof buf) == 0);
    CHECK(buf[0] == expected_byte(REGION_A + 4096 + 3));
    CHECK(target_read(t, REGION_B + 4000, buf, 50) == 0);
    CHECK_EQ_INT(t->stats.reads, raw_before); /* both from the cache */
    CHECK(target_read(t, HOLE + 5, buf, 10) != 0);
    target_cache_invalidate(t);
    CHECK(target_read(t, REGION_A + 20, buf, 8) == 0);
    CHECK(t->stats.reads > raw_before + 1); /* after invalidation: read again */
    fake_target_free(t);
}

/* Two processes with different bytes at the same address, read in turn
 * through one cache (the agent's): each gets its own, and the cache outlives
 * the target it came from. */
static void test_shared_cache(void)
{
    static unsigned char one[4096], two[4096];
    memset(one, 0x11, sizeof one);
    memset(two, 0x22, sizeof two);
    struct target *a = fake_target_new(), *b = fake_target_new();
    CHECK(fake_target_map(a, REGION_A, one, sizeof one) == 0);
    CHECK(fake_target_map(b, REGION_A, two, sizeof two) == 0);
    CHECK(target_cache_enable(a) == 0);
    struct target_page_cache *shared = target_cache_hold(a);
    CHECK(shared != NULL);
    target_cache_use(b, shared);
    unsigned char x = 0;
    CHECK(target_read(a, REGION_A + 8, &x, 1) == 0);
    CHECK_EQ_INT(x, 0x11);
    /* b's read lands in the slot a's page is in, without its epoch */
    CHECK(target_read(b, REGION_A + 8, &x, 1) == 0);
    CHECK_EQ_INT(x, 0x22);
    uint64_t reads = a->stats.reads;
    CHECK(target_read(a, REGION_A + 9, &x, 1) == 0);
    CHECK_EQ_INT(x, 0x11);
    CHECK(a->stats.reads == reads + 1); /* b took the slot: read again, not b's bytes */
    target_cache_invalidate(b);
    CHECK(target_read(a, REGION_A + 10, &x, 1) == 0);
    CHECK_EQ_INT(x, 0x11); /* a's epoch still stands for a */
    fake_target_free(a);
    CHECK(target_read(b, REGION_A + 8, &x, 1) == 0);
    CHECK_EQ_INT(x, 0x22);
    fake_target_free(b);
    target_cache_release(shared);
}

int main(void)
{
    test_merged_spans();
    test_many_spans();
    test_framed_spans();
    test_failed_piece();
    test_prefetch();
    test_shared_cache();
    return unit_report("test_target_reads");
}
