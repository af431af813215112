/* record's summary: the episodes in which an asyncio loop thread stayed in
 * one callback or task step (not in its selector) for the loop_blocked
 * threshold or longer, found in the recording's timeline. Internal to
 * src/output/. */
#ifndef PYSCOPE_OUTPUT_LOOP_BLOCKS_H
#define PYSCOPE_OUTPUT_LOOP_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/profile.h"

#define LOOP_BLOCKS_SHOWN 5

/* An episode runs from its first sample outside the selector to the first
 * sample after it (back in the selector, or the recording's end): the true
 * block began at most one interval before and ended at most one after. */
struct loop_block {
    uint32_t thread;
    uint64_t start_ns;        /* since the recording's start */
    uint64_t duration_ns;
    uint32_t stack;           /* sampled longest during the episode */
    bool at_edge;             /* under way at the thread's first sample or at the end */
};

struct loop_blocks {
    int threshold_ms;
    uint64_t count;
    struct loop_block longest[LOOP_BLOCKS_SHOWN];   /* longest first */
    size_t n_longest;
};

int loop_blocks_build(struct loop_blocks *out, const struct profile *p);

#endif
