/* The one interface through which pyscope sees a target: memory, threads,
 * mappings and what the kernel says of a live process (target/process.c) or
 * of a core file (target/core.c), each declaring which it can answer.
 * Nothing here writes to the target. */
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

/* What a target can answer besides its memory, threads, thread activity and
 * mapped files, which every target has. A live process answers all of it; a
 * core file is one instant of memory and registers, with no kernel around
 * it. Code asks target_can() for the answer it needs, never which kind of
 * target it has, so that an analysis runs on every target that can answer. */
enum target_capability {
    /* It runs on: memory changes between reads, maps grow, it can exit or
     * exec (refresh_maps, gone, image_id). */
    TARGET_CAN_CHANGE = 1u << 0,
    /* The kernel's view of it now: fds and sockets, per-thread status and
     * schedstat, caught signals, command line and executable (/proc). */
    TARGET_CAN_PROC = 1u << 1,
    /* Other processes it refers to: its children, a thread's tracer. */
    TARGET_CAN_PEERS = 1u << 2,
    /* Its clocks read now are the ones it runs on (the time left until an
     * absolute deadline means something). */
    TARGET_CAN_CLOCK = 1u << 3,
    /* Each thread's registers are recorded (no tracer needed to get them). */
    TARGET_CAN_SAVED_REGISTERS = 1u << 4,
};

struct target_ops {
    /* Copies len bytes at addr straight from the target, bypassing the page
     * cache; returns 0, or -1 if any byte is unreadable. */
    int (*read_raw)(struct target *t, uint64_t addr, void *buf, size_t len);
    /* Optional: reads many spans in as few system calls as possible, setting
     * each span's ok; returns how many succeeded. */
    size_t (*read_spans)(struct target *t, struct target_span *spans, size_t n);
    void (*close)(struct target *t);
    int (*list_threads)(struct target *t, pid_t *tids, int max);
    int (*thread_activity)(struct target *t, pid_t tid, struct thread_activity *out);
    int (*thread_comm)(struct target *t, pid_t tid, char *out, size_t outsize);
    int (*open_file)(const struct target *t, const char *path);
    /* The rest is there with its capability, NULL without: the target_*
     * functions below then answer "unknown" (-1, 0 or false). */
    int (*refresh_maps)(struct target *t);
    bool (*gone)(struct target *t);
    bool (*gone_soon)(struct target *t);
    uint64_t (*image_id)(struct target *t);
    int (*thread_activity_open)(struct target *t, pid_t tid);
    int (*thread_activity_read)(struct target *t, int handle, struct thread_activity *out);
    int (*thread_stopped)(struct target *t, pid_t tid, char *state, pid_t *tracer);
    int (*thread_cpu_ns)(struct target *t, pid_t tid, uint64_t *ns);
    int (*caught_signals)(struct target *t, uint64_t *mask);
    int (*cmdline)(struct target *t, char *out, size_t outsize);
    int (*exe)(struct target *t, char *out, size_t outsize);
    int (*peer_comm)(struct target *t, pid_t pid, char *out, size_t outsize);
    /* Between the numbers the target knows its threads by (its own pid
     * namespace: a container's) and ours; NULL: the same numbers. */
    pid_t (*host_tid)(struct target *t, pid_t own_tid);
    pid_t (*own_tid)(struct target *t, pid_t host_tid);
    unsigned capabilities;   /* enum target_capability bits */
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
/* The same, with the first n_head spans read before all the others and the
 * last n_tail after them, each in its order and never merged: a value read
 * at both ends brackets what the read copied in between. */
size_t target_read_spans_framed(struct target *t, struct target_span *spans, size_t n,
                                size_t n_head, size_t n_tail);

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
/* The tid of ours (target_list_threads' numbers) of a thread the target
 * knows by own_tid (what it records about itself: gettid() in its own pid
 * namespace), and the reverse; 0 when no thread has it. The same number
 * when the target shares our namespace. */
pid_t target_host_tid(struct target *t, pid_t own_tid);
pid_t target_own_tid(struct target *t, pid_t host_tid);

/* Does the target answer what cap names? */
bool target_can(const struct target *t, enum target_capability cap);

/* TARGET_CAN_CHANGE. Re-reads the mappings into t->maps: 0 or -1. */
int target_refresh_maps(struct target *t);
/* Has it exited (or is it exiting, its memory gone)? false when it cannot. */
bool target_gone(struct target *t);
/* After a failure: has it exited, or does it within a few tens of ms? */
bool target_gone_soon(struct target *t);
/* Changes when it execs a new program; 0 when unknown. */
uint64_t target_image_id(struct target *t);

/* TARGET_CAN_PROC. A handle on a thread's activity that is cheaper to read
 * again and again (a sampler's); -1 with errno EMFILE past the limit of
 * open files. Closed with close(2). */
int target_thread_activity_open(struct target *t, pid_t tid);
int target_thread_activity_read(struct target *t, int handle, struct thread_activity *out);
/* Is the thread stopped? *state 'T' (by a signal), 't' (by its tracer) or
 * 0; *tracer is its tracer's pid (0: none). -1 when unknown. */
int target_thread_stopped(struct target *t, pid_t tid, char *state, pid_t *tracer);
/* CPU time the thread has run, in ns. */
int target_thread_cpu_ns(struct target *t, pid_t tid, uint64_t *ns);
/* The signals it catches: bit n-1 for signal n. */
int target_caught_signals(struct target *t, uint64_t *mask);
/* Its command line (arguments separated by spaces) and executable path. */
int target_cmdline(struct target *t, char *out, size_t outsize);
int target_exe(struct target *t, char *out, size_t outsize);

/* TARGET_CAN_PEERS. The name of another process it refers to (a child it
 * waits for, a thread's tracer). */
int target_peer_comm(struct target *t, pid_t pid, char *out, size_t outsize);

void target_close(struct target *t);

#endif
