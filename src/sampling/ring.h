/* A bounded ring of sampling passes for the flight recorder: it keeps only
 * the passes of the last N seconds (each pass: its time, pass-wide facts, and
 * one (thread, stack, state) record per thread), and turns the window into a
 * struct profile that every profile writer can write. Stacks, frames and
 * threads are ids interned in a source profile, which the sampler fills. */
#ifndef PYSCOPE_SAMPLING_RING_H
#define PYSCOPE_SAMPLING_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/profile.h"
#include "profile/sample_sink.h"

/* One thread's sample in one pass: 12 bytes. */
struct ring_sample {
    uint32_t thread;          /* id in the source profile */
    uint32_t stack;           /* id in the source profile */
    uint16_t syscall;         /* as profile_segment.syscall */
    uint8_t state;            /* enum profile_state */
    uint8_t gc;
};

struct ring_pass {
    uint64_t time_ns;         /* since the recording started */
    uint64_t first_sample;    /* sequence number of its first sample */
    uint32_t n_samples;
    uint32_t hog_stack;
    uint16_t stacks_sampled, stacks_torn;
    uint8_t flags;
    uint8_t weight;           /* passes its samples stand for (0: one) */
};

struct sample_ring {
    struct sample_sink sink;  /* what a sampler feeds: see sample_ring_init */
    uint64_t window_ns;
    /* passes: a circular array of fixed capacity, oldest at pass_head */
    struct ring_pass *passes;
    size_t pass_cap, pass_head, n_passes;
    bool in_pass;             /* between begin and end: the newest pass is open */
    /* What the passes begun from now on stand for: set by a sampler's owner
     * that makes one pass for several ticks (0 or 1: each for itself). */
    uint8_t pass_weight;
    /* samples: live sequence numbers [first_seq, next_seq), sample s at
     * samples[s % sample_cap]; the array doubles up to max_samples */
    struct ring_sample *samples;
    size_t sample_cap, max_samples;
    uint64_t first_seq, next_seq;
    /* Passes that left the ring before leaving the window, because the
     * memory cap was reached, and samples that did not fit at all. */
    uint64_t passes_evicted;
    uint64_t samples_dropped;
    uint64_t newest_evicted_ns;  /* the window cannot start before this */
    bool evicted_any;
};

/* The default cap on the samples' memory. */
#define RING_DEFAULT_MAX_BYTES (64u << 20)

/* window_ns: how far back to keep; rate_hz: the pass rate, which sizes the
 * pass array (window x rate plus room for extra passes); max_bytes: cap on
 * the samples array (the pass array gets at most a quarter of it more).
 * r->sink is then a sink whose passes go into the ring (a window's GC
 * triggers and timeline are rebuilt from its samples). Returns 0, or -1 when
 * out of memory. */
int sample_ring_init(struct sample_ring *r, uint64_t window_ns, double rate_hz, size_t max_bytes);
void sample_ring_free(struct sample_ring *r);

/* A pass at time_ns (non-decreasing): passes older than the window are
 * forgotten first. */
void sample_ring_begin_pass(struct sample_ring *r, uint64_t time_ns);
void sample_ring_add(struct sample_ring *r, uint32_t thread, uint32_t stack,
                     enum profile_state state, bool gc, uint16_t syscall);
void sample_ring_end_pass(struct sample_ring *r, const struct sample_pass *facts);

/* Where the newest pass's samples are (mark->valid false without a pass),
 * and a new pass at time_ns holding them again: see sample_sink_ops.repeat
 * (false: they are no longer all in the ring, or there is no room). */
void sample_ring_mark(const struct sample_ring *r, struct sink_mark *mark);
bool sample_ring_repeat(struct sample_ring *r, uint64_t time_ns, const struct sink_mark *mark);

/* Replaces thread's sample in the newest pass with stack and state (or adds
 * one): for what is known better than a sample could see it, e.g. the
 * traceback of an uncaught exception. Returns 0, or -1 without a pass. */
int sample_ring_set_last(struct sample_ring *r, uint32_t thread, uint32_t stack,
                         enum profile_state state);

/* Bytes the ring holds now, and at most. */
size_t sample_ring_memory(const struct sample_ring *r);
size_t sample_ring_memory_cap(const struct sample_ring *r);

/* What a window covers, in the source recording's time. */
struct ring_window {
    uint64_t start_ns, end_ns;
    uint64_t passes;
    size_t threads;
    bool shortened;           /* the memory cap cut it below window_ns */
};

/* Builds out (initialised here; the caller frees it with profile_free) from
 * the passes in [end_ns - window, end_ns]: frames, stacks and threads that
 * occur in them (names included), counts, hogs, pass statistics and the
 * timeline, with times relative to the window's start. The meta is copied
 * from src with start_unix_ns and duration_ns set to the window. Returns 0,
 * or -1 when out of memory. */
int sample_ring_window(const struct sample_ring *r, const struct profile *src, uint64_t end_ns,
                       struct profile *out, struct ring_window *window);

/* As sample_ring_window, for the passes in [start_ns, end_ns] (at most the
 * ring's window): a request for the next N seconds, answered at their end. */
int sample_ring_window_between(const struct sample_ring *r, const struct profile *src,
                               uint64_t start_ns, uint64_t end_ns, struct profile *out,
                               struct ring_window *window);

/* The newest pass's samples (open or ended), copied into out, at most cap
 * of them. Returns how many there are. */
size_t sample_ring_last_pass(const struct sample_ring *r, struct ring_sample *out, size_t cap);

#endif
