/* A recorded profile: interned frames and stacks, per-thread sample counts by
 * GIL state, the GIL-hog table, and a timeline of per-thread segments kept in
 * a temporary file so that memory stays bounded however long the recording.
 * The sampler fills it; every output format reads it. */
#ifndef PYSCOPE_PROFILE_PROFILE_H
#define PYSCOPE_PROFILE_PROFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

enum profile_state {
    PROFILE_HOLDING_GIL = 0,
    PROFILE_WAITING_GIL,
    PROFILE_RUNNING,          /* on CPU without the GIL (native code) */
    PROFILE_IDLE,             /* blocked in a syscall */
    PROFILE_UNKNOWN,
    PROFILE_STATE_COUNT
};

const char *profile_state_name(enum profile_state state);  /* "holding_gil", ... */

/* --native: the pseudo-frame between the Python and the C frames of a
 * sample whose two stacks could not be matched. */
#define PROFILE_NATIVE_NOT_MERGED "[C stack not merged]"

struct profile_frame {
    char *function;           /* qualified name on 3.11+ */
    char *file;
    int line;                 /* -1 when unknown */
    bool synthetic;           /* a pseudo-frame pyscope adds, e.g. "<GC>" */
    /* --native: a C frame. function is its symbol ("" when the file names
     * none), file:line its source when debug info has it ("" and 0 when
     * not), module the ELF file's base name. */
    bool native;
    char *module;             /* NULL for Python frames */
    uint64_t address;         /* the first address seen in it (pprof locations) */
    uint32_t mapping;         /* index into profile->mappings, UINT32_MAX when none */
};

/* An ELF file native frames were found in, where the first process that
 * had it mapped it (pprof mappings). */
struct profile_mapping {
    char *path;
    uint64_t start, limit, offset;
};

struct profile_stack {
    uint32_t *frames;         /* frame ids, OUTERMOST first */
    uint32_t depth;
};

struct profile_thread {
    pid_t pid;
    pid_t tid;
    char name[64];            /* threading name, else the OS thread name */
    uint64_t samples;
    uint64_t state_samples[PROFILE_STATE_COUNT];
    uint64_t gc_samples;      /* samples in which this thread ran the GC */
    uint64_t first_ns, last_ns;   /* when it was first and last seen, since start */
};

/* Samples of one (thread, stack, state) combination. */
struct profile_count {
    uint32_t thread;
    uint32_t stack;
    uint8_t state;            /* enum profile_state */
    uint64_t samples;
};

/* A stack that held the GIL while at least one other thread waited for it. */
struct profile_hog {
    uint32_t stack;
    uint64_t samples;         /* held with waiters */
    uint64_t native_samples;  /* of those, inside a call that did not let go of the
                               * GIL for longer than the switch interval */
};

/* A stack that was running when the garbage collector ran: the stack below
 * the "<GC>" pseudo-frame, i.e. the code whose allocation triggered it. */
struct profile_gc_trigger {
    uint32_t stack;
    uint64_t samples;         /* passes that found a collection running from here */
    uint64_t collections;     /* collections first seen running from here */
};

/* One stretch of a thread's timeline during which its stack and state did not
 * change. Times are nanoseconds since the start of the recording. */
struct profile_segment {
    uint32_t thread;
    uint32_t stack;
    uint8_t state;
    uint8_t gc;
    uint16_t syscall;         /* for PROFILE_IDLE: the syscall number, else 0xffff */
    uint64_t start_ns;
    uint64_t end_ns;
};

/* One sampled process (several with --subprocesses), with its own pass
 * counts: each process has its own GIL and is sampled at its own pace, so
 * neither is ever averaged across processes. */
struct profile_process {
    pid_t pid, ppid;
    char role[40];            /* "parent", "fork child", "exec child", "fork grandchild", ... */
    char command[256];
    char python_version[32];
    uint64_t passes, passes_failed, gil_busy_passes;
    uint64_t first_ns, last_ns;   /* its first and last pass, since the start */
};

/* Room for the longest note on how C stacks are taken: the refusal's
 * strerror and perf_event_paranoid, then the fallback's terms. */
#define PROFILE_NATIVE_NOTE_MAX 320

struct profile_meta {
    pid_t pid;
    char command[1024];
    char python_version[32];
    uint64_t start_unix_ns;   /* wall-clock time the recording started */
    uint64_t duration_ns;
    double rate_hz;           /* requested; 0 means as fast as possible */
    uint64_t passes;          /* sampling passes over all threads */
    uint64_t passes_failed;   /* passes in which some stack could not be read whole */
    uint64_t stacks_sampled;  /* thread stacks read */
    uint64_t stacks_torn;     /* of those, torn or unreadable */
    uint64_t gil_busy_passes; /* passes in which some thread held the GIL */
    uint64_t gc_passes;       /* passes during which a collection ran */
    uint64_t gc_collections;  /* collections seen starting */
    /* --native: how C stacks were taken ("" without --native), and what came
     * of each sample's merge. */
    char native_mode[16];     /* "perf_event" or "ptrace" */
    char native_note[PROFILE_NATIVE_NOTE_MAX]; /* why that mode, when it is the fallback */
    uint64_t native_merged;   /* samples whose C and Python stacks were merged */
    uint64_t native_unmerged; /* ... could not be matched: both shown, one after the other */
    uint64_t native_truncated; /* of those, the stack copy ended before the Python frames */
    uint64_t native_missing;  /* ... had no C stack taken at the pass: Python only */
    /* perf_event: the samples the kernel took of the target (each one an
     * interrupt or a context switch of the target that copied its stack),
     * by the clock and at switches, and those it dropped (ring full). */
    uint64_t native_clock_samples, native_switch_samples, native_lost_samples;
    /* How long a loop thread must stay outside its selector in one step to
     * count as a loop-blocking episode (--loop-threshold); 0: the default. */
    long loop_blocked_ms;
};

struct profile {
    struct profile_meta meta;
    struct profile_frame *frames;
    size_t n_frames, cap_frames;
    struct profile_stack *stacks;
    size_t n_stacks, cap_stacks;
    struct profile_thread *threads;
    size_t n_threads, cap_threads;
    struct profile_process *processes;   /* in the order they were found */
    size_t n_processes, cap_processes;
    struct profile_count *counts;
    size_t n_counts, cap_counts;
    struct profile_hog *hogs;
    size_t n_hogs, cap_hogs;
    struct profile_gc_trigger *gc_triggers;
    size_t n_gc_triggers, cap_gc_triggers;
    struct profile_mapping *mappings;
    size_t n_mappings, cap_mappings;
    /* private: hash indexes and the timeline */
    struct profile_index *index;
    FILE *timeline;
    uint64_t n_segments;
};

int profile_init(struct profile *p);
void profile_free(struct profile *p);

/* Interning. Each returns an id, or UINT32_MAX when out of memory. */
uint32_t profile_frame_id(struct profile *p, const char *function, const char *file, int line,
                          bool synthetic);
/* A C frame (--native): symbol may be "" (unnamed), file "" and line 0 when
 * unknown. address and the mapping (path, start, limit, offset) are
 * remembered from the first time the frame is seen. */
uint32_t profile_native_frame_id(struct profile *p, const char *symbol, const char *module,
                                 const char *file, int line, uint64_t address,
                                 const struct profile_mapping *mapping);
/* The same frame as src's frame id, interned in p (C frames with their
 * mapping). */
uint32_t profile_copy_frame(struct profile *p, const struct profile *src, uint32_t id);
/* frames: outermost first. */
uint32_t profile_stack_id(struct profile *p, const uint32_t *frames, uint32_t depth);
uint32_t profile_thread_id(struct profile *p, pid_t pid, pid_t tid);
/* The process entry for pid, added (zeroed but for pid) when new. */
uint32_t profile_process_id(struct profile *p, pid_t pid);
/* The entry for pid, or NULL. */
const struct profile_process *profile_process_of(const struct profile *p, pid_t pid);

/* Counts one sample of thread in state with stack at time now_ns. */
int profile_add_sample(struct profile *p, uint32_t thread, uint32_t stack,
                       enum profile_state state, bool gc, uint64_t now_ns);
/* As profile_add_sample, for a sample that stands for weight passes (the
 * agent's quiet processes, sampled at one tick of several). */
int profile_add_samples(struct profile *p, uint32_t thread, uint32_t stack,
                        enum profile_state state, bool gc, uint64_t now_ns, uint32_t weight);
int profile_add_hog(struct profile *p, uint32_t stack, bool native);
/* Counts a pass that found a collection running on top of stack (the stack
 * without "<GC>"); new_collection when the collection was not running on
 * the previous pass. */
int profile_add_gc_trigger(struct profile *p, uint32_t stack, bool new_collection);

/* Appends one timeline segment (the sampler calls this when a thread's stack
 * or state changes, and once per thread at the end). */
int profile_add_segment(struct profile *p, const struct profile_segment *segment);
/* Calls fn for every segment in the order they were added; stops early when
 * fn returns non-zero, which it then returns. */
int profile_foreach_segment(const struct profile *p,
                            int (*fn)(void *ctx, const struct profile_segment *segment),
                            void *ctx);

/* Sorting helpers for writers: indexes of counts by descending samples. */
size_t *profile_counts_by_samples(const struct profile *p);

#endif
