/* The in-memory struct target used by unit tests: a list of byte regions
 * behind the same all-or-nothing read_raw contract a live process has. */
#include "fake_target.h"

#include <stdlib.h>
#include <string.h>

#include "target/process.h"

struct fake_region {
    uint64_t start;
    size_t len;
    unsigned char *bytes;
};

struct fake_target {
    struct target base; /* first, so a struct target * converts back */
    struct fake_region *regions;
    size_t nregions;
    size_t span_calls, spans_read;
    uint64_t last_addrs[16]; /* the last scattered read's pieces, in its order */
    size_t n_last;  /* scattered reads, and the pieces they asked for */
    struct fake_thread *threads;
    size_t nthreads;
};

struct fake_thread {
    pid_t tid;
    struct thread_activity activity;
};

static struct fake_target *as_fake(struct target *t)
{
    return (struct fake_target *)t;
}

static const struct fake_region *region_containing(const struct fake_target *f, uint64_t addr)
{
    for (size_t i = 0; i < f->nregions; i++) {
        const struct fake_region *r = &f->regions[i];
        if (addr >= r->start && addr - r->start < r->len)
            return r;
    }
    return NULL;
}

/* Copies the contiguous readable prefix of [addr, addr+len), walking across
 * touching regions the way a read crosses adjacent mappings. */
static size_t copy_readable(const struct fake_target *f, uint64_t addr, void *buf, size_t len)
{
    unsigned char *out = buf;
    size_t done = 0;
    while (done < len) {
        uint64_t at = addr + done;
        if (at < addr)
            break; /* the address space wrapped */
        const struct fake_region *r = region_containing(f, at);
        if (r == NULL)
            break;
        size_t off = (size_t)(at - r->start);
        size_t n = r->len - off;
        if (n > len - done)
            n = len - done;
        memcpy(out + done, r->bytes + off, n);
        done += n;
    }
    return done;
}

static int fake_read_raw(struct target *t, uint64_t addr, void *buf, size_t len)
{
    return copy_readable(as_fake(t), addr, buf, len) == len ? 0 : -1;
}

/* target_close has already freed maps and the page cache. */
static void fake_close(struct target *t)
{
    struct fake_target *f = as_fake(t);
    for (size_t i = 0; i < f->nregions; i++)
        free(f->regions[i].bytes);
    free(f->regions);
    free(f->threads);
    free(f);
}

static int fake_list_threads(struct target *t, pid_t *tids, int max)
{
    struct fake_target *f = as_fake(t);
    int n = 0;
    for (size_t i = 0; i < f->nthreads && n < max; i++)
        tids[n++] = f->threads[i].tid;
    return n;
}

static int fake_thread_activity(struct target *t, pid_t tid, struct thread_activity *out)
{
    struct fake_target *f = as_fake(t);
    for (size_t i = 0; i < f->nthreads; i++) {
        if (f->threads[i].tid == tid) {
            *out = f->threads[i].activity;
            return 0;
        }
    }
    return -1;
}

/* A fixed instant of memory and threads, as a core is: no capabilities. */
static const struct target_ops fake_ops = {
    .read_raw = fake_read_raw,
    .close = fake_close,
    .list_threads = fake_list_threads,
    .thread_activity = fake_thread_activity,
};

/* process_vm_readv's contract: spans in order, each whole or not at all. */
static size_t fake_read_spans(struct target *t, struct target_span *spans, size_t n)
{
    struct fake_target *f = as_fake(t);
    f->span_calls++;
    f->spans_read += n;
    f->n_last = n < 16 ? n : 16;
    for (size_t i = 0; i < f->n_last; i++)
        f->last_addrs[i] = spans[i].addr;
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        spans[i].ok = copy_readable(f, spans[i].addr, spans[i].buf, spans[i].len) == spans[i].len;
        ok += spans[i].ok;
    }
    return ok;
}

static const struct target_ops fake_span_ops = {
    .read_raw = fake_read_raw,
    .read_spans = fake_read_spans,
    .close = fake_close,
    .list_threads = fake_list_threads,
    .thread_activity = fake_thread_activity,
};

void fake_target_enable_spans(struct target *t)
{
    t->ops = &fake_span_ops;
}

void fake_target_span_counts(struct target *t, size_t *calls, size_t *spans)
{
    *calls = as_fake(t)->span_calls;
    *spans = as_fake(t)->spans_read;
}

size_t fake_target_last_pieces(struct target *t, uint64_t *addrs, size_t max)
{
    struct fake_target *f = as_fake(t);
    size_t n = f->n_last < max ? f->n_last : max;
    memcpy(addrs, f->last_addrs, n * sizeof *addrs);
    return n;
}

struct target *fake_target_new(void)
{
    struct fake_target *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->base.ops = &fake_ops;
    f->base.pid = 0; /* root stays "": files are opened at their own paths */
    return &f->base;
}

int fake_target_map(struct target *t, uint64_t addr, const void *bytes, size_t len)
{
    struct fake_target *f = as_fake(t);
    if (len == 0 || addr + len < addr)
        return -1;
    for (size_t i = 0; i < f->nregions; i++) {
        const struct fake_region *r = &f->regions[i];
        if (addr < r->start + r->len && r->start < addr + len)
            return -1;
    }
    struct fake_region *regions = realloc(f->regions, (f->nregions + 1) * sizeof(*regions));
    if (regions == NULL)
        return -1;
    f->regions = regions;
    struct target_map *maps = realloc(f->base.maps, (f->base.nmaps + 1) * sizeof(*maps));
    if (maps == NULL)
        return -1;
    f->base.maps = maps;

    unsigned char *copy = malloc(len);
    if (copy == NULL)
        return -1;
    memcpy(copy, bytes, len);
    f->regions[f->nregions++] = (struct fake_region){ .start = addr, .len = len, .bytes = copy };

    /* Kept sorted by start, as a real /proc/PID/maps listing is. */
    size_t at = f->base.nmaps;
    while (at > 0 && f->base.maps[at - 1].start > addr)
        at--;
    memmove(&f->base.maps[at + 1], &f->base.maps[at], (f->base.nmaps - at) * sizeof(*maps));
    f->base.nmaps++;
    struct target_map *m = &f->base.maps[at];
    memset(m, 0, sizeof(*m));
    m->start = addr;
    m->end = addr + len;
    memcpy(m->perms, "rw-p", 5);
    return 0;
}

void fake_target_free(struct target *t)
{
    target_close(t);
}

int fake_target_set_thread(struct target *t, pid_t tid, const struct thread_activity *activity)
{
    struct fake_target *f = as_fake(t);
    for (size_t i = 0; i < f->nthreads; i++) {
        if (f->threads[i].tid == tid) {
            f->threads[i].activity = *activity;
            return 0;
        }
    }
    struct fake_thread *grown = realloc(f->threads, (f->nthreads + 1) * sizeof *grown);
    if (!grown)
        return -1;
    f->threads = grown;
    f->threads[f->nthreads++] = (struct fake_thread){tid, *activity};
    return 0;
}
