/* Walking one thread's Python frames: the heap PyFrameObject chain (<=3.10)
 * or the _PyInterpreterFrame chain (3.11+), skipping shim and base frames. */
#ifndef PYSCOPE_PYTHON_FRAMES_H
#define PYSCOPE_PYTHON_FRAMES_H

#include <stdbool.h>
#include <stdint.h>
#include "python/code.h"

#define PY_MAX_FRAMES 32768

struct py_frame {
    uint64_t frame_addr;
    uint64_t code_addr;
    uint64_t func_addr;    /* the function object the frame runs (3.11+); 0 when unknown */
    long instr_offset;     /* bytes into the bytecode; negative before the first instruction */
    int line;              /* -1 when the line table gives none */
    bool is_entry;         /* the first Python frame of a C->Python call (3.11+) */
};

enum py_walk_status {
    PY_WALK_OK = 0,
    PY_WALK_TOO_DEEP,      /* stopped at PY_MAX_FRAMES or the caller's max */
    PY_WALK_UNREADABLE,    /* a frame's memory could not be read */
    PY_WALK_INVALID,       /* a frame did not look like a frame (torn by a running thread) */
    PY_WALK_STOPPED,       /* the walker's stop hook said the rest is known (3.11+) */
};

/* What one walk may read without a system call of its own: a copy of the
 * live part of the thread's newest data-stack chunk (3.11+), where nearly all
 * its frames are, and copies of the frames that lay elsewhere on the previous
 * walk (heap frame objects before 3.11; shim frames on the C stack and
 * generator frames after). Samplers read all of it for all threads in one
 * scattered read per pass; frames not found here are read one by one and
 * remembered for the next pass. */
struct py_stack_copy {
    uint64_t base;           /* target address of buf[0] */
    size_t len;              /* bytes valid in buf; 0 when there is no copy */
    unsigned char *buf;
    size_t cap;
    /* frames outside the chunk, prefetched */
    size_t frame_bytes;      /* bytes kept per frame */
    uint64_t *extra_addr;
    bool *extra_ok;
    unsigned char *extra_buf;
    size_t n_extra, cap_extra, extra_cursor;
    /* frames outside the chunk that this walk visited */
    uint64_t *visited;
    size_t n_visited, cap_visited;
};

#define PY_STACK_COPY_MAX (1u << 20)
#define PY_STACK_EXTRA_MAX 4096u

struct py_walker {
    struct py_reader *reader;
    struct py_code_cache *codes;
    /* codes outlives this walk (a sampler's): an entry is checked against
     * the object at its address before use, which may have been reused. */
    bool verify_codes;
    struct py_stack_copy *stack;   /* optional */
    bool skip_lines;               /* leave py_frame.line to the caller (-2) */
    /* Optional, 3.11+: asked before each frame is read; true ends the walk
     * there with PY_WALK_STOPPED. */
    bool (*stop)(void *ctx, uint64_t frame);
    void *stop_ctx;
};

/* The code object at addr through the walker's cache, checked when the
 * cache is one kept between walks. */
const struct py_code *py_walker_code(struct py_walker *w, uint64_t addr);

/* The bytes of a frame a walk needs, per frame model. */
size_t py_frame_read_size(const struct py_layout *L);

/* Prepares copy for a pass and appends the spans to read (the chunk part
 * [chunk + data offset, top), then the frames visited last time); returns
 * how many spans were added, at most max. */
size_t py_stack_copy_plan(struct py_reader *r, struct py_stack_copy *copy, uint64_t chunk,
                          uint64_t top, struct target_span *spans, size_t max);
/* Re-plans only the chunk part, keeping the frames prefetched by an earlier
 * plan (used when the chunk read ahead of time turned out too short). */
size_t py_stack_copy_plan_chunk(struct py_reader *r, struct py_stack_copy *copy, uint64_t chunk,
                                uint64_t top, struct target_span *spans, size_t max);
/* Takes the results of the read of the spans of the chunk-only plan. */
void py_stack_copy_commit_chunk(struct py_stack_copy *copy, const struct target_span *spans,
                                size_t n);
/* Takes the results of the read of those spans. */
void py_stack_copy_commit(struct py_stack_copy *copy, const struct target_span *spans, size_t n);
/* Plan, read and commit for a single thread (dump). */
void py_stack_copy_read(struct py_reader *r, uint64_t chunk, uint64_t top,
                        struct py_stack_copy *copy);
/* Grows the chunk copy to end, reading only the bytes it lacked (a thread
 * found deeper than its copy); 0, or -1 with the copy as it was. */
int py_stack_copy_extend(struct py_reader *r, struct py_stack_copy *copy, uint64_t end);
void py_stack_copy_free(struct py_stack_copy *copy);
/* n bytes at addr from the copy of the chunk; -1 when it does not hold them. */
int py_stack_copy_peek(const struct py_stack_copy *copy, uint64_t addr, void *out, size_t n);
/* Counts frame as visited outside the chunk (for the next plan's prefetch),
 * once. */
void py_stack_copy_note_visit(struct py_stack_copy *copy, uint64_t frame);

/* Walks from top (innermost) outwards, filling up to max frames. */
enum py_walk_status py_walk_frames(struct py_walker *w, uint64_t top, struct py_frame *out,
                                   size_t max, size_t *count);
const char *py_walk_status_text(enum py_walk_status status);
/* The code object (3.13+: the executable) the frame at frame runs, read
 * straight from the process, past any copy or cache; -1 if unreadable. */
int py_frame_code_now(struct py_reader *r, uint64_t frame, uint64_t *code);

/* Whether each of the first walked frames (up to 64) still runs the code it
 * was walked with, all read now in one scattered read. A copy of a stack can
 * be torn (its low frames copied before the thread returned and called
 * again, its top after), and the thread can be back in the same top frame
 * by the time the top is read again: only the frames below tell. */
bool py_frames_still(struct py_reader *r, const struct py_frame *frames, size_t count);

#endif
