/* The html format of `pyscope record` (docs/html.md): the page, CSS and JS
 * embedded at build time, plus the recording as compact JSON, with the
 * timeline in time bins sized so that the file stays small. */
#include <stdlib.h>
#include <string.h>

#include "output/html_assets.h"
#include "output/json_writer.h"
#include "output/profile_common.h"
#include "output/profile_summary.h"
#include "output/profile_writers.h"
#include "target/syscalls.h"
#include "util/idtable.h"

/* Aim for about this many time bins over the recording; a bin is never
 * shorter than the sampling period, so a short recording keeps one bin per
 * sample. */
#define TARGET_BINS 4000
/* Integers of timeline data above which the bins are made half as long
 * again and the timeline built again: about 12 MB of JSON at worst. */
#define TIMELINE_INT_BUDGET 2400000
/* At most this many stack prefixes, and this many (thread, prefix, state)
 * counts: past them the rarest prefixes are cut off and their samples shown
 * at their nearest kept caller. Only recordings with hundreds of thousands
 * of distinct stacks come near. With the timeline's budget, this keeps the
 * file under about 17 MB. */
#define NODE_BUDGET 200000
#define COUNT_BUDGET 200000
/* Never fewer bins than this, whatever the budget says: below it the
 * timeline stops being one. */
#define MIN_BINS 100
/* A weight unit is a thousandth of a bin, so that weights stay short. */
#define UNITS_PER_BIN 1000
#define NO_SYSCALL 0xffff
#define NONE_ID UINT32_MAX

/* ---- growable arrays ---------------------------------------------------- */

struct u32vec {
    uint32_t *v;
    size_t n, cap;
};

static int u32_push(struct u32vec *a, uint32_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        uint32_t *grown = realloc(a->v, cap * sizeof *grown);
        if (!grown)
            return -1;
        a->v = grown;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

/* ---- interned strings and the stack prefix tree ------------------------- */

struct strings {
    const char **s;
    size_t n, cap;
    struct idtable index;
};

struct string_key {
    const struct strings *t;
    const char *s;
};

static bool string_equal(const void *ctx, uint32_t id)
{
    const struct string_key *k = ctx;
    return strcmp(k->t->s[id], k->s) == 0;
}

static uint32_t string_id(struct strings *t, const char *s)
{
    struct string_key key = {t, s};
    uint64_t h = idtable_hash(IDTABLE_HASH_SEED, s, strlen(s));
    uint32_t id = idtable_find(&t->index, h, string_equal, &key);
    if (id != IDTABLE_NONE)
        return id;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        const char **grown = realloc(t->s, cap * sizeof *grown);
        if (!grown)
            return NONE_ID;
        t->s = grown;
        t->cap = cap;
    }
    id = (uint32_t)t->n;
    if (idtable_insert(&t->index, h, id) != 0)
        return NONE_ID;
    t->s[t->n++] = s;
    return id;
}

/* Node i is the stack prefix parent[i] + frame[i]; a parent is always
 * created before its children, which the page relies on. */
struct trie {
    struct u32vec parent, frame;
    struct idtable index;
};

struct node_key {
    const struct trie *t;
    uint32_t parent, frame;
};

static bool node_equal(const void *ctx, uint32_t id)
{
    const struct node_key *k = ctx;
    return k->t->parent.v[id] == k->parent && k->t->frame.v[id] == k->frame;
}

static uint32_t trie_child(struct trie *t, uint32_t parent, uint32_t frame)
{
    struct node_key key = {t, parent, frame};
    uint64_t h = idtable_hash(IDTABLE_HASH_SEED, &parent, sizeof parent);
    h = idtable_hash(h, &frame, sizeof frame);
    uint32_t id = idtable_find(&t->index, h, node_equal, &key);
    if (id != IDTABLE_NONE)
        return id;
    id = (uint32_t)t->parent.n;
    if (id == NONE_ID || u32_push(&t->parent, parent) != 0)
        return NONE_ID;
    if (u32_push(&t->frame, frame) != 0 || idtable_insert(&t->index, h, id) != 0) {
        t->parent.n--;
        return NONE_ID;
    }
    return id;
}

/* ---- the timeline, in bins ---------------------------------------------- */

/* Kinds are what the timeline colours by: state, GC, and for an idle thread
 * its syscall. Few distinct ones occur, but the key space is small enough to
 * index directly. */
#define KIND_KEYS ((size_t)PROFILE_STATE_COUNT * 2 * 65536)

struct kinds {
    uint16_t *by_key;          /* key -> kind + 1, 0 when not seen */
    uint32_t keys[4096];       /* kind -> key */
    size_t n;
};

static size_t kind_key(uint8_t state, bool gc, uint16_t syscall)
{
    return ((size_t)state * 2 + (gc ? 1 : 0)) * 65536 + syscall;
}

static uint32_t kind_id(struct kinds *k, uint8_t state, bool gc, uint16_t syscall)
{
    if (state >= PROFILE_STATE_COUNT)
        state = PROFILE_UNKNOWN;
    if (state != PROFILE_IDLE)
        syscall = NO_SYSCALL;
    size_t key = kind_key(state, gc, syscall);
    if (k->by_key[key])
        return k->by_key[key] - 1u;
    /* The syscall is only a detail: past a (never seen) number of distinct
     * ones, drop it, keeping room for every kind without one. */
    size_t room = sizeof k->keys / sizeof k->keys[0];
    if (syscall != NO_SYSCALL && k->n + 2 * PROFILE_STATE_COUNT >= room)
        return kind_id(k, state, gc, NO_SYSCALL);
    k->keys[k->n] = (uint32_t)key;
    k->by_key[key] = (uint16_t)++k->n;
    return (uint32_t)(k->n - 1);
}

struct part {
    uint32_t node, kind;
    uint64_t ns;
};

/* One thread's cells, encoded as the page reads them (docs/html.md):
 * gap (bins since the previous cell ended), length in bins, number of parts,
 * then per part: node, kind, weight. */
struct thread_cells {
    struct u32vec out;
    uint64_t end_bin;          /* the bin after the last cell written */
    uint64_t open_bin;         /* the bin whose parts are being gathered */
    bool open;
    struct part *parts;
    size_t n_parts, cap_parts;
    uint64_t last_end_ns;
    bool started;
};

struct timeline {
    const struct profile *p;
    const uint32_t *stack_node;
    struct kinds *kinds;
    struct thread_cells *threads;
    size_t n_threads;
    uint64_t bin_ns, unit_ns, n_bins;
    size_t total_ints;
    bool over_budget, failed;
};

static uint32_t weight_units(const struct timeline *tl, uint64_t ns)
{
    uint64_t w = (ns + tl->unit_ns / 2) / tl->unit_ns;
    if (w == 0)
        w = 1;
    return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

static int by_weight_desc(const void *a, const void *b)
{
    const struct part *x = a, *y = b;
    if (x->ns != y->ns)
        return x->ns < y->ns ? 1 : -1;
    return x->node != y->node ? (x->node < y->node ? -1 : 1) : (x->kind > y->kind) - (x->kind < y->kind);
}

static void emit_cell(struct timeline *tl, struct thread_cells *tc, uint64_t start_bin, uint64_t len,
                      struct part *parts, size_t n)
{
    if (n == 0 || tl->failed)
        return;
    qsort(parts, n, sizeof *parts, by_weight_desc);
    uint64_t gap = start_bin > tc->end_bin ? start_bin - tc->end_bin : 0;
    int rc = u32_push(&tc->out, gap > UINT32_MAX ? UINT32_MAX : (uint32_t)gap);
    rc |= u32_push(&tc->out, len > UINT32_MAX ? UINT32_MAX : (uint32_t)len);
    rc |= u32_push(&tc->out, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        rc |= u32_push(&tc->out, parts[i].node);
        rc |= u32_push(&tc->out, parts[i].kind);
        rc |= u32_push(&tc->out, weight_units(tl, parts[i].ns));
    }
    if (rc != 0)
        tl->failed = true;
    tc->end_bin = start_bin + len;
    tl->total_ints += 3 + 3 * n;
    if (tl->total_ints > TIMELINE_INT_BUDGET)
        tl->over_budget = true;
}

static void flush_open(struct timeline *tl, struct thread_cells *tc)
{
    if (!tc->open)
        return;
    emit_cell(tl, tc, tc->open_bin, 1, tc->parts, tc->n_parts);
    tc->open = false;
    tc->n_parts = 0;
}

static void add_part(struct timeline *tl, struct thread_cells *tc, uint64_t bin, uint32_t node,
                     uint32_t kind, uint64_t ns)
{
    if (tc->open && tc->open_bin != bin)
        flush_open(tl, tc);
    if (!tc->open) {
        tc->open = true;
        tc->open_bin = bin;
    }
    for (size_t i = 0; i < tc->n_parts; i++) {
        if (tc->parts[i].node == node && tc->parts[i].kind == kind) {
            tc->parts[i].ns += ns;
            return;
        }
    }
    if (tc->n_parts == tc->cap_parts) {
        size_t cap = tc->cap_parts ? tc->cap_parts * 2 : 8;
        struct part *grown = realloc(tc->parts, cap * sizeof *grown);
        if (!grown) {
            tl->failed = true;
            return;
        }
        tc->parts = grown;
        tc->cap_parts = cap;
    }
    tc->parts[tc->n_parts++] = (struct part){node, kind, ns};
}

/* Splits a segment into the partial bin it starts in, the whole bins it
 * covers (one cell, however many), and the partial bin it ends in. */
static int on_segment(void *ctx, const struct profile_segment *seg)
{
    struct timeline *tl = ctx;
    const struct profile *p = tl->p;
    if (seg->thread >= tl->n_threads || seg->stack >= p->n_stacks)
        return 0;
    struct thread_cells *tc = &tl->threads[seg->thread];
    uint64_t s = seg->start_ns, e = seg->end_ns;
    /* Cells must follow each other: a segment that starts before the
     * previous one ended starts where it ended. */
    if (tc->started && s < tc->last_end_ns)
        s = tc->last_end_ns;
    if (e <= s)
        return 0;
    tc->started = true;
    tc->last_end_ns = e;
    uint32_t node = tl->stack_node[seg->stack];
    uint32_t kind = kind_id(tl->kinds, seg->state, seg->gc != 0, seg->syscall);
    uint64_t q = tl->bin_ns;
    uint64_t first = s / q, last = (e - 1) / q;
    if (first == last) {
        add_part(tl, tc, first, node, kind, e - s);
    } else {
        uint64_t full_from = first, full_to = e / q;   /* whole bins [full_from, full_to) */
        if (s % q) {
            add_part(tl, tc, first, node, kind, (first + 1) * q - s);
            full_from = first + 1;
        }
        if (full_to > full_from) {
            flush_open(tl, tc);
            struct part run = {node, kind, (full_to - full_from) * q};
            emit_cell(tl, tc, full_from, full_to - full_from, &run, 1);
        }
        if (e % q)
            add_part(tl, tc, last, node, kind, e - last * q);
    }
    return tl->failed || tl->over_budget ? 1 : 0;
}

/* Without a timeline (recorded with none), each thread gets one cell over
 * its lifetime holding its exact counts. */
static void cells_from_counts(struct timeline *tl)
{
    const struct profile *p = tl->p;
    double period = profile_period_ns(p);
    for (size_t t = 0; t < tl->n_threads; t++) {
        struct thread_cells *tc = &tl->threads[t];
        const struct profile_thread *th = &p->threads[t];
        for (size_t i = 0; i < p->n_counts; i++) {
            const struct profile_count *c = &p->counts[i];
            if (c->thread != t || c->stack >= p->n_stacks)
                continue;
            uint32_t kind = kind_id(tl->kinds, c->state, false, NO_SYSCALL);
            add_part(tl, tc, th->first_ns / tl->bin_ns, tl->stack_node[c->stack], kind,
                     (uint64_t)((double)c->samples * (period > 0 ? period : 1.0)));
        }
        uint64_t from = th->first_ns / tl->bin_ns;
        uint64_t to = th->last_ns / tl->bin_ns + 1;
        if (tc->open)
            emit_cell(tl, tc, from, to > from ? to - from : 1, tc->parts, tc->n_parts);
        tc->open = false;
        tc->n_parts = 0;
    }
}

static void timeline_reset(struct timeline *tl)
{
    for (size_t t = 0; t < tl->n_threads; t++) {
        free(tl->threads[t].out.v);
        free(tl->threads[t].parts);
        memset(&tl->threads[t], 0, sizeof tl->threads[t]);
    }
    tl->total_ints = 0;
    tl->over_budget = tl->failed = false;
}

struct span_ctx {
    uint64_t end_ns;
};

static int find_end(void *ctx, const struct profile_segment *seg)
{
    struct span_ctx *c = ctx;
    if (seg->end_ns > c->end_ns)
        c->end_ns = seg->end_ns;
    return 0;
}

/* Builds the cells with bins as short as the budget allows. */
static int timeline_build(struct timeline *tl)
{
    const struct profile *p = tl->p;
    struct span_ctx span = {p->meta.duration_ns};
    if (profile_foreach_segment(p, find_end, &span) != 0)
        return -1;
    for (size_t t = 0; t < p->n_threads; t++)
        if (p->threads[t].last_ns + 1 > span.end_ns)
            span.end_ns = p->threads[t].last_ns + 1;
    if (span.end_ns == 0)
        span.end_ns = 1;
    double period = profile_period_ns(p);
    uint64_t q = span.end_ns / TARGET_BINS + 1;
    if (period > (double)q)
        q = (uint64_t)period;
    if (q < 1000)
        q = 1000;
    for (;;) {
        /* Whole multiples of unit_ns keep a bin exactly UNITS_PER_BIN units. */
        tl->unit_ns = (q + UNITS_PER_BIN - 1) / UNITS_PER_BIN;
        tl->bin_ns = tl->unit_ns * UNITS_PER_BIN;
        tl->n_bins = (span.end_ns + tl->bin_ns - 1) / tl->bin_ns;
        timeline_reset(tl);
        if (p->n_segments == 0) {
            cells_from_counts(tl);
        } else {
            int rc = profile_foreach_segment(p, on_segment, tl);
            if (rc < 0)
                return -1;
            for (size_t t = 0; t < tl->n_threads; t++)
                flush_open(tl, &tl->threads[t]);
        }
        if (tl->failed)
            return -1;
        if (!tl->over_budget || tl->n_bins * 2 / 3 < MIN_BINS)
            return 0;
        q = tl->bin_ns + tl->bin_ns / 2;
    }
}

/* ---- output -------------------------------------------------------------- */

/* JSON inside <script> must never contain "</script" or "<!--": every '<'
 * (which JSON has only inside strings) becomes \u003c. Every '/' (also only
 * inside strings) becomes \/ so that no file name in the data reads as a URL
 * to a scanner looking for http:// references. */
static ssize_t escaping_write(void *cookie, const char *buf, size_t size)
{
    FILE *out = cookie;
    size_t from = 0;
    for (size_t i = 0; i < size; i++) {
        const char *with = buf[i] == '<' ? "\\u003c" : buf[i] == '/' ? "\\/" : NULL;
        if (!with)
            continue;
        if (fwrite(buf + from, 1, i - from, out) != i - from || fputs(with, out) == EOF)
            return -1;
        from = i + 1;
    }
    if (fwrite(buf + from, 1, size - from, out) != size - from)
        return -1;
    return (ssize_t)size;
}

/* A node id, with NONE_ID (a stack without frames) written as -1. */
static void write_node(struct json_writer *w, uint32_t node)
{
    if (node == NONE_ID)
        json_int(w, -1);
    else
        json_uint(w, node);
}

struct count_row;

struct html_data {
    const struct profile *p;
    const struct profile_write_options *o;
    struct profile_summary summary;
    struct strings strings;
    uint32_t *frame_fn, *frame_file;
    char **native_names;          /* the display names of C frames, which strings points at */
    struct trie trie;
    uint32_t *stack_node;
    bool *stack_moved;              /* its deepest prefixes were pruned */
    struct count_row *counts;       /* merged by (thread, node, state) */
    size_t n_counts;
    uint64_t pruned_nodes, pruned_samples;
    struct kinds kinds;
    struct timeline tl;
};

static int by_total_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Keeps at most budget prefixes, the ones with the most samples (a parent
 * has at least its children's, so what is kept is a tree), and points every
 * stack at its deepest kept prefix. */
static int prune_tree(struct html_data *d, size_t budget)
{
    const struct profile *p = d->p;
    struct trie *t = &d->trie;
    size_t n = t->parent.n;
    if (n <= budget)
        return 0;
    uint64_t *total = calloc(n, sizeof *total);
    uint64_t *sorted = malloc(n * sizeof *sorted);
    uint32_t *new_id = malloc(n * sizeof *new_id);
    if (!total || !sorted || !new_id) {
        free(total);
        free(sorted);
        free(new_id);
        return -1;
    }
    for (size_t i = 0; i < p->n_counts; i++) {
        const struct profile_count *c = &p->counts[i];
        if (c->stack < p->n_stacks && d->stack_node[c->stack] != NONE_ID)
            total[d->stack_node[c->stack]] += c->samples;
    }
    for (size_t i = n; i-- > 0;)
        if (t->parent.v[i] != NONE_ID)
            total[t->parent.v[i]] += total[i];
    memcpy(sorted, total, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_total_desc);
    /* Keep totals above the budget-th largest (ties all go), and never a
     * prefix without samples. */
    uint64_t keep_above = sorted[budget];
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t parent = t->parent.v[i];
        /* A parent has at least its children's samples: it was kept first. */
        if (total[i] > keep_above) {
            t->parent.v[kept] = parent == NONE_ID ? NONE_ID : new_id[parent];
            t->frame.v[kept] = t->frame.v[i];
            new_id[i] = (uint32_t)kept++;
        } else {
            new_id[i] = parent == NONE_ID ? NONE_ID : new_id[parent];
            d->pruned_nodes++;
        }
    }
    t->parent.n = t->frame.n = kept;
    for (size_t i = 0; i < p->n_stacks; i++) {
        uint32_t node = d->stack_node[i];
        if (node == NONE_ID)
            continue;
        if (total[node] <= keep_above)
            d->stack_moved[i] = true;
        d->stack_node[i] = new_id[node];
    }
    free(total);
    free(sorted);
    free(new_id);
    return 0;
}

struct count_row {
    uint32_t thread, node;
    uint8_t state;
    uint64_t samples;
};

static int by_count_key(const void *a, const void *b)
{
    const struct count_row *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return (x->state > y->state) - (x->state < y->state);
}

/* The profile's counts by (thread, node, state): stacks that differ only in
 * what was pruned away become one. In thread, node, state order. */
static int merge_counts(struct html_data *d)
{
    const struct profile *p = d->p;
    free(d->counts);
    d->counts = malloc((p->n_counts ? p->n_counts : 1) * sizeof *d->counts);
    if (!d->counts)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < p->n_counts; i++) {
        const struct profile_count *c = &p->counts[i];
        if (c->thread >= p->n_threads || c->stack >= p->n_stacks)
            continue;
        d->counts[n++] = (struct count_row){c->thread, d->stack_node[c->stack], c->state, c->samples};
    }
    qsort(d->counts, n, sizeof *d->counts, by_count_key);
    size_t merged = 0;
    for (size_t i = 0; i < n; i++) {
        if (merged && by_count_key(&d->counts[merged - 1], &d->counts[i]) == 0)
            d->counts[merged - 1].samples += d->counts[i].samples;
        else
            d->counts[merged++] = d->counts[i];
    }
    d->n_counts = merged;
    return 0;
}

static int build(struct html_data *d)
{
    const struct profile *p = d->p;
    if (profile_summary_build(&d->summary, p) != 0)
        return -1;
    size_t nf = p->n_frames ? p->n_frames : 1;
    d->frame_fn = malloc(nf * sizeof *d->frame_fn);
    d->frame_file = malloc(nf * sizeof *d->frame_file);
    d->stack_node = malloc((p->n_stacks ? p->n_stacks : 1) * sizeof *d->stack_node);
    d->stack_moved = calloc(p->n_stacks ? p->n_stacks : 1, sizeof *d->stack_moved);
    d->kinds.by_key = calloc(KIND_KEYS, sizeof *d->kinds.by_key);
    d->tl.threads = calloc(p->n_threads ? p->n_threads : 1, sizeof *d->tl.threads);
    if (!d->frame_fn || !d->frame_file || !d->stack_node || !d->stack_moved || !d->kinds.by_key ||
        !d->tl.threads)
        return -1;
    for (size_t i = 0; i < p->n_frames; i++) {
        const char *fn = p->frames[i].function;
        if (p->frames[i].native) {
            if (!d->native_names && !(d->native_names = calloc(nf, sizeof *d->native_names)))
                return -1;
            char name[FRAME_NAME_MAX];
            if (!(d->native_names[i] = strdup(frame_display_name(&p->frames[i], name))))
                return -1;
            fn = d->native_names[i];
        }
        d->frame_fn[i] = string_id(&d->strings, fn);
        d->frame_file[i] = string_id(&d->strings, p->frames[i].file);
        if (d->frame_fn[i] == NONE_ID || d->frame_file[i] == NONE_ID)
            return -1;
    }
    for (size_t i = 0; i < p->n_stacks; i++) {
        const struct profile_stack *s = &p->stacks[i];
        uint32_t node = NONE_ID;
        for (uint32_t k = 0; k < s->depth; k++) {
            if (s->frames[k] >= p->n_frames)
                break;
            uint32_t child = trie_child(&d->trie, node, s->frames[k]);
            if (child == NONE_ID)
                return -1;
            node = child;
        }
        d->stack_node[i] = node;
    }
    /* Fewer prefixes make fewer counts; halve until both fit. */
    for (size_t budget = NODE_BUDGET;; budget /= 2) {
        if (prune_tree(d, budget) != 0 || merge_counts(d) != 0)
            return -1;
        if (d->n_counts <= COUNT_BUDGET || budget < 1000)
            break;
    }
    for (size_t i = 0; i < p->n_counts; i++)
        if (p->counts[i].stack < p->n_stacks && d->stack_moved[p->counts[i].stack])
            d->pruned_samples += p->counts[i].samples;
    d->tl.p = p;
    d->tl.stack_node = d->stack_node;
    d->tl.kinds = &d->kinds;
    d->tl.n_threads = p->n_threads;
    return timeline_build(&d->tl);
}

static void free_data(struct html_data *d)
{
    profile_summary_free(&d->summary);
    free(d->strings.s);
    idtable_free(&d->strings.index);
    for (size_t i = 0; d->native_names && i < d->p->n_frames; i++)
        free(d->native_names[i]);
    free(d->native_names);
    free(d->frame_fn);
    free(d->frame_file);
    free(d->trie.parent.v);
    free(d->trie.frame.v);
    idtable_free(&d->trie.index);
    free(d->stack_node);
    free(d->stack_moved);
    free(d->counts);
    free(d->kinds.by_key);
    if (d->tl.threads) {
        timeline_reset(&d->tl);
        free(d->tl.threads);
    }
}

static void write_kinds(struct json_writer *w, const struct kinds *k)
{
    json_begin_array(w);
    for (size_t i = 0; i < k->n; i++) {
        uint32_t key = k->keys[i];
        uint16_t syscall = (uint16_t)(key % 65536);
        json_begin_array(w);
        json_uint(w, key / 65536 / 2);
        json_uint(w, key / 65536 % 2);
        const char *name = syscall != NO_SYSCALL ? syscall_name(syscall) : NULL;
        if (name)
            json_string(w, name);
        else if (syscall != NO_SYSCALL)
            json_uint(w, syscall);
        else
            json_null(w);
        json_end_array(w);
    }
    json_end_array(w);
}

static void write_data(struct json_writer *w, struct html_data *d)
{
    const struct profile *p = d->p;
    json_begin_object(w);
    json_member_string(w, "format", "pyscope-html");
    json_member_int(w, "format_version", 1);
    json_key(w, "meta");
    profile_meta_write_json(w, p);
    json_key(w, "summary");
    profile_summary_write_json(w, &d->summary);
    json_key(w, "filters");
    json_begin_object(w);
    json_member_bool(w, "idle", d->o && d->o->include_idle);
    json_member_bool(w, "gil_only", d->o && d->o->gil_only);
    json_end_object(w);
    json_key(w, "states");
    json_begin_array(w);
    for (int st = 0; st < PROFILE_STATE_COUNT; st++)
        json_string(w, profile_state_name((enum profile_state)st));
    json_end_array(w);

    json_key(w, "strings");
    json_begin_array(w);
    for (size_t i = 0; i < d->strings.n; i++)
        json_string(w, d->strings.s[i]);
    json_end_array(w);
    /* [function, file, line, synthetic] per frame, flattened */
    json_key(w, "frames");
    json_begin_array(w);
    for (size_t i = 0; i < p->n_frames; i++) {
        json_uint(w, d->frame_fn[i]);
        json_uint(w, d->frame_file[i]);
        json_int(w, p->frames[i].line);
        json_uint(w, p->frames[i].synthetic ? 1 : 0);
    }
    json_end_array(w);
    /* [parent, frame] per node, flattened */
    json_key(w, "nodes");
    json_begin_array(w);
    for (size_t i = 0; i < d->trie.parent.n; i++) {
        write_node(w, d->trie.parent.v[i]);
        json_uint(w, d->trie.frame.v[i]);
    }
    json_end_array(w);
    /* [thread, node, state, samples] per count, flattened */
    json_key(w, "counts");
    json_begin_array(w);
    for (size_t i = 0; i < d->n_counts; i++) {
        json_uint(w, d->counts[i].thread);
        write_node(w, d->counts[i].node);
        json_uint(w, d->counts[i].state);
        json_uint(w, d->counts[i].samples);
    }
    json_end_array(w);
    json_key(w, "pruned");
    json_begin_object(w);
    json_member_uint(w, "nodes", d->pruned_nodes);
    json_member_uint(w, "samples", d->pruned_samples);
    json_end_object(w);

    json_key(w, "timeline");
    json_begin_object(w);
    json_member_uint(w, "bin_ns", d->tl.bin_ns);
    json_member_uint(w, "unit_ns", d->tl.unit_ns);
    json_member_uint(w, "bins", d->tl.n_bins);
    json_key(w, "kinds");
    write_kinds(w, &d->kinds);
    json_key(w, "threads");
    json_begin_array(w);
    for (size_t t = 0; t < d->tl.n_threads; t++) {
        const struct u32vec *cells = &d->tl.threads[t].out;
        /* A stack without frames is node -1 here too. */
        json_begin_array(w);
        size_t i = 0;
        while (i + 3 <= cells->n) {
            uint32_t n = cells->v[i + 2];
            json_uint(w, cells->v[i]);
            json_uint(w, cells->v[i + 1]);
            json_uint(w, n);
            i += 3;
            for (uint32_t k = 0; k < n && i + 3 <= cells->n; k++, i += 3) {
                write_node(w, cells->v[i]);
                json_uint(w, cells->v[i + 1]);
                json_uint(w, cells->v[i + 2]);
            }
        }
        json_end_array(w);
    }
    json_end_array(w);
    json_end_object(w);
    json_end_object(w);
}

/* Writes text up to marker (or the rest), returning what follows the marker. */
static const char *write_until(FILE *out, const char *text, const char *marker, bool *found)
{
    const char *at = strstr(text, marker);
    size_t len = at ? (size_t)(at - text) : strlen(text);
    fwrite(text, 1, len, out);
    *found = at != NULL;
    return at ? at + strlen(marker) : text + len;
}

int profile_write_html(FILE *out, const struct profile *p, const struct profile_write_options *o)
{
    struct html_data d;
    memset(&d, 0, sizeof d);
    d.p = p;
    d.o = o;
    int rc = build(&d);
    const char *rest = (const char *)html_asset_report_html;
    bool found_css, found_data, found_js;
    if (rc == 0) {
        rest = write_until(out, rest, "/*@CSS@*/", &found_css);
        fwrite(html_asset_report_css, 1, html_asset_report_css_len, out);
        rest = write_until(out, rest, "@DATA@", &found_data);
        cookie_io_functions_t io = {.write = escaping_write};
        FILE *escaped = fopencookie(out, "w", io);
        if (!escaped) {
            rc = -1;
        } else {
            setvbuf(escaped, NULL, _IOFBF, 1 << 16);
            struct json_writer w;
            json_init(&w, escaped, 0);
            write_data(&w, &d);
            if (json_finish(&w) != 0)
                rc = -1;
            if (fclose(escaped) != 0)
                rc = -1;
        }
        rest = write_until(out, rest, "/*@JS@*/", &found_js);
        fwrite(html_asset_report_js, 1, html_asset_report_js_len, out);
        fputs(rest, out);
        if (!found_css || !found_data || !found_js)
            rc = -1;
    }
    free_data(&d);
    if (fflush(out) != 0 || ferror(out))
        rc = -1;
    return rc;
}
