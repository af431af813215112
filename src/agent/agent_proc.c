/* The agent's process table: which processes of the host are sampled, which
 * cannot be read and why (retried with a growing delay), per-thread seconds
 * by GIL state for the metrics, and the periodic why, whose two snapshots
 * are taken on two turns of the loop so that no process waits for another. */
#include "agent/agent.h"

#include <ctype.h>
#include <dirent.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diagnosis/asyncio_why.h"
#include "output/dump_writers.h"
#include "output/why_writers.h"
#include "python/collect.h"
#include "python/stacks.h"
#include "python/waits.h"
#include "target/proc_file.h"
#include "target/process.h"
#include "target/proctree.h"

#define WHY_INTERVAL_NS 150000000ull   /* between why's two snapshots, as why's default */
#define RECHECK_NEW_NS 10000000000ull  /* a new process is looked at again this long */
#define RECHECK_FIRST_NS 1000000000ull
#define EXEC_CHECK_NS 2000000000ull     /* then its executable this often */
#define WHY_JSON_MAX (4u << 20)      /* bytes of why --json kept per process */
#define THREAD_FORGET_NS 5000000000ull /* a thread unseen this long has exited */
/* The shared profile is rebuilt past these: memory stays bounded however
 * many distinct stacks the host's processes go through. */
#define PROFILE_MAX_STACKS 200000
#define PROFILE_MAX_FRAMES 200000
#define PROFILE_MAX_THREADS 50000
#define PROFILE_DEAD_THREADS_MIN 8192

static const uint64_t retry_ns[] = {250000000ull, 500000000ull, 1000000000ull, 2000000000ull,
                                    5000000000ull, 10000000000ull};

struct agent_proc *agent_find(struct agent *a, pid_t pid)
{
    size_t lo = 0, hi = a->n_procs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->procs[mid]->pid == pid)
            return a->procs[mid];
        if (a->procs[mid]->pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void why_reset(struct agent_proc *p)
{
    p->why_settle_tries = 0;
    p->why_settle_tid = 0;
    p->why_children_since_ns = 0;
    if (p->why_pending) {
        hang_live_free(&p->why_first);
        waits_free(p->why_waits);
        p->why_waits = NULL;
        p->why_pending = false;
    }
}

/* What the process's repeated passes added since it was last settled,
 * into its own counters. */
static void fold_hot(struct agent_proc *p)
{
    if (!p->hot)
        return;
    p->still_seconds += p->hot->still_seconds;
    p->hot->still_seconds = 0;
    p->passes += p->hot->passes;
    p->hot->passes = 0;
}

static struct agent_hot *hot_new(struct agent *a, struct agent_proc *p)
{
    for (size_t i = 0; a->hot && i < a->opts.max_processes; i++) {
        struct agent_hot *h = &a->hot[i];
        if (h->proc)
            continue;
        memset(h, 0, sizeof *h);
        h->proc = p;
        if (i >= a->n_hot)
            a->n_hot = i + 1;
        return h;
    }
    return NULL;
}

static void detach(struct agent *a, struct agent_proc *p, uint64_t now_ns)
{
    why_reset(p);
    p->why_again = false;
    if (p->why_clock_open)
        run_clock_close(&p->why_clock);
    p->why_clock_open = false;
    fold_hot(p);
    if (p->sampler) {
        sampler_close(p->sampler, now_ns);
        free(p->sampler);
        p->sampler = NULL;
        a->freed_since_trim++;
    }
    if (p->hot) {
        memset(p->hot, 0, sizeof *p->hot);
        p->hot = NULL;
    }
}

static void proc_free(struct agent *a, struct agent_proc *p)
{
    detach(a, p, monotonic_ns());
    free(p->threads);
    free(p->why_json);
    free(p->why_summary);
    free(p);
}

void agent_procs_free(struct agent *a)
{
    for (size_t i = 0; i < a->n_procs; i++)
        proc_free(a, a->procs[i]);
    free(a->procs);
    free(a->procs_due);
    a->procs = NULL;
    a->procs_due = NULL;
    a->n_procs = a->cap_procs = 0;
}

static bool selected(struct agent *a, pid_t pid)
{
    if (a->opts.n_pids == 0)
        return true;
    for (int i = 0; i < a->opts.n_pids; i++)
        if (a->opts.pids[i] == pid)
            return true;
    return false;
}

static void attach(struct agent *a, struct agent_proc *p, uint64_t now_ns)
{
    struct pyscope_error err = {0};
    bool full = a->n_sampling >= a->opts.max_processes;
    struct agent_hot *hot = full ? NULL : hot_new(a, p);
    full = full || !hot;
    struct sampler *s = full ? NULL : calloc(1, sizeof *s);
    int opened = -1;
    if (full) {
        snprintf(p->reason, sizeof p->reason, "already sampling --max-processes %zu processes",
                 a->opts.max_processes);
    } else if (!s) {
        snprintf(p->reason, sizeof p->reason, "out of memory");
    } else if ((opened = sampler_open(s, p->pid, &a->profile, a->start_ns, &err)) == 0 &&
               sampler_small_caches(s) != 0) {
        sampler_close(s, monotonic_ns());
        free(s);
        snprintf(p->reason, sizeof p->reason, "out of memory");
    } else if (opened == 0) {
        s->sink = &a->ring.sink;
        /* As record at its usual rates: a second look at threads on CPU
         * without the GIL, and cached code objects checked when a walk reads
         * their frames. What a low rate over many processes can spare: the
         * interpreters looked up every second, known threads' names every
         * ten, idle threads' syscall files read four times a second while
         * they stay in the same call, and parked threads' thread states only
         * when the GIL shows they may have run. */
        s->recheck_running = true;
        s->verify_codes = true;
        s->memo_verified = true;
        s->interp_refresh_ns = 1000000000ull;
        s->idle_recheck_ns = 250000000ull;
        s->names_refresh_ns = 10000000000ull;
        s->skip_quiet_tstates = true;
        /* A process none of whose threads has run since the last pass is
         * not read again (most of a quiet host's passes). */
        if (sampler_repeat_still(s, &hot->st) != 0 && !a->clock_note_logged) {
            a->clock_note_logged = true;
            agent_log(a, "every pass reads its process, even one that has not run since the "
                         "last: no CPU clock for process %d (%s)", (int)p->pid,
                      s->st->clock.why_not);
        }
        if (a->page_cache)
            target_cache_use(s->target, a->page_cache);
        else
            a->page_cache = target_cache_hold(s->target);
        p->sampler = s;
        p->hot = hot;
        p->state = AGENT_PROC_SAMPLING;
        a->n_sampling++;
        p->failures = 0;
        p->reason[0] = '\0';
        snprintf(p->version, sizeof p->version, "%s", s->rt.version);
        if (s->profile_process < a->profile.n_processes)
            snprintf(a->profile.processes[s->profile_process].command,
                     sizeof a->profile.processes[s->profile_process].command, "%s", p->command);
        /* The first why soon after attaching, then at the configured pace. */
        p->next_why_ns = now_ns + 1000000000ull;
        agent_why_due_changed(p);
        agent_log(a, "sampling process %d (CPython %s)%s%s: %s", (int)p->pid, p->version,
                  p->container[0] ? " in container " : "", p->container, p->command);
        return;
    } else {
        free(s);
        snprintf(p->reason, sizeof p->reason, "%.*s", (int)sizeof p->reason - 1, err.message);
        if (err.status == PYSCOPE_ERR_NO_PROCESS || err.status == PYSCOPE_ERR_EXITED) {
            p->state = AGENT_PROC_IGNORED; /* gone: dropped at the next scan */
            if (hot)
                hot->proc = NULL;
            return;
        }
    }
    if (hot)
        hot->proc = NULL;
    if (p->state != AGENT_PROC_UNREADABLE || p->failures == 2)
        agent_log(a, "process %d cannot be read (retried later): %s", (int)p->pid, p->reason);
    p->state = AGENT_PROC_UNREADABLE;
    size_t step = (size_t)p->failures < sizeof retry_ns / sizeof retry_ns[0]
                      ? (size_t)p->failures
                      : sizeof retry_ns / sizeof retry_ns[0] - 1;
    p->retry_ns = now_ns + retry_ns[step];
    p->failures++;
}

/* Whether to sample p, from what /proc shows now. */
static void consider(struct agent *a, struct agent_proc *p, uint64_t now_ns)
{
    bool explicit = a->opts.n_pids > 0;
    if (!selected(a, p->pid))
        return;
    /* The cheap tests first: the command line against --match, the
     * executable's name, and only then its maps (large for a large process). */
    process_cmdline(p->pid, p->command, sizeof p->command);
    if (a->has_match && regexec(&a->match, p->command, 0, NULL, 0) != 0)
        return;
    if (!explicit && !agent_looks_python(p->pid))
        return;
    agent_container_id(p->pid, p->container, sizeof p->container);
    attach(a, p, now_ns);
}

static struct agent_proc *proc_new(struct agent *a, pid_t pid, uint64_t now_ns)
{
    struct agent_proc *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->pid = pid;
    p->state = AGENT_PROC_IGNORED;
    /* A process found between fork and exec, or a wrapper (a shell, env)
     * that execs Python, is not Python yet: looked at again for a while. */
    p->recheck_until_ns = now_ns + RECHECK_NEW_NS;
    p->exe_hash = agent_exe_hash(pid);
    p->recheck_step_ns = RECHECK_FIRST_NS;
    p->next_recheck_ns = now_ns + RECHECK_FIRST_NS;
    consider(a, p, now_ns);
    return p;
}

/* A process not (yet) taken up: looked at again as soon as it execs, and
 * else 1, 3 and 7 s after it was found, for a wrapper that execs Python or a program
 * that loads libpython a moment after it starts, so that a busy host's
 * other processes cost a few looks each rather than one every scan. Past
 * those 10 s, only its executable is looked at, every EXEC_CHECK_NS: a
 * wrapper may wait far longer (for a database, say) before its exec. A
 * kernel thread (no executable) never execs. */
static void recheck(struct agent *a, struct agent_proc *p, uint64_t now_ns)
{
    bool early = now_ns < p->recheck_until_ns;
    if (!early && (!p->exe_hash || now_ns < p->next_exec_check_ns))
        return;
    uint64_t exe = agent_exe_hash(p->pid);
    if (!early)
        p->next_exec_check_ns = now_ns + EXEC_CHECK_NS;
    if (exe == p->exe_hash && (!early || now_ns < p->next_recheck_ns))
        return;
    if (exe == p->exe_hash)
        p->recheck_step_ns *= 2;
    p->exe_hash = exe;
    p->next_recheck_ns = now_ns + p->recheck_step_ns;
    consider(a, p, now_ns);
}

static int cmp_pid(const void *x, const void *y)
{
    pid_t a = *(const pid_t *)x, b = *(const pid_t *)y;
    return (a > b) - (a < b);
}

/* Whether /proc must be listed again: no thread created (the last pid handed
 * out has not moved) and none ended (the host's thread count has not moved)
 * means the same processes as at the last listing. An exec keeps its pid:
 * rechecks look for it without a listing. A listing at least every
 * LIST_EVERY_NS all the same, in case a pid namespace hides a change. */
#define LIST_EVERY_NS 10000000000ull
static bool listing_due(struct agent *a, uint64_t now_ns)
{
    char text[256];
    uint64_t threads = 0, last_pid = 0;
    bool known = proc_read_text("/proc/loadavg", text, sizeof text) == 0 &&
                 agent_pids_from_loadavg(text, &threads, &last_pid);
    bool due = !known || !a->listed || threads != a->listed_threads ||
               last_pid != a->listed_last_pid || now_ns - a->listed_ns >= LIST_EVERY_NS;
    if (due) {
        a->listed = known;
        a->listed_threads = threads;
        a->listed_last_pid = last_pid;
        a->listed_ns = now_ns;
    }
    return due;
}

/* When the scan has something to do for p next (recheck, attach). */
static uint64_t revisit_due(const struct agent_proc *p, uint64_t now_ns)
{
    switch (p->state) {
    case AGENT_PROC_IGNORED:
        if (now_ns < p->recheck_until_ns)
            return now_ns; /* at every scan */
        return p->exe_hash ? p->next_exec_check_ns : UINT64_MAX;
    case AGENT_PROC_UNREADABLE:
        return p->retry_ns;
    default:
        return UINT64_MAX;
    }
}

/* What a scan does for the processes it knows: a wrapper that may have
 * exec'd Python looked at again, an unreadable process retried. Only those
 * due are touched: most of a host's processes are looked at every 2 s, and
 * the sampled ones not at all (a look at each process's entry every second,
 * none touched since, cost this VM's agent as much as all the repeated
 * passes). */
static void revisit(struct agent *a, uint64_t now_ns)
{
    bool all = a->revisit_all || !a->procs_due;
    a->revisit_all = false;
    for (size_t i = 0; i < a->n_procs; i++) {
        if (!all && now_ns < a->procs_due[i])
            continue;
        struct agent_proc *p = a->procs[i];
        if (p->state == AGENT_PROC_IGNORED)
            recheck(a, p, now_ns);
        if (p->state == AGENT_PROC_UNREADABLE && now_ns >= p->retry_ns)
            attach(a, p, now_ns);
        if (a->procs_due)
            a->procs_due[i] = revisit_due(p, now_ns);
    }
}

void agent_scan(struct agent *a, uint64_t now_ns)
{
    /* Counted from the entries, not the processes: a look at every process
     * each second, none of them touched since, cost this VM's agent about as
     * much as all the passes over the repeated ones. */
    a->n_sampling = 0;
    for (size_t i = 0; i < a->n_hot; i++)
        a->n_sampling += a->hot[i].proc != NULL;
    if (!listing_due(a, now_ns)) {
        revisit(a, now_ns);
        return;
    }
    DIR *d = opendir("/proc");
    if (!d)
        return;
    size_t n = 0, cap = 1024;
    pid_t *pids = malloc(cap * sizeof *pids);
    struct dirent *e;
    pid_t self = getpid();
    while (pids && (e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0 || pid == self)
            continue;
        if (n == cap) {
            pid_t *grown = realloc(pids, 2 * cap * sizeof *pids);
            if (!grown)
                break;
            pids = grown;
            cap *= 2;
        }
        pids[n++] = pid;
    }
    closedir(d);
    if (!pids)
        return;
    qsort(pids, n, sizeof *pids, cmp_pid);
    a->scans++;

    /* Merge the sorted table with the sorted listing: gone entries are
     * dropped, new ones looked at once. */
    struct agent_proc **next = malloc((n ? n : 1) * sizeof *next);
    uint64_t *due = calloc(n ? n : 1, sizeof *due); /* all due now */
    if (!next || !due) {
        free(next);
        free(due);
        free(pids);
        return;
    }
    size_t k = 0, j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < a->n_procs && a->procs[j]->pid < pids[i]) {
            proc_free(a, a->procs[j++]);
        }
        struct agent_proc *p = NULL;
        if (j < a->n_procs && a->procs[j]->pid == pids[i])
            p = a->procs[j++];
        else
            p = proc_new(a, pids[i], now_ns);
        if (p)
            next[k++] = p;
    }
    while (j < a->n_procs) {
        proc_free(a, a->procs[j++]);
    }
    /* Each sampler's buffers come and go with its process, mostly freed by the
     * pass that finds it gone rather than here: what they held is given back
     * to the system at the next scan, so that churn leaves memory flat. */
    if (a->freed_since_trim) {
        malloc_trim(0);
        a->freed_since_trim = 0;
    }
    free(a->procs);
    free(a->procs_due);
    a->procs = next;
    a->procs_due = due;
    a->n_procs = k;
    a->cap_procs = n;
    free(pids);
    revisit(a, now_ns);
}

static struct agent_thread *thread_of(struct agent_proc *p, pid_t tid, size_t hint)
{
    if (hint < p->n_threads && p->threads[hint].tid == tid)
        return &p->threads[hint];
    for (size_t i = 0; i < p->n_threads; i++)
        if (p->threads[i].tid == tid)
            return &p->threads[i];
    if (p->n_threads == p->cap_threads) {
        size_t cap = p->cap_threads ? 2 * p->cap_threads : 8;
        struct agent_thread *grown = realloc(p->threads, cap * sizeof *grown);
        if (!grown)
            return NULL;
        p->threads = grown;
        p->cap_threads = cap;
    }
    struct agent_thread *t = &p->threads[p->n_threads++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    t->last_seen_ns = monotonic_ns();
    return t;
}

/* Threads not seen for a while have exited: their series end. */
static void forget_threads(struct agent_proc *p, uint64_t now_ns)
{
    size_t live = 0, kept = 0;
    for (size_t i = 0; i < p->n_threads; i++) {
        struct agent_thread *t = &p->threads[i];
        if (t->seen) {
            live++;
            t->last_seen_ns = now_ns;
        }
        t->seen = false;
        if (now_ns - t->last_seen_ns < THREAD_FORGET_NS)
            p->threads[kept++] = *t;
    }
    p->n_threads = kept;
    p->live_threads = live;
}

void agent_settle(struct agent_proc *p, uint64_t now_ns)
{
    fold_hot(p);
    if (p->still_seconds <= 0)
        return;
    double dt = p->still_seconds;
    p->still_seconds = 0;
    for (size_t i = 0; i < p->n_threads; i++) {
        struct agent_thread *t = &p->threads[i];
        if (!t->in_last_read)
            continue;
        t->seconds[t->last_state] += dt;
        if (t->last_gc)
            t->gc_seconds += dt;
        t->seen = true;
    }
    if (p->gc_running)
        p->gc_seconds += dt;
    forget_threads(p, now_ns);
}

/* Adds the newest pass to the process's counters: each thread's state
 * lasted since the previous pass (at most two intervals: a pass that came
 * late does not credit a state with time nobody saw). A pass that repeated
 * the last read one (nothing ran) only adds to still_seconds: a quiet
 * process then costs the same whatever its number of threads. */
static double pass_span(struct agent *a, struct agent_hot *h, uint64_t now_ns)
{
    if (h->stride > 1) {
        /* Its stretch's ticks, as its samples in the profile; the pass
         * after it counts from the stretch's last tick. */
        h->last_pass_ns = now_ns + h->after_pass * a->interval_ns;
        return (double)(h->stride * a->interval_ns) / 1e9;
    }
    uint64_t dt_ns = a->interval_ns;
    if (h->last_pass_ns && now_ns > h->last_pass_ns) {
        dt_ns = now_ns - h->last_pass_ns;
        if (dt_ns > 2 * a->interval_ns)
            dt_ns = 2 * a->interval_ns;
    }
    h->last_pass_ns = now_ns;
    return (double)dt_ns / 1e9;
}

/* A repeated pass, when the last read one was counted whole: its time
 * waits in still_seconds (false: it must be counted as a read one). */
static bool account_still(struct agent *a, struct agent_hot *h, uint64_t now_ns)
{
    if (!h->last_read_samples)
        return false;
    h->still_seconds += pass_span(a, h, now_ns);
    a->samples += h->last_read_samples;
    return true;
}

static void account_pass(struct agent *a, struct agent_proc *p, uint64_t now_ns, bool repeated)
{
    struct agent_hot *h = p->hot;
    if (repeated && account_still(a, h, now_ns))
        return;
    double dt = pass_span(a, h, now_ns);
    agent_settle(p, now_ns);
    size_t n = sample_ring_last_pass(&a->ring, a->pass_scratch, a->cap_pass_scratch);
    if (n > a->cap_pass_scratch) {
        size_t cap = n * 2;
        struct ring_sample *grown = realloc(a->pass_scratch, cap * sizeof *grown);
        if (grown) {
            a->pass_scratch = grown;
            a->cap_pass_scratch = cap;
        }
        n = sample_ring_last_pass(&a->ring, a->pass_scratch, a->cap_pass_scratch);
        if (n > a->cap_pass_scratch)
            n = a->cap_pass_scratch;
    }
    for (size_t i = 0; i < p->n_threads; i++)
        p->threads[i].in_last_read = false;
    bool gc = false;
    size_t counted = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ring_sample *s = &a->pass_scratch[i];
        if (s->thread >= a->profile.n_threads || s->state >= PROFILE_STATE_COUNT)
            continue;
        const struct profile_thread *pt = &a->profile.threads[s->thread];
        struct agent_thread *t = thread_of(p, pt->tid, i);
        if (!t)
            continue;
        memcpy(t->name, pt->name, sizeof t->name);
        t->seconds[s->state] += dt;
        if (s->gc) {
            t->gc_seconds += dt;
            gc = true;
        }
        t->seen = true;
        t->in_last_read = true;
        t->last_state = s->state;
        t->last_gc = s->gc;
        t->name[sizeof t->name - 1] = '\0';
        counted++;
    }
    a->samples += n;
    h->last_read_samples = counted == n ? n : 0;
    if (gc) {
        p->gc_seconds += dt;
        if (!p->gc_running)
            p->gc_collections++;
    }
    p->gc_running = gc;
    forget_threads(p, now_ns);
}

/* Frames, stacks or threads past the caps: every sampler is reopened on a
 * fresh profile and ring (the window restarts; counters go on). */
static void maybe_reset(struct agent *a, uint64_t now_ns)
{
    if (a->profile.n_stacks < PROFILE_MAX_STACKS && a->profile.n_frames < PROFILE_MAX_FRAMES &&
        a->profile.n_threads <= PROFILE_DEAD_THREADS_MIN)
        return; /* the common case, without a walk of the table at every tick */
    /* Threads (and processes) that are gone stay interned: under churn they
     * would fill the cap, at most a few times the live ones are kept. */
    size_t live = 0;
    for (size_t i = 0; i < a->n_procs; i++)
        live += a->procs[i]->live_threads;
    bool dead_threads = a->profile.n_threads > PROFILE_DEAD_THREADS_MIN &&
                        a->profile.n_threads > 4 * live;
    if (a->profile.n_stacks < PROFILE_MAX_STACKS && a->profile.n_frames < PROFILE_MAX_FRAMES &&
        a->profile.n_threads < PROFILE_MAX_THREADS && !dead_threads)
        return;
    for (size_t i = 0; i < a->n_procs; i++)
        if (a->procs[i]->state == AGENT_PROC_SAMPLING)
            detach(a, a->procs[i], now_ns);
    a->n_sampling = 0;
    a->revisit_all = true; /* one not attached again is retried */
    struct profile fresh;
    struct sample_ring ring;
    if (profile_init(&fresh) != 0 ||
        sample_ring_init(&ring, (uint64_t)(a->opts.window_s * 1e9), a->opts.rate_hz * 64,
                         a->opts.max_bytes) != 0) {
        agent_log(a, "out of memory rebuilding the profile");
        return;
    }
    fresh.meta = a->profile.meta;
    profile_free(&a->profile);
    sample_ring_free(&a->ring);
    a->profile = fresh;
    a->ring = ring;
    a->resets++;
    for (size_t i = 0; i < a->n_procs; i++)
        if (a->procs[i]->state == AGENT_PROC_SAMPLING)
            attach(a, a->procs[i], now_ns);
}

/* Whether each process has run since its last pass, asked of the kernel
 * for all of them at once (run_clock_look_all sends up to 64 to a message:
 * handed over as many at a time, nothing is allocated on each tick). */
static void look_ahead(struct agent *a)
{
    struct run_clock *clocks[64];
    size_t n = 0;
    for (size_t i = 0; i < a->n_hot; i++) {
        struct run_clock *c = a->hot[i].proc && !a->hot[i].skip
                                  ? sampler_clock_to_look(&a->hot[i].st)
                                  : NULL;
        if (c)
            clocks[n++] = c;
        if (n == sizeof clocks / sizeof clocks[0]) {
            run_clock_look_all(clocks, n);
            n = 0;
        }
    }
    if (n)
        run_clock_look_all(clocks, n);
}

/* A pass made by p's sampler: a read, or a repeat its entry could not
 * make alone (the sink could not copy the last samples). */
static void read_pass(struct agent *a, struct agent_proc *p, uint64_t now_ns)
{
    uint64_t failed_before = a->profile.meta.passes_failed;
    uint64_t repeated_before = p->hot->st.passes_repeated;
    if (sampler_pass(p->sampler, monotonic_ns()) != 0) {
        bool exec = p->sampler->exec_seen;
        detach(a, p, now_ns);
        if (a->n_sampling)
            a->n_sampling--;
        a->revisit_all = true;
        if (exec) {
            /* The new program may be Python again: looked at afresh. */
            p->state = AGENT_PROC_UNREADABLE;
            p->failures = 0;
            p->retry_ns = now_ns;
            snprintf(p->reason, sizeof p->reason, "exec'd a new program");
            process_cmdline(p->pid, p->command, sizeof p->command);
        } else {
            p->state = AGENT_PROC_IGNORED; /* exited: dropped at the next scan */
        }
        return;
    }
    p->passes++;
    a->passes++;
    bool repeated = p->hot->st.passes_repeated != repeated_before;
    a->passes_repeated += p->hot->st.passes_repeated - repeated_before;
    if (a->profile.meta.passes_failed != failed_before) {
        p->passes_failed++;
        a->sample_errors++;
    }
    account_pass(a, p, now_ns, repeated);
}

/* A process is sampled at one tick of 2 while fewer than a quarter of its
 * recent ticks were found changed, of 4 under a sixteenth, of 8 under a
 * sixty-fourth (8 only from 32 Hz, within the span's cap below: at 19 Hz
 * its reads, twice as far apart, each cost more, and 8 saved a twentieth
 * of the agent's CPU against a quarter at 100 Hz): the share of
 * passes that bring anything new, below which reading every tick mostly
 * reads the same again. Recent: each pass weighs the ticks it stood for,
 * and the weight fades by 1/e a second; a process just found, or one that
 * has kept changing, starts from all. One that stops takes 1.4 s to come
 * to stretches of 2, 3 s to 4 and 4.2 s to 8; one change after a long
 * settled spell takes it to stretches of 2 for about a second, several in
 * a row to every tick. */
#define CHANGE_MEMORY_NS 1000000000ull
#define STRIDE2_CHANGED 0.25
#define STRIDE4_CHANGED 0.0625
#define STRIDE8_CHANGED 0.015625
/* And how long a stretch may last: at a rate the budget has lowered, a
 * process that starts to run is still seen within about half a second. */
#define STRIDE_SPAN_MAX_NS 250000000ull

static uint64_t stride_draw(struct agent *a)
{
    uint64_t x = a->stride_random ? a->stride_random : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return a->stride_random = x;
}

/* After a pass: the next stretch of ticks it is due in. Each stretch has
 * one pass at a tick drawn uniformly from its ticks, and the pass's samples
 * count for all of them: the counts of a settled process are then those of
 * every tick on average (each tick is sampled with probability 1/stride,
 * at weight stride), with no tick counted twice or left out, and a process
 * that changes at a fixed period cannot fall between the passes for ever.
 * Settled: no thread has run since the last read pass (its passes are
 * repeats), or each pass found every thread as the read pass before it
 * (a service whose workers wake, handle a little and wait again at the
 * same call, whose passes show them waiting there every time); changed:
 * a thread found elsewhere, in another state, new or gone. How settled it
 * is, is the share of its recent ticks found changed (above). The rest of
 * the pass's own stretch is left out whatever the next stride: its weight
 * covers it. */
void agent_next_stretch(struct agent *a, struct agent_hot *h, bool changed)
{
    unsigned span = h->stride ? h->stride : 1;
    double per_tick = a->interval_ns < CHANGE_MEMORY_NS
        ? 1.0 - (double)a->interval_ns / (double)CHANGE_MEMORY_NS : 0.0;
    double keep = 1.0;
    for (unsigned k = 0; k < span; k++)
        keep *= per_tick;
    h->settled = h->settled * keep + (changed ? 0.0 : 1.0 - keep);
    unsigned most = a->opts.idle_stride ? a->opts.idle_stride : 1;
    unsigned stride = 1;
    if (most >= 8 && 1.0 - h->settled < STRIDE8_CHANGED)
        stride = 8;
    else if (most >= 4 && 1.0 - h->settled < STRIDE4_CHANGED)
        stride = 4;
    else if (most >= 2 && 1.0 - h->settled < STRIDE2_CHANGED)
        stride = 2;
    while (stride > 1 && stride * a->interval_ns > STRIDE_SPAN_MAX_NS)
        stride /= 2;
    unsigned at = stride > 1 ? (unsigned)(stride_draw(a) >> 33) % stride : 0;
    h->skip = (uint8_t)(h->after_pass + at);
    h->after_pass = (uint8_t)(stride - 1 - at);
    h->stride = (uint8_t)stride;
}

/* The processes in the order of their entries. One that has not run since
 * its last pass is given that pass again from its entry alone; the clock
 * is read again after a pass that read, so that each pass is stamped with
 * about the time it was made. A quiet process's ticks between its passes
 * are passed over (agent_next_stretch). */
void agent_sample_all(struct agent *a, uint64_t now_ns)
{
    maybe_reset(a, now_ns);
    look_ahead(a);
    uint64_t t = monotonic_ns();
    for (size_t i = 0; i < a->n_hot; i++) {
        struct agent_hot *h = &a->hot[i];
        struct agent_proc *p = h->proc;
        if (!p)
            continue;
        if (h->skip) {
            h->skip--;
            a->ticks_skipped++;
            continue;
        }
        a->ring.pass_weight = h->stride;
        if (sampler_still_pass(&h->st, t)) {
            h->passes++;
            a->passes++;
            a->passes_repeated++;
            if (!account_still(a, h, now_ns))
                account_pass(a, p, now_ns, true);
            agent_next_stretch(a, h, false);
        } else if (p->state == AGENT_PROC_SAMPLING && p->sampler) {
            uint64_t repeated = h->st.passes_repeated, alike = h->st.passes_alike;
            read_pass(a, p, now_ns);
            if (h->proc == p)
                agent_next_stretch(a, h, h->st.passes_repeated == repeated &&
                                             h->st.passes_alike == alike);
            t = monotonic_ns();
        }
        a->ring.pass_weight = 0;
    }
}

/* As why's settle_look, without waiting: when look caught an asyncio loop
 * inside a step, the time to take it again at (0: the look stands). */
static uint64_t look_again(struct agent_proc *p, const struct hang_live *look, uint64_t now_ns)
{
    pid_t tid = asyncio_caught_mid_step(&look->report, look->ran);
    if (!p->why_settle_tries)
        p->why_settle_since_ns = now_ns;
    int ms = tid && now_ns - p->why_settle_since_ns < ASYNCIO_SETTLE_MAX_MS * 1000000ull
                 ? asyncio_settle_delay_ms(p->why_settle_tries)
                 : -1;
    if (ms < 0) {
        p->why_settle_tries = 0;
        p->why_settle_tid = 0;
        return 0;
    }
    p->why_settle_tries++;
    p->why_settle_tid = tid;
    return now_ns + (uint64_t)ms * 1000000ull;
}

/* A look taken again waits, past its least delay, for the loop's thread
 * to be asleep: true (and *due put off) while it should wait on. */
static bool settle_wait(struct agent_proc *p, uint64_t now_ns, uint64_t *due)
{
    if (!p->why_settle_tid || now_ns - p->why_settle_since_ns >= ASYNCIO_SETTLE_MAX_MS * 1000000ull ||
        hang_live_thread_asleep(p->pid, p->why_settle_tid))
        return false;
    *due = now_ns + ASYNCIO_SETTLE_POLL_MS * 1000000ull;
    return true;
}

/* why diagnoses a child that a thread waits for on the spot (a parent in
 * waitpid for a child that deadlocked is hung, not idle); the agent's loop
 * cannot wait for that, so it takes the child's own evaluation, when it
 * samples the child: one that ended after this evaluation's first look,
 * asked for at once, waited for up to CHILD_WAIT_MAX_NS. A child it does
 * not sample (not Python, or left out by --pid or --match) is not
 * diagnosed, as why does not diagnose a child that is not Python. */
#define CHILD_WAIT_MAX_NS 3000000000ull
#define CHILD_POLL_NS 50000000ull

static bool sampled_child(const struct agent_proc *c, const struct agent_proc *p)
{
    return c && c != p && c->state == AGENT_PROC_SAMPLING && c->sampler &&
           proctree_parent(c->pid) == p->pid;
}

/* The sampled process w waits for, if it is p's child. The wait's pid is
 * in p's pid namespace: in a container's, it is the child whose last NSpid
 * is that pid. */
static struct agent_proc *waited_child(struct agent *a, const struct agent_proc *p,
                                       const struct report_wait *w)
{
    if (!w || w->kind != WAIT_CHILD || w->child <= 0)
        return NULL;
    pid_t own;
    bool nested = false;
    if (process_own_tid(p->pid, p->pid, &own, &nested) != 0)
        return NULL;
    if (!nested) {
        struct agent_proc *c = agent_find(a, w->child);
        return sampled_child(c, p) ? c : NULL;
    }
    for (size_t i = 0; i < a->n_procs; i++) {
        struct agent_proc *c = a->procs[i];
        if (sampled_child(c, p) && process_own_tid(c->pid, c->pid, &own, &nested) == 0 &&
            own == w->child)
            return c;
    }
    return NULL;
}

/* True while a child that p's threads wait for has no evaluation newer
 * than p's first look (each such child's asked for now). */
static bool children_pending(struct agent *a, struct agent_proc *p, uint64_t now_ns)
{
    if (!p->why_children_since_ns)
        p->why_children_since_ns = now_ns;
    else if (now_ns - p->why_children_since_ns >= CHILD_WAIT_MAX_NS)
        return false;
    const struct stack_report *r = &p->why_first.report;
    bool pending = false;
    for (size_t i = 0; i < r->n_threads; i++) {
        struct agent_proc *c = waited_child(a, p, r->threads[i].wait);
        if (!c || c->why_done_ns >= p->why_first_ns)
            continue;
        pending = true;
        if (!c->why_pending && c->next_why_ns > now_ns) {
            c->next_why_ns = now_ns;
            agent_why_due_changed(c);
        }
    }
    return pending;
}

struct child_query {
    struct agent *a;
    struct agent_proc *parent;
};

static int child_verdict(void *ctx, pid_t child, struct diagnosis_child *out)
{
    struct child_query *q = ctx;
    struct report_wait w = {.kind = WAIT_CHILD, .child = child};
    struct agent_proc *c = waited_child(q->a, q->parent, &w);
    if (!c || !c->why_known)
        return -1;
    out->verdict = c->verdict;
    out->grade = c->why_grade;
    snprintf(out->summary, sizeof out->summary, "%s", c->why_summary ? c->why_summary : "");
    if (process_thread_comm(c->pid, c->pid, out->comm, sizeof out->comm) != 0)
        snprintf(out->comm, sizeof out->comm, "?");
    return 0;
}

static void why_finish(struct agent *a, struct agent_proc *p, uint64_t now_ns)
{
    if (children_pending(a, p, now_ns)) {
        p->why_due_ns = now_ns + CHILD_POLL_NS;
        return;
    }
    struct py_runtime *rt = &p->sampler->rt;
    struct hang_live second = {0}; /* freed below even when not taken */
    struct pyscope_error err = {0};
    struct why_report why = {0};
    int interval_ms = (int)((now_ns - p->why_first_ns) / 1000000ull);
    struct stacks_names names = {sampler_thread_name, p->sampler, p->sampler->codes};
    /* Nothing of the process ran since just before the first snapshot: a
     * second would read the same memory and the same /proc files (but an
     * asyncio loop's timings, which are taken from our clock). */
    const struct stack_report *fr = &p->why_first.report;
    bool same = p->why_clock_open && !(fr->tasks && fr->tasks->n_loops) &&
                run_clock_still(&p->why_clock);
    int took = same ? 0 : hang_live_take_named(rt, p->pid, &names, !p->why_loopless, &second, &err);
    if (took == 0 && !same)
        p->why_loopless = !(second.report.tasks && second.report.tasks->n_loops);
    uint64_t again = took == 0 && !same ? look_again(p, &second, now_ns) : 0;
    if (same)
        a->why_second_spared++;
    else
        a->why_second_read++;
    if (again) {
        hang_live_free(&second);
        p->why_due_ns = again;
        return;
    }
    p->why_settle_tries = 0;
    p->why_settle_tid = 0;
    if (took == 0) {
        uint64_t caught = 0;
        target_caught_signals(rt->target, &caught);
        struct hang_live *first = &p->why_first;
        struct hang_snapshot sa = {&first->report, &first->raw, first->cpu_ns, caught, {0}};
        py_signal_handlers_read(rt, &sa.handlers);
        struct hang_live *b = same ? first : &second;
        struct hang_snapshot sb = {&b->report, &b->raw, b->cpu_ns, caught, sa.handlers};
        struct diagnosis_queries queries;
        waits_queries(p->why_waits, &queries);
        struct child_query children = {a, p};
        queries.child_verdict = child_verdict;
        queries.child_ctx = &children;
        /* The same findings as `why`: an asyncio service's hang is most
         * often its tasks', with the loop's thread idle in its selector. */
        if (hang_analyze(&queries, &sa, &sb, interval_ms, &why) == 0 &&
            asyncio_findings(&first->report, &b->report, interval_ms, ASYNCIO_BLOCKED_MS,
                             &queries, &why) == 0) {
            why.progress.watched_ms = interval_ms;
            char *json = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&json, &len);
            if (f) {
                why_report_write_json(f, &why);
                /* A report past the cap is not kept (the verdict is). */
                if (fclose(f) == 0 && len <= WHY_JSON_MAX) {
                    free(p->why_json);
                    p->why_json = json;
                    p->why_json_len = len;
                } else {
                    free(json);
                }
            }
            if (!p->why_known || p->verdict != why.verdict)
                agent_log(a, "process %d: why says %s", (int)p->pid,
                          why_verdict_name(why.verdict));
            p->verdict = why.verdict;
            p->why_grade = why.grade;
            free(p->why_summary);
            p->why_summary = strdup(why.summary);
            p->why_known = true;
        }
        why_report_free(&why);
    }
    hang_live_free(&second);
    p->why_generation++;
    p->why_done_ns = now_ns;
    why_reset(p);
    if (p->why_again) {
        p->why_again = false;
        p->next_why_ns = 0;
    }
}

void agent_why_due_changed(struct agent_proc *p)
{
    if (p->hot)
        p->hot->why_at = p->why_pending ? p->why_due_ns : p->next_why_ns;
}

static void why_step_one(struct agent *a, struct agent_proc *p, uint64_t now_ns)
{
    if (p->why_pending) {
        if (now_ns >= p->why_due_ns && !settle_wait(p, now_ns, &p->why_due_ns))
            why_finish(a, p, now_ns);
        return;
    }
    if (now_ns < p->next_why_ns || settle_wait(p, now_ns, &p->next_why_ns))
        return;
    struct pyscope_error err = {0};
    struct py_runtime *rt = &p->sampler->rt;
    /* The sampler's names, which it keeps fresh, rather than threading's
     * dict read again at every look (a quarter of a look's cost); and
     * its code objects, checked rather than read anew. */
    struct stacks_names names = {sampler_thread_name, p->sampler, p->sampler->codes};
    if (!p->why_clock_open)
        p->why_clock_open = run_clock_open(&p->why_clock, p->pid) == 0;
    if (p->why_clock_open)
        run_clock_still(&p->why_clock); /* from here, for why_finish */
    if (hang_live_take_named(rt, p->pid, &names, !p->why_loopless, &p->why_first, &err) != 0) {
        hang_live_free(&p->why_first);
        p->why_settle_tries = 0;
        p->why_settle_tid = 0;
        p->next_why_ns = now_ns + (uint64_t)(a->opts.why_every_s * a->why_scale * 1e9);
        p->why_generation++;
        p->why_done_ns = now_ns;
        return;
    }
    const struct report_tasks *tasks = p->why_first.report.tasks;
    p->why_loopless = !(tasks && tasks->n_loops);
    uint64_t again = look_again(p, &p->why_first, now_ns);
    if (again) {
        hang_live_free(&p->why_first);
        p->next_why_ns = again;
        return;
    }
    p->next_why_ns = now_ns + (uint64_t)(a->opts.why_every_s * a->why_scale * 1e9);
    struct stack_report *r = &p->why_first.report;
    snprintf(r->command, sizeof r->command, "%s", p->command);
    target_exe(rt->target, r->executable, sizeof r->executable);
    snprintf(r->python_version, sizeof r->python_version, "%s", rt->version);
    p->why_waits = waits_new(rt);
    if (!p->why_waits || waits_analyze(p->why_waits, r, &p->why_first.raw) != 0) {
        waits_free(p->why_waits);
        p->why_waits = NULL;
        hang_live_free(&p->why_first);
        p->why_generation++;
        p->why_done_ns = now_ns;
        return;
    }
    p->why_first_ns = now_ns;
    /* As why does: put off past the wake-up of tasks that merely sleep
     * while others wait, so that the second look shows what they did. */
    double interval_ms = asyncio_second_look_ms(r, WHY_INTERVAL_NS / 1e6, now_ns / 1e9);
    p->why_due_ns = now_ns + (uint64_t)(interval_ms * 1e6);
    p->why_pending = true;
}

/* The processes whose evaluation (or its second snapshot) is due, found
 * from their entries: a tick touches no process that has nothing due. */
void agent_why_step(struct agent *a, uint64_t now_ns)
{
    for (size_t i = 0; i < a->n_hot; i++) {
        struct agent_proc *p = a->hot[i].proc;
        if (!p || now_ns < a->hot[i].why_at)
            continue;
        if (p->state == AGENT_PROC_SAMPLING && p->sampler)
            why_step_one(a, p, now_ns);
        agent_why_due_changed(p);
    }
}

uint64_t agent_why_deadline(const struct agent *a)
{
    uint64_t due = UINT64_MAX;
    for (size_t i = 0; i < a->n_hot; i++)
        if (a->hot[i].proc && a->hot[i].why_at < due)
            due = a->hot[i].why_at;
    return due;
}

char *agent_dump_json(struct agent *a, struct agent_proc *p, size_t *len, int *status)
{
    (void)a;
    if (!p->sampler) {
        *status = 503;
        return NULL;
    }
    struct py_runtime *rt = &p->sampler->rt;
    struct stack_report report = {0};
    report.pid = p->pid;
    /* What `dump --json` shows by default, locals aside: each thread's
     * wait, the asyncio tasks, the threads Python does not know. */
    struct collect_request req = {.waits = true, .tasks = TASKS_PENDING, .max_tasks = 1000};
    struct pyscope_error err = {0};
    target_cache_invalidate(rt->target);
    char *json = NULL;
    if (collect_report(rt->target, rt, &req, &report, &err) == 0) {
        report.pid = p->pid;
        snprintf(report.command, sizeof report.command, "%s", p->command);
        target_exe(rt->target, report.executable, sizeof report.executable);
        snprintf(report.python_version, sizeof report.python_version, "%s", rt->version);
        FILE *f = open_memstream(&json, len);
        if (f) {
            stack_report_write_json(f, &report);
            if (fclose(f) != 0) {
                free(json);
                json = NULL;
            }
        }
    }
    stack_report_free(&report);
    if (!json)
        *status = 500;
    return json;
}
