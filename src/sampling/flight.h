/* The flight recorder: a sampler attached to one process, paced at a rate,
 * whose passes go into a sample ring holding the last N seconds; on request
 * the window is written in any profile format. The caller (run) owns the
 * process and its events; it calls flight_tick when flight_deadline comes. */
#ifndef PYSCOPE_SAMPLING_FLIGHT_H
#define PYSCOPE_SAMPLING_FLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "output/profile_formats.h"
#include "profile/profile.h"
#include "sampling/ring.h"
#include "sampling/sampler.h"

struct flight_options {
    uint64_t window_ns;
    double rate_hz;
    size_t max_bytes;          /* cap on the ring's samples; 0: RING_DEFAULT_MAX_BYTES */
    bool native;               /* --native: samples carry C stacks (perf_event only: the
                                * program is already traced, no ptrace fallback) */
    bool native_all;
};

struct flight {
    struct flight_options opts;
    struct profile profile;    /* frames, stacks and threads, interned for the ring */
    struct sample_ring ring;
    struct sampler sampler;
    bool attached;
    bool ever_attached;
    pid_t pid;
    uint64_t start_ns;         /* monotonic: time 0 of the recording */
    uint64_t interval_ns;
    uint64_t next_pass_ns;
    uint64_t watch_since_ns;   /* when pid was (re)started: paces attach attempts */
    uint64_t next_attach_ns;
    char why_not[520];         /* why the last attach failed */
    bool native_said;          /* --native was set up (or refused) once */
};

/* Starts the clock; nothing is sampled before flight_watch. */
int flight_init(struct flight *f, const struct flight_options *opts);
void flight_free(struct flight *f);

/* Samples pid from now on (again, after it exec'd): attaching is retried
 * until CPython is found in it. */
void flight_watch(struct flight *f, pid_t pid);

/* When flight_tick wants to be called next (monotonic ns). */
uint64_t flight_deadline(const struct flight *f);

/* Attaches if due, and takes a pass if due. Returns true when this call
 * attached (the runtime is now known). */
bool flight_tick(struct flight *f, uint64_t now_ns);

/* One pass right now (at a stop the caller is about to report). */
void flight_pass_now(struct flight *f);

/* The runtime found in the process, or NULL while not attached. */
struct py_runtime *flight_runtime(struct flight *f);

/* Replaces tid's sample in the newest pass with this stack (frames
 * outermost first): what is known about a thread better than a sample saw
 * it. Returns 0 or -1. */
int flight_set_last_stack(struct flight *f, pid_t tid, const struct profile_frame *frames,
                          size_t n_frames, enum profile_state state);

/* Monotonic now, as the recording counts it. */
uint64_t flight_now(const struct flight *f);

/* Writes the window ending at end_ns (from flight_now) to path in format,
 * replacing the file whole, and prints one line on stderr saying where it
 * went, what it covers, and why it was written (before_what, e.g. "the
 * uncaught ValueError"). Returns 0, or -1 after saying why on stderr. */
int flight_write(struct flight *f, uint64_t end_ns, const char *path,
                 const struct profile_format *format, const char *before_what);

#endif
