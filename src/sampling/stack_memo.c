/* Incremental stack walks for the sampler: a thread's frames below the
 * first byte of its stack chunk that changed since the last pass are the
 * frames the last walk found there, so the walk stops at the first of them
 * and the rest is taken, ids and all, from the memo. */
#include "sampling/stack_memo.h"

#include <stdlib.h>
#include <string.h>

/* Compared in blocks: the first differing block bounds what is unchanged. */
#define COMPARE_BLOCK 256u

static uint64_t first_change(const unsigned char *a, const unsigned char *b, size_t len,
                             uint64_t base)
{
    size_t at = 0;
    while (at < len) {
        size_t n = len - at < COMPARE_BLOCK ? len - at : COMPARE_BLOCK;
        if (memcmp(a + at, b + at, n) != 0)
            break;
        at += n;
    }
    return base + at;
}

static bool extras_unchanged(const struct stack_memo *m, const struct py_stack_copy *copy)
{
    size_t n = 0;
    for (size_t k = 0; k < copy->n_extra; k++) {
        if (!copy->extra_ok[k])
            continue;
        if (n >= m->n_extra || copy->extra_addr[k] != m->extra_addr[n] ||
            copy->frame_bytes != m->extra_bytes ||
            memcmp(copy->extra_buf + k * copy->frame_bytes, m->extra_buf + n * m->extra_bytes,
                   m->extra_bytes) != 0)
            return false;
        n++;
    }
    return n == m->n_extra;
}

void stack_memo_begin(struct stack_memo *m, const struct py_stack_copy *copy, size_t frame_bytes)
{
    m->unchanged_end = 0;
    m->reuse_from = 0;
    bool same_walk = frame_bytes == m->frame_bytes;
    m->frame_bytes = frame_bytes;
    if (!m->valid || !same_walk || !copy->len || copy->base != m->base ||
        !extras_unchanged(m, copy))
        return;
    size_t len = copy->len < m->len ? copy->len : m->len;
    m->unchanged_end = first_change(copy->buf, m->buf, len, m->base);
}

/* The memo's frames lie at falling addresses (each frame is pushed above
 * its caller); frames outside the chunk are not searched for. */
static bool find_frame(const struct stack_memo *m, uint64_t frame, size_t *index)
{
    size_t lo = 0, hi = m->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->addr[mid] == frame) {
            *index = mid;
            return true;
        }
        if (m->addr[mid] > frame)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

bool stack_memo_frame_same(const struct stack_memo *m, const struct py_stack_copy *copy,
                           uint64_t frame, size_t frame_bytes)
{
    if (!m->valid || !frame_bytes || frame < m->base || frame < copy->base ||
        frame - m->base > m->len || frame_bytes > m->len - (frame - m->base) ||
        frame - copy->base > copy->len || frame_bytes > copy->len - (frame - copy->base))
        return false;
    return memcmp(m->buf + (frame - m->base), copy->buf + (frame - copy->base), frame_bytes) == 0;
}

bool stack_memo_stop(void *ctx, uint64_t frame)
{
    struct stack_memo *m = ctx;
    if (m->unchanged_end == 0 || frame < m->base || frame + m->frame_bytes > m->unchanged_end)
        return false;
    size_t index;
    if (!find_frame(m, frame, &index))
        return false;
    m->reuse_from = index;
    return true;
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = need * 2;
    void *grown = realloc(*p, n * size);
    if (!grown)
        return -1;
    *p = grown;
    *cap = n;
    return 0;
}

static int keep_frames(struct stack_memo *m, const struct py_frame *frames, const uint32_t *ids,
                       size_t n_new, bool stopped)
{
    size_t tail = stopped ? m->count - m->reuse_from : 0;
    size_t total = n_new + tail;
    size_t cap_addr = m->cap_frames, cap_ids = m->cap_frames, cap_entry = m->cap_frames;
    if (grow((void **)&m->addr, &cap_addr, total, sizeof *m->addr) != 0 ||
        grow((void **)&m->ids, &cap_ids, total, sizeof *m->ids) != 0 ||
        grow((void **)&m->entry, &cap_entry, total, sizeof *m->entry) != 0)
        return -1;
    m->cap_frames = cap_addr < cap_ids ? cap_addr : cap_ids;
    if (cap_entry < m->cap_frames)
        m->cap_frames = cap_entry;
    if (tail) {
        memmove(m->addr + n_new, m->addr + m->reuse_from, tail * sizeof *m->addr);
        memmove(m->ids + n_new, m->ids + m->reuse_from, tail * sizeof *m->ids);
        memmove(m->entry + n_new, m->entry + m->reuse_from, tail * sizeof *m->entry);
    }
    for (size_t i = 0; i < n_new; i++) {
        m->addr[i] = frames[i].frame_addr;
        m->ids[i] = ids[i];
        m->entry[i] = frames[i].is_entry;
    }
    m->count = total;
    return 0;
}

static int keep_extras(struct stack_memo *m, const struct py_stack_copy *copy)
{
    size_t need = copy->n_extra ? copy->n_extra : 1;
    size_t cap_addr = m->cap_extra, cap_buf = m->cap_extra;
    if (grow((void **)&m->extra_addr, &cap_addr, need, sizeof *m->extra_addr) != 0)
        return -1;
    if (copy->frame_bytes != m->extra_bytes) {
        free(m->extra_buf);
        m->extra_buf = NULL;
        cap_buf = 0;
        m->extra_bytes = copy->frame_bytes;
    }
    if (copy->frame_bytes && grow((void **)&m->extra_buf, &cap_buf, need, copy->frame_bytes) != 0)
        return -1;
    m->cap_extra = cap_addr < cap_buf || !copy->frame_bytes ? cap_addr : cap_buf;
    m->n_extra = 0;
    for (size_t k = 0; k < copy->n_extra; k++) {
        if (!copy->extra_ok[k])
            continue;
        m->extra_addr[m->n_extra] = copy->extra_addr[k];
        memcpy(m->extra_buf + m->n_extra * copy->frame_bytes,
               copy->extra_buf + k * copy->frame_bytes, copy->frame_bytes);
        m->n_extra++;
    }
    return 0;
}

int stack_memo_commit(struct stack_memo *m, struct py_stack_copy *copy,
                      const struct py_frame *frames, const uint32_t *ids, size_t n_new,
                      bool stopped, bool complete)
{
    if (!complete || !copy->len || (stopped && !m->valid)) {
        m->valid = false;
        return stopped ? -1 : 0;
    }
    if (keep_frames(m, frames, ids, n_new, stopped) != 0) {
        m->valid = false;
        return -1;
    }
    /* A walk that stopped early did not visit the frames outside the chunk
     * below where it stopped: note them, so that the next pass reads them. */
    if (stopped)
        for (size_t k = 0; k < m->n_extra; k++)
            py_stack_copy_note_visit(copy, m->extra_addr[k]);
    if (keep_extras(m, copy) != 0) {
        m->valid = false;
        return stopped ? -1 : 0;
    }
    unsigned char *buf = m->buf;
    size_t cap = m->cap;
    m->buf = copy->buf;
    m->cap = copy->cap;
    m->base = copy->base;
    m->len = copy->len;
    copy->buf = buf;
    copy->cap = cap;
    copy->base = 0;
    copy->len = 0;
    m->valid = true;
    return 0;
}

void stack_memo_free(struct stack_memo *m)
{
    free(m->buf);
    free(m->addr);
    free(m->ids);
    free(m->entry);
    free(m->extra_addr);
    free(m->extra_buf);
    memset(m, 0, sizeof *m);
}
