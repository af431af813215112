/* Checks the flight recorder's sample ring: only the last window is kept,
 * the window becomes a profile with re-interned ids, counts, hogs, pass
 * statistics and a timeline relative to its start, the memory cap shortens
 * the window (and says so) instead of growing, and set_last replaces the
 * newest sample of a thread, and a pass repeated from its mark holds the
 * marked samples again, or says it cannot once they have left the ring; a
 * pass begun with a weight counts for that many in the window's profile
 * (samples, states, GC, hogs), read or repeated, and passes after it for
 * themselves again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile.h"
#include "sampling/ring.h"
#include "unit.h"

#define MS 1000000ull
#define SEC 1000000000ull

struct source {
    struct profile p;
    uint32_t t_main, t_worker;
    uint32_t s_old, s_work, s_sleep, s_raise;
};

static uint32_t stack_of(struct profile *p, const char *a, const char *b, int line)
{
    uint32_t frames[2];
    frames[0] = profile_frame_id(p, a, "app.py", 1, false);
    frames[1] = profile_frame_id(p, b, "app.py", line, false);
    return profile_stack_id(p, frames, 2);
}

static void source_init(struct source *s)
{
    CHECK_EQ_INT(profile_init(&s->p), 0);
    s->p.meta.pid = 100;
    s->p.meta.start_unix_ns = 1000 * SEC;
    s->p.meta.rate_hz = 100;
    snprintf(s->p.meta.command, sizeof s->p.meta.command, "python app.py");
    s->t_main = profile_thread_id(&s->p, 100, 100);
    s->t_worker = profile_thread_id(&s->p, 100, 101);
    snprintf(s->p.threads[s->t_main].name, sizeof s->p.threads[0].name, "MainThread");
    snprintf(s->p.threads[s->t_worker].name, sizeof s->p.threads[0].name, "worker");
    s->s_old = stack_of(&s->p, "<module>", "startup", 3);
    s->s_work = stack_of(&s->p, "<module>", "work", 7);
    s->s_sleep = stack_of(&s->p, "<module>", "sleepy", 9);
    s->s_raise = stack_of(&s->p, "<module>", "fail", 11);
}

static void pass(struct sample_ring *r, uint64_t t, uint32_t thread_a, uint32_t stack_a,
                 enum profile_state state_a, uint32_t thread_b, uint32_t stack_b,
                 enum profile_state state_b, bool hog)
{
    sample_ring_begin_pass(r, t);
    sample_ring_add(r, thread_a, stack_a, state_a, false, 0xffff);
    if (thread_b != UINT32_MAX)
        sample_ring_add(r, thread_b, stack_b, state_b, false, state_b == PROFILE_IDLE ? 230 : 0xffff);
    struct sample_pass facts = {.gil_busy = true, .hog_stack = hog ? stack_a : UINT32_MAX,
                                    .stacks_sampled = thread_b != UINT32_MAX ? 2 : 1};
    sample_ring_end_pass(r, &facts);
}

static size_t pass_samples_newest(const struct sample_ring *r)
{
    return r->passes[(r->pass_head + r->n_passes - 1) % r->pass_cap].n_samples;
}

struct seg_check {
    uint64_t n, min_start, max_end;
    uint64_t main_last_start;
    uint32_t main_last_stack;
    bool ordered;
    uint64_t last_end[8];
};

static int collect(void *ctx, const struct profile_segment *seg)
{
    struct seg_check *c = ctx;
    c->n++;
    if (seg->start_ns < c->min_start)
        c->min_start = seg->start_ns;
    if (seg->end_ns > c->max_end)
        c->max_end = seg->end_ns;
    if (seg->thread < 8) {
        if (seg->start_ns < c->last_end[seg->thread] || seg->end_ns < seg->start_ns)
            c->ordered = false;
        c->last_end[seg->thread] = seg->end_ns;
    }
    if (seg->thread == 0 && seg->start_ns >= c->main_last_start) {
        c->main_last_start = seg->start_ns;
        c->main_last_stack = seg->stack;
    }
    return 0;
}

static const char *top_function(const struct profile *p, uint32_t stack)
{
    const struct profile_stack *s = &p->stacks[stack];
    return s->depth ? p->frames[s->frames[s->depth - 1]].function : "";
}

/* 5 s at 100 Hz into a 1 s ring: the startup stack has left it, the window
 * starts 1 s before the end, and the worker that ended mid-window has its
 * stretch closed where it disappeared. */
static void test_window(void)
{
    struct source s;
    source_init(&s);
    struct sample_ring r;
    CHECK_EQ_INT(sample_ring_init(&r, 1 * SEC, 100, RING_DEFAULT_MAX_BYTES), 0);
    for (uint64_t t = 0; t < 5 * SEC; t += 10 * MS) {
        uint32_t main_stack = t < 1 * SEC ? s.s_old : s.s_work;
        bool worker_alive = t < 4500 * MS;
        pass(&r, t, s.t_main, main_stack, PROFILE_HOLDING_GIL,
             worker_alive ? s.t_worker : UINT32_MAX, s.s_sleep, PROFILE_IDLE, t % (100 * MS) == 0);
    }
    uint64_t end = 4990 * MS + 5 * MS;
    struct profile w;
    struct ring_window info;
    CHECK_EQ_INT(sample_ring_window(&r, &s.p, end, &w, &info), 0);
    CHECK_EQ_INT(info.start_ns, end - 1 * SEC);
    CHECK_EQ_INT(info.end_ns, end);
    CHECK(!info.shortened);
    CHECK_EQ_INT(info.passes, 100);
    CHECK_EQ_INT(info.threads, 2);
    CHECK_EQ_INT(w.meta.passes, 100);
    CHECK_EQ_INT(w.meta.gil_busy_passes, 100);
    CHECK_EQ_INT(w.meta.stacks_sampled, 100 + 50);
    CHECK_EQ_INT(w.meta.duration_ns, 1 * SEC);
    CHECK_EQ_INT(w.meta.start_unix_ns, 1000 * SEC + end - 1 * SEC);
    CHECK_EQ_INT(w.meta.pid, 100);
    CHECK_EQ_STR(w.meta.command, "python app.py");
    /* Only what the window uses is interned again. */
    CHECK_EQ_INT(w.n_stacks, 2);
    for (size_t i = 0; i < w.n_frames; i++)
        CHECK(strcmp(w.frames[i].function, "startup") != 0);
    CHECK_EQ_INT(w.n_threads, 2);
    CHECK_EQ_STR(w.threads[0].name, "MainThread");
    CHECK_EQ_STR(w.threads[1].name, "worker");
    CHECK_EQ_INT(w.threads[0].samples, 100);
    CHECK_EQ_INT(w.threads[1].samples, 50);
    CHECK_EQ_INT(w.threads[0].state_samples[PROFILE_HOLDING_GIL], 100);
    CHECK_EQ_INT(w.threads[1].state_samples[PROFILE_IDLE], 50);
    CHECK_EQ_INT(w.n_hogs, 1);
    CHECK_EQ_INT(w.hogs[0].samples, 10);
    /* Timeline: main one stretch over the whole window, the worker one that
     * ends where it was last missing. */
    struct seg_check c = {.min_start = UINT64_MAX, .ordered = true};
    CHECK_EQ_INT(profile_foreach_segment(&w, collect, &c), 0);
    CHECK_EQ_INT(c.n, 2);
    CHECK(c.ordered);
    CHECK_EQ_INT(c.min_start, 5 * MS);
    CHECK_EQ_INT(c.max_end, 1 * SEC);
    CHECK_EQ_STR(top_function(&w, c.main_last_stack), "work");
    CHECK_EQ_INT(c.last_end[1], 4500 * MS - (end - 1 * SEC));
    profile_free(&w);

    /* A window that ends early: only passes up to its end count. */
    CHECK_EQ_INT(sample_ring_window(&r, &s.p, 4500 * MS, &w, &info), 0);
    CHECK_EQ_INT(info.passes, 52);
    CHECK_EQ_INT(w.meta.duration_ns, 1 * SEC);
    profile_free(&w);

    /* The newest pass's sample of a thread can be replaced... */
    CHECK_EQ_INT(sample_ring_set_last(&r, s.t_main, s.s_raise, PROFILE_HOLDING_GIL), 0);
    CHECK_EQ_INT(sample_ring_window(&r, &s.p, end, &w, &info), 0);
    c = (struct seg_check){.min_start = UINT64_MAX, .ordered = true};
    profile_foreach_segment(&w, collect, &c);
    CHECK_EQ_STR(top_function(&w, c.main_last_stack), "fail");
    CHECK_EQ_INT(w.threads[0].samples, 100);
    profile_free(&w);
    /* ... or added when the thread was not in it. */
    CHECK_EQ_INT(sample_ring_set_last(&r, s.t_worker, s.s_raise, PROFILE_UNKNOWN), 0);
    CHECK_EQ_INT(sample_ring_window(&r, &s.p, end, &w, &info), 0);
    CHECK_EQ_INT(w.threads[1].samples, 51);
    profile_free(&w);

    sample_ring_free(&r);
    profile_free(&s.p);
}

/* A recording shorter than the window starts at the recording's start. */
static void test_short_recording(void)
{
    struct source s;
    source_init(&s);
    struct sample_ring r;
    CHECK_EQ_INT(sample_ring_init(&r, 30 * SEC, 100, RING_DEFAULT_MAX_BYTES), 0);
    for (uint64_t t = 50 * MS; t < 2 * SEC; t += 10 * MS)
        pass(&r, t, s.t_main, s.s_work, PROFILE_HOLDING_GIL, UINT32_MAX, 0, 0, false);
    struct profile w;
    struct ring_window info;
    CHECK_EQ_INT(sample_ring_window(&r, &s.p, 2 * SEC, &w, &info), 0);
    CHECK_EQ_INT(info.start_ns, 0);
    CHECK_EQ_INT(info.passes, 195);
    CHECK_EQ_INT(w.meta.duration_ns, 2 * SEC);
    profile_free(&w);
    /* Nothing sampled yet: an empty but valid profile. */
    struct sample_ring empty;
    CHECK_EQ_INT(sample_ring_init(&empty, 30 * SEC, 100, RING_DEFAULT_MAX_BYTES), 0);
    CHECK_EQ_INT(sample_ring_window(&empty, &s.p, 1 * SEC, &w, &info), 0);
    CHECK_EQ_INT(info.passes, 0);
    CHECK_EQ_INT(w.n_threads, 0);
    profile_free(&w);
    sample_ring_free(&empty);
    sample_ring_free(&r);
    profile_free(&s.p);
}

/* The memory cap: 4096 samples at most (the floor), 64 threads a pass, a
 * 10 s window at 100 Hz: the ring keeps 64 whole passes and no more, and the
 * window says it was shortened. */
static void test_memory_cap(void)
{
    struct source s;
    source_init(&s);
    uint32_t threads[64];
    for (int i = 0; i < 64; i++)
        threads[i] = profile_thread_id(&s.p, 100, 200 + i);
    struct sample_ring r;
    CHECK_EQ_INT(sample_ring_init(&r, 10 * SEC, 100, 1), 0);
    size_t cap = sample_ring_memory_cap(&r);
    for (uint64_t t = 0; t < 3 * SEC; t += 10 * MS) {
        sample_ring_begin_pass(&r, t);
        for (int i = 0; i < 64; i++)
            sample_ring_add(&r, threads[i], s.s_work, PROFILE_HOLDING_GIL, false, 0xffff);
        struct sample_pass facts = {.hog_stack = UINT32_MAX, .stacks_sampled = 64};
        sample_ring_end_pass(&r, &facts);
        CHECK(sample_ring_memory(&r) <= cap);
    }
    CHECK_EQ_INT(r.next_seq - r.first_seq, 4096);
    CHECK_EQ_INT(r.n_passes, 64);
    CHECK(r.passes_evicted > 0);
    struct profile w;
    struct ring_window info;
    CHECK_EQ_INT(sample_ring_window(&r, &s.p, 3 * SEC, &w, &info), 0);
    CHECK(info.shortened);
    CHECK_EQ_INT(info.passes, 64);
    CHECK_EQ_INT(info.start_ns, 3 * SEC - 640 * MS);
    CHECK_EQ_INT(w.meta.stacks_sampled, 64 * 64);
    CHECK_EQ_INT(w.n_threads, 64);
    profile_free(&w);
    sample_ring_free(&r);
    profile_free(&s.p);
}

/* A week at 10 kHz asks for more passes than the cap allows: the pass array
 * stays within a quarter of the cap, and passes without any sample (no
 * thread yet) still leave room by dropping the oldest. */
static void test_pass_cap(void)
{
    struct sample_ring r;
    uint64_t week = 7ull * 24 * 3600 * SEC;
    CHECK_EQ_INT(sample_ring_init(&r, week, 10000, RING_DEFAULT_MAX_BYTES), 0);
    CHECK(sample_ring_memory_cap(&r) <= RING_DEFAULT_MAX_BYTES + RING_DEFAULT_MAX_BYTES / 4);
    sample_ring_free(&r);
    CHECK_EQ_INT(sample_ring_init(&r, 10 * SEC, 100, 1), 0);
    CHECK_EQ_INT(r.pass_cap, 256);
    for (uint64_t t = 0; t < 1000; t++) {
        sample_ring_begin_pass(&r, t * MS);
        sample_ring_end_pass(&r, &(struct sample_pass){.hog_stack = UINT32_MAX});
    }
    CHECK_EQ_INT(r.n_passes, 256);
    CHECK_EQ_INT(r.passes_evicted, 1000 - 256);
    sample_ring_free(&r);
}

/* Two processes' passes interleaved in one ring, as the agent feeds it: the
 * main thread's process is repeated from its mark after the worker's
 * process had its own pass, 300 times, and the window is what adding the
 * samples one by one would have made, across the samples array's growth
 * (4096 to 8192 samples). */
static void test_repeat(void)
{
    struct source s;
    source_init(&s);
    uint32_t other = profile_thread_id(&s.p, 300, 300);
    struct sample_ring a, b;
    CHECK_EQ_INT(sample_ring_init(&a, 100 * SEC, 100, RING_DEFAULT_MAX_BYTES), 0);
    CHECK_EQ_INT(sample_ring_init(&b, 100 * SEC, 100, RING_DEFAULT_MAX_BYTES), 0);
    struct sink_mark mark;
    sample_ring_mark(&a, &mark);
    CHECK(!mark.valid);
    CHECK(!sample_ring_repeat(&a, 0, &mark));  /* begun empty: ended as such */
    sample_ring_end_pass(&a, &(struct sample_pass){.hog_stack = UINT32_MAX});
    sample_ring_begin_pass(&b, 0);
    sample_ring_end_pass(&b, &(struct sample_pass){.hog_stack = UINT32_MAX});
    struct sample_pass facts = {.gil_busy = true, .hog_stack = UINT32_MAX, .stacks_sampled = 2};
    for (struct sample_ring *r = &a; r; r = r == &a ? &b : NULL) {
        pass(r, 10 * MS, s.t_main, s.s_work, PROFILE_HOLDING_GIL, s.t_worker, s.s_sleep,
             PROFILE_IDLE, false);
    }
    sample_ring_mark(&a, &mark);
    CHECK(mark.valid);
    CHECK_EQ_INT(mark.n, 2);
    for (uint64_t k = 1; k <= 300; k++) {
        uint64_t t = 10 * MS + k * 20 * MS;
        for (struct sample_ring *r = &a; r; r = r == &a ? &b : NULL) {
            sample_ring_begin_pass(r, t - 10 * MS);
            for (int i = 0; i < 20; i++)
                sample_ring_add(r, other, s.s_old, PROFILE_RUNNING, false, 0xffff);
            sample_ring_end_pass(r, &(struct sample_pass){.hog_stack = UINT32_MAX});
        }
        CHECK(sample_ring_repeat(&a, t, &mark));
        sample_ring_end_pass(&a, &facts);
        sample_ring_mark(&a, &mark);
        CHECK_EQ_INT(mark.n, 2);
        sample_ring_begin_pass(&b, t);
        sample_ring_add(&b, s.t_main, s.s_work, PROFILE_HOLDING_GIL, false, 0xffff);
        sample_ring_add(&b, s.t_worker, s.s_sleep, PROFILE_IDLE, false, 230);
        sample_ring_end_pass(&b, &facts);
    }
    CHECK_EQ_INT(a.sample_cap, 8192);
    CHECK_EQ_INT(a.next_seq, b.next_seq);
    CHECK_EQ_INT(a.n_passes, b.n_passes);
    for (uint64_t seq = a.first_seq; seq < a.next_seq; seq++) {
        const struct ring_sample *x = &a.samples[seq % a.sample_cap];
        const struct ring_sample *y = &b.samples[seq % b.sample_cap];
        CHECK(x->thread == y->thread && x->stack == y->stack && x->state == y->state &&
              x->syscall == y->syscall && x->gc == y->gc);
    }
    struct profile wa, wb;
    struct ring_window ia, ib;
    uint64_t end = 10 * MS + 300 * 20 * MS;
    CHECK_EQ_INT(sample_ring_window(&a, &s.p, end, &wa, &ia), 0);
    CHECK_EQ_INT(sample_ring_window(&b, &s.p, end, &wb, &ib), 0);
    CHECK_EQ_INT(ia.passes, ib.passes);
    CHECK_EQ_INT(wa.n_threads, 3);
    CHECK_EQ_INT(wa.threads[0].samples, 301);
    CHECK_EQ_INT(wa.threads[1].state_samples[PROFILE_IDLE], 301);
    CHECK_EQ_INT(wa.threads[0].samples, wb.threads[0].samples);
    CHECK_EQ_INT(wa.threads[2].samples, wb.threads[2].samples);
    CHECK_EQ_INT(wa.meta.stacks_sampled, wb.meta.stacks_sampled);
    profile_free(&wa);
    profile_free(&wb);
    sample_ring_free(&b);

    /* Marked samples pushed out by the memory cap (4096 samples, 64 a pass)
     * are not copied: the pass is begun empty, for the caller to fill. */
    sample_ring_free(&a);
    CHECK_EQ_INT(sample_ring_init(&a, 100 * SEC, 100, 1), 0);
    pass(&a, 0, s.t_main, s.s_work, PROFILE_HOLDING_GIL, s.t_worker, s.s_sleep, PROFILE_IDLE,
         false);
    sample_ring_mark(&a, &mark);
    for (uint64_t k = 1; k <= 70; k++) {
        sample_ring_begin_pass(&a, k * MS);
        for (int i = 0; i < 64; i++)
            sample_ring_add(&a, other, s.s_old, PROFILE_RUNNING, false, 0xffff);
        sample_ring_end_pass(&a, &(struct sample_pass){.hog_stack = UINT32_MAX});
    }
    uint64_t passes = a.n_passes;
    CHECK(!sample_ring_repeat(&a, 71 * MS, &mark));
    CHECK_EQ_INT(a.n_passes, passes + 1);
    CHECK_EQ_INT(pass_samples_newest(&a), 0);
    sample_ring_add(&a, s.t_main, s.s_work, PROFILE_HOLDING_GIL, false, 0xffff);
    sample_ring_end_pass(&a, &facts);
    CHECK_EQ_INT(pass_samples_newest(&a), 1);
    /* A mark of samples not written yet (another ring's) is refused too. */
    mark = (struct sink_mark){.first = a.next_seq, .n = 2, .valid = true};
    CHECK(!sample_ring_repeat(&a, 72 * MS, &mark));
    sample_ring_end_pass(&a, &facts);
    sample_ring_free(&a);
    profile_free(&s.p);
}

/* The agent's quiet process, one pass for 4 ticks: in the window its
 * samples count 4 times each, repeated ones too, and its hog 4 times; a
 * pass begun after the weight is put back counts once. Pass statistics
 * stay per pass. */
static void test_weight(void)
{
    struct source s;
    source_init(&s);
    struct sample_ring r;
    CHECK_EQ_INT(sample_ring_init(&r, 100 * SEC, 100, RING_DEFAULT_MAX_BYTES), 0);
    pass(&r, 10 * MS, s.t_main, s.s_work, PROFILE_HOLDING_GIL, s.t_worker, s.s_sleep,
         PROFILE_IDLE, false);
    r.pass_weight = 4;
    pass(&r, 20 * MS, s.t_main, s.s_work, PROFILE_HOLDING_GIL, s.t_worker, s.s_sleep,
         PROFILE_IDLE, true);
    struct sink_mark mark;
    sample_ring_mark(&r, &mark);
    CHECK(sample_ring_repeat(&r, 30 * MS, &mark));
    sample_ring_end_pass(&r, &(struct sample_pass){.hog_stack = UINT32_MAX});
    r.pass_weight = 0;
    sample_ring_begin_pass(&r, 40 * MS);
    sample_ring_add(&r, s.t_main, s.s_work, PROFILE_HOLDING_GIL, true, 0xffff);
    sample_ring_end_pass(&r, &(struct sample_pass){.hog_stack = UINT32_MAX});
    struct profile w;
    struct ring_window info;
    CHECK_EQ_INT(sample_ring_window(&r, &s.p, 50 * MS, &w, &info), 0);
    CHECK_EQ_INT(info.passes, 4);
    CHECK_EQ_INT(w.meta.passes, 4);
    CHECK_EQ_INT(w.n_threads, 2);
    CHECK_EQ_INT(w.threads[0].samples, 1 + 4 + 4 + 1);
    CHECK_EQ_INT(w.threads[0].state_samples[PROFILE_HOLDING_GIL], 10);
    CHECK_EQ_INT(w.threads[0].gc_samples, 1);
    CHECK_EQ_INT(w.threads[1].state_samples[PROFILE_IDLE], 1 + 4 + 4);
    uint64_t counted = 0;
    for (size_t i = 0; i < w.n_counts; i++)
        counted += w.counts[i].samples;
    CHECK_EQ_INT(counted, 19);
    CHECK_EQ_INT(w.n_hogs, 1);
    CHECK_EQ_INT(w.hogs[0].samples, 4);
    profile_free(&w);
    sample_ring_free(&r);
    profile_free(&s.p);
}

int main(void)
{
    test_pass_cap();
    test_window();
    test_short_recording();
    test_memory_cap();
    test_repeat();
    test_weight();
    return unit_report("test_ring");
}
