/* The agent's parsers and its view of the sample ring: container ids from
 * cgroup files as Docker, containerd/CRI-O under Kubernetes, podman and
 * systemd write them; the newest pass's samples, whole and across the
 * ring's wrap; the repeated passes' time credited when settled; the
 * thread count and last pid of /proc/loadavg that spare a listing of /proc;
 * the stretches of a quiet process's ticks: every tick stood for by exactly
 * one pass, the pass's tick uniform over its stretch, one tick at a time
 * again after a read. */
#include <stdlib.h>

#include "agent/agent.h"
#include "unit.h"

#define ID64 "4f3c5e0b8a2d9c1e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e"

static void test_container_ids(void)
{
    char id[80];
    agent_container_from_cgroup("0::/system.slice/docker-" ID64 ".scope\n", id, sizeof id);
    CHECK_EQ_STR(id, ID64);
    agent_container_from_cgroup("12:pids:/docker/" ID64 "\n11:memory:/docker/" ID64 "\n", id,
                                sizeof id);
    CHECK_EQ_STR(id, ID64);
    agent_container_from_cgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-"
                                "pod1b2c.slice/cri-containerd-" ID64 ".scope\n",
                                id, sizeof id);
    CHECK_EQ_STR(id, ID64);
    agent_container_from_cgroup("0::/machine.slice/libpod-" ID64 ".scope/container\n", id, sizeof id);
    CHECK_EQ_STR(id, ID64);
    /* No container: a user session, the root, garbage. */
    agent_container_from_cgroup("0::/user.slice/user-0.slice/session-3.scope\n", id, sizeof id);
    CHECK_EQ_STR(id, "");
    agent_container_from_cgroup("0::/\n", id, sizeof id);
    CHECK_EQ_STR(id, "");
    agent_container_from_cgroup("no colons here " ID64 "\n", id, sizeof id);
    CHECK_EQ_STR(id, "");
    /* 65 hex digits, or 63, are not an id; upper case neither. */
    agent_container_from_cgroup("0::/docker/" ID64 "a\n", id, sizeof id);
    CHECK_EQ_STR(id, "");
    agent_container_from_cgroup("0::/docker/4F3C5E0B8A2D9C1E7F6A5B4C3D2E1F0A9B8C7D6E5F4A3B2C1D0E9F8A7B6C5D4E\n",
                                id, sizeof id);
    CHECK_EQ_STR(id, "");
    agent_container_from_cgroup("", id, sizeof id);
    CHECK_EQ_STR(id, "");
}

static void test_last_pass(void)
{
    struct sample_ring r;
    /* A small cap: the samples array wraps, passes are evicted. */
    CHECK_EQ_INT(sample_ring_init(&r, 1000000000ull, 100, 64 * sizeof(struct ring_sample)), 0);
    struct ring_sample out[16];
    CHECK_EQ_INT(sample_ring_last_pass(&r, out, 16), 0);
    for (uint32_t pass = 0; pass < 50; pass++) {
        sample_ring_begin_pass(&r, (uint64_t)pass * 10000000ull);
        for (uint32_t t = 0; t < 5; t++)
            sample_ring_add(&r, t, pass, t == 0 ? PROFILE_HOLDING_GIL : PROFILE_IDLE, t == 1, 0xffff);
        struct sample_pass facts = {.hog_stack = UINT32_MAX};
        sample_ring_end_pass(&r, &facts);
        size_t n = sample_ring_last_pass(&r, out, 16);
        CHECK_EQ_INT(n, 5);
        for (uint32_t t = 0; t < 5 && t < n; t++) {
            CHECK_EQ_INT(out[t].thread, t);
            CHECK_EQ_INT(out[t].stack, pass);
            CHECK_EQ_INT(out[t].gc, t == 1);
        }
    }
    /* Fewer slots than samples: the count says how many there are. */
    CHECK_EQ_INT(sample_ring_last_pass(&r, out, 2), 5);
    sample_ring_free(&r);
}

/* A still stretch of 1.5 s credited at once: to each thread of the last
 * read pass in the state it had there (the collector's time too), not to
 * a thread already gone from that pass, which is forgotten once unseen
 * for 5 s; a second settle adds nothing. */
static void test_settle(void)
{
    struct agent_thread threads[3] = {
        {.tid = 10, .in_last_read = true, .last_state = PROFILE_IDLE, .last_seen_ns = 9000000000ull},
        {.tid = 11, .in_last_read = true, .last_state = PROFILE_HOLDING_GIL, .last_gc = true,
         .last_seen_ns = 9000000000ull},
        {.tid = 12, .last_seen_ns = 4000000000ull},
    };
    struct agent_proc p = {.threads = threads, .n_threads = 3, .cap_threads = 3,
                           .still_seconds = 1.5, .gc_running = true, .gc_seconds = 2};
    agent_settle(&p, 10000000000ull);
    CHECK_EQ_INT(p.n_threads, 2);
    CHECK_EQ_INT(p.live_threads, 2);
    CHECK(threads[0].seconds[PROFILE_IDLE] == 1.5 && threads[0].gc_seconds == 0);
    CHECK(threads[1].seconds[PROFILE_HOLDING_GIL] == 1.5 && threads[1].gc_seconds == 1.5);
    CHECK(threads[1].seconds[PROFILE_IDLE] == 0);
    CHECK(p.gc_seconds == 3.5 && p.still_seconds == 0);
    CHECK_EQ_INT(threads[0].last_seen_ns, 10000000000ull);
    agent_settle(&p, 11000000000ull);
    CHECK(threads[0].seconds[PROFILE_IDLE] == 1.5 && p.gc_seconds == 3.5);
}

static void test_loadavg(void)
{
    uint64_t threads = 0, last = 0;
    CHECK(agent_pids_from_loadavg("0.02 0.10 0.09 1/587 14647\n", &threads, &last));
    CHECK_EQ_INT(threads, 587);
    CHECK_EQ_INT(last, 14647);
    CHECK(agent_pids_from_loadavg("12.50 8.01 3.00 17/120345 4194303", &threads, &last));
    CHECK_EQ_INT(threads, 120345);
    CHECK_EQ_INT(last, 4194303);
    /* Anything else is not taken: the caller then lists /proc. */
    threads = last = 7;
    CHECK(!agent_pids_from_loadavg("", &threads, &last));
    CHECK(!agent_pids_from_loadavg("0.02 0.10 0.09 1/587\n", &threads, &last));
    CHECK(!agent_pids_from_loadavg("0.02 0.10 0.09 1/587 \n", &threads, &last));
    CHECK(!agent_pids_from_loadavg("0.02 0.10 0.09 1-587 14647\n", &threads, &last));
    CHECK(!agent_pids_from_loadavg("0.02 0.10 0.09 1/587 146x47\n", &threads, &last));
    CHECK(!agent_pids_from_loadavg("0.02 0.10", &threads, &last));
    CHECK(threads == 7 && last == 7);
}

/* An agent at 19 Hz with --idle-stride 4, its draws seeded. */
static struct agent stride_agent(uint64_t seed)
{
    struct agent a = {0};
    a.opts.idle_stride = 4;
    a.interval_ns = 1000000000ull / 19;
    a.stride_random = seed;
    return a;
}

/* A process quiet for 6 s, then running for 2 s, then quiet: 19 ticks a
 * second, its passes' weights summed against the ticks that went by. */
static void test_stretches(void)
{
    const uint64_t tick = 1000000000ull / 19;
    struct agent a = stride_agent(12345);
    struct agent_hot h = {0};
    uint64_t weights = 0, passes = 0, at[4] = {0}, in_stride[5] = {0};
    uint64_t stretch_start = 0, stretch_end = 0, ticks = 19 * 60 * 20;
    bool ran_late = false;
    for (uint64_t k = 0; k < ticks; k++) {
        if (h.skip) {
            h.skip--;
            continue;
        }
        unsigned stride = h.stride ? h.stride : 1;
        weights += stride;
        passes++;
        CHECK(k >= stretch_start && k < stretch_start + stride);
        stretch_end = stretch_start + stride;
        in_stride[stride]++;
        if (stride == 4)
            at[k - stretch_start]++;
        /* Runs for 2 s of every 20: a read pass. */
        uint64_t s = (k / 19) % 20;
        bool read = s >= 6 && s < 8;
        if (read && stride > 1)
            ran_late = true;
        unsigned before = h.after_pass;
        agent_next_stretch(&a, &h, read || k == 0);
        /* The next stretch starts after this one's remaining ticks. */
        stretch_start = k + 1 + before;
    }
    /* Up to the end of the last pass's stretch, every tick counted once (the
     * loop may end among the ticks skipped before the next pass). */
    CHECK_EQ_INT(weights, stretch_end);
    CHECK(stretch_end + 3 >= ticks && stretch_end <= ticks + 3);
    CHECK(in_stride[1] > 0 && in_stride[2] > 0 && in_stride[4] > 0);
    CHECK_EQ_INT(in_stride[3], 0);
    CHECK(ran_late); /* a stretch's pass can find the process running */
    /* After 5 s quiet, the pass falls on each of a stretch's 4 ticks about
     * as often (12 stretches a quiet stretch, 60 of them). */
    uint64_t all = at[0] + at[1] + at[2] + at[3];
    CHECK(all > 500);
    for (int i = 0; i < 4; i++)
        CHECK(at[i] * 4 > all * 3 / 4 && at[i] * 4 < all * 5 / 4);
    /* Quiet 1-5 s: stride 2; running: every tick. */
    CHECK(passes < ticks / 2);

    /* A stretch lasts 250 ms at most: at 5 Hz (a rate the budget lowered)
     * every tick, at 10 Hz stretches of 2. */
    a.interval_ns = 1000000000ull / 5;
    h = (struct agent_hot){0};
    for (uint64_t k = 0; k < 5 * 30; k++) {
        CHECK_EQ_INT(h.skip, 0);
        agent_next_stretch(&a, &h, k == 0);
    }
    CHECK_EQ_INT(h.stride, 1);
    a.interval_ns = 1000000000ull / 10;
    h = (struct agent_hot){0};
    for (uint64_t k = 0; k < 10 * 30; k++)
        agent_next_stretch(&a, &h, k == 0);
    CHECK_EQ_INT(h.stride, 2);
    a.interval_ns = tick;

    /* --idle-stride 1: every tick, however quiet. */
    a.opts.idle_stride = 1;
    h = (struct agent_hot){0};
    for (uint64_t k = 0; k < 19 * 30; k++) {
        CHECK_EQ_INT(h.skip, 0);
        agent_next_stretch(&a, &h, k == 0);
    }
    CHECK_EQ_INT(h.stride, 1);
}

/* The stride follows the share of recent ticks found changed: a process
 * that stops comes to stretches of 2 after about 1.4 s and of 4 after 3 s;
 * one change in a settled spell costs a second of stretches of 2, two in a
 * row every tick; one changed at a fiftieth of its passes, at random, is
 * mostly at 4, and one changed at half of them at every tick. */
static void test_change_share(void)
{
    struct agent a = stride_agent(777);
    struct agent_hot h = {0};
    for (int k = 0; k < 19 * 3; k++)
        agent_next_stretch(&a, &h, true);
    CHECK_EQ_INT(h.stride, 1);
    /* Stops changing: the ticks until each stride, skips included. */
    uint64_t ticks = 0, to2 = 0, to4 = 0;
    while (ticks < 19 * 10 && !to4) {
        ticks += 1 + h.skip;
        h.skip = 0;
        agent_next_stretch(&a, &h, false);
        ticks += h.after_pass;
        if (h.stride == 2 && !to2)
            to2 = ticks;
        if (h.stride == 4)
            to4 = ticks;
    }
    CHECK(to2 >= 24 && to2 <= 30);
    CHECK(to4 >= 52 && to4 <= 64);
    for (int k = 0; k < 19 * 5; k++)
        agent_next_stretch(&a, &h, false);
    CHECK_EQ_INT(h.stride, 4);
    agent_next_stretch(&a, &h, true);
    CHECK_EQ_INT(h.stride, 2);
    int back = 0;
    while (h.stride != 4 && back < 100) {
        agent_next_stretch(&a, &h, false);
        back++;
    }
    CHECK(back >= 8 && back <= 14); /* passes of 2 ticks: about a second */
    agent_next_stretch(&a, &h, true);
    agent_next_stretch(&a, &h, true);
    CHECK_EQ_INT(h.stride, 1);

    /* Changed at random: a pass in 50, then one in 2. */
    for (int share = 50; share >= 2; share -= 48) {
        uint64_t rnd = 99, passes = 0, by_stride[5] = {0};
        h = (struct agent_hot){0};
        ticks = 0;
        while (ticks < 19 * 600) {
            ticks += 1 + h.skip;
            h.skip = 0;
            rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
            agent_next_stretch(&a, &h, (rnd >> 33) % (uint64_t)share == 0);
            ticks += h.after_pass;
            passes++;
            by_stride[h.stride]++;
        }
        if (share == 50) {
            CHECK(by_stride[4] > 3 * (by_stride[1] + by_stride[2]));
            CHECK(passes < ticks / 3);
        } else {
            CHECK(by_stride[1] > 20 * (by_stride[2] + by_stride[4]));
            CHECK(passes > ticks * 9 / 10);
        }
    }
}

/* Stretches of 8 from 32 Hz (8 ticks within the 250 ms cap): at 100 Hz a
 * process settled for about 4.2 s (under a sixty-fourth of its recent ticks
 * changed) comes to 8, each tick of a stretch as likely to get its pass and
 * every tick counted once; one change brings it back to 2 at most. At
 * 19 Hz the same option stops at 4. */
static void test_stride_8(void)
{
    struct agent a = stride_agent(4242);
    a.opts.idle_stride = 8;
    a.interval_ns = 1000000000ull / 100;
    struct agent_hot h = {0};
    for (int k = 0; k < 100 * 3; k++)
        agent_next_stretch(&a, &h, true);
    CHECK_EQ_INT(h.stride, 1);
    /* Settled from here, tick by tick: the first pass at stride 8 starts
     * the count; from then on each stretch follows the last. */
    uint64_t at[8] = {0}, weights = 0, to8 = 0, stretch_start = 0, stretch_end = 0;
    for (uint64_t k = 0; k < 100 * 120; k++) {
        if (h.skip) {
            h.skip--;
            continue;
        }
        if (to8) {
            CHECK_EQ_INT(h.stride, 8);
            CHECK(k >= stretch_start && k < stretch_start + 8);
            at[k - stretch_start]++;
            weights += 8;
            stretch_end = stretch_start + 8;
        }
        unsigned before = h.after_pass;
        agent_next_stretch(&a, &h, false);
        if (!to8 && h.stride == 8)
            to8 = k + 1 + before; /* where its first stretch of 8 starts */
        stretch_start = k + 1 + before;
    }
    CHECK(to8 >= 400 && to8 <= 440);
    CHECK_EQ_INT(weights, stretch_end - to8);
    uint64_t all = 0;
    for (int i = 0; i < 8; i++)
        all += at[i];
    CHECK(all > 1400);
    for (int i = 0; i < 8; i++)
        CHECK(at[i] * 8 > all * 3 / 4 && at[i] * 8 < all * 5 / 4);
    agent_next_stretch(&a, &h, true);
    CHECK(h.stride <= 2);

    /* 19 Hz: 8 ticks would be 421 ms, over the cap. */
    a.interval_ns = 1000000000ull / 19;
    h = (struct agent_hot){0};
    for (int k = 0; k < 19 * 60; k++) {
        agent_next_stretch(&a, &h, k == 0);
        CHECK(h.stride <= 4);
    }
    CHECK_EQ_INT(h.stride, 4);
}

int main(void)
{
    test_container_ids();
    test_loadavg();
    test_stretches();
    test_change_share();
    test_stride_8();
    test_last_pass();
    test_settle();
    return unit_report("test_agent");
}
