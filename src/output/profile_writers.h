/* Writers for a recorded profile (struct profile): the formats users open in
 * the viewers they already have, and the summary printed when a recording
 * ends. Each writer returns 0, or -1 when the output (or memory) failed. */
#ifndef PYSCOPE_OUTPUT_PROFILE_WRITERS_H
#define PYSCOPE_OUTPUT_PROFILE_WRITERS_H

#include <stdbool.h>
#include <stdio.h>

#include "profile/profile.h"

/* A NULL options pointer means all false. Which writers honour which option is
 * said at each writer. */
struct profile_write_options {
    bool include_idle;     /* --idle: keep samples in state PROFILE_IDLE (default: drop them) */
    bool gil_only;         /* --gil: keep only samples in state PROFILE_HOLDING_GIL */
    bool thread_roots;     /* --threads: root each stack at a frame naming its thread, e.g.
                            * "thread 4250 \"worker-2\"" (also "process PID" when the
                            * profile has several pids) */
    bool process_labels;   /* pprof: label every sample with its pid and process (the
                            * command), even when the profile has one pid (the agent) */
};

/* Brendan Gregg's folded stacks ("a;b;c 42", outermost first), as
 * flamegraph.pl and inferno read them. Honours all three options. */
int profile_write_collapsed(FILE *out, const struct profile *p, const struct profile_write_options *o);

/* An SVG flame graph, as py-spy's `-o profile.svg` and flamegraph.pl draw
 * it: callers at the bottom, boxes as wide as their samples, titled with
 * them. Honours all three options (the same stacks as the collapsed
 * output). */
int profile_write_svg(FILE *out, const struct profile *p, const struct profile_write_options *o);

/* speedscope's JSON file format: one sampled profile per thread, in time order
 * and weighted in seconds from the timeline. Honours include_idle and
 * gil_only; each thread is its own profile already, so thread_roots adds
 * nothing. */
int profile_write_speedscope(FILE *out, const struct profile *p, const struct profile_write_options *o);

/* Chrome Trace Event JSON for Perfetto UI and chrome://tracing, also accepted
 * by `viztracer --combine`: per thread one track with its Python stack over
 * time and one with its GIL state, plus the summary under "pyscope". The
 * state filters decide which stretches show a stack; the GIL track always
 * shows everything. thread_roots adds nothing (one track per thread). */
int profile_write_chrome(FILE *out, const struct profile *p, const struct profile_write_options *o);

/* gzipped profile.proto for `go tool pprof`, with thread, tid and state labels
 * on every sample. Honours all three options. */
int profile_write_pprof(FILE *out, const struct profile *p, const struct profile_write_options *o);

/* Everything recorded, for scripts (schema: docs/record-json.md). The state
 * filters apply to "samples" only; the timeline and the summary always cover
 * the whole recording. */
int profile_write_json(FILE *out, const struct profile *p, const struct profile_write_options *o);

/* One self-contained HTML page (docs/html.md) that opens offline: a
 * per-thread GIL timeline whose selected range filters an interactive flame
 * graph, the per-thread summary table and the GIL hogs, with the recording's
 * data and the page's JS and CSS inside the file. include_idle and gil_only
 * set which states the flame graph shows when the page opens (the page can
 * change them: the data always holds every state); thread_roots adds nothing
 * (the page filters by thread). */
int profile_write_html(FILE *out, const struct profile *p, const struct profile_write_options *o);

/* The human-readable report printed at the end of a recording: per-thread GIL
 * table, GIL utilisation, GC, sampling statistics and the GIL hogs. */
int profile_write_summary(FILE *out, const struct profile *p);

#endif
