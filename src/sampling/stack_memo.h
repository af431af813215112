/* What a thread's last complete walk left behind, so that the next walk
 * stops at the first frame whose bytes (and everything below it) have not
 * changed and takes the rest, frame ids included, from the last one. */
#ifndef PYSCOPE_SAMPLING_STACK_MEMO_H
#define PYSCOPE_SAMPLING_STACK_MEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "python/frames.h"

struct stack_memo {
    bool valid;
    /* the chunk bytes the last walk read */
    uint64_t base;
    size_t len;
    unsigned char *buf;
    size_t cap;
    /* its frames, innermost first, their profile frame ids, and which
     * were the first of a C->Python call (for the native merge) */
    uint64_t *addr;
    uint32_t *ids;
    bool *entry;
    size_t count, cap_frames;
    /* the frames it read outside the chunk */
    uint64_t *extra_addr;
    unsigned char *extra_buf;
    size_t n_extra, cap_extra, extra_bytes;
    size_t frame_bytes;          /* what a walk reads of each frame */
    /* this walk: chunk bytes below unchanged_end are as they were */
    uint64_t unchanged_end;
    size_t reuse_from;           /* set when the walk stopped: index into addr/ids */
};

/* Compares this pass's copy with the memo; after it, stack_memo_stop tells
 * the walker where to stop. frame_bytes: py_frame_read_size. */
void stack_memo_begin(struct stack_memo *m, const struct py_stack_copy *copy, size_t frame_bytes);

/* The walker's stop hook (ctx: the memo): true at a frame that is, with all
 * below it, unchanged since the last walk and was part of it. */
bool stack_memo_stop(void *ctx, uint64_t frame);

/* After a walk that ended well (PY_WALK_OK, or stopped): remembers frames
 * and ids (n_new walked now, then the memo's from reuse_from when stopped)
 * and takes over the copy's chunk buffer, leaving it the old one to read
 * into next time. Any other walk forgets the memo. Returns -1 when out of
 * memory (the memo is then forgotten too). */
int stack_memo_commit(struct stack_memo *m, struct py_stack_copy *copy,
                      const struct py_frame *frames, const uint32_t *ids, size_t n_new,
                      bool stopped, bool complete);

/* Whether the memo's copy and this one both hold the frame_bytes at frame,
 * the same in both. */
bool stack_memo_frame_same(const struct stack_memo *m, const struct py_stack_copy *copy,
                           uint64_t frame, size_t frame_bytes);

void stack_memo_free(struct stack_memo *m);

#endif
