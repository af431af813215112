/* The end-of-recording summary as data: per-thread GIL table, process-wide GIL
 * and GC figures, sampling statistics and the top GIL hogs. Built once and
 * written by the text summary and, as JSON, by the chrome and json formats,
 * so that all three always agree. Internal to src/output/. */
#ifndef PYSCOPE_OUTPUT_PROFILE_SUMMARY_H
#define PYSCOPE_OUTPUT_PROFILE_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "output/json_writer.h"
#include "output/loop_blocks.h"
#include "profile/profile.h"

#define SUMMARY_MAX_HOGS 10
#define SUMMARY_MAX_GC_TRIGGERS 5

/* Percentages use the thread's own samples as denominator. */
struct summary_thread {
    uint32_t thread;                       /* index into profile.threads */
    double state_pct[PROFILE_STATE_COUNT];
    double gc_pct;
};

struct summary_hog {
    uint32_t stack;
    uint64_t samples;
    uint64_t native_samples;
    bool native_keeps_gil;    /* native_samples are the majority */
    double passes_pct;        /* share of all passes this stack hogged the GIL */
};

/* --native: the C function that held the GIL (the innermost C frame of a
 * hog stack outside the C runtime), with its Python caller, summed over the
 * hog stacks that share both. */
#define SUMMARY_MAX_C_HOGS 10
struct summary_c_hog {
    uint32_t c_frame;         /* of the hog stack with the most samples */
    uint32_t py_frame;        /* the innermost Python frame below it, UINT32_MAX: none */
    uint64_t samples;
    uint64_t native_samples;
    double passes_pct;
};

struct summary_gc_trigger {
    uint32_t stack;           /* the stack the collection ran on top of */
    uint64_t samples;
    uint64_t collections;
};

struct profile_summary {
    const struct profile *profile;
    struct summary_thread *threads;        /* in profile order */
    size_t n_threads;
    struct summary_hog hogs[SUMMARY_MAX_HOGS];   /* most samples first */
    size_t n_hogs;
    size_t n_hogs_total;                   /* distinct hog stacks, shown or not */
    struct summary_c_hog c_hogs[SUMMARY_MAX_C_HOGS];   /* most samples first */
    size_t n_c_hogs;
    uint64_t c_hog_unmerged;               /* hog samples naming no C function, their C
                                              stack not merged */
    double gil_utilisation_pct;            /* passes in which some thread held the GIL */
    double gc_pct;                         /* passes during which a collection ran */
    struct summary_gc_trigger gc_triggers[SUMMARY_MAX_GC_TRIGGERS];   /* most collections first */
    size_t n_gc_triggers;
    double rate_achieved_hz;               /* passes per second of recording */
    double mean_interval_ns;
    double torn_pct;                       /* of stacks sampled */
    double failed_pct;                     /* of passes */
    struct loop_blocks loop_blocks;        /* asyncio loops blocked in one step */
};

int profile_summary_build(struct profile_summary *s, const struct profile *p);
void profile_summary_free(struct profile_summary *s);

/* Writes the recording's metadata as one JSON object value. */
void profile_meta_write_json(struct json_writer *w, const struct profile *p);
/* Writes the summary as one JSON object value (schema: docs/record-json.md). */
void profile_summary_write_json(struct json_writer *w, const struct profile_summary *s);

#endif
