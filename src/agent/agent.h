/* pyscope agent: one long-running process per host that finds every CPython
 * process, samples each at a low rate without stopping it, evaluates why on
 * each now and then, and serves the results over HTTP in the formats fleet
 * tools already collect (Prometheus text, pprof, Pyroscope push). One thread:
 * the HTTP server is driven from the same loop as the sampling, so nothing
 * is shared between threads. */
#ifndef PYSCOPE_AGENT_AGENT_H
#define PYSCOPE_AGENT_AGENT_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "report/why_report.h"
#include "profile/profile.h"
#include "diagnosis/hang.h"
#include "python/hang_live.h"
#include "sampling/ring.h"
#include "sampling/sampler.h"

#define AGENT_MAX_PIDS 64
#define AGENT_MAX_PPROF_SECONDS 60

struct agent_options {
    const char *listen;          /* HOST:PORT, default 127.0.0.1:9464 */
    double rate_hz;              /* requested passes per second per process */
    pid_t pids[AGENT_MAX_PIDS];  /* --pid: only these (none: every process) */
    int n_pids;
    const char *match;           /* --match: extended regex on the command line */
    double why_every_s;          /* how often why runs on each process */
    double cpu_budget;           /* fraction of one core the agent may use */
    bool debug_endpoints;        /* /debug/pyscope/dump and why */
    const char *push_url;        /* base URL of a Pyroscope-compatible server */
    double push_every_s;
    const char *app_name;        /* the application name pushed */
    const char *log_path;        /* NULL: stderr */
    double window_s;             /* samples kept, for /debug/pprof/profile */
    size_t max_bytes;            /* cap on the samples' memory */
    size_t max_processes;        /* sampled at once; more are listed as unreadable */
    bool bpf;                    /* --bpf: run_counter tells whether a process ran */
    unsigned idle_stride;        /* --idle-stride: at most one tick in this many for a quiet process */
};

enum agent_proc_state {
    AGENT_PROC_SAMPLING,
    AGENT_PROC_UNREADABLE,       /* looks like Python, cannot be read: retried */
    AGENT_PROC_IGNORED,          /* not Python, or not selected */
};

struct agent_thread {
    pid_t tid;
    char name[64];
    double seconds[PROFILE_STATE_COUNT];
    double gc_seconds;           /* of those, running the garbage collector */
    bool seen;                   /* in the newest pass */
    bool in_last_read;           /* in the newest pass that was read, with: */
    uint8_t last_state;          /* its state, */
    bool last_gc;                /* and whether it ran the collector */
    uint64_t last_seen_ns;
};

struct agent_proc {
    pid_t pid;
    enum agent_proc_state state;
    char command[256];
    char container[80];          /* the container id from its cgroup, or "" */
    char version[32];
    char reason[256];            /* why it cannot be read */
    int failures;                /* attempts in a row that failed */
    uint64_t retry_ns;
    uint64_t recheck_until_ns;   /* ignored, but looked at again until then: */
    uint64_t exe_hash;           /* at once when its executable changes (an exec), */
    uint64_t next_recheck_ns, recheck_step_ns; /* else at growing intervals */
    uint64_t next_exec_check_ns; /* and past recheck_until_ns, its executable */
    struct sampler *sampler;     /* when sampling */
    struct agent_hot *hot;       /* when sampling: what each pass touches */
    struct agent_thread *threads;
    size_t n_threads, cap_threads;
    size_t live_threads;         /* seen in the newest pass */
    /* Passes that repeated the last read one are counted here and credited
     * to its threads' states later (agent_settle), not thread by thread. */
    double still_seconds;
    uint64_t passes, passes_failed;
    double gc_seconds;
    uint64_t gc_collections;
    bool gc_running;
    /* why: the first snapshot waits here for the second */
    uint64_t next_why_ns;
    bool why_pending;
    uint64_t why_first_ns;
    uint64_t why_due_ns;          /* when the second snapshot is taken */
    bool why_again;               /* a request waits for the evaluation after the pending one */
    int why_settle_tries;         /* looks taken again so far (asyncio_caught_mid_step) */
    uint64_t why_settle_since_ns; /* ... since */
    pid_t why_settle_tid;         /* ... waiting for this loop thread to be asleep */
    /* The last look found no asyncio loop: the next does not read each
     * thread's CPU time before it too (which only a loop's thread needs). */
    bool why_loopless;
    struct hang_live why_first;
    /* Asked before the first snapshot and at the second's time: a process
     * none of whose threads ran in between is as the first found it. */
    struct run_clock why_clock;
    bool why_clock_open;
    struct waits_ctx *why_waits;
    bool why_known;
    enum why_verdict verdict;
    enum why_grade why_grade;
    char *why_summary;           /* the newest verdict's summary, for a parent's why */
    uint64_t why_done_ns;        /* when the newest evaluation ended */
    /* Since when this evaluation waits for those of children its threads
     * wait for (see children_pending), 0: it does not. */
    uint64_t why_children_since_ns;
    uint64_t why_generation;     /* evaluations done */
    char *why_json;              /* the newest evaluation, as why --json writes it */
    size_t why_json_len;
};

/* A sampled process's part of each tick, in one array for all processes
 * (a quiet process's pass touches nothing else; see struct sampler_still):
 * its repeat, and what a repeated pass adds up until the process is next
 * read or its counters are asked for (agent_settle). */
struct agent_hot {
    struct sampler_still st;
    struct agent_proc *proc;     /* NULL: a free entry */
    uint64_t last_pass_ns;
    size_t last_read_samples;    /* samples of the last read pass, all counted */
    double still_seconds;
    uint64_t passes;
    uint64_t why_at;             /* when its why (or its second snapshot) is due */
    /* A settled process is sampled at one tick, chosen at random, of each
     * stretch of stride ticks (see agent_next_stretch): skip ticks go by before
     * its next pass, after_pass of its stretch are left after that pass. */
    /* Share of recent ticks found unchanged (agent_next_stretch): 0, as a
     * new entry starts, is a process taken as changing at every tick. */
    double settled;
    uint8_t stride, skip, after_pass;
};

struct agent_http;

struct agent {
    struct agent_options opts;
    regex_t match;
    bool has_match;
    FILE *log;
    bool counting;               /* run_counter started: processes' runs counted by BPF */
    char counting_why_not[160];
    uint64_t start_ns;           /* monotonic: time 0 of the ring */
    uint64_t start_unix_ns;
    /* Frames, stacks and threads of every process are interned in one
     * profile, whose passes go to one ring: the pprof endpoint writes any
     * window of it. Rebuilt when it grows past a cap (see agent_proc.c). */
    struct profile profile;
    struct sample_ring ring;
    /* One page cache for every process's target: a pass reads one process
     * at a time and empties it first, so one does the work of all. */
    struct target_page_cache *page_cache;
    struct ring_sample *pass_scratch;
    size_t cap_pass_scratch;
    uint64_t resets;
    struct agent_proc **procs;   /* sorted by pid */
    struct agent_hot *hot;       /* one for each process sampled (opts.max_processes) */
    size_t n_hot;                /* entries ever used: the free ones among them are NULL */
    size_t n_sampling;           /* of them, sampled (see agent_scan) */
    size_t n_procs, cap_procs;
    /* When each of procs is next due a look from the scan (see revisit), and
     * whether all are (a process's state changed outside the scan). */
    uint64_t *procs_due;
    bool revisit_all;
    double rate_hz;              /* in force: lowered when over the CPU budget */
    bool budget_limited;
    unsigned why_scale;          /* why runs every why_every_s x this (the budget) */
    uint64_t interval_ns;
    uint64_t next_tick_ns, next_scan_ns, next_budget_ns, next_push_ns;
    double budget_cpu_s;         /* CPU seconds at the last budget check */
    uint64_t budget_at_ns;
    /* health */
    uint64_t samples, sample_errors, scans, ticks, ticks_late;
    /* /proc/loadavg at the last listing of /proc (see agent_scan), and when */
    uint64_t listed_threads, listed_last_pid, listed_ns;
    bool listed;
    /* process passes, and those that repeated the last because nothing ran */
    uint64_t passes, passes_repeated;
    uint64_t ticks_skipped;      /* a quiet process's ticks stood for by a pass at another */
    uint64_t stride_random;      /* xorshift state for the ticks chosen */
    uint64_t why_second_read, why_second_spared;
    bool clock_note_logged;
    /* Samplers freed since the allocator was last asked to give memory back. */
    size_t freed_since_trim;
    double lag_seconds;          /* summed lateness of passes behind the clock */
    uint64_t http_requests, push_ok, push_failed;
    char push_error[256];
    uint64_t push_from_ns;       /* ring time the next push starts at */
    struct agent_http *http;
    volatile int *stop;
    volatile int *reopen_log;
};

/* Sets the agent up (listening included); 0, or -1 after logging why. */
int agent_init(struct agent *a, const struct agent_options *opts);
/* Runs until *stop is set; *reopen_log set asks for the log to be reopened. */
void agent_run(struct agent *a, volatile int *stop, volatile int *reopen_log);
void agent_free(struct agent *a);

/* The port the HTTP server listens on. */
unsigned agent_port(const struct agent *a);

void agent_log(struct agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t agent_unix_ns(void);
double agent_cpu_seconds(void);

/* agent_proc.c: the process table */
void agent_scan(struct agent *a, uint64_t now_ns);
void agent_sample_all(struct agent *a, uint64_t now_ns);
/* After a pass over h's process (changed: it read a thread sampled
 * otherwise than at the read pass before; else it was repeated, or found
 * every thread as before): the stretch of ticks its next pass stands for,
 * and how many ticks go by before it. */
void agent_next_stretch(struct agent *a, struct agent_hot *h, bool changed);
void agent_why_step(struct agent *a, uint64_t now_ns);
/* When agent_why_step has a look to take next (monotonic ns). */
uint64_t agent_why_deadline(const struct agent *a);
struct agent_proc *agent_find(struct agent *a, pid_t pid);
/* Brings p's counters up to date (the repeated passes not yet credited). */
void agent_settle(struct agent_proc *p, uint64_t now_ns);
void agent_procs_free(struct agent *a);
/* After a change to p's why schedule (next_why_ns, why_due_ns, why_pending). */
void agent_why_due_changed(struct agent_proc *p);
/* The JSON of dump for one process (without locals), malloc'ed; NULL with
 * *status set to an HTTP status when it cannot be had. */
char *agent_dump_json(struct agent *a, struct agent_proc *p, size_t *len, int *status);

/* agent_discovery.c: what /proc says about a process */
bool agent_looks_python(pid_t pid);
/* A hash of the path its executable links to (0: none), to notice an exec. */
uint64_t agent_exe_hash(pid_t pid);
void agent_container_id(pid_t pid, char *out, size_t outsize);
/* The host's thread count and the last pid handed out, from the text of
 * /proc/loadavg: false if it does not parse. */
bool agent_pids_from_loadavg(const char *text, uint64_t *threads, uint64_t *last_pid);
/* The same from the text of a /proc/PID/cgroup file. */
void agent_container_from_cgroup(const char *text, char *out, size_t outsize);

/* agent_metrics.c */
char *agent_metrics(struct agent *a, size_t *len);

/* agent_profile.c: a pprof of the ring between two times, of one pid or all */
char *agent_pprof(struct agent *a, uint64_t start_ns, uint64_t end_ns, pid_t pid, size_t *len);

/* agent_http.c */
int agent_http_start(struct agent *a);
/* Waits for HTTP activity until deadline_ns at most, and serves it. */
void agent_http_poll(struct agent *a, uint64_t deadline_ns);
void agent_http_stop(struct agent *a);

/* agent_push.c: one push of the ring's newest stretch; 0 or -1 */
int agent_push(struct agent *a, uint64_t now_ns);
int agent_push_url_valid(const char *url);

#endif
