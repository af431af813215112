/* Checks the sampler's stack memo: a walk may stop only at a frame of the
 * last walk whose bytes and everything below them are unchanged, frames
 * outside the chunk must be unchanged too, the kept frames and ids are the
 * new ones followed by the reused tail, and a torn walk forgets the memo. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "python/frames.h"
#include "sampling/stack_memo.h"
#include "unit.h"

#define BASE 0x10000ull
#define FRAME 64u
#define CHUNK (8 * FRAME)

/* A copy of a chunk holding n frames at BASE, BASE + FRAME, ... */
static void fill_copy(struct py_stack_copy *copy, unsigned char seed)
{
    if (!copy->buf) {
        copy->buf = malloc(CHUNK);
        copy->cap = CHUNK;
    }
    for (size_t i = 0; i < CHUNK; i++)
        copy->buf[i] = (unsigned char)(i * 3 + seed);
    copy->base = BASE;
    copy->len = CHUNK;
}

static void frames_at(struct py_frame *frames, uint32_t *ids, size_t n, uint32_t first_id)
{
    /* innermost first: the highest address first */
    for (size_t i = 0; i < n; i++) {
        memset(&frames[i], 0, sizeof frames[i]);
        frames[i].frame_addr = BASE + (n - 1 - i) * FRAME;
        ids[i] = first_id + (uint32_t)i;
    }
}

static void test_stop_and_reuse(void)
{
    struct stack_memo m = {0};
    struct py_stack_copy copy = {0};
    struct py_frame frames[8];
    uint32_t ids[8];

    /* Pass 1: a full walk of 6 frames (addresses BASE+5F .. BASE). */
    fill_copy(&copy, 1);
    stack_memo_begin(&m, &copy, FRAME);
    CHECK(!stack_memo_stop(&m, BASE + 2 * FRAME)); /* nothing remembered yet */
    frames_at(frames, ids, 6, 100);
    CHECK_EQ_INT(stack_memo_commit(&m, &copy, frames, ids, 6, false, true), 0);
    CHECK(m.valid);
    CHECK_EQ_INT(m.count, 6);
    CHECK_EQ_INT(copy.len, 0); /* the buffer went to the memo */

    /* Pass 2: the innermost two frames changed (bytes from BASE + 4F on). */
    fill_copy(&copy, 1);
    for (size_t i = 4 * FRAME; i < CHUNK; i++)
        copy.buf[i] ^= 0x5a;
    stack_memo_begin(&m, &copy, FRAME);
    CHECK(m.unchanged_end <= BASE + 4 * FRAME);
    CHECK(m.unchanged_end >= BASE + 3 * FRAME);
    CHECK(!stack_memo_stop(&m, BASE + 5 * FRAME)); /* changed */
    CHECK(!stack_memo_stop(&m, BASE + 4 * FRAME)); /* changed */
    CHECK(!stack_memo_stop(&m, BASE + 3 * FRAME + 8)); /* not a frame of the last walk */
    if (m.unchanged_end >= BASE + 3 * FRAME + FRAME) {
        CHECK(stack_memo_stop(&m, BASE + 3 * FRAME));
        CHECK_EQ_INT(m.reuse_from, 2);
    } else {
        CHECK(stack_memo_stop(&m, BASE + 2 * FRAME));
        CHECK_EQ_INT(m.reuse_from, 3);
    }
    size_t reuse_from = m.reuse_from;
    /* The new walk read 3 frames before it stopped (one more than before). */
    struct py_frame fresh[3];
    uint32_t fresh_ids[3] = {7, 8, 9};
    for (size_t i = 0; i < 3; i++) {
        memset(&fresh[i], 0, sizeof fresh[i]);
        fresh[i].frame_addr = BASE + (6 - i) * FRAME;
    }
    CHECK_EQ_INT(stack_memo_commit(&m, &copy, fresh, fresh_ids, 3, true, true), 0);
    CHECK_EQ_INT(m.count, 3 + (6 - reuse_from));
    CHECK_EQ_INT(m.ids[0], 7);
    CHECK_EQ_INT(m.ids[2], 9);
    CHECK_EQ_INT(m.ids[3], 100 + reuse_from);
    CHECK_EQ_INT(m.ids[m.count - 1], 105);
    CHECK_EQ_INT(m.addr[m.count - 1], BASE);

    /* Pass 3: a torn walk forgets everything. */
    fill_copy(&copy, 1);
    stack_memo_begin(&m, &copy, FRAME);
    CHECK_EQ_INT(stack_memo_commit(&m, &copy, fresh, fresh_ids, 1, false, false), 0);
    CHECK(!m.valid);
    fill_copy(&copy, 1);
    stack_memo_begin(&m, &copy, FRAME);
    CHECK_EQ_INT(m.unchanged_end, 0);
    CHECK(!stack_memo_stop(&m, BASE));

    py_stack_copy_free(&copy);
    stack_memo_free(&m);
}

static void test_frames_outside_the_chunk(void)
{
    struct stack_memo m = {0};
    struct py_stack_copy copy = {0};
    struct py_frame frames[4];
    uint32_t ids[4];
    uint64_t outside = 0x7fff0000ull;
    copy.frame_bytes = FRAME;
    copy.extra_addr = malloc(sizeof *copy.extra_addr);
    copy.extra_ok = malloc(sizeof *copy.extra_ok);
    copy.extra_buf = calloc(1, FRAME);
    copy.cap_extra = 1;
    copy.n_extra = 1;
    copy.extra_addr[0] = outside;
    copy.extra_ok[0] = true;

    fill_copy(&copy, 2);
    stack_memo_begin(&m, &copy, FRAME);
    frames_at(frames, ids, 4, 10);
    CHECK_EQ_INT(stack_memo_commit(&m, &copy, frames, ids, 4, false, true), 0);

    /* Same chunk, same outside frame: a stop is allowed. */
    fill_copy(&copy, 2);
    stack_memo_begin(&m, &copy, FRAME);
    CHECK(m.unchanged_end == BASE + CHUNK);
    CHECK(stack_memo_stop(&m, BASE + 3 * FRAME));
    /* The walk stops at once: the frame outside is noted for next time. */
    copy.n_visited = 0;
    CHECK_EQ_INT(stack_memo_commit(&m, &copy, frames, ids, 0, true, true), 0);
    CHECK_EQ_INT(copy.n_visited, 1);
    CHECK(copy.visited[0] == outside);

    /* The outside frame changed: no stop anywhere. */
    fill_copy(&copy, 2);
    copy.extra_buf[5] ^= 1;
    stack_memo_begin(&m, &copy, FRAME);
    CHECK_EQ_INT(m.unchanged_end, 0);
    CHECK(!stack_memo_stop(&m, BASE));

    py_stack_copy_free(&copy);
    stack_memo_free(&m);
}

int main(void)
{
    test_stop_and_reuse();
    test_frames_outside_the_chunk();
    return unit_report("test_stack_memo");
}
