/* Open-addressing hash index with linear probing, kept at most half full so
 * that probes stay short on the sampler's hot path. */
#include "util/idtable.h"

#include <stdlib.h>
#include <string.h>

/* A word at a time: stacks are hashed on every sample, and a byte-wise
 * hash of a 50-frame stack was a visible share of a sampling pass. */
uint64_t idtable_hash(uint64_t seed, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = seed ^ (len * 0xff51afd7ed558ccdull);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    uint64_t tail = 0;
    if (len)
        memcpy(&tail, p, len);
    h = (h ^ tail) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 32);
}

uint32_t idtable_find(const struct idtable *t, uint64_t hash,
                      bool (*equal)(const void *ctx, uint32_t id), const void *ctx)
{
    if (t->cap == 0)
        return IDTABLE_NONE;
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        if (t->ids[i] == IDTABLE_NONE)
            return IDTABLE_NONE;
        if (t->hashes[i] == hash && equal(ctx, t->ids[i]))
            return t->ids[i];
    }
}

static void place(uint64_t *hashes, uint32_t *ids, size_t cap, uint64_t hash, uint32_t id)
{
    size_t mask = cap - 1;
    size_t i = (size_t)hash & mask;
    while (ids[i] != IDTABLE_NONE)
        i = (i + 1) & mask;
    hashes[i] = hash;
    ids[i] = id;
}

int idtable_insert(struct idtable *t, uint64_t hash, uint32_t id)
{
    if ((t->used + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        uint64_t *hashes = malloc(cap * sizeof *hashes);
        uint32_t *ids = malloc(cap * sizeof *ids);
        if (!hashes || !ids) {
            free(hashes);
            free(ids);
            return -1;
        }
        for (size_t i = 0; i < cap; i++)
            ids[i] = IDTABLE_NONE;
        for (size_t i = 0; i < t->cap; i++)
            if (t->ids[i] != IDTABLE_NONE)
                place(hashes, ids, cap, t->hashes[i], t->ids[i]);
        free(t->hashes);
        free(t->ids);
        t->hashes = hashes;
        t->ids = ids;
        t->cap = cap;
    }
    place(t->hashes, t->ids, t->cap, hash, id);
    t->used++;
    return 0;
}

void idtable_free(struct idtable *t)
{
    free(t->hashes);
    free(t->ids);
    t->hashes = NULL;
    t->ids = NULL;
    t->cap = t->used = 0;
}
