/* A per-user cache of expanded compressed cores, keyed by the compressed
 * file's identity (device, inode, size, modification and change times):
 * $PYSCOPE_CORE_CACHE, else $XDG_CACHE_HOME/pyscope/cores, else
 * ~/.cache/pyscope/cores; PYSCOPE_CORE_CACHE=off turns it off. Cores that
 * expand to less than PYSCOPE_CORE_CACHE_MIN bytes (64 MiB) are not kept:
 * they expand in a fraction of a second. */
#ifndef PYSCOPE_TARGET_CORE_CACHE_H
#define PYSCOPE_TARGET_CORE_CACHE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct core_cache {
    int dirfd;                  /* -1: no cache */
    char dir[PATH_MAX];
    char path[PATH_MAX + 160];  /* the entry found or published */
    uint64_t min_bytes;         /* smaller expansions are not kept */
};

/* Says where the cache is, from the environment; -1 when it is off or
 * there is no home to put it in. */
int core_cache_init(struct core_cache *cache);
/* Opens the cache directory (creating it 0700 when create is set); -1 when
 * there is none to use (missing, not ours, or writable by others). */
int core_cache_open_dir(struct core_cache *cache, bool create);
/* The entry's file name for a compressed file's identity. */
void core_cache_key(const struct stat *compressed, char *out, size_t outsize);
/* The kept expansion of the compressed file, open for reading, with its
 * size; -1 when there is none. Marks it used. */
int core_cache_lookup(struct core_cache *cache, const struct stat *compressed, uint64_t *size);
/* An unlinked file in the cache directory to expand into; -1 on failure. */
int core_cache_create(struct core_cache *cache);
/* Bytes the cache may still fill on fd's filesystem (a tenth stays free). */
uint64_t core_cache_room(int fd);
/* Links a complete expansion made with core_cache_create in under its key,
 * then evicts the least recently used entries beyond 4 GiB in all. */
int core_cache_publish(struct core_cache *cache, int fd, const struct stat *compressed);
void core_cache_close(struct core_cache *cache);

#endif
