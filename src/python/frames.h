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
    int line;              /* -1 when the line table gives none */
    bool is_entry;         /* the first Python frame of a C->Python call (3.11+) */
};

enum py_walk_status {
    PY_WALK_OK = 0,
    PY_WALK_TOO_DEEP,      /* stopped at PY_MAX_FRAMES or the caller's max */
    PY_WALK_UNREADABLE,    /* a frame's memory could not be read */
    PY_WALK_INVALID,       /* a frame did not look like a frame (torn by a running thread) */
};

/* A local copy of the live part of a thread's newest data-stack chunk
 * (3.11+), where nearly all its frames are: one read instead of one per
 * frame. Frames outside it (older chunks, shim frames on the C stack,
 * generator frames) are read one by one. */
struct py_stack_copy {
    uint64_t base;           /* target address of buf[0] */
    size_t len;              /* bytes valid in buf; 0 when there is no copy */
    unsigned char *buf;
    size_t cap;
};

#define PY_STACK_COPY_MAX (1u << 20)

struct py_walker {
    struct py_reader *reader;
    struct py_code_cache *codes;
    struct py_stack_copy *stack;   /* optional */
};

/* Copies [chunk + data offset, top) of a thread's data stack into copy;
 * on failure copy->len is 0 and walks fall back to per-frame reads. */
void py_stack_copy_read(struct py_reader *r, uint64_t chunk, uint64_t top,
                        struct py_stack_copy *copy);
void py_stack_copy_free(struct py_stack_copy *copy);

/* Walks from top (innermost) outwards, filling up to max frames. */
enum py_walk_status py_walk_frames(struct py_walker *w, uint64_t top, struct py_frame *out,
                                   size_t max, size_t *count);
const char *py_walk_status_text(enum py_walk_status status);

#endif
