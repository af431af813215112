/* The one interface through which pyscope sees a target: memory, threads and
 * mappings of a live process or of a core file (target/core.c). Nothing here
 * writes to the target. */
#ifndef PYSCOPE_TARGET_TARGET_H
#define PYSCOPE_TARGET_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct target_map {
    uint64_t start, end, offset;
    char perms[5];          /* "r-xp" */
    uint64_t inode;
    char *path;             /* NULL for anonymous maps */
};

struct target;
struct span_merger;
struct thread_activity;   /* target/process.h */

/* One piece of a scattered read. */
struct target_span {
    uint64_t addr;
    void *buf;
    size_t len;
    bool ok;                /* set by target_read_spans */
};

struct target_ops {
    /* Copies len bytes at addr straight from the target, bypassing the page
     * cache; returns 0, or -1 if any byte is unreadable. */
    int (*read_raw)(struct target *t, uint64_t addr, void *buf, size_t len);
    /* Optional: reads many spans in as few system calls as possible, setting
     * each span's ok; returns how many succeeded. */
    size_t (*read_spans)(struct target *t, struct target_span *spans, size_t n);
    void (*close)(struct target *t);
    /* The optional rest: a NULL member means "the live process way"
     * (/proc for threads, t->root for files). */
    int (*list_threads)(struct target *t, pid_t *tids, int max);
    int (*thread_activity)(struct target *t, pid_t tid, struct thread_activity *out);
    int (*thread_comm)(struct target *t, pid_t tid, char *out, size_t outsize);
    int (*open_file)(const struct target *t, const char *path);
    bool is_core;       /* memory and threads come from a core file */
};

/* A small direct-mapped cache of target pages. It makes one dump or one
 * sample cost a few page reads instead of one read per field; it is emptied
 * between samples because the target keeps running. */
#define TARGET_PAGE_SIZE 4096u
#define TARGET_CACHE_SLOTS 1024u

/* Tags live apart from the page data so that enabling the cache touches
 * only a few kilobytes: untouched data pages are never faulted in. */
struct target_page_cache {
    uint64_t page[TARGET_CACHE_SLOTS];   /* page-aligned address */
    uint64_t epoch[TARGET_CACHE_SLOTS];  /* valid only when equal to the target's epoch */
    unsigned char (*data)[TARGET_PAGE_SIZE];
    /* Targets may share one cache (one pass reads one target at a time):
     * each invalidation takes a fresh epoch from here, so that a page cached
     * for one target never matches another. */
    uint64_t clock;
    unsigned users;
};

struct target_stats {
    uint64_t reads;         /* raw reads issued to the target */
    uint64_t bytes;
    uint64_t failures;
};

struct target {
    const struct target_ops *ops;
    pid_t pid;
    struct target_map *maps;
    size_t nmaps;
    char root[64];          /* "/proc/PID/root": mapped files are opened below it */
    char comm[64];          /* the process name, for messages */
    struct target_page_cache *cache;   /* NULL: no caching */
    uint64_t epoch;
    struct target_stats stats;
    struct span_merger *merger;        /* target_read_spans' scratch; NULL until needed */
};

/* Reads through the page cache; returns 0, or -1 if any byte is unreadable. */
int target_read(struct target *t, uint64_t addr, void *buf, size_t len);
int target_read_u64(struct target *t, uint64_t addr, uint64_t *out);
int target_read_i32(struct target *t, uint64_t addr, int32_t *out);
int target_read_u8(struct target *t, uint64_t addr, uint8_t *out);

/* Reads every span straight from the target (no cache): one system call for
 * all of them on a live process. Spans that share or adjoin a page are read
 * as one piece (each piece costs the kernel a page-table walk of its own).
 * Returns how many were read whole. */
size_t target_read_spans(struct target *t, struct target_span *spans, size_t n);

/* A stretch of target memory another read will want soon. */
struct target_range {
    uint64_t addr;
    size_t len;
};
/* Brings the pages of these ranges into the page cache in one system call
 * (per 256 pages) instead of one per page; a no-op without the cache. */
void target_prefetch(struct target *t, const struct target_range *ranges, size_t n);
/* Forgets every cached page: call between samples. */
void target_cache_invalidate(struct target *t);
/* Turns the page cache on; returns -1 when out of memory (reads still work). */
int target_cache_enable(struct target *t);
/* t's cache, kept alive for the caller (NULL when it has none), and the
 * release of it; t2 then reads through it instead of a cache of its own, so
 * that many targets read in turn use the memory of one. */
struct target_page_cache *target_cache_hold(struct target *t);
void target_cache_release(struct target_page_cache *c);
void target_cache_use(struct target *t2, struct target_page_cache *c);

/* The map containing addr, or NULL. */
const struct target_map *target_find_map(const struct target *t, uint64_t addr);

/* Opens path (a path inside the target's mount namespace) for reading. */
int target_open_file(const struct target *t, const char *path);

/* The target's kernel threads (at most max); the count or -1. */
int target_list_threads(struct target *t, pid_t *tids, int max);
/* What a thread is doing (its syscall, on CPU or not). */
int target_thread_activity(struct target *t, pid_t tid, struct thread_activity *out);
/* A thread's name as the kernel knows it (comm); -1 when unknown. */
int target_thread_comm(struct target *t, pid_t tid, char *out, size_t outsize);
/* Is this a core file rather than a live process? */
int target_is_core(const struct target *t);

void target_close(struct target *t);

#endif
