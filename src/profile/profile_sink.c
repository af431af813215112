/* The profile as a sampler's sink: each sample counted, hogs and GC triggers
 * tallied, and a thread's timeline segment closed when its stack or state
 * changes (or the thread goes). */
#include "profile/sample_sink.h"

#include <stddef.h>

#define PROFILE_SINK(sink) ((struct profile_sink *)(void *)((char *)(sink) - offsetof(struct profile_sink, sink)))

static void close_segment(struct profile_sink *ps, struct sink_thread *th, uint64_t time_ns)
{
    if (!th->segment_open)
        return;
    th->segment.end_ns = time_ns;
    if (ps->timeline)
        profile_add_segment(ps->profile, &th->segment);
    th->segment_open = false;
}

static void begin_pass(struct sample_sink *sink, uint64_t time_ns)
{
    PROFILE_SINK(sink)->now_ns = time_ns;
}

static void add(struct sample_sink *sink, struct sink_thread *th, const struct sink_sample *smp)
{
    struct profile_sink *ps = PROFILE_SINK(sink);
    profile_add_sample(ps->profile, smp->thread, smp->stack, smp->state, smp->gc, ps->now_ns);
    struct profile_segment *seg = &th->segment;
    if (th->segment_open && seg->stack == smp->stack && seg->state == smp->state &&
        seg->gc == smp->gc && seg->syscall == smp->syscall)
        return;
    close_segment(ps, th, ps->now_ns);
    *seg = (struct profile_segment){.thread = smp->thread, .stack = smp->stack,
                                    .state = (uint8_t)smp->state, .gc = smp->gc,
                                    .syscall = smp->syscall, .start_ns = ps->now_ns};
    th->segment_open = true;
}

static void gc_trigger(struct sample_sink *sink, uint32_t stack, bool new_collection)
{
    profile_add_gc_trigger(PROFILE_SINK(sink)->profile, stack, new_collection);
}

static void end_pass(struct sample_sink *sink, const struct sample_pass *pass)
{
    if (pass->hog_stack != UINT32_MAX)
        profile_add_hog(PROFILE_SINK(sink)->profile, pass->hog_stack, pass->hog_native);
}

static void thread_gone(struct sample_sink *sink, struct sink_thread *th, uint64_t time_ns)
{
    close_segment(PROFILE_SINK(sink), th, time_ns);
}

static const struct sample_sink_ops profile_sink_ops = {
    .begin_pass = begin_pass,
    .add = add,
    .gc_trigger = gc_trigger,
    .end_pass = end_pass,
    .thread_gone = thread_gone,
};

void profile_sink_init(struct profile_sink *ps, struct profile *profile, bool timeline)
{
    *ps = (struct profile_sink){.sink = {&profile_sink_ops}, .profile = profile,
                                .timeline = timeline};
}
