/* Frame-chain walking for both frame models. Each frame is read in one piece
 * so its fields agree with each other; a frame whose code is not a code object
 * ends the walk as invalid instead of being printed. */
#include "python/frames.h"

#include <stdlib.h>
#include <string.h>

const char *py_walk_status_text(enum py_walk_status status)
{
    switch (status) {
    case PY_WALK_OK: return "ok";
    case PY_WALK_TOO_DEEP: return "stack deeper than the frame limit";
    case PY_WALK_UNREADABLE: return "a frame could not be read";
    case PY_WALK_INVALID: return "a frame changed while it was read";
    }
    return "?";
}

static uint64_t field_u64(const unsigned char *buf, long off)
{
    uint64_t v;
    memcpy(&v, buf + off, sizeof v);
    return v;
}

static int32_t field_i32(const unsigned char *buf, long off)
{
    int32_t v;
    memcpy(&v, buf + off, sizeof v);
    return v;
}

static enum py_walk_status walk_frame_objects(struct py_walker *w, uint64_t frame,
                                              struct py_frame *out, size_t max, size_t *count)
{
    struct py_reader *r = w->reader;
    const struct py_layout *L = r->L;
    unsigned char buf[512];
    size_t need = (size_t)L->frame_lasti + 4;
    if (need > sizeof buf)
        return PY_WALK_INVALID;
    while (frame) {
        if (*count >= max)
            return PY_WALK_TOO_DEEP;
        if (target_read(r->t, frame, buf, need) != 0)
            return PY_WALK_UNREADABLE;
        if (!py_is_type(r, frame, "frame"))
            return PY_WALK_INVALID;
        uint64_t code_addr = field_u64(buf, L->frame_code);
        const struct py_code *code = py_code_get(w->codes, r, code_addr);
        if (!code)
            return PY_WALK_INVALID;
        long lasti = field_i32(buf, L->frame_lasti);
        /* 3.10 counts f_lasti in 2-byte code units, 3.8/3.9 in bytes. */
        long offset = L->linetable == PY_LINETABLE_310 ? lasti * 2 : lasti;
        struct py_frame *f = &out[(*count)++];
        f->frame_addr = frame;
        f->code_addr = code_addr;
        f->line = py_code_line(code, L, offset);
        f->is_entry = true;
        frame = field_u64(buf, L->frame_back);
    }
    return PY_WALK_OK;
}

void py_stack_copy_read(struct py_reader *r, uint64_t chunk, uint64_t top,
                        struct py_stack_copy *copy)
{
    const struct py_layout *L = r->L;
    copy->len = 0;
    if (!chunk || L->chunk_data == PY_OFF_NONE)
        return;
    uint64_t base = chunk + (uint64_t)L->chunk_data;
    if (top <= base || top - base > PY_STACK_COPY_MAX)
        return;
    size_t len = (size_t)(top - base);
    if (len > copy->cap) {
        unsigned char *grown = realloc(copy->buf, len);
        if (!grown)
            return;
        copy->buf = grown;
        copy->cap = len;
    }
    /* Straight from the target, not the page cache: this is the one read
     * of the thread's stack, and it must not evict the code objects. */
    if (r->t->ops->read_raw(r->t, base, copy->buf, len) != 0)
        return;
    r->t->stats.reads++;
    r->t->stats.bytes += len;
    copy->base = base;
    copy->len = len;
}

void py_stack_copy_free(struct py_stack_copy *copy)
{
    free(copy->buf);
    memset(copy, 0, sizeof *copy);
}

static int read_frame_bytes(struct py_walker *w, uint64_t frame, unsigned char *buf, size_t need)
{
    const struct py_stack_copy *copy = w->stack;
    if (copy && copy->len && frame >= copy->base && frame - copy->base <= copy->len &&
        need <= copy->len - (size_t)(frame - copy->base)) {
        memcpy(buf, copy->buf + (frame - copy->base), need);
        return 0;
    }
    return target_read(w->reader->t, frame, buf, need);
}

static enum py_walk_status walk_interpreter_frames(struct py_walker *w, uint64_t frame,
                                                   struct py_frame *out, size_t max,
                                                   size_t *count)
{
    struct py_reader *r = w->reader;
    const struct py_layout *L = r->L;
    unsigned char buf[256];
    size_t need = (size_t)L->iframe_localsplus;
    if (need > sizeof buf || need < 16)
        return PY_WALK_INVALID;
    uint64_t tag_mask = L->stackref_tagged ? ~(uint64_t)7 : ~(uint64_t)0;
    size_t visited = 0;
    while (frame) {
        if (*count >= max || ++visited > PY_MAX_FRAMES * 2)
            return PY_WALK_TOO_DEEP;
        if (read_frame_bytes(w, frame, buf, need) != 0)
            return PY_WALK_UNREADABLE;
        uint64_t previous = field_u64(buf, L->iframe_previous);
        int owner = buf[L->iframe_owner];
        if (owner == L->owner_cstack || owner == L->owner_interpreter) {
            /* Shim and base frames belong to the C stack, not to Python code;
             * the frame below a shim is where a C->Python call entered. */
            if (*count > 0)
                out[*count - 1].is_entry = true;
            frame = previous;
            continue;
        }
        uint64_t code_addr = field_u64(buf, L->iframe_executable) & tag_mask;
        if (code_addr == 0) {
            frame = previous;
            continue;
        }
        const struct py_code *code = py_code_get(w->codes, r, code_addr);
        if (!code) {
            /* 3.13+ frames may run non-code executables; anything else is torn. */
            if (L->version_hex >= 0x030d0000 && py_type_of(r, code_addr, NULL, NULL) == 0) {
                frame = previous;
                continue;
            }
            return PY_WALK_INVALID;
        }
        uint64_t instr = field_u64(buf, L->iframe_instr_ptr);
        long offset = (long)(instr - (code_addr + (uint64_t)L->code_code_adaptive));
        struct py_frame *f = &out[(*count)++];
        f->frame_addr = frame;
        f->code_addr = code_addr;
        f->line = py_code_line(code, L, offset);
        if (L->iframe_is_entry != PY_OFF_NONE)
            f->is_entry = buf[L->iframe_is_entry] != 0;
        else
            f->is_entry = false;
        frame = previous;
    }
    return PY_WALK_OK;
}

enum py_walk_status py_walk_frames(struct py_walker *w, uint64_t top, struct py_frame *out,
                                   size_t max, size_t *count)
{
    *count = 0;
    if (max > PY_MAX_FRAMES)
        max = PY_MAX_FRAMES;
    if (w->reader->L->frames == PY_FRAMES_OBJECTS)
        return walk_frame_objects(w, top, out, max, count);
    return walk_interpreter_frames(w, top, out, max, count);
}
