/* The sampling engine: one pass reads every thread's Python stack and GIL
 * state of one process, without stopping it, and hands them to a sink (the
 * profile, or the flight recorder's ring). */
#ifndef PYSCOPE_SAMPLING_SAMPLER_H
#define PYSCOPE_SAMPLING_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile/profile.h"
#include "profile/sample_sink.h"
#include "python/code.h"
#include "python/frames.h"
#include "python/runtime.h"
#include "python/threads.h"
#include "target/run_clock.h"
#include "util/addrset.h"
#include "util/error.h"

struct sampled_thread;
struct frame_key_cache;
struct callable_cache;
struct py_vars_cache;
struct pass_thread;
struct async_stacks;
struct native_sampler;

struct chain_entry {
    uint64_t tstate;
    uint64_t thread_id;
    int interp;
    uint64_t cframe;          /* 3.11/3.12: the thread's _PyCFrame last time */
    uint64_t cframe_top;      /* read with the thread state: its current_frame */
    bool cframe_ok;
    bool cframe_assumed;      /* not read: the thread is parked idle, the last one stands */
    bool top_kept;            /* not read either: the thread stood still at a call (top_keepable) */
    bool ts_skipped;          /* its thread state not read: the last pass's block stands */
};

/* What one pass found, besides each thread's sample. */
struct pass_summary {
    bool failed, gc_now, waiters;
    uint64_t holder, switches;      /* the main interpreter's GIL holder */
    uint32_t holder_stack;
    uint64_t sampled, torn;         /* stacks read, and of those torn */
    uint64_t changed;               /* threads not sampled as at their last pass */
};

/* What a pass over a process none of whose threads has run since the last
 * pass that read every thread whole (target/run_clock.h) uses: it gives
 * that pass's samples once more instead of reading (the agent's). Apart
 * from the 50 KB sampler so that an agent can keep those of all its
 * processes side by side: a quiet fleet's passes then touch a few pages at
 * each tick, not a sampler each (on this VM, the first touch of each was
 * most of what such a pass cost besides the look). */
enum still_pending { STILL_LOOK, STILL_READ, STILL_ADD };
struct sampler_still {
    struct run_clock clock;
    bool clock_open;
    bool usable;                      /* turned on and clock_open, no C or task stacks */
    bool repeatable;                  /* the last pass read every thread whole */
    /* What sampler_still_pass left to the next sampler_pass: nothing (it
     * looks itself), a read, or the samples of a repeat the sink could not
     * copy, added one by one to the pass it opened. */
    enum still_pending pending;
    unsigned clock_ran, clock_skip;   /* looks in a row that found it had run; passes to skip */
    struct pass_summary last_sum;
    struct sink_mark last_mark;       /* where the sink put the last pass */
    uint64_t passes_repeated;
    /* Read passes that found every thread as the read pass before did (the
     * same threads, each at the same stack in the same state). */
    uint64_t passes_alike;
    /* GIL-hog tracking: the holder and the switch count, and since when they
     * have not changed. */
    uint64_t hold_tstate, hold_switches, hold_since_ns;
    bool gc_was_collecting;
    /* the sampler's, as they were when the repeat was turned on */
    struct sample_sink *sink;
    struct profile *profile;
    uint32_t profile_process;
    uint64_t start_ns;
};

struct sampler {
    pid_t pid;
    struct target *target;
    struct py_runtime rt;
    struct py_reader reader;
    struct py_code_cache *codes;
    struct frame_key_cache *frame_keys;
    struct callable_cache *callables;  /* call sites and C callables, as frame ids */
    struct py_vars_cache *vars;
    struct py_frame *frames;          /* scratch for one walk */
    uint32_t *stack_ids;              /* scratch: frame ids of one stack */
    uint32_t *walk_ids;               /* scratch: ids of the frames one walk read */
    struct sampled_thread *threads;
    size_t n_threads, cap_threads;
    size_t find_hint;                 /* where find_thread looks first */
    struct profile *profile;
    uint32_t profile_process;         /* its entry in profile->processes */
    /* Where each pass's samples go: by default profile_sink, into the
     * profile's counts, hogs and timeline. Whatever the sink, the profile
     * interns the frames, stacks and threads, and keeps the running totals. */
    struct sample_sink *sink;
    struct profile_sink profile_sink;
    /* With --async: loop threads' samples as task stacks (NULL: as sampled). */
    struct async_stacks *tasks;
    bool tasks_waiting;               /* --async --idle: suspended tasks too */
    /* interpreters, re-read every 100 ms */
    struct py_interp interps[PY_MAX_INTERPRETERS];
    uint64_t gil_bufs[PY_MAX_INTERPRETERS][64];   /* copies of each GIL struct */
    uint64_t last_holders[PY_MAX_INTERPRETERS];   /* gil->last_holder, locked or not */
    bool gil_quiet[PY_MAX_INTERPRETERS];          /* no switch between the last two reads */
    /* Each GIL's switch count and last holder read first and last in the
     * pass's first read, and whether no thread but that holder can have
     * taken it in between. */
    uint64_t gil_start[PY_MAX_INTERPRETERS][2];
    uint64_t gil_end[PY_MAX_INTERPRETERS][2];
    bool gil_steady[PY_MAX_INTERPRETERS];
    uint64_t heads[PY_MAX_INTERPRETERS];
    int32_t gc_flags[PY_MAX_INTERPRETERS];
    int n_interps;
    uint64_t interps_read_ns;
    /* the thread list as the last pass found it, and per-pass scratch */
    struct chain_entry *chain;
    size_t n_chain, cap_chain;
    struct pass_thread *pass;
    unsigned char *blocks;
    size_t cap_pass;
    struct target_span *spans;
    size_t cap_spans;
    struct addrset walked;            /* thread states one walk has read */
    uint64_t image_id;                /* process_image_id when opened */
    bool exec_seen;                   /* the process has exec'd: the end of its recording */
    bool fds_exhausted;               /* some threads' syscall files are opened per read */
    size_t kept_fds, fd_budget;       /* syscall files kept open, and how many may be */
    bool recheck_running;             /* look twice at threads on CPU without the GIL */
    /* Check every cached code object against the target on every pass, so
     * that a freed one whose address is reused is never shown under its old
     * name (costs a read per code page per pass). */
    bool verify_codes;
    /* With verify_codes, still take the frames a walk finds unchanged from
     * the stack memo: a frame still on the stack holds its code object, so
     * the check made when it was walked stands (the agent's setting). */
    bool memo_verified;
    /* How often the interpreters are looked up again and an exec looked
     * for (0: every 100 ms); a pass whose thread list does not link up
     * looks at once. */
    uint64_t interp_refresh_ns;
    /* A thread its syscall file found idle, still in the same frame at the
     * same instruction, is taken to be idle there without a read for this
     * long (0: read every pass). */
    uint64_t idle_recheck_ns;
    /* How often the names of known threads are read again (0: every second;
     * a thread new since the last reading is named within a second). */
    uint64_t names_refresh_ns;
    /* A parked thread (waiting for the GIL, or idle where it was) that has
     * not taken the GIL since its thread state was last read has not run
     * Python code since: its thread state is not read again (the agent's
     * setting; see quiet_since_read in sampler.c). */
    bool skip_quiet_tstates;
    /* The repeat of a still process's pass (see struct sampler_still): in
     * own_still unless the owner keeps it elsewhere. */
    struct sampler_still *st;
    struct sampler_still own_still;
    bool chain_blocks;                /* s->blocks hold the chain's thread states */
    bool thread_unnamed;
    uint64_t start_ns;                /* monotonic time of the first pass */
    uint64_t last_names_ns;           /* when thread names were last refreshed */
    uint64_t last_code_flush_ns;
    /* --native: each sample's C stack, merged with its Python stack */
    struct native_sampler *native;
    bool *entry_flags;                /* scratch: is_entry of one walk's frames */
    uint64_t states_read_ns;          /* when this pass had read the GIL's state */
    uint32_t gc_frame;                /* the "<GC>" pseudo-frame */
};

/* Attaches to pid (which must run CPython); samples go into profile (with a
 * timeline) until s->sink is pointed elsewhere. */
int sampler_open(struct sampler *s, pid_t pid, struct profile *profile, uint64_t start_ns,
                 struct pyscope_error *err);
/* Cuts its caches of frame ids and call sites to an eighth (what a process
 * sampled at a low rate needs): right after sampler_open; 0 or -1. */
int sampler_small_caches(struct sampler *s);
/* One pass over all threads at monotonic time now_ns. Returns 0, or -1 when
 * the process is gone. */
int sampler_pass(struct sampler *s, uint64_t now_ns);
/* The agent's: passes over a process that has not run since the last one
 * repeat its samples, with s->sink as it is now. The state of that is kept
 * at home (NULL: in the sampler), which must stay put until sampler_close.
 * -1 when the kernel's counters cannot be had (s->st->clock.why_not says
 * why): every pass then reads the process. */
int sampler_repeat_still(struct sampler *s, struct sampler_still *home);
/* A pass over the process of st without its sampler, when the clock shows
 * that none of its threads has run: true if it was made. Else the next
 * sampler_pass makes it (without looking at the clock again). */
bool sampler_still_pass(struct sampler_still *st, uint64_t now_ns);
/* A thread's threading name as the sampler last read it (stacks_names's
 * name_of, ctx the sampler): new threads are named within a second, the
 * others looked at again every names_refresh_ns. */
bool sampler_thread_name(void *ctx, uint64_t thread_id, pid_t tid, char out[64]);
/* The clock the next pass will look at (for run_clock_look_all, which looks
 * at many processes' at once), or NULL when it will not look. */
struct run_clock *sampler_clock_to_look(struct sampler_still *st);
/* Turns on --async's task stacks; -1 when the target has no asyncio layout. */
int sampler_enable_tasks(struct sampler *s);
/* --native: every sample also carries the thread's C stack (mode: an enum
 * native_mode of native/native_sampler.h). *note says how, when it is the
 * fallback or limited. */
int sampler_enable_native(struct sampler *s, int mode, bool all, double rate_hz, char *note,
                          size_t note_size, struct pyscope_error *err);
/* Closes every open timeline segment at now_ns and releases everything. */
void sampler_close(struct sampler *s, uint64_t now_ns);

uint64_t monotonic_ns(void);

#endif
