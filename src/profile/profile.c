/* The profile store: growable arrays plus hash indexes for interning, and
 * the timeline as fixed-size records in an unlinked temporary file. */
#include "profile/profile.h"

#include <stdlib.h>
#include <string.h>

#include "util/idtable.h"

struct profile_index {
    struct idtable frames, stacks, threads, counts, hogs, gc_triggers;
};

const char *profile_state_name(enum profile_state state)
{
    switch (state) {
    case PROFILE_HOLDING_GIL: return "holding_gil";
    case PROFILE_WAITING_GIL: return "waiting_gil";
    case PROFILE_RUNNING: return "running";
    case PROFILE_IDLE: return "idle";
    case PROFILE_UNKNOWN:
    case PROFILE_STATE_COUNT: break;
    }
    return "unknown";
}

/* Grows *items (of size each) so that one more fits. */
static int grow(void **items, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 64;
    void *grown = realloc(*items, ncap * size);
    if (!grown)
        return -1;
    *items = grown;
    *cap = ncap;
    return 0;
}

int profile_init(struct profile *p)
{
    memset(p, 0, sizeof *p);
    p->index = calloc(1, sizeof *p->index);
    p->timeline = tmpfile();
    if (!p->index || !p->timeline) {
        profile_free(p);
        return -1;
    }
    return 0;
}

void profile_free(struct profile *p)
{
    for (size_t i = 0; i < p->n_frames; i++) {
        free(p->frames[i].function);
        free(p->frames[i].file);
        free(p->frames[i].module);
    }
    for (size_t i = 0; i < p->n_mappings; i++)
        free(p->mappings[i].path);
    free(p->mappings);
    for (size_t i = 0; i < p->n_stacks; i++)
        free(p->stacks[i].frames);
    free(p->frames);
    free(p->stacks);
    free(p->threads);
    free(p->processes);
    free(p->counts);
    free(p->hogs);
    free(p->gc_triggers);
    if (p->index) {
        idtable_free(&p->index->frames);
        idtable_free(&p->index->stacks);
        idtable_free(&p->index->threads);
        idtable_free(&p->index->counts);
        idtable_free(&p->index->hogs);
        idtable_free(&p->index->gc_triggers);
        free(p->index);
    }
    if (p->timeline)
        fclose(p->timeline);
    memset(p, 0, sizeof *p);
}

/* Mappings are few (the files a process maps executable): a linear search. */
static uint32_t profile_mapping_id(struct profile *p, const struct profile_mapping *m)
{
    for (size_t i = 0; i < p->n_mappings; i++)
        if (strcmp(p->mappings[i].path, m->path) == 0)
            return (uint32_t)i;
    if (grow((void **)&p->mappings, &p->cap_mappings, p->n_mappings, sizeof *p->mappings) != 0)
        return UINT32_MAX;
    struct profile_mapping *copy = &p->mappings[p->n_mappings];
    *copy = *m;
    if (!(copy->path = strdup(m->path)))
        return UINT32_MAX;
    return (uint32_t)p->n_mappings++;
}

struct frame_key {
    const struct profile *p;
    const char *function, *file;
    int line;
    bool synthetic;
    const char *module;       /* NULL: a Python or pseudo-frame */
};

static bool frame_equal(const void *ctx, uint32_t id)
{
    const struct frame_key *k = ctx;
    const struct profile_frame *f = &k->p->frames[id];
    return f->line == k->line && f->synthetic == k->synthetic &&
           strcmp(f->function, k->function) == 0 && strcmp(f->file, k->file) == 0 &&
           (f->module == NULL) == (k->module == NULL) &&
           (!k->module || strcmp(f->module, k->module) == 0);
}

static uint32_t intern_frame(struct profile *p, const struct frame_key *key, uint64_t address,
                             const struct profile_mapping *mapping)
{
    uint64_t h = idtable_hash(IDTABLE_HASH_SEED, key->function, strlen(key->function) + 1);
    h = idtable_hash(h, key->file, strlen(key->file) + 1);
    h = idtable_hash(h, &key->line, sizeof key->line);
    h = idtable_hash(h, &key->synthetic, sizeof key->synthetic);
    if (key->module)
        h = idtable_hash(h, key->module, strlen(key->module) + 1);
    uint32_t id = idtable_find(&p->index->frames, h, frame_equal, key);
    if (id != IDTABLE_NONE)
        return id;
    if (p->n_frames >= UINT32_MAX - 1 ||
        grow((void **)&p->frames, &p->cap_frames, p->n_frames, sizeof *p->frames) != 0)
        return UINT32_MAX;
    struct profile_frame *f = &p->frames[p->n_frames];
    memset(f, 0, sizeof *f);
    f->function = strdup(key->function);
    f->file = strdup(key->file);
    f->line = key->line;
    f->synthetic = key->synthetic;
    f->mapping = UINT32_MAX;
    if (key->module) {
        f->native = true;
        f->module = strdup(key->module);
        f->address = address;
        f->mapping = mapping ? profile_mapping_id(p, mapping) : UINT32_MAX;
    }
    id = (uint32_t)p->n_frames;
    if (!f->function || !f->file || (key->module && !f->module) ||
        idtable_insert(&p->index->frames, h, id) != 0) {
        free(f->function);
        free(f->file);
        free(f->module);
        return UINT32_MAX;
    }
    p->n_frames++;
    return id;
}

uint32_t profile_frame_id(struct profile *p, const char *function, const char *file, int line,
                          bool synthetic)
{
    struct frame_key key = {p, function, file, line, synthetic, NULL};
    return intern_frame(p, &key, 0, NULL);
}

uint32_t profile_native_frame_id(struct profile *p, const char *symbol, const char *module,
                                 const char *file, int line, uint64_t address,
                                 const struct profile_mapping *mapping)
{
    struct frame_key key = {p, symbol, file, line, false, module};
    return intern_frame(p, &key, address, mapping);
}

uint32_t profile_copy_frame(struct profile *p, const struct profile *src, uint32_t id)
{
    const struct profile_frame *f = &src->frames[id];
    if (!f->native)
        return profile_frame_id(p, f->function, f->file, f->line, f->synthetic);
    const struct profile_mapping *m = f->mapping < src->n_mappings ? &src->mappings[f->mapping]
                                                                  : NULL;
    return profile_native_frame_id(p, f->function, f->module, f->file, f->line, f->address, m);
}

struct stack_key {
    const struct profile *p;
    const uint32_t *frames;
    uint32_t depth;
};

static bool stack_equal(const void *ctx, uint32_t id)
{
    const struct stack_key *k = ctx;
    const struct profile_stack *s = &k->p->stacks[id];
    return s->depth == k->depth &&
           (k->depth == 0 || memcmp(s->frames, k->frames, k->depth * sizeof *k->frames) == 0);
}

uint32_t profile_stack_id(struct profile *p, const uint32_t *frames, uint32_t depth)
{
    struct stack_key key = {p, frames, depth};
    uint64_t h = idtable_hash(IDTABLE_HASH_SEED, &depth, sizeof depth);
    h = idtable_hash(h, frames, depth * sizeof *frames);
    uint32_t id = idtable_find(&p->index->stacks, h, stack_equal, &key);
    if (id != IDTABLE_NONE)
        return id;
    if (p->n_stacks >= UINT32_MAX - 1 ||
        grow((void **)&p->stacks, &p->cap_stacks, p->n_stacks, sizeof *p->stacks) != 0)
        return UINT32_MAX;
    struct profile_stack *s = &p->stacks[p->n_stacks];
    s->frames = malloc((depth ? depth : 1) * sizeof *frames);
    if (!s->frames)
        return UINT32_MAX;
    if (depth)
        memcpy(s->frames, frames, depth * sizeof *frames);
    s->depth = depth;
    id = (uint32_t)p->n_stacks;
    if (idtable_insert(&p->index->stacks, h, id) != 0) {
        free(s->frames);
        return UINT32_MAX;
    }
    p->n_stacks++;
    return id;
}

struct u64_key {
    const void *items;
    size_t item_size;
    uint64_t (*key_of)(const void *item);
    uint64_t key;
};

static uint64_t thread_key_of(const void *item)
{
    const struct profile_thread *t = item;
    return ((uint64_t)(uint32_t)t->pid << 32) | (uint32_t)t->tid;
}

static uint64_t count_key_of(const void *item)
{
    const struct profile_count *c = item;
    return ((uint64_t)c->thread << 40) ^ ((uint64_t)c->stack << 3) ^ c->state;
}

static uint64_t hog_key_of(const void *item)
{
    return ((const struct profile_hog *)item)->stack;
}

static bool u64_equal(const void *ctx, uint32_t id)
{
    const struct u64_key *k = ctx;
    return k->key_of((const char *)k->items + (size_t)id * k->item_size) == k->key;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

uint32_t profile_thread_id(struct profile *p, pid_t pid, pid_t tid)
{
    struct profile_thread probe = {.pid = pid, .tid = tid};
    struct u64_key key = {p->threads, sizeof *p->threads, thread_key_of, thread_key_of(&probe)};
    uint32_t id = idtable_find(&p->index->threads, mix(key.key), u64_equal, &key);
    if (id != IDTABLE_NONE)
        return id;
    if (grow((void **)&p->threads, &p->cap_threads, p->n_threads, sizeof *p->threads) != 0)
        return UINT32_MAX;
    id = (uint32_t)p->n_threads;
    p->threads[id] = probe;
    if (idtable_insert(&p->index->threads, mix(key.key), id) != 0)
        return UINT32_MAX;
    p->n_threads++;
    return id;
}

uint32_t profile_process_id(struct profile *p, pid_t pid)
{
    for (size_t i = 0; i < p->n_processes; i++)
        if (p->processes[i].pid == pid)
            return (uint32_t)i;
    if (grow((void **)&p->processes, &p->cap_processes, p->n_processes, sizeof *p->processes) != 0)
        return UINT32_MAX;
    memset(&p->processes[p->n_processes], 0, sizeof *p->processes);
    p->processes[p->n_processes].pid = pid;
    return (uint32_t)p->n_processes++;
}

const struct profile_process *profile_process_of(const struct profile *p, pid_t pid)
{
    for (size_t i = 0; i < p->n_processes; i++)
        if (p->processes[i].pid == pid)
            return &p->processes[i];
    return NULL;
}

int profile_add_sample(struct profile *p, uint32_t thread, uint32_t stack,
                       enum profile_state state, bool gc, uint64_t now_ns)
{
    return profile_add_samples(p, thread, stack, state, gc, now_ns, 1);
}

int profile_add_samples(struct profile *p, uint32_t thread, uint32_t stack,
                        enum profile_state state, bool gc, uint64_t now_ns, uint32_t weight)
{
    if (thread >= p->n_threads || stack >= p->n_stacks || state >= PROFILE_STATE_COUNT)
        return -1;
    struct profile_thread *t = &p->threads[thread];
    if (t->samples == 0)
        t->first_ns = now_ns;
    t->last_ns = now_ns;
    t->samples += weight;
    t->state_samples[state] += weight;
    if (gc)
        t->gc_samples += weight;

    struct profile_count probe = {.thread = thread, .stack = stack, .state = (uint8_t)state};
    struct u64_key key = {p->counts, sizeof *p->counts, count_key_of, count_key_of(&probe)};
    uint32_t id = idtable_find(&p->index->counts, mix(key.key), u64_equal, &key);
    if (id == IDTABLE_NONE) {
        if (grow((void **)&p->counts, &p->cap_counts, p->n_counts, sizeof *p->counts) != 0)
            return -1;
        id = (uint32_t)p->n_counts;
        p->counts[id] = probe;
        if (idtable_insert(&p->index->counts, mix(key.key), id) != 0)
            return -1;
        p->n_counts++;
    }
    p->counts[id].samples += weight;
    return 0;
}

int profile_add_hog(struct profile *p, uint32_t stack, bool native)
{
    struct profile_hog probe = {.stack = stack};
    struct u64_key key = {p->hogs, sizeof *p->hogs, hog_key_of, stack};
    uint32_t id = idtable_find(&p->index->hogs, mix(key.key), u64_equal, &key);
    if (id == IDTABLE_NONE) {
        if (grow((void **)&p->hogs, &p->cap_hogs, p->n_hogs, sizeof *p->hogs) != 0)
            return -1;
        id = (uint32_t)p->n_hogs;
        p->hogs[id] = probe;
        if (idtable_insert(&p->index->hogs, mix(key.key), id) != 0)
            return -1;
        p->n_hogs++;
    }
    p->hogs[id].samples++;
    if (native)
        p->hogs[id].native_samples++;
    return 0;
}

static uint64_t gc_trigger_key_of(const void *item)
{
    return ((const struct profile_gc_trigger *)item)->stack;
}

int profile_add_gc_trigger(struct profile *p, uint32_t stack, bool new_collection)
{
    struct profile_gc_trigger probe = {.stack = stack};
    struct u64_key key = {p->gc_triggers, sizeof *p->gc_triggers, gc_trigger_key_of, stack};
    uint32_t id = idtable_find(&p->index->gc_triggers, mix(key.key), u64_equal, &key);
    if (id == IDTABLE_NONE) {
        if (grow((void **)&p->gc_triggers, &p->cap_gc_triggers, p->n_gc_triggers,
                 sizeof *p->gc_triggers) != 0)
            return -1;
        id = (uint32_t)p->n_gc_triggers;
        p->gc_triggers[id] = probe;
        if (idtable_insert(&p->index->gc_triggers, mix(key.key), id) != 0)
            return -1;
        p->n_gc_triggers++;
    }
    p->gc_triggers[id].samples++;
    if (new_collection)
        p->gc_triggers[id].collections++;
    return 0;
}

int profile_add_segment(struct profile *p, const struct profile_segment *segment)
{
    if (fwrite(segment, sizeof *segment, 1, p->timeline) != 1)
        return -1;
    p->n_segments++;
    return 0;
}

int profile_foreach_segment(const struct profile *p,
                            int (*fn)(void *ctx, const struct profile_segment *segment),
                            void *ctx)
{
    if (fflush(p->timeline) != 0 || fseek(p->timeline, 0, SEEK_SET) != 0)
        return -1;
    struct profile_segment seg;
    int rc = 0;
    for (uint64_t i = 0; i < p->n_segments; i++) {
        if (fread(&seg, sizeof seg, 1, p->timeline) != 1) {
            rc = -1;
            break;
        }
        rc = fn(ctx, &seg);
        if (rc != 0)
            break;
    }
    fseek(p->timeline, 0, SEEK_END);
    return rc;
}

static const struct profile *sort_profile;

static int by_samples_desc(const void *a, const void *b)
{
    uint64_t x = sort_profile->counts[*(const size_t *)a].samples;
    uint64_t y = sort_profile->counts[*(const size_t *)b].samples;
    return x < y ? 1 : x > y ? -1 : 0;
}

size_t *profile_counts_by_samples(const struct profile *p)
{
    size_t *order = malloc((p->n_counts ? p->n_counts : 1) * sizeof *order);
    if (!order)
        return NULL;
    for (size_t i = 0; i < p->n_counts; i++)
        order[i] = i;
    sort_profile = p;
    qsort(order, p->n_counts, sizeof *order, by_samples_desc);
    return order;
}
