/* The target-independent half of target access: the page cache every read
 * goes through, typed reads, and map look-ups. Live processes and core files
 * supply only read_raw. */
#include "target/target.h"


#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int target_cache_enable(struct target *t)
{
    if (t->cache)
        return 0;
    /* Epoch 0 never matches, so every zeroed slot starts empty. */
    t->cache = calloc(1, sizeof *t->cache);
    if (!t->cache)
        return -1;
    /* Not populated: a dump touches a few hundred of these pages, and
     * zeroing all of them up front cost more than the faults it saved. */
    void *data = mmap(NULL, (size_t)TARGET_CACHE_SLOTS * TARGET_PAGE_SIZE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    t->cache->data = data == MAP_FAILED ? NULL : data;
    if (!t->cache->data) {
        free(t->cache);
        t->cache = NULL;
        return -1;
    }
    t->cache->users = 1;
    t->epoch = ++t->cache->clock;
    return 0;
}

void target_cache_invalidate(struct target *t)
{
    /* A new epoch empties every slot without touching the page data. */
    t->epoch = t->cache ? ++t->cache->clock : t->epoch + 1;
}

struct target_page_cache *target_cache_hold(struct target *t)
{
    if (t->cache)
        t->cache->users++;
    return t->cache;
}

void target_cache_release(struct target_page_cache *c)
{
    if (!c || --c->users > 0)
        return;
    munmap(c->data, (size_t)TARGET_CACHE_SLOTS * TARGET_PAGE_SIZE);
    free(c);
}

void target_cache_use(struct target *t, struct target_page_cache *c)
{
    if (!c || t->cache == c)
        return;
    target_cache_release(t->cache);
    c->users++;
    t->cache = c;
    t->epoch = ++c->clock;
}

static int read_raw_counted(struct target *t, uint64_t addr, void *buf, size_t len)
{
    t->stats.reads++;
    t->stats.bytes += len;
    int rc = t->ops->read_raw(t, addr, buf, len);
    if (rc != 0)
        t->stats.failures++;
    return rc;
}

/* Thread stacks sit megabytes apart at the same offsets, and so do
 * allocator arenas: the page number's high bits are folded in so that
 * such pages do not all land in one slot. */
static size_t slot_of(uint64_t page)
{
    uint64_t n = page / TARGET_PAGE_SIZE;
    return (size_t)((n ^ (n >> 9) ^ (n >> 18) ^ (n >> 27)) % TARGET_CACHE_SLOTS);
}

static bool slot_holds(const struct target *t, size_t slot, uint64_t page)
{
    return t->cache->page[slot] == page && t->cache->epoch[slot] == t->epoch;
}

static const unsigned char *cached_page(struct target *t, uint64_t page)
{
    struct target_page_cache *c = t->cache;
    size_t slot = slot_of(page);
    if (slot_holds(t, slot, page))
        return c->data[slot];
    if (read_raw_counted(t, page, c->data[slot], TARGET_PAGE_SIZE) != 0) {
        c->epoch[slot] = 0;
        return NULL;
    }
    c->page[slot] = page;
    c->epoch[slot] = t->epoch;
    return c->data[slot];
}

int target_read(struct target *t, uint64_t addr, void *buf, size_t len)
{
    if (len == 0)
        return 0;
    if (addr + len < addr)
        return -1;
    /* Large reads (whole stack chunks) go straight through: caching them
     * would evict the small objects that are read again and again. */
    if (!t->cache || len > 2 * TARGET_PAGE_SIZE)
        return read_raw_counted(t, addr, buf, len);
    unsigned char *out = buf;
    while (len > 0) {
        uint64_t page = addr & ~(uint64_t)(TARGET_PAGE_SIZE - 1);
        size_t in_page = (size_t)(addr - page);
        size_t n = TARGET_PAGE_SIZE - in_page;
        if (n > len)
            n = len;
        const unsigned char *data = cached_page(t, page);
        if (!data)
            return read_raw_counted(t, addr, out, len);
        memcpy(out, data + in_page, n);
        out += n;
        addr += n;
        len -= n;
    }
    return 0;
}

/* Pieces closer than this that also share or adjoin a page are merged:
 * the bytes between them lie on pages read anyway. */
#define MERGE_GAP_MAX TARGET_PAGE_SIZE
#define MERGE_PIECE_MAX (64u * 1024u)

struct span_order {
    uint64_t addr;
    size_t index;
};

struct span_merger {
    struct span_order *order;
    struct target_span *pieces;
    size_t *first, *count;       /* per piece: its members in order[] */
    size_t cap;
    unsigned char *scratch;
    size_t scratch_cap;
};

static int by_address(const void *a, const void *b)
{
    const struct span_order *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static struct span_merger *merger_for(struct target *t, size_t n)
{
    struct span_merger *m = t->merger;
    if (!m) {
        m = calloc(1, sizeof *m);
        if (!m)
            return NULL;
        t->merger = m;
    }
    if (n > m->cap) {
        size_t cap = n * 2;
        struct span_order *order = realloc(m->order, cap * sizeof *order);
        if (order)
            m->order = order;
        struct target_span *pieces = realloc(m->pieces, cap * sizeof *pieces);
        if (pieces)
            m->pieces = pieces;
        size_t *first = realloc(m->first, cap * sizeof *first);
        if (first)
            m->first = first;
        size_t *count = realloc(m->count, cap * sizeof *count);
        if (count)
            m->count = count;
        if (!order || !pieces || !first || !count)
            return NULL;
        m->cap = cap;
    }
    return m;
}

static void merger_free(struct span_merger *m)
{
    if (!m)
        return;
    free(m->order);
    free(m->pieces);
    free(m->first);
    free(m->count);
    free(m->scratch);
    free(m);
}

static size_t read_spans_direct(struct target *t, struct target_span *spans, size_t n)
{
    t->stats.reads++;
    size_t ok = t->ops->read_spans(t, spans, n);
    for (size_t i = 0; i < n; i++)
        t->stats.bytes += spans[i].ok ? spans[i].len : 0;
    t->stats.failures += n - ok;
    return ok;
}

/* Groups the spans (sorted by address) into pieces; returns the number of
 * pieces, or 0 when nothing would be merged. */
static size_t plan_pieces(struct span_merger *m, const struct target_span *spans, size_t n,
                          size_t *scratch_need)
{
    for (size_t i = 0; i < n; i++)
        m->order[i] = (struct span_order){spans[i].addr, i};
    /* A pass's spans come mostly in address order already, and are few:
     * insertion sort does them in a pass, without qsort's calls. */
    if (n <= 64) {
        for (size_t i = 1; i < n; i++) {
            struct span_order v = m->order[i];
            size_t j = i;
            for (; j > 0 && m->order[j - 1].addr > v.addr; j--)
                m->order[j] = m->order[j - 1];
            m->order[j] = v;
        }
    } else {
        qsort(m->order, n, sizeof *m->order, by_address);
    }
    size_t pieces = 0, need = 0;
    uint64_t start = 0, end = 0;
    for (size_t k = 0; k < n; k++) {
        const struct target_span *s = &spans[m->order[k].index];
        uint64_t s_end = s->addr + s->len;
        uint64_t last_page = (end - 1) & ~(uint64_t)(TARGET_PAGE_SIZE - 1);
        bool joins = pieces > 0 && s->len > 0 && s_end >= s->addr &&
                     s->addr <= end + MERGE_GAP_MAX &&
                     (s->addr & ~(uint64_t)(TARGET_PAGE_SIZE - 1)) <= last_page + TARGET_PAGE_SIZE &&
                     (s_end > end ? s_end : end) - start <= MERGE_PIECE_MAX;
        if (joins) {
            if (s_end > end)
                end = s_end;
            m->count[pieces - 1]++;
            continue;
        }
        if (pieces > 0 && m->count[pieces - 1] > 1)
            need += (size_t)(end - start);
        if (pieces > 0)
            m->pieces[pieces - 1].len = (size_t)(end - start);
        start = s->addr;
        end = s_end >= s->addr ? s_end : s->addr;
        m->first[pieces] = k;
        m->count[pieces] = 1;
        m->pieces[pieces++] = (struct target_span){start, NULL, 0, false};
    }
    if (pieces > 0) {
        m->pieces[pieces - 1].len = (size_t)(end - start);
        if (m->count[pieces - 1] > 1)
            need += (size_t)(end - start);
    }
    *scratch_need = need;
    return pieces < n ? pieces : 0;
}

size_t target_read_spans(struct target *t, struct target_span *spans, size_t n)
{
    return target_read_spans_framed(t, spans, n, 0, 0);
}

size_t target_read_spans_framed(struct target *t, struct target_span *spans, size_t n,
                                size_t n_head, size_t n_tail)
{
    for (size_t i = 0; i < n; i++)
        spans[i].ok = false;
    if (n_head > n || n_tail > n - n_head)
        return 0;
    if (!t->ops->read_spans) {
        size_t ok = 0;
        for (size_t i = 0; i < n; i++) {
            spans[i].ok = read_raw_counted(t, spans[i].addr, spans[i].buf, spans[i].len) == 0;
            ok += spans[i].ok;
        }
        return ok;
    }
    /* The head and tail are pieces of their own, first and last; only the
     * spans between them are sorted and merged. */
    struct target_span *mid = spans + n_head;
    size_t n_mid = n - n_head - n_tail;
    struct span_merger *m = n_mid > 1 ? merger_for(t, n) : NULL;
    size_t need = 0, pieces = m ? plan_pieces(m, mid, n_mid, &need) : 0;
    if (pieces && need > m->scratch_cap) {
        unsigned char *grown = realloc(m->scratch, need);
        if (grown) {
            m->scratch = grown;
            m->scratch_cap = need;
        } else {
            pieces = 0;
        }
    }
    if (!pieces)
        return read_spans_direct(t, spans, n); /* in the array's order */

    /* pieces <= n_mid, so head, pieces and tail fit the merger's n slots. */
    memmove(m->pieces + n_head, m->pieces, pieces * sizeof *m->pieces);
    memcpy(m->pieces, spans, n_head * sizeof *spans);
    memcpy(m->pieces + n_head + pieces, mid + n_mid, n_tail * sizeof *spans);
    struct target_span *merged = m->pieces + n_head;
    size_t offset = 0;
    for (size_t p = 0; p < pieces; p++) {
        if (m->count[p] == 1) {
            merged[p].buf = mid[m->order[m->first[p]].index].buf;
        } else {
            merged[p].buf = m->scratch + offset;
            offset += merged[p].len;
        }
    }
    read_spans_direct(t, m->pieces, n_head + pieces + n_tail);
    size_t ok = 0, retry = 0;
    for (size_t i = 0; i < n_head; i++)
        ok += spans[i].ok = m->pieces[i].ok;
    for (size_t i = 0; i < n_tail; i++)
        ok += mid[n_mid + i].ok = m->pieces[n_head + pieces + i].ok;
    /* Members of a piece that failed are tried on their own: the piece may
     * have failed only for a span that was never going to be readable. */
    for (size_t p = 0; p < pieces; p++) {
        for (size_t k = m->first[p]; k < m->first[p] + m->count[p]; k++) {
            struct target_span *s = &mid[m->order[k].index];
            if (!merged[p].ok) {
                if (m->count[p] > 1)
                    m->order[retry++].index = m->order[k].index;
                continue;
            }
            if (m->count[p] > 1)
                memcpy(s->buf, (unsigned char *)merged[p].buf + (s->addr - merged[p].addr), s->len);
            s->ok = true;
            ok++;
        }
    }
    for (size_t r = 0; r < retry; r++)
        m->pieces[r] = mid[m->order[r].index];
    if (retry) {
        read_spans_direct(t, m->pieces, retry);
        for (size_t r = 0; r < retry; r++) {
            mid[m->order[r].index].ok = m->pieces[r].ok;
            ok += m->pieces[r].ok;
        }
    }
    return ok;
}

enum { PREFETCH_BATCH = 256 };

struct prefetch_batch {
    struct target_span spans[PREFETCH_BATCH];
    size_t slots[PREFETCH_BATCH];
    size_t used;
};

static void prefetch_flush(struct target *t, struct prefetch_batch *b)
{
    if (b->used == 0)
        return;
    target_read_spans(t, b->spans, b->used);
    for (size_t k = 0; k < b->used; k++)
        if (b->spans[k].ok)
            t->cache->epoch[b->slots[k]] = t->epoch;
    b->used = 0;
}

static void prefetch_page(struct target *t, struct prefetch_batch *b, uint64_t page)
{
    size_t slot = slot_of(page);
    if (slot_holds(t, slot, page))
        return;
    for (size_t k = 0; k < b->used; k++)
        if (b->slots[k] == slot)
            return; /* two wanted pages share a slot: the first one wins */
    t->cache->epoch[slot] = 0;
    t->cache->page[slot] = page;
    b->slots[b->used] = slot;
    b->spans[b->used++] = (struct target_span){page, t->cache->data[slot], TARGET_PAGE_SIZE, false};
    if (b->used == PREFETCH_BATCH)
        prefetch_flush(t, b);
}

void target_prefetch(struct target *t, const struct target_range *ranges, size_t n)
{
    if (!t->cache || !t->ops->read_spans)
        return;
    struct prefetch_batch *b = malloc(sizeof *b);
    if (!b)
        return;
    b->used = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t first = ranges[i].addr & ~(uint64_t)(TARGET_PAGE_SIZE - 1);
        uint64_t end = ranges[i].addr + ranges[i].len;
        if (ranges[i].len == 0 || end < ranges[i].addr || ranges[i].len > 64 * TARGET_PAGE_SIZE)
            continue;
        for (uint64_t page = first; page < end; page += TARGET_PAGE_SIZE)
            prefetch_page(t, b, page);
    }
    prefetch_flush(t, b);
    free(b);
}

int target_read_u64(struct target *t, uint64_t addr, uint64_t *out)
{
    return target_read(t, addr, out, sizeof *out);
}

int target_read_i32(struct target *t, uint64_t addr, int32_t *out)
{
    return target_read(t, addr, out, sizeof *out);
}

int target_read_u8(struct target *t, uint64_t addr, uint8_t *out)
{
    return target_read(t, addr, out, sizeof *out);
}

const struct target_map *target_find_map(const struct target *t, uint64_t addr)
{
    size_t lo = 0, hi = t->nmaps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct target_map *m = &t->maps[mid];
        if (addr < m->start)
            hi = mid;
        else if (addr >= m->end)
            lo = mid + 1;
        else
            return m;
    }
    return NULL;
}

int target_list_threads(struct target *t, pid_t *tids, int max)
{
    return t->ops->list_threads ? t->ops->list_threads(t, tids, max) : -1;
}

int target_thread_activity(struct target *t, pid_t tid, struct thread_activity *out)
{
    return t->ops->thread_activity ? t->ops->thread_activity(t, tid, out) : -1;
}

pid_t target_host_tid(struct target *t, pid_t own_tid)
{
    return t->ops->host_tid && own_tid > 0 ? t->ops->host_tid(t, own_tid) : own_tid;
}

pid_t target_own_tid(struct target *t, pid_t host_tid)
{
    return t->ops->own_tid && host_tid > 0 ? t->ops->own_tid(t, host_tid) : host_tid;
}

int target_thread_comm(struct target *t, pid_t tid, char *out, size_t outsize)
{
    return t->ops->thread_comm ? t->ops->thread_comm(t, tid, out, outsize) : -1;
}

bool target_can(const struct target *t, enum target_capability cap)
{
    return (t->ops->capabilities & (unsigned)cap) == (unsigned)cap;
}

int target_refresh_maps(struct target *t)
{
    return t->ops->refresh_maps ? t->ops->refresh_maps(t) : -1;
}

bool target_gone(struct target *t)
{
    return t->ops->gone && t->ops->gone(t);
}

bool target_gone_soon(struct target *t)
{
    return t->ops->gone_soon && t->ops->gone_soon(t);
}

uint64_t target_image_id(struct target *t)
{
    return t->ops->image_id ? t->ops->image_id(t) : 0;
}

int target_thread_activity_open(struct target *t, pid_t tid)
{
    return t->ops->thread_activity_open ? t->ops->thread_activity_open(t, tid) : -1;
}

int target_thread_activity_read(struct target *t, int handle, struct thread_activity *out)
{
    return t->ops->thread_activity_read ? t->ops->thread_activity_read(t, handle, out) : -1;
}

int target_thread_stopped(struct target *t, pid_t tid, char *state, pid_t *tracer)
{
    return t->ops->thread_stopped ? t->ops->thread_stopped(t, tid, state, tracer) : -1;
}

int target_thread_cpu_ns(struct target *t, pid_t tid, uint64_t *ns)
{
    return t->ops->thread_cpu_ns ? t->ops->thread_cpu_ns(t, tid, ns) : -1;
}

int target_caught_signals(struct target *t, uint64_t *mask)
{
    return t->ops->caught_signals ? t->ops->caught_signals(t, mask) : -1;
}

int target_cmdline(struct target *t, char *out, size_t outsize)
{
    return t->ops->cmdline ? t->ops->cmdline(t, out, outsize) : -1;
}

int target_exe(struct target *t, char *out, size_t outsize)
{
    return t->ops->exe ? t->ops->exe(t, out, outsize) : -1;
}

int target_peer_comm(struct target *t, pid_t pid, char *out, size_t outsize)
{
    return t->ops->peer_comm ? t->ops->peer_comm(t, pid, out, outsize) : -1;
}

int target_open_file(const struct target *t, const char *path)
{
    return t->ops->open_file ? t->ops->open_file(t, path) : -1;
}

void target_close(struct target *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nmaps; i++)
        free(t->maps[i].path);
    free(t->maps);
    target_cache_release(t->cache);
    t->cache = NULL;
    merger_free(t->merger);
    if (t->ops && t->ops->close)
        t->ops->close(t);
    else
        free(t);
}
