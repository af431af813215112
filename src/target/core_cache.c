/* The cache of expanded compressed cores. A compressed stream decodes only
 * from its start, so a large core costs seconds to expand on every look; its
 * expansion is kept in a per-user directory under a name made of the
 * compressed file's identity, and a second look reads that copy at once.
 * Entries are published whole (an unlinked file, linked in once complete)
 * and the oldest go first when the cache outgrows its budget. */
#include "target/core_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define DEFAULT_MIN_BYTES (64ull << 20)
#define BUDGET_BYTES (4ull << 30)
#define MAX_ENTRIES 4096

static int make_dirs(char *path)
{
    /* Each missing component is created 0700: the cache holds the memory
     * of crashed processes. */
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int rc = mkdir(path, 0700);
        *p = '/';
        if (rc != 0 && errno != EEXIST)
            return -1;
    }
    return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

int core_cache_init(struct core_cache *cache)
{
    memset(cache, 0, sizeof *cache);
    cache->dirfd = -1;
    const char *env = getenv("PYSCOPE_CORE_CACHE");
    const char *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME");
    int n;
    if (env && (!*env || strcmp(env, "off") == 0 || strcmp(env, "0") == 0))
        return -1;
    if (env)
        n = snprintf(cache->dir, sizeof cache->dir, "%s", env);
    else if (xdg && xdg[0] == '/')
        n = snprintf(cache->dir, sizeof cache->dir, "%s/pyscope/cores", xdg);
    else if (home && home[0] == '/')
        n = snprintf(cache->dir, sizeof cache->dir, "%s/.cache/pyscope/cores", home);
    else
        return -1;
    if (n <= 0 || (size_t)n >= sizeof cache->dir || cache->dir[0] != '/')
        return -1;
    const char *min = getenv("PYSCOPE_CORE_CACHE_MIN");
    char *end;
    unsigned long long v = min && *min ? strtoull(min, &end, 10) : 0;
    cache->min_bytes = min && *min && *end == '\0' ? v : DEFAULT_MIN_BYTES;
    return 0;
}

int core_cache_open_dir(struct core_cache *cache, bool create)
{
    if (cache->dirfd >= 0)
        return 0;
    if (!cache->dir[0] || (create && make_dirs(cache->dir) != 0))
        return -1;
    int fd = open(cache->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    /* Only a directory of our own that nobody else can write to. */
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    cache->dirfd = fd;
    return 0;
}

void core_cache_key(const struct stat *st, char *out, size_t outsize)
{
    snprintf(out, outsize, "%llx-%llx-%llx-%llx.%09ld-%llx.%09ld.core",
             (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
             (unsigned long long)st->st_size, (unsigned long long)st->st_mtim.tv_sec,
             st->st_mtim.tv_nsec, (unsigned long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

int core_cache_lookup(struct core_cache *cache, const struct stat *compressed, uint64_t *size)
{
    if (cache->dirfd < 0)
        return -1;
    char name[160];
    core_cache_key(compressed, name, sizeof name);
    int fd = openat(cache->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        st.st_size <= 0) {
        close(fd);
        return -1;
    }
    /* Used now: the last to be evicted. */
    futimens(fd, NULL);
    *size = (uint64_t)st.st_size;
    snprintf(cache->path, sizeof cache->path, "%s/%s", cache->dir, name);
    return fd;
}

int core_cache_create(struct core_cache *cache)
{
    if (cache->dirfd < 0)
        return -1;
    return openat(cache->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

uint64_t core_cache_room(int fd)
{
    struct statvfs vfs;
    if (fstatvfs(fd, &vfs) != 0)
        return 0;
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    uint64_t total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
    /* A tenth of the filesystem stays free whatever the cache wants. */
    return avail > total / 10 ? avail - total / 10 : 0;
}

struct entry {
    char name[160];
    uint64_t bytes;
    struct timespec used;
};

static int newest_first(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? 1 : -1;
    return x->used.tv_nsec < y->used.tv_nsec ? 1 : x->used.tv_nsec > y->used.tv_nsec ? -1 : 0;
}

/* Removes the least recently used entries beyond the budget; keep is never
 * removed. */
static void evict(struct core_cache *cache, const char *keep)
{
    int fd = dup(cache->dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct entry *entries = calloc(MAX_ENTRIES, sizeof *entries);
    size_t n = 0;
    struct dirent *e;
    while (entries && n < MAX_ENTRIES && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        struct stat st;
        if (len < 6 || len >= sizeof entries[n].name || strcmp(e->d_name + len - 5, ".core") ||
            fstatat(cache->dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        memcpy(entries[n].name, e->d_name, len + 1);
        entries[n].bytes = (uint64_t)st.st_blocks * 512;
        entries[n].used = st.st_mtim;
        n++;
    }
    closedir(d);
    if (!entries)
        return;
    qsort(entries, n, sizeof *entries, newest_first);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        bool kept = strcmp(entries[i].name, keep) == 0;
        if (!kept && total + entries[i].bytes > BUDGET_BYTES)
            unlinkat(cache->dirfd, entries[i].name, 0);
        else
            total += entries[i].bytes;
    }
    free(entries);
}

int core_cache_publish(struct core_cache *cache, int fd, const struct stat *compressed)
{
    char name[160], proc[64];
    core_cache_key(compressed, name, sizeof name);
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, cache->dirfd, name, AT_SYMLINK_FOLLOW) != 0 && errno != EEXIST)
        return -1;
    snprintf(cache->path, sizeof cache->path, "%s/%s", cache->dir, name);
    evict(cache, name);
    return 0;
}

void core_cache_close(struct core_cache *cache)
{
    if (cache->dirfd >= 0)
        close(cache->dirfd);
    cache->dirfd = -1;
}
