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

struct py_walker {
    struct py_reader *reader;
    struct py_code_cache *codes;
};

/* Walks from top (innermost) outwards, filling up to max frames. */
enum py_walk_status py_walk_frames(struct py_walker *w, uint64_t top, struct py_frame *out,
                                   size_t max, size_t *count);
const char *py_walk_status_text(enum py_walk_status status);

#endif
