/* A hash index from content to small integer ids: the caller keeps the
 * content in its own arrays and supplies the hash and an equality test. */
#ifndef PYSCOPE_UTIL_IDTABLE_H
#define PYSCOPE_UTIL_IDTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IDTABLE_NONE UINT32_MAX

struct idtable {
    uint64_t *hashes;
    uint32_t *ids;
    size_t cap;              /* a power of two, or 0 */
    size_t used;
};

/* The id whose content has this hash and makes equal(ctx, id) true. */
uint32_t idtable_find(const struct idtable *t, uint64_t hash,
                      bool (*equal)(const void *ctx, uint32_t id), const void *ctx);
/* Adds id under hash; returns -1 when out of memory. */
int idtable_insert(struct idtable *t, uint64_t hash, uint32_t id);
void idtable_free(struct idtable *t);

/* FNV-1a over bytes, continued from seed (use IDTABLE_HASH_SEED to start). */
#define IDTABLE_HASH_SEED 0xcbf29ce484222325ull
uint64_t idtable_hash(uint64_t seed, const void *data, size_t len);

#endif
