/* record's loop-blocking episodes (output/loop_blocks.c) from synthetic
 * timelines: uvloop's loop threads, told by the frame that runs the loop. */
#include <stdbool.h>
#include <stdint.h>

#include "output/loop_blocks.h"
#include "profile/profile.h"
#include "unit.h"

#define NO_SYSCALL 0xffff

static void add_segment(struct profile *p, uint32_t thread, uint32_t stack, uint64_t start_us,
                        uint64_t end_us)
{
    struct profile_segment seg = {thread, stack, (uint8_t)PROFILE_IDLE, false, NO_SYSCALL,
                                  start_us * 1000, end_us * 1000};
    CHECK_EQ_INT(profile_add_segment(p, &seg), 0);
}

/* uvloop's loop thread: waiting, its innermost frame calls into uvloop's
 * run_until_complete; a step runs above that frame (300 ms, then 50 ms,
 * under the threshold). A thread never seen waiting in uvloop has no
 * episode however long its stack stays the same; a sample that lost the
 * loop's frames neither ends nor lengthens one. */
static void test_uvloop(void)
{
    struct profile p;
    CHECK_EQ_INT(profile_init(&p), 0);
    uint32_t boot = profile_frame_id(&p, "Thread.run", "/usr/lib/python3.11/threading.py", 975, false);
    uint32_t base = profile_frame_id(&p, "run_loop", "/app/loop.py", 58, false);
    uint32_t run = profile_frame_id(&p, "[C] uvloop.loop.Loop.run_until_complete", "", -1, true);
    uint32_t blocker = profile_frame_id(&p, "blocker", "/app/loop.py", 37, false);
    uint32_t sleep = profile_frame_id(&p, "[C] time.sleep", "", -1, true);
    uint32_t waiting = profile_stack_id(&p, (uint32_t[]){boot, base, run}, 3);
    uint32_t step = profile_stack_id(&p, (uint32_t[]){boot, base, blocker, sleep}, 4);
    uint32_t torn = profile_stack_id(&p, (uint32_t[]){blocker, sleep}, 2);
    uint32_t other = profile_stack_id(&p, (uint32_t[]){boot, blocker, sleep}, 3);
    uint32_t loop = profile_thread_id(&p, 7, 8), worker = profile_thread_id(&p, 7, 9);
    add_segment(&p, loop, step, 0, 150000);
    add_segment(&p, loop, waiting, 150000, 200000);
    add_segment(&p, loop, step, 200000, 350000);
    add_segment(&p, loop, torn, 350000, 360000);
    add_segment(&p, loop, step, 360000, 500000);
    add_segment(&p, loop, waiting, 500000, 600000);
    add_segment(&p, loop, step, 600000, 650000);
    add_segment(&p, loop, waiting, 650000, 700000);
    add_segment(&p, worker, other, 0, 700000);
    struct loop_blocks b;
    CHECK_EQ_INT(loop_blocks_build(&b, &p), 0);
    CHECK_EQ_INT((int)b.count, 2);
    CHECK_EQ_INT((int)b.n_longest, 2);
    CHECK_EQ_INT((int)b.longest[0].thread, (int)loop);
    CHECK_EQ_INT((int)(b.longest[0].duration_ns / 1000000), 300);
    CHECK_EQ_INT((int)(b.longest[0].start_ns / 1000000), 200);
    CHECK_EQ_INT((int)b.longest[0].stack, (int)step);
    CHECK(!b.longest[0].at_edge);
    /* The first, under way at the thread's first sample, learnt from the later waits. */
    CHECK_EQ_INT((int)(b.longest[1].duration_ns / 1000000), 150);
    CHECK(b.longest[1].at_edge);
    profile_free(&p);
}

int main(void)
{
    test_uvloop();
    return unit_report("test_loop_blocks");
}
