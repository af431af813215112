/* Where a sampler's passes go. A sink is told when a pass begins, gets one
 * sample per thread, and the pass-wide facts when it ends. Two implement it:
 * a profile (counts, hogs, GC triggers and the timeline: profile_sink.c)
 * and the flight recorder's ring (sampling/ring.c). Thread and stack ids are
 * a profile's either way: the sampler interns into one whichever sink it feeds. */
#ifndef PYSCOPE_PROFILE_SAMPLE_SINK_H
#define PYSCOPE_PROFILE_SAMPLE_SINK_H

#include <stdbool.h>
#include <stdint.h>

#include "profile/profile.h"

/* One thread's sample in one pass. */
struct sink_sample {
    uint32_t thread;
    uint32_t stack;
    enum profile_state state;
    bool gc;                  /* this thread was running the collector */
    uint16_t syscall;         /* as profile_segment.syscall */
};

/* What one pass found besides the threads' samples. */
struct sample_pass {
    bool failed;              /* some stack could not be read whole */
    bool gil_busy;            /* some thread held the GIL */
    bool gc;                  /* a collection was running */
    bool gc_started;          /* ... and was not on the pass before */
    uint32_t hog_stack;       /* GIL holder's stack while others waited, or UINT32_MAX */
    bool hog_native;          /* ... held for longer than a switch interval */
    uint16_t stacks_sampled;
    uint16_t stacks_torn;
};

/* What a sink keeps for one sampled thread from pass to pass; the sampler
 * holds it with the thread and hands it back with each of its samples. */
struct sink_thread {
    bool segment_open;
    struct profile_segment segment;
};

/* Where a sink put the samples of a pass, for it to give them again. */
struct sink_mark {
    uint64_t first;           /* the sink's own position of the first */
    uint32_t n;
    bool valid;
};

struct sample_sink;

struct sample_sink_ops {
    /* A pass at time_ns since the recording started (non-decreasing). */
    void (*begin_pass)(struct sample_sink *sink, uint64_t time_ns);
    void (*add)(struct sample_sink *sink, struct sink_thread *thread,
                const struct sink_sample *sample);
    /* A collection seen running on top of stack (the stack without "<GC>");
     * new_collection when it was not running on the pass before. */
    void (*gc_trigger)(struct sample_sink *sink, uint32_t stack, bool new_collection);
    void (*end_pass)(struct sample_sink *sink, const struct sample_pass *pass);
    /* The thread is no longer sampled (it exited, or the sampler closes). */
    void (*thread_gone)(struct sample_sink *sink, struct sink_thread *thread, uint64_t time_ns);
    /* Optional, for a pass that repeats an earlier one unchanged without
     * handing each thread's sample over again: mark notes where the pass
     * just ended went; repeat begins a pass at time_ns holding the marked
     * samples, or, returning false, begins it empty (the caller then adds
     * them one by one). */
    void (*mark)(struct sample_sink *sink, struct sink_mark *mark);
    bool (*repeat)(struct sample_sink *sink, uint64_t time_ns, const struct sink_mark *mark);
};

struct sample_sink {
    const struct sample_sink_ops *ops;
};

/* The profile as a sink: samples counted by (thread, stack, state), hogs,
 * GC triggers, and with timeline, one segment per stretch of a thread's
 * unchanged stack and state. */
struct profile_sink {
    struct sample_sink sink;
    struct profile *profile;
    bool timeline;
    uint64_t now_ns;          /* the open pass's time */
};

void profile_sink_init(struct profile_sink *ps, struct profile *profile, bool timeline);

#endif
