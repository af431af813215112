/* Frame-chain walking for both frame models. Each frame is read in one piece
 * so its fields agree with each other; a frame whose code is not a code object
 * ends the walk as invalid instead of being printed. */
#include "python/frames.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

const char *py_walk_status_text(enum py_walk_status status)
{
    switch (status) {
    case PY_WALK_OK: return "ok";
    case PY_WALK_TOO_DEEP: return "stack deeper than the frame limit";
    case PY_WALK_UNREADABLE: return "a frame could not be read";
    case PY_WALK_INVALID: return "a frame changed while it was read";
    case PY_WALK_STOPPED: return "stopped where the rest was known";
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

const struct py_code *py_walker_code(struct py_walker *w, uint64_t addr)
{
    return w->verify_codes ? py_code_get_verified(w->codes, w->reader, addr)
                           : py_code_get(w->codes, w->reader, addr);
}

size_t py_frame_read_size(const struct py_layout *L)
{
    if (L->frames == PY_FRAMES_OBJECTS) {
        long need = L->frame_lasti + 4;
        if (L->frame_executing != PY_OFF_NONE && L->frame_executing + 1 > need)
            need = L->frame_executing + 1;
        if (L->frame_state != PY_OFF_NONE && L->frame_state + 1 > need)
            need = L->frame_state + 1;
        return (size_t)need;
    }
    return (size_t)L->iframe_localsplus;
}

/* A frame object that is not executing any more (finished, or recycled from
 * the free list) has nothing to do with the thread we are walking: its
 * f_back leads into some other, older stack. */
static bool frame_object_executing(const struct py_layout *L, const unsigned char *buf)
{
    if (L->frame_executing != PY_OFF_NONE)
        return buf[L->frame_executing] == 1;
    if (L->frame_state != PY_OFF_NONE)
        return (signed char)buf[L->frame_state] == 0; /* FRAME_EXECUTING */
    return true;
}

static int ensure_extra(struct py_stack_copy *copy, size_t n, size_t frame_bytes)
{
    if (n <= copy->cap_extra && frame_bytes == copy->frame_bytes)
        return 0;
    size_t cap = n > copy->cap_extra ? n : copy->cap_extra;
    uint64_t *addr = realloc(copy->extra_addr, cap * sizeof *addr);
    if (addr)
        copy->extra_addr = addr;
    bool *ok = realloc(copy->extra_ok, cap * sizeof *ok);
    if (ok)
        copy->extra_ok = ok;
    unsigned char *buf = realloc(copy->extra_buf, cap * frame_bytes);
    if (buf)
        copy->extra_buf = buf;
    if (!addr || !ok || !buf)
        return -1;
    copy->cap_extra = cap;
    copy->frame_bytes = frame_bytes;
    return 0;
}

size_t py_stack_copy_plan_chunk(struct py_reader *r, struct py_stack_copy *copy, uint64_t chunk,
                                uint64_t top, struct target_span *spans, size_t max)
{
    const struct py_layout *L = r->L;
    size_t n = 0;
    copy->len = 0;
    copy->base = 0;
    if (chunk && L->chunk_data != PY_OFF_NONE && n < max) {
        uint64_t base = chunk + (uint64_t)L->chunk_data;
        size_t len = top > base && top - base <= PY_STACK_COPY_MAX ? (size_t)(top - base) : 0;
        if (len > copy->cap) {
            unsigned char *grown = realloc(copy->buf, len);
            if (grown) {
                copy->buf = grown;
                copy->cap = len;
            }
        }
        if (len && len <= copy->cap) {
            copy->base = base;
            spans[n++] = (struct target_span){base, copy->buf, len, false};
        }
    }
    return n;
}

void py_stack_copy_commit_chunk(struct py_stack_copy *copy, const struct target_span *spans,
                                size_t n)
{
    if (copy->base && n > 0 && spans[0].buf == copy->buf)
        copy->len = spans[0].ok ? spans[0].len : 0;
}

size_t py_stack_copy_plan(struct py_reader *r, struct py_stack_copy *copy, uint64_t chunk,
                          uint64_t top, struct target_span *spans, size_t max)
{
    const struct py_layout *L = r->L;
    copy->n_extra = 0;
    copy->extra_cursor = 0;
    size_t n = py_stack_copy_plan_chunk(r, copy, chunk, top, spans, max);
    size_t frame_bytes = py_frame_read_size(L);
    if (copy->n_visited && frame_bytes && ensure_extra(copy, copy->n_visited, frame_bytes) == 0) {
        for (size_t i = 0; i < copy->n_visited && n < max; i++) {
            copy->extra_addr[copy->n_extra] = copy->visited[i];
            copy->extra_ok[copy->n_extra] = false;
            spans[n++] = (struct target_span){copy->visited[i],
                                              copy->extra_buf + copy->n_extra * frame_bytes,
                                              frame_bytes, false};
            copy->n_extra++;
        }
    }
    copy->n_visited = 0;
    return n;
}

void py_stack_copy_commit(struct py_stack_copy *copy, const struct target_span *spans, size_t n)
{
    size_t i = 0;
    if (copy->base && n > 0 && spans[0].buf == copy->buf) {
        copy->len = spans[0].ok ? spans[0].len : 0;
        i = 1;
    }
    for (size_t k = 0; k < copy->n_extra && i < n; k++, i++)
        copy->extra_ok[k] = spans[i].ok;
}

void py_stack_copy_read(struct py_reader *r, uint64_t chunk, uint64_t top,
                        struct py_stack_copy *copy)
{
    struct target_span span;
    copy->n_visited = 0; /* a one-off walk: nothing to prefetch */
    size_t n = py_stack_copy_plan(r, copy, chunk, top, &span, 1);
    target_read_spans(r->t, &span, n);
    py_stack_copy_commit(copy, &span, n);
}

int py_stack_copy_extend(struct py_reader *r, struct py_stack_copy *copy, uint64_t end)
{
    if (!copy->len || end <= copy->base)
        return -1;
    if (end - copy->base <= copy->len)
        return 0;
    if (end - copy->base > PY_STACK_COPY_MAX)
        return -1;
    size_t len = (size_t)(end - copy->base);
    if (len > copy->cap) {
        unsigned char *grown = realloc(copy->buf, len);
        if (!grown)
            return -1;
        copy->buf = grown;
        copy->cap = len;
    }
    if (r->t->ops->read_raw(r->t, copy->base + copy->len, copy->buf + copy->len,
                            len - copy->len) != 0)
        return -1;
    copy->len = len;
    return 0;
}

void py_stack_copy_free(struct py_stack_copy *copy)
{
    free(copy->buf);
    free(copy->extra_addr);
    free(copy->extra_ok);
    free(copy->extra_buf);
    free(copy->visited);
    memset(copy, 0, sizeof *copy);
}

static void remember_visit(struct py_stack_copy *copy, uint64_t frame)
{
    if (copy->n_visited >= PY_STACK_EXTRA_MAX)
        return;
    if (copy->n_visited == copy->cap_visited) {
        size_t cap = copy->cap_visited ? copy->cap_visited * 2 : 16;
        uint64_t *grown = realloc(copy->visited, cap * sizeof *grown);
        if (!grown)
            return;
        copy->visited = grown;
        copy->cap_visited = cap;
    }
    copy->visited[copy->n_visited++] = frame;
}

void py_stack_copy_note_visit(struct py_stack_copy *copy, uint64_t frame)
{
    for (size_t i = 0; i < copy->n_visited; i++)
        if (copy->visited[i] == frame)
            return;
    remember_visit(copy, frame);
}

/* Frames come in the same order as on the previous walk, so the search
 * starts where the last hit was. */
static const unsigned char *prefetched(struct py_stack_copy *copy, uint64_t frame, size_t need)
{
    if (need > copy->frame_bytes)
        return NULL;
    for (size_t k = 0; k < copy->n_extra; k++) {
        size_t i = (copy->extra_cursor + k) % copy->n_extra;
        if (copy->extra_addr[i] == frame && copy->extra_ok[i]) {
            copy->extra_cursor = i + 1;
            return copy->extra_buf + i * copy->frame_bytes;
        }
    }
    return NULL;
}

int py_stack_copy_peek(const struct py_stack_copy *copy, uint64_t addr, void *out, size_t n)
{
    if (!copy->len || addr < copy->base || addr - copy->base > copy->len ||
        n > copy->len - (size_t)(addr - copy->base))
        return -1;
    memcpy(out, copy->buf + (addr - copy->base), n);
    return 0;
}

static int read_frame_bytes(struct py_walker *w, uint64_t frame, unsigned char *buf, size_t need)
{
    struct py_stack_copy *copy = w->stack;
    if (!copy)
        return target_read(w->reader->t, frame, buf, need);
    if (copy->len && frame >= copy->base && frame - copy->base <= copy->len &&
        need <= copy->len - (size_t)(frame - copy->base)) {
        memcpy(buf, copy->buf + (frame - copy->base), need);
        return 0;
    }
    remember_visit(copy, frame);
    const unsigned char *hit = prefetched(copy, frame, need);
    if (hit) {
        memcpy(buf, hit, need);
        return 0;
    }
    return target_read(w->reader->t, frame, buf, need);
}

/* Frame objects are recognised by their type, checked on the type pointer
 * already in hand: reading it again would cost a read per frame. */
static bool is_frame_type(struct py_walker *w, uint64_t type)
{
    const char *name;
    return type && py_type_name(w->reader, type, &name) == 0 && strcmp(name, "frame") == 0;
}

static void set_line(struct py_walker *w, const struct py_code *code, struct py_frame *f)
{
    f->line = w->skip_lines ? -2 : py_code_line(code, w->reader->L, f->instr_offset);
}

static enum py_walk_status walk_frame_objects(struct py_walker *w, uint64_t frame,
                                              struct py_frame *out, size_t max, size_t *count)
{
    struct py_reader *r = w->reader;
    const struct py_layout *L = r->L;
    unsigned char buf[512];
    size_t need = py_frame_read_size(L);
    if (need > sizeof buf || L->ob_type + 8 > (long)need)
        return PY_WALK_INVALID;
    while (frame) {
        if (*count >= max)
            return PY_WALK_TOO_DEEP;
        if (read_frame_bytes(w, frame, buf, need) != 0)
            return PY_WALK_UNREADABLE;
        if (!is_frame_type(w, field_u64(buf, L->ob_type)) || !frame_object_executing(L, buf))
            return PY_WALK_INVALID;
        uint64_t code_addr = field_u64(buf, L->frame_code);
        const struct py_code *code = py_walker_code(w, code_addr);
        if (!code)
            return PY_WALK_INVALID;
        long lasti = field_i32(buf, L->frame_lasti);
        struct py_frame *f = &out[(*count)++];
        f->frame_addr = frame;
        f->code_addr = code_addr;
        f->func_addr = 0; /* a PyFrameObject does not record its function */
        /* 3.10 counts f_lasti in 2-byte code units, 3.8/3.9 in bytes. */
        f->instr_offset = L->linetable == PY_LINETABLE_310 ? lasti * 2 : lasti;
        set_line(w, code, f);
        f->is_entry = true;
        frame = field_u64(buf, L->frame_back);
    }
    return PY_WALK_OK;
}

static enum py_walk_status walk_interpreter_frames(struct py_walker *w, uint64_t frame,
                                                   struct py_frame *out, size_t max,
                                                   size_t *count)
{
    struct py_reader *r = w->reader;
    const struct py_layout *L = r->L;
    unsigned char buf[256];
    size_t need = py_frame_read_size(L);
    if (need > sizeof buf || need < 16)
        return PY_WALK_INVALID;
    uint64_t tag_mask = L->stackref_tagged ? ~(uint64_t)7 : ~(uint64_t)0;
    /* Every thread's chain ends where C first entered Python: at the entry
     * frame the eval loop keeps on the C stack (3.12+, owned by the C stack
     * or the interpreter), or at a frame marked is_entry (3.11). A chain that
     * ends anywhere else was read while it changed. */
    bool ends_at_shim = L->owner_cstack >= 0 || L->owner_interpreter >= 0;
    bool at_entry = false;
    size_t visited = 0;
    while (frame) {
        if (*count >= max || ++visited > PY_MAX_FRAMES * 2)
            return PY_WALK_TOO_DEEP;
        if (w->stop && w->stop(w->stop_ctx, frame))
            return PY_WALK_STOPPED;
        if (read_frame_bytes(w, frame, buf, need) != 0)
            return PY_WALK_UNREADABLE;
        uint64_t previous = field_u64(buf, L->iframe_previous);
        int owner = buf[L->iframe_owner];
        if (owner == L->owner_cstack || owner == L->owner_interpreter) {
            /* Shim and base frames belong to the C stack, not to Python code;
             * the frame below a shim is where a C->Python call entered. */
            if (*count > 0)
                out[*count - 1].is_entry = true;
            at_entry = true;
            frame = previous;
            continue;
        }
        at_entry = false;
        uint64_t code_addr = field_u64(buf, L->iframe_executable) & tag_mask;
        if (code_addr == 0) {
            /* The newest frame may be on its way in or out (3.14 clears a
             * popped frame's executable); below it, an empty frame means
             * the chain was read while it changed. */
            if (visited > 1)
                return PY_WALK_INVALID;
            frame = previous;
            continue;
        }
        const struct py_code *code = py_walker_code(w, code_addr);
        if (!code) {
            /* 3.13+ frames may run non-code executables; anything else is torn. */
            if (L->executable_any && py_type_of(r, code_addr, NULL, NULL) == 0) {
                frame = previous;
                continue;
            }
            return PY_WALK_INVALID;
        }
        uint64_t instr = field_u64(buf, L->iframe_instr_ptr);
        struct py_frame *f = &out[(*count)++];
        f->frame_addr = frame;
        f->code_addr = code_addr;
        f->func_addr = L->iframe_funcobj != PY_OFF_NONE
                           ? field_u64(buf, L->iframe_funcobj) & tag_mask : 0;
        f->instr_offset = (long)(instr - (code_addr + (uint64_t)L->code_code_adaptive));
        set_line(w, code, f);
        if (L->iframe_is_entry != PY_OFF_NONE)
            f->is_entry = buf[L->iframe_is_entry] != 0;
        else
            f->is_entry = false;
        if (!ends_at_shim)
            at_entry = f->is_entry;
        frame = previous;
    }
    return visited == 0 || at_entry ? PY_WALK_OK : PY_WALK_INVALID;
}

int py_frame_code_now(struct py_reader *r, uint64_t frame, uint64_t *code)
{
    const struct py_layout *L = r->L;
    bool objects = L->frames == PY_FRAMES_OBJECTS;
    long field = objects ? L->frame_code : L->iframe_executable;
    if (!frame || field == PY_OFF_NONE ||
        r->t->ops->read_raw(r->t, frame + (uint64_t)field, code, sizeof *code) != 0)
        return -1;
    if (!objects && L->stackref_tagged)
        *code &= ~(uint64_t)7;
    return 0;
}

bool py_frames_still(struct py_reader *r, const struct py_frame *frames, size_t count)
{
    enum { CHECKED_MAX = 64 };
    const struct py_layout *L = r->L;
    bool objects = L->frames == PY_FRAMES_OBJECTS;
    long field = objects ? L->frame_code : L->iframe_executable;
    if (field == PY_OFF_NONE)
        return true;
    struct target_span spans[CHECKED_MAX];
    uint64_t codes[CHECKED_MAX];
    size_t n = 0;
    for (size_t i = 0; i < count && n < CHECKED_MAX; i++) {
        if (!frames[i].frame_addr)
            continue;
        spans[n] = (struct target_span){frames[i].frame_addr + (uint64_t)field, &codes[n], 8, false};
        n++;
    }
    if (n == 0)
        return true;
    target_read_spans(r->t, spans, n);
    uint64_t mask = !objects && L->stackref_tagged ? ~(uint64_t)7 : ~(uint64_t)0;
    for (size_t i = 0, k = 0; i < count && k < n; i++) {
        if (!frames[i].frame_addr)
            continue;
        if (!spans[k].ok || (codes[k] & mask) != frames[i].code_addr)
            return false;
        k++;
    }
    return true;
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
