/* One sampling pass over a live CPython process: thread states read straight
 * from the target, each thread's data-stack chunk copied in one read, code
 * objects and (code, line) -> frame ids cached across passes, GIL state from
 * the GIL itself plus one pread of the thread's /proc syscall file. */
#include "sampling/sampler.h"

#include <errno.h>
#include <stdint.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "native/native_sampler.h"
#include "python/callable.h"
#include "python/thread_state.h"
#include "python/threads.h"
#include "sampling/async_stacks.h"
#include "sampling/stack_memo.h"
#include "target/process.h"

#define FRAME_KEY_SLOTS 8192u
#define MAX_STACK_DEPTH 4096u
/* Code objects can be freed and their address reused: what is cached by
 * code address is forgotten this often (a sampler that checks code objects
 * at each use keeps them), and what is cached by callable is checked again,
 * which bounds how long a stale name could be shown. */
#define CODE_CACHE_LIFETIME_NS 2000000000ull
#define NAMES_REFRESH_NS 1000000000ull
/* CPython's default switch interval: a holder that keeps the GIL this long
 * while others wait is not returning to the eval loop, i.e. it is inside a
 * call that does not release the GIL. */
#define GIL_SWITCH_INTERVAL_NS 5000000ull

struct sampled_thread {
    uint64_t tstate;
    uint64_t thread_id;
    pid_t tid;
    int syscall_fd;
    uint32_t profile_thread;
    bool python_named;        /* its profile name is threading's, not the OS's */
    bool seen;
    size_t first_span, n_spans;      /* this pass's stack reads */
    /* Where its data stack was on the last pass: the first read of a pass
     * takes the stack along with the thread state, from there. */
    uint64_t last_chunk, last_top, last_limit;
    bool read_ahead;                 /* this pass's copy came with the first read */
    bool bracketed;                  /* its state, top and copy all came with it */
    uint32_t ahead;                  /* bytes read past last_top: see READ_AHEAD_MIN */
    /* A thread waiting for the GIL runs no Python code until it takes it:
     * while it waits (see classify), its stack is not read again and the
     * one sampled before counts. */
    bool parked;                     /* this pass did not read its stack */
    /* Idle where its syscall file last found it (see still_idle): its stack
     * is not read either, unless the thread state shows it has moved. */
    bool idle_parked;
    uint32_t last_stack;             /* UINT32_MAX: none, or it was torn */
    /* The "[C] name" leaf of the last walk that read the innermost frame: a
     * walk the memo stops at once has not changed frame or instruction. */
    uint32_t last_leaf;
    bool at_call;                    /* its innermost frame's instruction is a call */
    bool at_call_known;
    uint64_t last_top_frame;
    /* its innermost frame, code and instruction as the newest walk found
     * them (site_code 0: none), and as they were when its syscall file last
     * said idle (idle_read_ns 0: it did not) */
    uint64_t site_frame, site_code;
    /* walks in a row that found it in the same innermost frame at the same
     * instruction (see top_keepable) */
    uint8_t still_walks;
    long site_offset;
    uint64_t idle_frame, idle_code, idle_read_ns;
    long idle_offset;
    uint16_t idle_syscall;
    uint8_t idle_streak;             /* reads in a row that found it idle there */
    uint32_t covered_run;            /* passes in a row the read ahead was enough */
    /* The GIL's switch count when its thread state was last read, and when
     * (ts_known false: not yet): see quiet_since_read. */
    uint64_t ts_switch, ts_read_ns;
    bool ts_known;
    /* The switch count when this thread was last seen blocked in the GIL's
     * futex, or last seen holding the GIL; UINT64_MAX when neither. */
    uint64_t waiting_since_switch;
    uint64_t held_at_switch;
    /* --native: since when (just after a pass read the GIL) it has been
     * seen holding the GIL without a switch, 0 when it was not holding it
     * at the last pass. A C stack sampled before then may be of its wait
     * for the GIL: never used for a sample that holds it. */
    uint64_t hold_seen_ns, hold_seen_switches;
    /* this pass's sample, for a pass that repeats it (has_sample false:
     * none was given) */
    struct sink_sample sample;
    bool has_sample;
    struct sink_thread sink;
    struct py_stack_copy copy;
    struct stack_memo memo;
};

struct frame_key {
    uint64_t code, func;     /* function object (3.11+; 0 when unknown) */
    long offset;
    uint32_t frame;
    uint64_t serial;         /* of the py_code it was made from */
};

struct frame_key_cache {
    size_t n;
    struct frame_key slots[];
};

/* The innermost frame's C callable costs a look at its instruction and,
 * at a call, a read of its value stack: both answers are kept, by
 * (code, offset) while the code entry they were read with stands, and by
 * callable object while the object there still looks the same. */
#define CALL_SITE_SLOTS 4096u
#define CALLABLE_SLOTS 1024u

struct call_site {
    uint64_t code;
    long offset;
    char kind;               /* 0: not a call */
    uint8_t oparg;
    bool known;
    bool slot_known;         /* where its callable was found, from the frame */
    uint32_t slot_off;
    uint64_t serial;         /* of the code entry it was read with; 0: none */
};

struct callable_id {
    uint64_t obj;
    uint32_t frame;
    /* The type and the two words after it when named (a builtin's method
     * definition and self, a descriptor's class and name, a type's size and
     * tp_name): an address freed and reused by another object shows others. */
    uint64_t ident[3];
    bool transient;          /* checked at each use: see py_c_callable_lasting */
};

struct callable_cache {
    size_t n_sites, n_ids;
    struct call_site *sites;
    struct callable_id *ids;
};

uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int reserve_spans(struct sampler *s, size_t need);

static bool callable_ident(struct sampler *s, uint64_t obj, uint64_t ident[3])
{
    return target_read(s->target, obj + (uint64_t)s->rt.layout.ob_type, ident, 3 * sizeof *ident) == 0;
}

/* A named callable, if the object at its address is still it. */
static bool callable_known(struct sampler *s, const struct callable_id *id, uint64_t obj)
{
    uint64_t now[3];
    return obj && id->obj == obj &&
           (!id->transient || (callable_ident(s, obj, now) && memcmp(now, id->ident, sizeof now) == 0));
}

/* Every named callable checked in one scattered read: a C callable lives as
 * long as its module or class, so that naming them all again every time the
 * code caches are flushed was most of what a quiet process cost. */
static void recheck_callables(struct sampler *s)
{
    struct callable_cache *c = s->callables;
    size_t n = 0;
    for (size_t i = 0; i < c->n_ids; i++)
        n += c->ids[i].obj != 0;
    if (n == 0)
        return;
    uint64_t(*now)[3] = malloc(n * sizeof *now);
    size_t *which = malloc(n * sizeof *which);
    if (!now || !which || reserve_spans(s, n) != 0) {
        memset(c->ids, 0, c->n_ids * sizeof c->ids[0]);
    } else {
        size_t k = 0;
        for (size_t i = 0; i < c->n_ids; i++) {
            if (!c->ids[i].obj)
                continue;
            which[k] = i;
            s->spans[k] = (struct target_span){c->ids[i].obj + (uint64_t)s->rt.layout.ob_type,
                                               now[k], sizeof now[k], false};
            k++;
        }
        target_read_spans(s->target, s->spans, n);
        for (k = 0; k < n; k++)
            if (!s->spans[k].ok || memcmp(now[k], c->ids[which[k]].ident, sizeof now[k]) != 0)
                memset(&c->ids[which[k]], 0, sizeof c->ids[0]);
    }
    free(now);
    free(which);
}

static void flush_code_caches(struct sampler *s)
{
    if (s->tasks)
        async_stacks_flush(s->tasks);
    py_vars_cache_clear(s->vars);
    recheck_callables(s);
    /* Checked at each use, a code entry stands while its object does, and
     * the frame ids and call sites made from it with it (by its serial). */
    if (s->verify_codes)
        return;
    py_code_cache_clear(s->codes);
    memset(s->frame_keys->slots, 0, s->frame_keys->n * sizeof s->frame_keys->slots[0]);
    memset(s->callables->sites, 0, s->callables->n_sites * sizeof s->callables->sites[0]);
}

/* The (code, offset) -> frame id and call-site caches, at 1/divisor of
 * their full size (replacing any there were). */
static int alloc_id_caches(struct sampler *s, size_t divisor)
{
    free(s->frame_keys);
    free(s->callables);
    size_t keys = FRAME_KEY_SLOTS / divisor, sites = CALL_SITE_SLOTS / divisor,
           ids = CALLABLE_SLOTS / divisor;
    s->frame_keys = calloc(1, sizeof *s->frame_keys + keys * sizeof s->frame_keys->slots[0]);
    s->callables = calloc(1, sizeof *s->callables + sites * sizeof(struct call_site) +
                                 ids * sizeof(struct callable_id));
    if (!s->frame_keys || !s->callables) {
        free(s->frame_keys);
        free(s->callables);
        s->frame_keys = NULL;
        s->callables = NULL;
        return -1;
    }
    s->frame_keys->n = keys;
    s->callables->n_sites = sites;
    s->callables->n_ids = ids;
    s->callables->sites = (struct call_site *)(s->callables + 1);
    s->callables->ids = (struct callable_id *)(s->callables->sites + sites);
    return 0;
}

int sampler_small_caches(struct sampler *s)
{
    return alloc_id_caches(s, 8);
}

/* Descriptors left for everything but the threads' syscall files. */
#define FD_RESERVE 64

int sampler_open(struct sampler *s, pid_t pid, struct profile *profile, uint64_t start_ns,
                 struct pyscope_error *err)
{
    memset(s, 0, sizeof *s);
    s->pid = pid;
    s->profile = profile;
    s->start_ns = start_ns;
    profile_sink_init(&s->profile_sink, profile, true);
    s->sink = &s->profile_sink.sink;
    s->st = &s->own_still;
    process_raise_fd_limit();
    struct rlimit rl;
    s->fd_budget = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                       ? (rl.rlim_cur > FD_RESERVE ? (size_t)(rl.rlim_cur - FD_RESERVE) : 0)
                       : SIZE_MAX;
    /* Before the target exists, so that an exec while it opens is seen. */
    s->image_id = process_image_id(pid);
    s->target = process_open(pid, err);
    if (!s->target)
        return -1;
    target_cache_enable(s->target);
    if (py_runtime_find(s->target, &s->rt, err) != 0) {
        target_close(s->target);
        s->target = NULL;
        return -1;
    }
    s->rt.target = s->target;
    py_reader_init(&s->reader, &s->rt);
    s->codes = calloc(1, sizeof *s->codes);
    alloc_id_caches(s, 1);
    s->vars = calloc(1, sizeof *s->vars);
    s->frames = malloc(sizeof *s->frames * PY_MAX_FRAMES);
    s->stack_ids = malloc(sizeof *s->stack_ids * (MAX_STACK_DEPTH + 2));
    s->walk_ids = malloc(sizeof *s->walk_ids * MAX_STACK_DEPTH);
    s->gc_frame = profile_frame_id(profile, "<GC>", "<gc>", -1, true);
    s->profile_process = profile_process_id(profile, pid);
    if (s->profile_process != UINT32_MAX)
        snprintf(profile->processes[s->profile_process].python_version,
                 sizeof profile->processes[s->profile_process].python_version, "%s", s->rt.version);
    if (!s->codes || !s->frame_keys || !s->callables || !s->vars || !s->frames || !s->stack_ids || !s->walk_ids || s->gc_frame == UINT32_MAX) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        sampler_close(s, start_ns);
        return -1;
    }
    s->st->hold_switches = UINT64_MAX;
    return 0;
}

static void forget_thread(struct sampler *s, size_t index, uint64_t now_ns)
{
    struct sampled_thread *th = &s->threads[index];
    s->sink->ops->thread_gone(s->sink, &th->sink, now_ns);
    if (th->syscall_fd >= 0) {
        close(th->syscall_fd);
        s->kept_fds--;
    }
    py_stack_copy_free(&th->copy);
    stack_memo_free(&th->memo);
    if (s->native)
        native_sampler_forget(s->native, th->tid);
    s->threads[index] = s->threads[--s->n_threads];
}

static void refresh_names(struct sampler *s);

void sampler_close(struct sampler *s, uint64_t now_ns)
{
    uint64_t rel = now_ns > s->start_ns ? now_ns - s->start_ns : 0;
    /* A thread started in the last second may not be in threading's table
     * yet at the last look: one more, so that it keeps its name. */
    bool unnamed = false;
    for (size_t i = 0; i < s->n_threads && !unnamed; i++)
        unnamed = !s->threads[i].python_named;
    if (unnamed && s->profile && target_can(s->target, TARGET_CAN_CHANGE) &&
        !target_gone(s->target)) {
        target_cache_invalidate(s->target);
        refresh_names(s);
    }
    while (s->n_threads > 0)
        forget_thread(s, s->n_threads - 1, rel);
    free(s->threads);
    free(s->chain);
    free(s->pass);
    free(s->blocks);
    free(s->spans);
    addrset_free(&s->walked);
    if (s->codes) {
        py_code_cache_clear(s->codes);
        free(s->codes);
    }
    free(s->frame_keys);
    free(s->callables);
    if (s->vars) {
        py_vars_cache_clear(s->vars);
        free(s->vars);
    }
    free(s->frames);
    free(s->stack_ids);
    free(s->walk_ids);
    async_stacks_free(s->tasks);
    free(s->entry_flags);
    native_sampler_close(s->native);
    if (s->st && s->st->clock_open)
        run_clock_close(&s->st->clock);
    if (s->target)
        target_close(s->target);
    memset(s, 0, sizeof *s);
}

/* Thread names come from threading._active, which changes rarely; the OS
 * thread name stands in for threads Python does not name. */
static void refresh_names(struct sampler *s)
{
    struct py_snapshot snap = {0};
    snap.threads = calloc(s->n_threads ? s->n_threads : 1, sizeof *snap.threads);
    char (*names)[64] = calloc(s->n_threads ? s->n_threads : 1, sizeof *names);
    if (snap.threads && names) {
        snap.n_threads = (int)s->n_threads;
        /* The main interpreter, last on the list, first: a thread that
         * entered a subinterpreter is named by the threading module that
         * started it (the other one's calls it MainThread or Dummy-N). */
        for (int k = s->n_interps - 1; k >= 0; k--)
            snap.interps[snap.n_interps++].addr = s->interps[k].addr;
        for (size_t i = 0; i < s->n_threads; i++)
            snap.threads[i].thread_id = s->threads[i].thread_id;
        py_thread_names(&s->reader, &snap, names);
        for (size_t i = 0; i < s->n_threads; i++) {
            struct profile_thread *pt = &s->profile->threads[s->threads[i].profile_thread];
            s->threads[i].python_named = names[i][0] != '\0';
            if (names[i][0])
                memcpy(pt->name, names[i], sizeof pt->name);
            else if (!pt->name[0])
                target_thread_comm(s->target, s->threads[i].tid, pt->name, sizeof pt->name);
        }
    }
    free(snap.threads);
    free(names);
}

/* A pass looks its threads up in list order, mostly the order they were
 * added in: the search starts after the one found last, which makes it one
 * look (the entries are large, each look a cache miss). */
static struct sampled_thread *find_thread(struct sampler *s, uint64_t tstate, uint64_t thread_id)
{
    size_t n = s->n_threads, start = s->find_hint < n ? s->find_hint : 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = start + k < n ? start + k : start + k - n;
        if (s->threads[i].tstate == tstate && s->threads[i].thread_id == thread_id) {
            s->find_hint = i + 1;
            return &s->threads[i];
        }
    }
    return NULL;
}

/* Before 3.11 a thread state does not know its kernel tid; the full snapshot
 * works it out from glibc's struct pthread. Only done for new threads, and
 * once per pass however many of them there are: one snapshot each made a
 * first pass over 1,100 new threads on 3.8 read 2 million times (9 s). */
struct tid_lookup {
    struct py_snapshot snap;
    bool tried, ok;
};

static pid_t tid_from_snapshot(struct sampler *s, struct tid_lookup *lk, uint64_t tstate)
{
    if (!lk->tried) {
        lk->tried = true;
        pid_t tids[PROCESS_MAX_THREADS];
        int n = target_list_threads(s->target, tids, PROCESS_MAX_THREADS);
        lk->ok = n > 0 && py_snapshot_read(&s->reader, tids, n, &lk->snap) == 0;
    }
    pid_t tid = 0;
    for (int i = 0; lk->ok && i < lk->snap.n_threads; i++)
        if (lk->snap.threads[i].tstate == tstate)
            tid = lk->snap.threads[i].tid;
    return tid;
}

static struct sampled_thread *add_thread(struct sampler *s, const struct py_thread *pt,
                                         struct tid_lookup *lk)
{
    if (s->n_threads == s->cap_threads) {
        size_t cap = s->cap_threads ? s->cap_threads * 2 : 16;
        struct sampled_thread *grown = realloc(s->threads, cap * sizeof *grown);
        if (!grown)
            return NULL;
        s->threads = grown;
        s->cap_threads = cap;
    }
    pid_t tid = pt->tid ? pt->tid : tid_from_snapshot(s, lk, pt->tstate);
    /* A thread state not yet bound to its OS thread (Thread.start() in
     * progress) has no stack yet; it is picked up once it runs. */
    if (tid == 0)
        return NULL;
    uint32_t id = profile_thread_id(s->profile, s->pid, tid);
    if (id == UINT32_MAX)
        return NULL;
    struct sampled_thread *th = &s->threads[s->n_threads++];
    memset(th, 0, sizeof *th);
    s->thread_unnamed = true;
    th->tstate = pt->tstate;
    th->thread_id = pt->thread_id;
    th->tid = tid;
    /* Descriptors kept past the budget would leave none for reading the
     * others (and the ELF files, the maps): those are opened per read. */
    th->syscall_fd = -1;
    if (tid && s->kept_fds < s->fd_budget) {
        th->syscall_fd = target_thread_activity_open(s->target, tid);
        if (th->syscall_fd >= 0)
            s->kept_fds++;
        else if (errno == EMFILE || errno == ENFILE)
            s->fd_budget = s->kept_fds;
    }
    if (tid && th->syscall_fd < 0 && s->kept_fds >= s->fd_budget)
        s->fds_exhausted = true;
    th->profile_thread = id;
    th->waiting_since_switch = UINT64_MAX;
    th->last_stack = UINT32_MAX;
    th->last_leaf = UINT32_MAX;
    th->held_at_switch = UINT64_MAX;
    s->last_names_ns = 0; /* name it at the end of this pass */
    return th;
}

/* (code object, instruction offset) -> frame id, so that a frame seen
 * before costs neither a line-table decode nor a string hash. */
static uint32_t frame_id_for(struct sampler *s, uint64_t code_addr, uint64_t func, long offset,
                             bool *unreadable)
{
    uint64_t h = ((code_addr ^ func) >> 4) * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)offset * 0xff51afd7ed558ccdull;
    struct frame_key *slot = &s->frame_keys->slots[(h >> 20) % s->frame_keys->n];
    const struct py_code *code = NULL;
    if (s->verify_codes) {
        code = py_code_get_verified(s->codes, &s->reader, code_addr);
        if (code && slot->code == code_addr && slot->func == func && slot->offset == offset &&
            slot->serial == code->serial)
            return slot->frame;
    } else {
        if (slot->code == code_addr && slot->func == func && slot->offset == offset && code_addr)
            return slot->frame;
        code = py_code_get(s->codes, &s->reader, code_addr);
    }
    if (!code) {
        *unreadable = true;
        return profile_frame_id(s->profile, "<unreadable code>", "?", -1, true);
    }
    int line = py_code_line(code, &s->rt.layout, offset);
    uint32_t id = profile_frame_id(s->profile, py_code_function_name(s->codes, &s->reader, code, func),
                                   code->filename, line, false);
    if (id != UINT32_MAX) {
        slot->code = code_addr;
        slot->func = func;
        slot->offset = offset;
        slot->frame = id;
        slot->serial = code->serial;
    }
    return id;
}

/* An awaiting task's coroutine, interned like a sampled frame of the same
 * code and instruction (so its lines merge with the thread's own). */
static uint32_t task_frame_id(void *ctx, uint64_t code, long offset)
{
    bool unreadable = false;
    uint32_t id = frame_id_for(ctx, code, 0, offset, &unreadable);
    return unreadable ? UINT32_MAX : id;
}

struct waiting_ctx {
    struct sampler *s;
    const struct sampled_thread *th;
    uint32_t thread;          /* the entry beside th's, made on the first task */
    uint64_t rel_ns;
};

/* --async --idle: a loop thread's suspended tasks, one idle sample each per
 * pass, go to a thread entry of their own beside the loop's thread (its tid
 * negated), so that the thread's own samples still add up to its passes. */
static void add_waiting(void *ctx, const uint32_t *ids, size_t n)
{
    struct waiting_ctx *w = ctx;
    struct profile *p = w->s->profile;
    if (w->thread == UINT32_MAX) {
        if (w->th->tid <= 0 || (w->thread = profile_thread_id(p, w->s->pid, -w->th->tid)) ==
                                   UINT32_MAX)
            return;
        char loop[sizeof p->threads[w->thread].name];
        memcpy(loop, p->threads[w->th->profile_thread].name, sizeof loop);
        snprintf(p->threads[w->thread].name, sizeof p->threads[w->thread].name,
                 "%.40s: waiting tasks", loop);
    }
    uint32_t stack = profile_stack_id(p, ids, (uint32_t)n);
    if (stack != UINT32_MAX)
        profile_add_sample(p, w->thread, stack, PROFILE_IDLE, false, w->rel_ns);
}

static void sample_waiting_tasks(struct sampler *s, const struct sampled_thread *th,
                                 uint64_t interp, uint64_t rel_ns)
{
    struct waiting_ctx w = {s, th, UINT32_MAX, rel_ns};
    async_stacks_waiting(s->tasks, interp, th->tstate, s->stack_ids, MAX_STACK_DEPTH,
                         add_waiting, &w);
}

int sampler_enable_tasks(struct sampler *s)
{
    if (!s->tasks)
        s->tasks = async_stacks_new(&s->rt, s->profile, task_frame_id, s);
    s->st->usable = false; /* a repeat would not carry task stacks */
    return s->tasks ? 0 : -1;
}

/* The "[C] name" pseudo-frame of the C callable the innermost frame f is
 * calling, or UINT32_MAX when it calls none that can be told. copy holds
 * f's bytes when f lies in the copied chunk. */
static uint32_t callable_frame_for(struct sampler *s, const struct py_frame *f,
                                   const struct py_stack_copy *copy, bool *at_call)
{
    uint64_t h = (f->code_addr >> 4) * 0x9e3779b97f4a7c15ull ^ (uint64_t)f->instr_offset * 0xff51afd7ed558ccdull;
    struct call_site *site = &s->callables->sites[(h >> 20) % s->callables->n_sites];
    const struct py_code *code = py_code_cached(s->codes, f->code_addr);
    uint64_t serial = code ? code->serial : 0;
    if (!site->known || site->code != f->code_addr || site->offset != f->instr_offset ||
        !serial || site->serial != serial) {
        int oparg = 0;
        site->kind = py_frame_call_kind(&s->reader, f, &oparg);
        site->oparg = (uint8_t)oparg;
        site->code = f->code_addr;
        site->offset = f->instr_offset;
        site->known = true;
        site->slot_known = false;
        site->serial = serial;
    }
    *at_call = site->kind != 0;
    if (!site->kind)
        return UINT32_MAX;
    /* The stack's depth at an instruction is fixed by the compiler: the
     * slot this call site's callable was found in holds it again. Still the
     * callable named then, it costs no read of the target. */
    if (site->slot_known) {
        uint64_t at = f->frame_addr + site->slot_off, bits = 0;
        if (py_stack_copy_peek(copy, at, &bits, 8) == 0 || target_read_u64(s->target, at, &bits) == 0) {
            uint64_t obj = py_stackref_object(&s->reader, bits);
            struct callable_id *slot = &s->callables->ids[((obj >> 4) * 0x9e3779b97f4a7c15ull >> 20) % s->callables->n_ids];
            if (callable_known(s, slot, obj))
                return slot->frame;
        }
    }
    uint64_t slot_addr = 0;
    uint64_t obj = py_frame_c_callable_find(&s->reader, s->vars, f, site->kind, site->oparg,
                                            &slot_addr);
    if (!obj)
        return UINT32_MAX;
    if (slot_addr >= f->frame_addr && slot_addr - f->frame_addr < UINT32_MAX) {
        site->slot_off = (uint32_t)(slot_addr - f->frame_addr);
        site->slot_known = true;
    }
    struct callable_id *slot = &s->callables->ids[((obj >> 4) * 0x9e3779b97f4a7c15ull >> 20) % s->callables->n_ids];
    if (callable_known(s, slot, obj))
        return slot->frame;
    char name[PY_C_CALLABLE_MAX + 8] = "[C] ";
    int named = py_c_callable_name(&s->reader, obj, name + 4, sizeof name - 4);
    if (named == 1 && target_refresh_maps(s->target) == 0)
        named = py_c_callable_name(&s->reader, obj, name + 4, sizeof name - 4);
    if (named < 0)
        return UINT32_MAX;
    uint32_t id = profile_frame_id(s->profile, name, "", -1, true);
    uint64_t ident[3];
    if (id != UINT32_MAX && callable_ident(s, obj, ident)) {
        slot->obj = obj;
        slot->frame = id;
        memcpy(slot->ident, ident, sizeof ident);
        slot->transient = !py_c_callable_lasting(&s->reader, obj);
    }
    return id;
}

/* A thread on CPU without the GIL may be running native code, or it may be
 * a waiter between two futex waits inside take_gil (its timed wait expired,
 * it was woken but another thread got in first, or it is finishing the
 * hand-off in drop_gil), which takes longer when CPUs are scarce. Look again
 * a few times, briefly: a waiter is soon back in the GIL's futex, a thread
 * in native code never goes there. */
#define RECHECK_POLLS 8
#define RECHECK_PAUSE_US 50

/* Through the thread's open syscall file, or, for the threads beyond the
 * limit of open files, by opening it each time. */
static int read_activity(struct sampler *s, const struct sampled_thread *th,
                         struct thread_activity *a)
{
    if (th->syscall_fd >= 0)
        return target_thread_activity_read(s->target, th->syscall_fd, a);
    return th->tid ? target_thread_activity(s->target, th->tid, a) : -1;
}

static bool seen_back_in_gil(struct sampler *s, const struct sampled_thread *th,
                             const struct py_interp *pi, uint64_t gil_size)
{
    struct py_interp now = *pi;
    for (int i = 0; i < RECHECK_POLLS; i++) {
        usleep(RECHECK_PAUSE_US);
        struct thread_activity a;
        if (read_activity(s, th, &a) != 0)
            return false;
        enum thread_run_state st = thread_classify(&a, false, pi->gil, gil_size);
        if (st == THREAD_WAITING_GIL)
            return true;
        if (st == THREAD_IDLE)
            return false;
        /* Taking the GIL a moment later means it was on its way in. */
        if (py_interp_read_gil(&s->reader, &now) == 0 && now.gil_holder == th->tstate)
            return true;
    }
    return false;
}

/* A thread seen waiting in take_gil leaves it only by taking the GIL,
 * which counts a switch: while the count stands still it is still waiting. */
static bool still_waiting(const struct sampled_thread *th, const struct py_interp *pi)
{
    return th->waiting_since_switch == pi->gil_switches && pi->gil_holder != 0 &&
           pi->gil_holder != th->tstate;
}

/* A thread idle in a call stays so until it returns, and it cannot return
 * without leaving the call's frame or instruction: while both stand, its
 * syscall file is read again only every so often (the agent's option). */
static bool still_idle(const struct sampler *s, const struct sampled_thread *th, bool torn,
                       uint64_t now_ns)
{
    /* The longer it has stayed, the less often it is looked at: up to 8 times
     * the owner's interval. */
    uint64_t every = s->idle_recheck_ns << (th->idle_streak < 3 ? th->idle_streak : 3);
    return s->idle_recheck_ns && th->idle_read_ns && !torn && th->site_code &&
           th->site_frame == th->idle_frame && th->site_code == th->idle_code &&
           th->site_offset == th->idle_offset && now_ns - th->idle_read_ns < every;
}

static enum profile_state classify(struct sampler *s, struct sampled_thread *th,
                                   const struct py_interp *pi, uint64_t gil_size, bool torn,
                                   uint64_t now_ns, uint16_t *syscall_out)
{
    *syscall_out = 0xffff;
    if (pi->gil_holder == th->tstate) {
        th->idle_read_ns = 0;
        th->waiting_since_switch = UINT64_MAX;
        th->held_at_switch = pi->gil_switches;
        return PROFILE_HOLDING_GIL;
    }
    uint64_t held_at = th->held_at_switch;
    th->held_at_switch = UINT64_MAX;
    /* Its /proc file is the costliest read of a pass. */
    if (still_waiting(th, pi))
        return PROFILE_WAITING_GIL;
    if (still_idle(s, th, torn, now_ns)) {
        *syscall_out = th->idle_syscall;
        return PROFILE_IDLE;
    }
    bool was_idle = th->idle_read_ns != 0;
    th->idle_read_ns = 0;
    struct thread_activity a;
    bool looked_again = false;
look:
    if (read_activity(s, th, &a) != 0)
        return PROFILE_UNKNOWN;
    switch (thread_classify(&a, false, pi->gil, gil_size)) {
    case THREAD_WAITING_GIL:
        th->waiting_since_switch = pi->gil_switches;
        return PROFILE_WAITING_GIL;
    case THREAD_IDLE:
        if (s->native)
            native_sampler_poke_settled(s->native, th->tid);
        th->waiting_since_switch = UINT64_MAX;
        *syscall_out = (uint16_t)(a.syscall_nr < 0xffff ? a.syscall_nr : 0xfffe);
        if (!torn) {
            bool same = was_idle && th->site_code && th->site_frame == th->idle_frame &&
                        th->site_code == th->idle_code && th->site_offset == th->idle_offset;
            th->idle_streak = same && th->idle_streak < 255 ? th->idle_streak + 1 : 0;
            th->idle_read_ns = now_ns;
            th->idle_syscall = *syscall_out;
            th->idle_frame = th->site_frame;
            th->idle_code = th->site_code;
            th->idle_offset = th->site_offset;
        }
        return PROFILE_IDLE;
    case THREAD_RUNNING:
        /* Still inside take_gil: the GIL has not changed hands since it was
         * seen waiting (leaving take_gil means taking it, which counts a
         * switch). Or handing it over in drop_gil: it held the GIL one
         * switch ago and another thread holds it now. */
        if (th->waiting_since_switch == pi->gil_switches ||
            (held_at != UINT64_MAX && pi->gil_holder != 0 && pi->gil_switches == held_at + 1))
            return PROFILE_WAITING_GIL;
        if (s->recheck_running && seen_back_in_gil(s, th, pi, gil_size)) {
            th->waiting_since_switch = pi->gil_switches;
            return PROFILE_WAITING_GIL;
        }
        th->waiting_since_switch = UINT64_MAX;
        /* Runnable only because --native interrupted its wait (a loaded
         * machine may not run it again for a while): the wait goes on. */
        switch (s->native ? native_sampler_poke_unrun(s->native, th->tid) : POKE_NONE) {
        case POKE_ON_ITS_WAY:
            *syscall_out = was_idle ? th->idle_syscall : 0xffff;
            return PROFILE_IDLE;
        case POKE_SLEPT_SINCE:
            if (!looked_again) {
                looked_again = true;
                goto look;
            }
            break;
        case POKE_NONE:
            break;
        }
        return PROFILE_RUNNING;
    case THREAD_HOLDING_GIL:
    case THREAD_UNKNOWN:
        break;
    }
    return PROFILE_UNKNOWN;
}

/* The copy of a thread's stack and the top frame pointer it is walked from
 * are not read at one instant. When the pointer is the newer, it can name a
 * slot the thread filled after the copy was taken, above callers the copy
 * still shows as they were: spin() returned, through_c() called in its
 * caller's slot, then a new spin() in the same slot shows spin() under
 * through_c(). When the copy is the newer, the pointer can name a slot the
 * thread has since returned from, whose stale bytes sit above whatever its
 * caller called next.
 *
 * Frames found unchanged from the copy to a later read held throughout, so
 * a walk over them from a pointer read between the two is the stack at the
 * instant of that pointer. So the top pointer is read again, and then every
 * walked frame (the first CHECKED_FRAMES). At the walked top, the walk is
 * that stack; at a frame below it, the walk from there; further up the
 * same chunk, the walk from the new top over the copy grown to it, checked
 * once more. Always the stack at the second pointer: keeping the first walk
 * whenever the thread went deeper would sample the shallower of two
 * instants. The pointer comes first because reading the frames pulls in
 * cache lines the running thread writes, slowing it just then: a pointer
 * read after them found a tight loop's shortest call 10% of the time where
 * paused dumps found it 16%. Anything else is read again (a thread that
 * merely moved on too: dropping it would drop the short calls most). */
enum { CHECKED_FRAMES = 64, CHECKED_BYTES = 32 };

enum walk_check { WALK_HELD, WALK_CUT, WALK_ABOVE, WALK_MOVED };

static enum walk_check walk_check(struct sampler *s, const struct sampled_thread *th,
                                  const struct py_thread *pt, uint64_t top_at, size_t count,
                                  bool stopped, uint64_t *cut_at)
{
    const struct py_layout *L = &s->rt.layout;
    if (L->iframe_executable == PY_OFF_NONE || L->iframe_previous == PY_OFF_NONE)
        return WALK_HELD;
    long lo = L->iframe_executable < L->iframe_previous ? L->iframe_executable : L->iframe_previous;
    long hi = (L->iframe_executable > L->iframe_previous ? L->iframe_executable
                                                          : L->iframe_previous) + 8;
    size_t len = (size_t)(hi - lo);
    if (lo < 0 || len > CHECKED_BYTES)
        return WALK_HELD;
    unsigned char was[CHECKED_FRAMES][CHECKED_BYTES], now[CHECKED_FRAMES][CHECKED_BYTES];
    uint64_t addr[CHECKED_FRAMES], top = 0;
    struct target_span spans[CHECKED_FRAMES + 1];
    size_t n = 0, head = top_at ? 1 : 0;
    size_t tail = stopped && th->memo.reuse_from < th->memo.count
                      ? th->memo.count - th->memo.reuse_from : 0;
    for (size_t i = 0; i < count + tail && n < CHECKED_FRAMES; i++) {
        uint64_t frame = i < count ? s->frames[i].frame_addr
                                   : th->memo.addr[th->memo.reuse_from + (i - count)];
        /* Frames outside the copy were read at the walk's own instant. */
        if (!frame || py_stack_copy_peek(&th->copy, frame + (uint64_t)lo, was[n], len) != 0)
            continue;
        addr[n] = frame;
        spans[head + n] = (struct target_span){frame + (uint64_t)lo, now[n], len, false};
        n++;
    }
    if (n == 0)
        return WALK_HELD;
    if (top_at)
        spans[0] = (struct target_span){top_at, &top, 8, false};
    if (target_read_spans_framed(s->target, spans, head + n, head, 0) != head + n)
        return WALK_MOVED;
    /* From the new top down, only the frames below it must hold: those
     * above, returned from, may have been reused since. */
    size_t from = 0;
    enum walk_check verdict = WALK_HELD;
    if (top_at && top != pt->top_frame) {
        *cut_at = top;
        while (from < n && addr[from] != top)
            from++;
        bool above = pt->top_frame && top > pt->top_frame && th->copy.len &&
                     pt->top_frame >= th->copy.base && pt->datastack_limit &&
                     top < pt->datastack_limit;
        if (from < n)
            verdict = WALK_CUT;
        else if (above)
            verdict = WALK_ABOVE, from = 0;
        else
            return WALK_MOVED;
    }
    size_t exe = (size_t)(L->iframe_executable - lo), prev = (size_t)(L->iframe_previous - lo);
    for (size_t k = from; k < n; k++)
        if (memcmp(was[k] + exe, now[k] + exe, 8) != 0 || memcmp(was[k] + prev, now[k] + prev, 8) != 0)
            return WALK_MOVED;
    return verdict;
}

/* Walks one thread (its stack copy already read) and interns the stack;
 * returns the stack id, or UINT32_MAX. *torn is set when the walk could not
 * finish. On 3.11+ the walk stops where the thread's stack is unchanged
 * since its last walk, and the rest comes from the memo. */
static uint32_t sample_stack(struct sampler *s, struct sampled_thread *th,
                             const struct py_thread *pt, uint64_t interp, bool in_gc,
                             bool blocked, bool *torn, uint64_t top_at, bool *moved)
{
    const struct py_layout *L = &s->rt.layout;
    bool use_memo = (!s->verify_codes || s->memo_verified) && L->frames != PY_FRAMES_OBJECTS &&
                    th->copy.len;
    struct py_walker walker = {.reader = &s->reader, .codes = s->codes, .stack = &th->copy,
                               .skip_lines = true};
    if (use_memo) {
        walker.stop = stack_memo_stop;
        walker.stop_ctx = &th->memo;
    }
    uint64_t top = pt->top_frame;
    size_t count = 0;
    bool stopped, cut = false;
    enum py_walk_status status;
    size_t visited = th->copy.n_visited;
    for (int walks = 0;; walks++) {
        if (use_memo)
            stack_memo_begin(&th->memo, &th->copy, py_frame_read_size(L));
        th->copy.n_visited = visited; /* a walk again must not plan its frames twice */
        status = py_walk_frames(&walker, top, s->frames, MAX_STACK_DEPTH, &count);
        stopped = status == PY_WALK_STOPPED;
        *torn = status != PY_WALK_OK && status != PY_WALK_TOO_DEEP && !stopped;
        if (!moved || *torn || L->frames == PY_FRAMES_OBJECTS)
            break;
        /* The first walk's check reads the top again; a walk cut at a
         * frame below is of frames just checked; a walk from further up
         * is checked once more, the top not read again. */
        if (walks == 1 && cut)
            break;
        enum walk_check verdict = walk_check(s, th, pt, walks == 0 ? top_at : 0, count,
                                             stopped, &top);
        if (verdict == WALK_HELD)
            break;
        cut = verdict == WALK_CUT;
        if (verdict == WALK_MOVED || walks > 0 ||
            (verdict == WALK_ABOVE &&
             py_stack_copy_extend(&s->reader, &th->copy, top + py_frame_read_size(L)) != 0)) {
            th->memo.valid = false;
            *moved = true;
            return UINT32_MAX;
        }
    }
    if (count > 0) {
        bool same = !*torn && th->site_code && th->site_frame == s->frames[0].frame_addr &&
                    th->site_code == s->frames[0].code_addr &&
                    th->site_offset == s->frames[0].instr_offset;
        th->still_walks = same ? (uint8_t)(th->still_walks < 255 ? th->still_walks + 1 : 255) : 0;
        th->site_frame = s->frames[0].frame_addr;
        th->site_code = *torn ? 0 : s->frames[0].code_addr;
        th->site_offset = s->frames[0].instr_offset;
    } else if (!stopped) {
        th->site_code = 0;
        th->still_walks = 0;
    } else if (th->memo.reuse_from == 0 && th->still_walks < 255) {
        th->still_walks++; /* stopped at once: the same innermost frame, unchanged */
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t id = frame_id_for(s, s->frames[i].code_addr, s->frames[i].func_addr,
                                   s->frames[i].instr_offset, torn);
        if (id == UINT32_MAX) {
            th->memo.valid = false;
            return UINT32_MAX;
        }
        s->walk_ids[i] = id;
    }
    /* Before the memo takes over the copy's bytes, which the leaf reads. */
    if (count > 0) {
        th->at_call_known = !*torn;
        th->at_call = true;
        th->last_leaf = *torn ? UINT32_MAX
                              : callable_frame_for(s, &s->frames[0], &th->copy, &th->at_call);
    } else if (!stopped) {
        th->last_leaf = UINT32_MAX;
        th->at_call_known = false;
    }
    const uint32_t *ids = s->walk_ids;
    const bool *entry = NULL;
    size_t n = count;
    if (use_memo) {
        bool complete = (status == PY_WALK_OK || stopped) && !*torn;
        if (stack_memo_commit(&th->memo, &th->copy, s->frames, s->walk_ids, count, stopped,
                              complete) != 0) {
            *torn = true; /* out of memory: the part not walked is lost */
            return UINT32_MAX;
        }
        if (stopped) {
            ids = th->memo.ids;
            entry = th->memo.entry;
            n = th->memo.count < MAX_STACK_DEPTH ? th->memo.count : MAX_STACK_DEPTH;
        }
    } else {
        th->memo.valid = false;
    }
    uint32_t leaf = !*torn ? th->last_leaf : UINT32_MAX;
    /* Innermost first so far; profiles store outermost first. */
    uint32_t depth = 0;
    if (s->native && !*torn) {
        if (!entry) {
            for (size_t i = 0; i < n; i++)
                s->entry_flags[i] = s->frames[i].is_entry;
            entry = s->entry_flags;
        }
        /* (A walk the memo stopped at once left the innermost frame where
         * the last walk found it.) */
        bool task = s->tasks &&
                    async_stacks_native_read(s->tasks, interp, th->tstate, s->frames,
                                             use_memo ? th->memo.addr : NULL, n);
        bool holds = th->hold_seen_ns != 0;
        struct native_py_stack py = {ids, entry, n, leaf, n ? th->site_frame : 0,
                                     n ? th->site_offset : -1,
                                     holds ? th->hold_seen_ns : 0,
                                     holds ? s->states_read_ns : UINT64_MAX};
        depth = (uint32_t)native_sampler_stack(s->native, th->tid, blocked, &py, s->stack_ids,
                                               MAX_STACK_DEPTH + 1);
        if (task)
            depth = (uint32_t)async_stacks_native(s->tasks, ids, n, s->stack_ids, depth,
                                                  MAX_STACK_DEPTH + 1);
    } else {
        /* With --async, a loop thread's frames below its running task's
         * coroutine give way to the task's logical stack. */
        size_t keep = n;
        if (s->tasks)
            depth = (uint32_t)async_stacks_prefix(s->tasks, interp, th->tstate, s->frames,
                                                  use_memo ? th->memo.addr : NULL, n, s->stack_ids,
                                                  MAX_STACK_DEPTH - n, &keep);
        for (size_t i = keep; i-- > 0;)
            s->stack_ids[depth++] = ids[i];
        if (leaf != UINT32_MAX && depth > 0)
            s->stack_ids[depth++] = leaf;
    }
    if (in_gc) {
        /* Remember what the collection runs on top of: the code that
         * allocated and so triggered it. */
        uint32_t below = profile_stack_id(s->profile, s->stack_ids, depth);
        if (below != UINT32_MAX)
            s->sink->ops->gc_trigger(s->sink, below, !s->st->gc_was_collecting);
        s->stack_ids[depth++] = s->gc_frame;
    }
    return profile_stack_id(s->profile, s->stack_ids, depth);
}

struct pass_thread {
    struct sampled_thread *th;
    struct py_thread pt;
    int interp;                 /* index into the pass's interpreters */
    uint64_t cframe;            /* 3.11/3.12 */
    bool top_assumed;           /* pt.top_frame is the last pass's (cframe_assumed) */
    bool ts_stale;              /* pt is from an earlier pass's read (ts_skipped) */
    bool top_later;             /* pt.top_frame was read after the first read (3.11/3.12) */
};

/* Where the thread's top frame pointer lives now, to read it again. */
static uint64_t top_field_addr(const struct sampler *s, const struct pass_thread *pass)
{
    const struct py_layout *L = &s->rt.layout;
    if (L->tstate_current_frame != PY_OFF_NONE)
        return pass->pt.tstate + (uint64_t)L->tstate_current_frame;
    if (L->cframe_current_frame != PY_OFF_NONE && pass->cframe)
        return pass->cframe + (uint64_t)L->cframe_current_frame;
    return 0;
}

/* The interpreters change rarely; they are looked up again every so often,
 * and whenever a pass finds them inconsistent. */
#define INTERP_REFRESH_NS 100000000ull

static void refresh_interpreters(struct sampler *s, uint64_t now_ns)
{
    uint64_t before[PY_MAX_INTERPRETERS], gil_before[PY_MAX_INTERPRETERS];
    int n_before = s->n_interps;
    for (int k = 0; k < n_before; k++) {
        before[k] = s->interps[k].addr;
        gil_before[k] = s->interps[k].gil;
    }
    s->n_interps = 0;
    uint64_t addr = py_runtime_first_interpreter(&s->rt);
    while (addr && s->n_interps < PY_MAX_INTERPRETERS) {
        struct py_interp *pi = &s->interps[s->n_interps++];
        py_interp_read(&s->reader, addr, pi);
        pi->gc_flag = py_interp_gc_flag(&s->reader, addr);
        if (target_read_u64(s->target, addr + (uint64_t)s->rt.layout.interp_next, &addr) != 0)
            break;
    }
    s->interps_read_ns = now_ns;
    /* The thread list of the last pass stays the plan of the next single
     * read unless the interpreters moved (that read checks the list). */
    bool same = s->n_interps == n_before;
    for (int k = 0; same && k < n_before; k++)
        same = s->interps[k].addr == before[k] && s->interps[k].gil == gil_before[k];
    if (!same)
        s->n_chain = 0;
}

static int grow_pass(struct sampler *s, size_t n)
{
    if (n <= s->cap_pass)
        return 0;
    size_t cap = s->cap_pass ? s->cap_pass : 32;
    while (cap < n)
        cap *= 2;
    struct pass_thread *threads = realloc(s->pass, cap * sizeof *threads);
    if (threads)
        s->pass = threads;
    unsigned char *blocks = realloc(s->blocks, cap * (size_t)TSTATE_READ_MAX);
    if (blocks)
        s->blocks = blocks;
    if (!threads || !blocks)
        return -1;
    s->cap_pass = cap;
    return 0;
}

/* Reads every interpreter's GIL, GC flag and thread list head, and every
 * thread state seen on the last pass, in one scattered read; then checks
 * that the list still links up the same way. Returns the number of threads,
 * or -1 when the list changed (the caller then walks it). */
/* Room for at least need spans. */
static int reserve_spans(struct sampler *s, size_t need)
{
    if (need <= s->cap_spans)
        return 0;
    struct target_span *grown = realloc(s->spans, need * 2 * sizeof *grown);
    if (!grown)
        return -1;
    s->spans = grown;
    s->cap_spans = need * 2;
    return 0;
}

/* How far past last pass's top of stack the read ahead reaches, so that a
 * thread that called a few functions deeper since is still covered. Each
 * byte costs the copy, so it adapts per thread: doubled whenever the stack
 * outgrew it (which costs a second read), halved after a long run of
 * passes it was enough for. */
#define READ_AHEAD_MIN 512u
#define READ_AHEAD_MAX 16384u
#define READ_AHEAD_SHRINK_AFTER 1024u

static void adapt_read_ahead(struct sampled_thread *th, bool covered)
{
    if (th->ahead < READ_AHEAD_MIN)
        th->ahead = READ_AHEAD_MIN;
    if (!covered) {
        th->covered_run = 0;
        if (th->ahead < READ_AHEAD_MAX)
            th->ahead *= 2;
    } else if (++th->covered_run >= READ_AHEAD_SHRINK_AFTER) {
        th->covered_run = 0;
        if (th->ahead > READ_AHEAD_MIN)
            th->ahead /= 2;
    }
}


/* The thread states of parked threads are left unread while the GIL shows
 * they cannot have changed. A thread's Python state (its frames, its data
 * stack, the top frame its thread state points to) changes only while it
 * holds the GIL, and CPython counts a switch every time the GIL is taken
 * by a thread other than its last holder: while the count stands where it
 * was when the thread state was read, and the thread is not the last
 * holder, it has not taken the GIL since. Only the last holder can have run
 * meanwhile, and the one change it can make to another's thread state that
 * a pass uses is unlinking itself from the list, which rewrites its
 * predecessor's next: that one is read too. A thread state is still read at
 * least every TSTATE_SKIP_MAX_NS. */
#define TSTATE_SKIP_MAX_NS 1000000000ull

static bool quiet_since_read(const struct sampler *s, const struct sampled_thread *th, int k,
                             uint64_t switches, uint64_t last_holder, uint64_t now_ns)
{
    return th->ts_known && s->interps[k].gil && s->rt.layout.gil_switch_number != PY_OFF_NONE &&
           switches == th->ts_switch && last_holder != th->tstate &&
           now_ns - th->ts_read_ns < TSTATE_SKIP_MAX_NS;
}

/* Whether chain entry i's thread state can be left unread, on the GIL's
 * switch count given: to plan, the last pass's, and only when no switch
 * came between the last two passes either (else a switch is likely again,
 * and confirming would cost a second read); to confirm, this pass's. */
static bool skip_tstate(const struct sampler *s, size_t i, const struct sampled_thread *th,
                        uint64_t switches, bool planning, uint64_t now_ns)
{
    int k = s->chain[i].interp;
    if (!s->skip_quiet_tstates || !s->chain_blocks || k < 0 || k >= s->n_interps ||
        (!th->parked && !th->idle_parked) || (planning && !s->gil_quiet[k]))
        return false;
    uint64_t holder = s->last_holders[k];
    bool holder_next = i + 1 < s->n_chain && s->chain[i + 1].interp == k &&
                       s->chain[i + 1].tstate == holder;
    return !holder_next && quiet_since_read(s, th, k, switches, holder, now_ns);
}

/* This pass's GIL read along with the rest: a thread state left unread
 * whose thread may have taken the GIL after all is read now. */
static int confirm_skipped(struct sampler *s, size_t ts_size)
{
    const struct py_layout *L = &s->rt.layout;
    for (int k = 0; k < s->n_interps; k++) {
        uint64_t before = s->interps[k].gil_switches;
        py_gil_decode(L, (const unsigned char *)s->gil_bufs[k], &s->interps[k]);
        s->gil_quiet[k] = s->interps[k].gil_switches == before;
        memcpy(&s->last_holders[k], (const unsigned char *)s->gil_bufs[k] + L->gil_last_holder, 8);
    }
    size_t n = 0;
    for (size_t i = 0; i < s->n_chain; i++) {
        if (!s->chain[i].ts_skipped)
            continue;
        struct sampled_thread *th = find_thread(s, s->chain[i].tstate, s->chain[i].thread_id);
        /* quiet_since_read's clock was checked when planning. */
        if (th && skip_tstate(s, i, th, s->interps[s->chain[i].interp].gil_switches, false,
                              th->ts_read_ns))
            continue;
        s->chain[i].ts_skipped = false;
        s->spans[n++] = (struct target_span){s->chain[i].tstate, s->blocks + i * TSTATE_READ_MAX,
                                             ts_size, false};
    }
    if (n && target_read_spans(s->target, s->spans, n) != n)
        return -1;
    return 0;
}

/* The threads whose thread state this pass read: the GIL's count then. */
static void note_read_states(struct sampler *s, int n_pass, uint64_t now_ns)
{
    for (int i = 0; i < n_pass; i++) {
        struct sampled_thread *th = s->pass[i].th;
        if (!th || s->pass[i].ts_stale)
            continue;
        th->ts_switch = s->interps[s->pass[i].interp].gil_switches;
        th->ts_read_ns = now_ns;
        th->ts_known = true;
    }
}

/* 3.11/3.12 keep the top frame pointer in a _PyCFrame on the thread's C
 * stack, a page of its own to read for each thread. A thread that the last
 * two walks found in the same innermost frame at a call (sleeping, waiting
 * on a lock or a socket) is planned without it, the frame it was in taken
 * as its top, if top_still confirms it. */
static bool top_keepable(const struct sampled_thread *th)
{
    return th->still_walks >= 1 && th->at_call_known && th->at_call && th->site_code &&
           th->site_frame == th->last_top_frame && th->memo.valid && th->last_chunk;
}

/* Read in the same instant as the thread state (pt) and the stack copy: the
 * same _PyCFrame (a C function calling back into Python runs its own eval
 * loop, which puts one of its own), the same top of the data stack (a
 * Python call pushes its frame there), and the frame kept as the top the
 * same to the byte, at the same call (only FOR_ITER and SEND enter a
 * generator's frame, which lies elsewhere, without either). Then the
 * _PyCFrame's current_frame is still that frame. */
static bool top_still(struct sampler *s, const struct chain_entry *e, const struct py_thread *pt)
{
    struct sampled_thread *th = find_thread(s, e->tstate, e->thread_id);
    return th && th->read_ahead && th->n_spans && pt->datastack_chunk == th->last_chunk &&
           pt->datastack_top == th->last_top && pt->top_frame == th->last_top_frame &&
           stack_memo_frame_same(&th->memo, &th->copy, th->last_top_frame,
                                 py_frame_read_size(&s->rt.layout));
}

static int read_known_threads(struct sampler *s, size_t ts_size, uint64_t now_ns)
{
    const struct py_layout *L = &s->rt.layout;
    size_t n_spans = 0, need = (size_t)s->n_interps * 5 + s->n_chain * 2;
    if (reserve_spans(s, need) != 0)
        return -1;
    if (s->n_chain == 0 || grow_pass(s, s->n_chain) != 0 || L->gil_size <= 0 ||
        (size_t)L->gil_size > sizeof s->gil_bufs[0])
        return -1;
    /* Each GIL's switch count and last holder first and last of the read
     * (never merged with the rest, which is read in address order): see
     * sample_stack_once_more. */
    bool gil_framed = L->gil_switch_number != PY_OFF_NONE && L->gil_switch_number + 8 <= L->gil_size &&
                      L->gil_last_holder + 8 <= L->gil_size;
    for (int k = 0; gil_framed && k < s->n_interps; k++) {
        s->spans[n_spans++] = (struct target_span){s->interps[k].gil + (uint64_t)L->gil_switch_number,
                                                   &s->gil_start[k][0], 8, false};
        s->spans[n_spans++] = (struct target_span){s->interps[k].gil + (uint64_t)L->gil_last_holder,
                                                   &s->gil_start[k][1], 8, false};
    }
    size_t n_head = n_spans;
    for (int k = 0; k < s->n_interps; k++) {
        struct py_interp *pi = &s->interps[k];
        s->spans[n_spans++] = (struct target_span){pi->gil, s->gil_bufs[k], (size_t)L->gil_size, false};
        s->spans[n_spans++] = (struct target_span){pi->addr + (uint64_t)L->interp_threads_head,
                                                   &s->heads[k], 8, false};
        if (pi->gc_flag)
            s->spans[n_spans++] = (struct target_span){pi->gc_flag, &s->gc_flags[k], 4, false};
    }
    for (size_t i = 0; i < s->n_chain; i++) {
        struct sampled_thread *th = find_thread(s, s->chain[i].tstate, s->chain[i].thread_id);
        s->chain[i].cframe_assumed = false;
        s->chain[i].top_kept = false;
        s->chain[i].ts_skipped = false;
        if (th) {
            th->read_ahead = false;
            th->parked = th->waiting_since_switch != UINT64_MAX && th->last_stack != UINT32_MAX;
            th->idle_parked = !th->parked && th->last_stack != UINT32_MAX &&
                              still_idle(s, th, false, now_ns);
            /* Judged on the last pass's GIL; this pass's confirms it below. */
            s->chain[i].ts_skipped = skip_tstate(s, i, th, s->interps[s->chain[i].interp].gil_switches,
                                                 true, now_ns);
            s->chain[i].cframe_assumed = th->idle_parked || s->chain[i].ts_skipped;
            if (!s->chain[i].cframe_assumed && !th->parked && s->chain[i].cframe &&
                top_keepable(th))
                s->chain[i].cframe_assumed = s->chain[i].top_kept = true;
        }
        if (!s->chain[i].ts_skipped)
            s->spans[n_spans++] = (struct target_span){s->chain[i].tstate,
                                                       s->blocks + i * TSTATE_READ_MAX, ts_size, false};
    }
    size_t first_cframe = n_spans;
    /* 3.11/3.12 keep the top frame in a _PyCFrame on the thread's C stack;
     * it rarely moves, so the one seen last time is read along (a page of
     * its own per thread: not for a thread parked idle, whose last top frame
     * stands while its thread state has not moved either). */
    for (size_t i = 0; i < s->n_chain; i++) {
        if (!s->chain[i].cframe)
            continue;
        struct sampled_thread *th = find_thread(s, s->chain[i].tstate, s->chain[i].thread_id);
        if (s->chain[i].cframe_assumed && th)
            s->chain[i].cframe_top = th->last_top_frame;
        else
            s->spans[n_spans++] = (struct target_span){
                s->chain[i].cframe + (uint64_t)L->cframe_current_frame, &s->chain[i].cframe_top, 8,
                false};
    }
    /* Each thread's stack as it was last time, and the frames it had
     * outside its chunk: when nothing moved far, this one read is the whole
     * pass, and the stack is read at nearly the same instant as the state. */
    for (size_t i = 0; i < s->n_chain; i++) {
        struct sampled_thread *th = find_thread(s, s->chain[i].tstate, s->chain[i].thread_id);
        if (!th || th->parked || th->idle_parked)
            continue;
        if (reserve_spans(s, n_spans + 1 + th->copy.n_visited) != 0)
            break;
        th->first_span = n_spans;
        uint64_t ahead = th->last_top + (th->ahead ? th->ahead : READ_AHEAD_MIN);
        if (th->last_limit && ahead > th->last_limit)
            ahead = th->last_limit; /* past the chunk's end the read would fail */
        th->n_spans = py_stack_copy_plan(&s->reader, &th->copy, th->last_chunk,
                                         th->last_chunk ? ahead : 0, s->spans + n_spans,
                                         s->cap_spans - n_spans);
        n_spans += th->n_spans;
        th->read_ahead = true;
    }
    size_t first_gil_end = n_spans;
    gil_framed = gil_framed && reserve_spans(s, n_spans + 2 * (size_t)s->n_interps) == 0;
    for (int k = 0; gil_framed && k < s->n_interps; k++) {
        s->spans[n_spans++] = (struct target_span){s->interps[k].gil + (uint64_t)L->gil_switch_number,
                                                   &s->gil_end[k][0], 8, false};
        s->spans[n_spans++] = (struct target_span){s->interps[k].gil + (uint64_t)L->gil_last_holder,
                                                   &s->gil_end[k][1], 8, false};
    }
    target_read_spans_framed(s->target, s->spans, n_spans, gil_framed ? n_head : 0,
                             gil_framed ? n_spans - first_gil_end : 0);
    for (int k = 0; k < s->n_interps; k++)
        s->gil_steady[k] = gil_framed && s->spans[2 * (size_t)k].ok &&
                           s->spans[2 * (size_t)k + 1].ok &&
                           s->spans[first_gil_end + 2 * (size_t)k].ok &&
                           s->spans[first_gil_end + 2 * (size_t)k + 1].ok &&
                           memcmp(s->gil_start[k], s->gil_end[k], sizeof s->gil_end[k]) == 0;
    for (size_t i = 0; i < s->n_chain; i++) {
        struct sampled_thread *th = find_thread(s, s->chain[i].tstate, s->chain[i].thread_id);
        if (th && th->read_ahead)
            py_stack_copy_commit(&th->copy, s->spans + th->first_span, th->n_spans);
    }
    for (size_t i = n_head; i < first_cframe; i++)
        if (!s->spans[i].ok)
            return -1;
    for (size_t i = 0, k = first_cframe; i < s->n_chain; i++) {
        if (!s->chain[i].cframe)
            s->chain[i].cframe_ok = false;
        else if (s->chain[i].cframe_assumed)
            s->chain[i].cframe_ok = true;
        else
            s->chain[i].cframe_ok = s->spans[k++].ok;
    }
    if (confirm_skipped(s, ts_size) != 0)
        return -1;
    size_t i = 0;
    for (int k = 0; k < s->n_interps; k++) {
        struct py_interp *pi = &s->interps[k];
        py_gil_decode(L, (const unsigned char *)s->gil_bufs[k], pi);
        pi->gc_collecting = pi->gc_flag && s->gc_flags[k] != 0;
        uint64_t expected = s->heads[k];
        while (expected) {
            if (i >= s->n_chain || s->chain[i].tstate != expected || s->chain[i].interp != k)
                return -1;
            const unsigned char *block = s->blocks + i * TSTATE_READ_MAX;
            uint64_t back, next;
            memcpy(&back, block + L->tstate_interp, 8);
            memcpy(&next, block + L->tstate_next, 8);
            if (back != pi->addr)
                return -1;
            struct pass_thread *ptr = &s->pass[i];
            uint64_t cframe = py_tstate_cframe(L, block);
            bool along = cframe && cframe == s->chain[i].cframe && s->chain[i].cframe_ok;
            if (along) {
                /* Fill from the block without the cframe read, then put in
                 * the top frame that was read along with it. */
                ptr->pt = (struct py_thread){0};
                py_thread_from_block_no_frame(&s->reader, expected, block, &ptr->pt);
                ptr->pt.top_frame = s->chain[i].cframe_top;
                ptr->top_assumed = s->chain[i].cframe_assumed && !s->chain[i].top_kept;
                ptr->top_later = false;
                along = !s->chain[i].top_kept || top_still(s, &s->chain[i], &ptr->pt);
            }
            if (!along) {
                py_thread_from_block(&s->reader, expected, block, &ptr->pt);
                ptr->top_assumed = false;
                ptr->top_later = cframe != 0;
            }
            ptr->cframe = cframe;
            ptr->interp = k;
            ptr->th = NULL;
            ptr->ts_stale = s->chain[i].ts_skipped;
            i++;
            expected = next;
        }
    }
    return i == s->n_chain ? (int)i : -1;
}

/* The slow path: walk every thread list with one read per thread state. */
static int walk_threads(struct sampler *s, size_t ts_size)
{
    const struct py_layout *L = &s->rt.layout;
    size_t n = 0;
    s->chain_blocks = false; /* the blocks are rewritten in the list's new order */
    if (!s->walked.slots && addrset_init(&s->walked, PY_MAX_THREADS) != 0)
        return -1;
    addrset_clear(&s->walked);
    for (int k = 0; k < s->n_interps; k++) {
        struct py_interp *pi = &s->interps[k];
        py_interp_read_gil(&s->reader, pi);
        int32_t gc = 0;
        pi->gc_collecting = pi->gc_flag && target_read_i32(s->target, pi->gc_flag, &gc) == 0 && gc;
        uint64_t tstate = 0;
        if (target_read_u64(s->target, pi->addr + (uint64_t)L->interp_threads_head, &tstate) != 0)
            return -1;
        /* A thread state met again: one we passed exited and a new thread
         * took its memory, linked at the head. The list ends there, so that
         * no thread is sampled (and its stack planned) twice in a pass. */
        for (int guard = 0; tstate && guard < PY_MAX_THREADS && addrset_add(&s->walked, tstate);
             guard++) {
            if (grow_pass(s, n + 1) != 0)
                return -1;
            unsigned char *block = s->blocks + n * TSTATE_READ_MAX;
            uint64_t back;
            if (s->target->ops->read_raw(s->target, tstate, block, ts_size) != 0)
                return -1;
            memcpy(&back, block + L->tstate_interp, 8);
            if (back != pi->addr)
                return -1;
            py_thread_from_block(&s->reader, tstate, block, &s->pass[n].pt);
            s->pass[n].cframe = py_tstate_cframe(L, block);
            s->pass[n].interp = k;
            s->pass[n].th = NULL;
            s->pass[n].top_assumed = false;
            s->pass[n].ts_stale = false;
            s->pass[n].top_later = true; /* read one by one: nothing is bracketed */
            n++;
            memcpy(&tstate, block + L->tstate_next, 8);
        }
    }
    return (int)n;
}

/* After an exec nothing we know about the process holds. */
static bool exec_happened(struct sampler *s)
{
    uint64_t image = target_image_id(s->target);
    if (image && s->image_id && image != s->image_id)
        s->exec_seen = true;
    return s->exec_seen;
}

static uint64_t interp_refresh_ns(const struct sampler *s)
{
    return s->interp_refresh_ns ? s->interp_refresh_ns : INTERP_REFRESH_NS;
}

/* Caches and interpreters before a pass. Returns 1 to go on, 0 when there is
 * nothing to sample yet, -1 when the process is gone or exec'd. */
static int prepare_pass(struct sampler *s, uint64_t now_ns)
{
    target_cache_invalidate(s->target);
    if (now_ns - s->last_code_flush_ns > CODE_CACHE_LIFETIME_NS) {
        flush_code_caches(s);
        s->last_code_flush_ns = now_ns;
    }
    /* No interpreter yet: a process starting up is looked at again at every
     * pass, unless the owner set its own pace (the agent, for which a
     * program that links libpython without running it, perf or gdb say,
     * would otherwise cost a lookup and a liveness check at every pass). */
    bool empty_due = s->n_interps == 0 &&
                     (!s->interp_refresh_ns || now_ns - s->interps_read_ns > s->interp_refresh_ns);
    if (empty_due || now_ns - s->interps_read_ns > interp_refresh_ns(s)) {
        if (exec_happened(s))
            return -1;
        refresh_interpreters(s, now_ns);
        if (s->n_interps == 0)
            return target_gone(s->target) ? -1 : 0;
    }
    if (s->n_interps == 0)
        return 0;
    return 1;
}

/* Every thread state into s->pass: the one read of the list last seen, or
 * the walk when it changed. Returns the number of threads, or -1. */
static int read_thread_states(struct sampler *s, uint64_t now_ns)
{
    const struct py_layout *L = &s->rt.layout;
    size_t ts_size = L->tstate_size > 0 && L->tstate_size <= TSTATE_READ_MAX ? (size_t)L->tstate_size
                                                                             : TSTATE_READ_MAX;
    int n_pass = read_known_threads(s, ts_size, now_ns);
    if (n_pass < 0) {
        /* The stacks planned with the first read are not the states read
         * next: none is bracketed by its GIL reads. */
        memset(s->gil_steady, 0, sizeof s->gil_steady);
        if (interp_refresh_ns(s) > INTERP_REFRESH_NS && exec_happened(s))
            return -1;
        refresh_interpreters(s, now_ns);
        n_pass = walk_threads(s, ts_size);
    }
    return n_pass;
}

/* Remembers the list for the next pass's single read. */
static void remember_chain(struct sampler *s, int n_pass)
{
    if ((size_t)n_pass > s->cap_chain) {
        struct chain_entry *grown = realloc(s->chain, (size_t)n_pass * 2 * sizeof *grown);
        if (grown) {
            s->chain = grown;
            s->cap_chain = (size_t)n_pass * 2;
        }
    }
    s->n_chain = 0;
    if ((size_t)n_pass <= s->cap_chain) {
        for (int i = 0; i < n_pass; i++)
            s->chain[i] = (struct chain_entry){s->pass[i].pt.tstate, s->pass[i].pt.thread_id,
                                               s->pass[i].interp, s->pass[i].cframe, 0, false,
                                               false, false, false};
        s->n_chain = (size_t)n_pass;
    }
    /* Block i is pass i's thread state, i.e. chain entry i's. */
    s->chain_blocks = s->n_chain == (size_t)n_pass;
}

struct tid_owner {
    pid_t tid;
    bool holds;  /* holds its interpreter's GIL: where the thread runs now */
    bool frameless;
    size_t age;  /* index in s->threads: smaller was added earlier */
    int pass;
};

static int tid_owner_order(const void *a, const void *b)
{
    const struct tid_owner *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->holds != y->holds)
        return x->holds ? -1 : 1;
    if (x->frameless != y->frameless)
        return x->frameless ? 1 : -1;
    return x->age < y->age ? -1 : x->age > y->age;
}

static void one_state_per_tid(struct sampler *s, int n_pass)
{
    struct tid_owner *o = malloc((size_t)n_pass * sizeof *o);
    if (!o)
        return;
    int n = 0;
    for (int i = 0; i < n_pass; i++)
        if (s->pass[i].th)
            o[n++] = (struct tid_owner){
                s->pass[i].th->tid,
                s->interps[s->pass[i].interp].gil_holder == s->pass[i].pt.tstate,
                !s->pass[i].pt.top_frame, (size_t)(s->pass[i].th - s->threads), i};
    qsort(o, (size_t)n, sizeof *o, tid_owner_order);
    for (int k = 1; k < n; k++)
        if (o[k].tid == o[k - 1].tid)
            s->pass[o[k].pass].th = NULL;
    free(o);
}

/* Pairs each thread state of the pass with its sampled thread, adding the
 * new ones. */
static void match_threads(struct sampler *s, int n_pass)
{
    for (size_t i = 0; i < s->n_threads; i++)
        s->threads[i].seen = false;
    struct tid_lookup lk = {0};
    for (int i = 0; i < n_pass; i++)
        if (!find_thread(s, s->pass[i].pt.tstate, s->pass[i].pt.thread_id))
            add_thread(s, &s->pass[i].pt, &lk);
    if (lk.ok)
        py_snapshot_free(&lk.snap);
    for (int i = 0; i < n_pass; i++)
        s->pass[i].th = find_thread(s, s->pass[i].pt.tstate, s->pass[i].pt.thread_id);
    /* One kernel thread, one sample a pass. Before 3.11 a thread state
     * can carry another thread's thread_id, and so its tid: one that
     * Thread.start() is making (its creator's), or one read while it is
     * freed and reused. With subinterpreters, a thread that entered one
     * has a state in each interpreter. Of those sharing a tid, the one
     * holding its GIL is kept, else the one with frames known longest. */
    if ((s->reader.L->tstate_native_thread_id == PY_OFF_NONE || s->n_interps > 1) && n_pass > 1)
        one_state_per_tid(s, n_pass);
}

/* Stacks the first read did not cover (new threads, a moved or grown
 * stack), in one more scattered read. */
static void read_uncovered_stacks(struct sampler *s, int n_pass)
{
    size_t n_spans = 0;
    for (int i = 0; i < n_pass; i++) {
        struct sampled_thread *th = s->pass[i].th;
        if (!th)
            continue;
        struct py_thread *pt = &s->pass[i].pt;
        const struct py_interp *pi = &s->interps[s->pass[i].interp];
        th->n_spans = 0;
        th->bracketed = false;
        if (th->parked) {
            if (still_waiting(th, pi) && pt->top_frame == th->last_top_frame)
                continue;
            th->parked = false; /* it took the GIL since: read it whole */
        }
        if (th->idle_parked) {
            if (pi->gil_holder != th->tstate && pt->top_frame == th->last_top_frame &&
                pt->datastack_chunk == th->last_chunk && pt->datastack_top == th->last_top)
                continue;
            th->idle_parked = false;
            th->idle_read_ns = 0; /* it moved: its state is read again too */
            uint64_t top = 0;
            if (s->pass[i].top_assumed &&
                target_read_u64(s->target, s->pass[i].cframe + (uint64_t)s->rt.layout.cframe_current_frame,
                                &top) == 0)
                pt->top_frame = top;
            else if (s->pass[i].top_assumed)
                pt->top_frame = 0; /* unreadable: nothing sampled rather than the old stack */
        }
        const struct py_stack_copy *c = &th->copy;
        bool covered = th->read_ahead && pt->datastack_chunk == th->last_chunk &&
                       (pt->datastack_chunk == 0 ||
                        (c->len && pt->datastack_top >= c->base &&
                         pt->datastack_top - c->base <= c->len));
        if (th->read_ahead && pt->datastack_chunk == th->last_chunk)
            adapt_read_ahead(th, covered);
        /* (An idle parked thread that moved was not planned in the first
         * read: read_ahead is false, and its top was read after it.) */
        th->bracketed = covered && !s->pass[i].ts_stale && !s->pass[i].top_assumed &&
                        !s->pass[i].top_later;
        if (covered)
            continue;
        if (reserve_spans(s, n_spans + 1 + th->copy.n_visited) != 0)
            break;
        th->first_span = n_spans;
        th->n_spans = th->read_ahead
            ? py_stack_copy_plan_chunk(&s->reader, &th->copy, pt->datastack_chunk,
                                       pt->datastack_top, s->spans + n_spans,
                                       s->cap_spans - n_spans)
            : py_stack_copy_plan(&s->reader, &th->copy, pt->datastack_chunk, pt->datastack_top,
                                 s->spans + n_spans, s->cap_spans - n_spans);
        n_spans += th->n_spans;
    }
    if (n_spans)
        target_read_spans(s->target, s->spans, n_spans);
    for (int i = 0; i < n_pass; i++) {
        struct sampled_thread *th = s->pass[i].th;
        if (!th)
            continue;
        if (th->n_spans && th->read_ahead)
            py_stack_copy_commit_chunk(&th->copy, s->spans + th->first_span, th->n_spans);
        else if (th->n_spans)
            py_stack_copy_commit(&th->copy, s->spans + th->first_span, th->n_spans);
        th->last_chunk = s->pass[i].pt.datastack_chunk;
        th->last_top = s->pass[i].pt.datastack_top;
        th->last_limit = s->pass[i].pt.datastack_limit;
        th->read_ahead = false;
    }
}

/* A thread whose walk did not hold (walk_check): its state, top frame and
 * stack are read again, in that order and at once. Returns false when the
 * thread state no longer reads as this thread's. */
static bool reread_thread(struct sampler *s, struct pass_thread *pass)
{
    const struct py_layout *L = &s->rt.layout;
    size_t ts_size = L->tstate_size > 0 && L->tstate_size <= TSTATE_READ_MAX ? (size_t)L->tstate_size
                                                                             : TSTATE_READ_MAX;
    unsigned char *block = s->blocks + (size_t)(pass - s->pass) * TSTATE_READ_MAX;
    uint64_t back;
    if (s->target->ops->read_raw(s->target, pass->pt.tstate, block, ts_size) != 0)
        return false;
    memcpy(&back, block + L->tstate_interp, 8);
    struct py_thread pt;
    py_thread_from_block(&s->reader, pass->pt.tstate, block, &pt);
    if (back != s->interps[pass->interp].addr || pt.thread_id != pass->pt.thread_id)
        return false;
    pass->pt = pt;
    pass->cframe = py_tstate_cframe(L, block);
    pass->top_assumed = false;
    pass->ts_stale = false;
    py_stack_copy_read(&s->reader, pt.datastack_chunk, pt.datastack_top, &pass->th->copy);
    return true;
}

/* A thread is read again at most this many times in a pass. */
#define REREADS_MAX 2

static uint32_t sample_stack_once_more(struct sampler *s, struct pass_thread *pass,
                                       uint64_t interp, bool in_gc, bool blocked, bool *torn)
{
    /* A thread runs Python code only while it holds the GIL, and CPython
     * counts a switch whenever a thread other than the last holder takes
     * it. When the GIL read last in the first read shows the count and
     * the last holder as the one read first did, only that holder can have run
     * while the state, top and copy were read: no other thread needs the
     * check; when it changed hands, every thread does. A thread read again
     * after the first read is checked if it held the GIL when the pass read
     * it, or when none did. */
    const struct py_interp *pi = &s->interps[pass->interp];
    bool check = !pass->th->bracketed ? !pi->gil_holder || pi->gil_holder == pass->pt.tstate
                 : s->gil_steady[pass->interp] ? s->last_holders[pass->interp] == pass->pt.tstate
                                               : true;
    for (int reads = 0;; reads++) {
        bool moved = false;
        uint32_t stack = sample_stack(s, pass->th, &pass->pt, interp, in_gc, blocked, torn,
                                      top_field_addr(s, pass), check ? &moved : NULL);
        if (!moved)
            return stack;
        /* Still moving after that many reads: unreadable, not a guess. */
        if (reads == REREADS_MAX || !reread_thread(s, pass)) {
            *torn = true;
            return UINT32_MAX;
        }
    }
}

/* One thread of the pass: its state, its stack, and the sample for the sink. */
static void sample_thread(struct sampler *s, struct pass_thread *pass, struct pass_summary *sum,
                          uint64_t now_ns)
{
    struct sampled_thread *th = pass->th;
    th->seen = true;
    const struct py_interp *pi = &s->interps[pass->interp];
    uint16_t syscall;
    bool in_gc = pi->gc_collecting && pi->gil_holder == th->tstate;
    bool torn = false;
    uint32_t stack = UINT32_MAX;
    enum profile_state state;
    if (s->native) {
        /* The C stack's merge needs to know whether the thread is off CPU
         * (its switch-out sample is then of this instant); parking idle
         * threads, which wants the stack first, is the agent's alone. */
        state = classify(s, th, pi, (uint64_t)s->rt.layout.gil_size, false, now_ns, &syscall);
        bool holds = pi->gil && pi->gil_holder == th->tstate;
        if (!holds) {
            th->hold_seen_ns = 0;
        } else if (!th->hold_seen_ns || th->hold_seen_switches != pi->gil_switches) {
            th->hold_seen_ns = s->states_read_ns;
            th->hold_seen_switches = pi->gil_switches;
        }
        if (!th->parked && !th->idle_parked)
            stack = sample_stack_once_more(s, pass, pi->addr, in_gc,
                                           state == PROFILE_IDLE || state == PROFILE_WAITING_GIL,
                                           &torn);
    } else {
        /* The stack first: whether the thread is still at the call it was
         * last found idle in is part of its state (see classify). */
        if (!th->parked && !th->idle_parked)
            stack = sample_stack_once_more(s, pass, pi->addr, in_gc, false, &torn);
        state = classify(s, th, pi, (uint64_t)s->rt.layout.gil_size, torn, now_ns, &syscall);
    }
    if ((th->parked && state == PROFILE_WAITING_GIL) || (th->idle_parked && state == PROFILE_IDLE))
        stack = th->last_stack;
    else if (th->parked || th->idle_parked)
        torn = true; /* cannot be: parked means still waiting, or idle */
    /* On a CPU without the GIL, yet running bytecode that calls
     * nothing: no code can do that, so it is between the futex wake-up
     * and taking the GIL (what take_gil does when CPUs are scarce). */
    if (state == PROFILE_RUNNING && !th->parked && !torn && th->at_call_known && !th->at_call)
        state = PROFILE_WAITING_GIL;
    th->last_stack = torn ? UINT32_MAX : stack;
    th->last_top_frame = pass->pt.top_frame;
    bool had = th->has_sample;
    th->has_sample = false;
    sum->sampled++;
    if (torn) {
        sum->torn++;
        sum->failed = true;
    }
    if (stack == UINT32_MAX) {
        sum->changed++;
        return;
    }
    struct sink_sample sample = {th->profile_thread, stack, state, in_gc, syscall};
    if (!had || th->sample.stack != stack || th->sample.state != state ||
        th->sample.gc != in_gc || th->sample.syscall != syscall)
        sum->changed++;
    th->sample = sample;
    th->has_sample = !torn && state != PROFILE_UNKNOWN;
    s->sink->ops->add(s->sink, &th->sink, &sample);
    /* Suspended tasks are counts without a timeline: into a profile only. */
    if (s->tasks && s->tasks_waiting && s->sink == &s->profile_sink.sink)
        sample_waiting_tasks(s, th, pi->addr, s->profile_sink.now_ns);
    if (state == PROFILE_HOLDING_GIL && pass->interp == 0) {
        sum->holder = th->tstate;
        sum->switches = pi->gil_switches;
        sum->holder_stack = stack;
    }
    if (state == PROFILE_WAITING_GIL && pass->interp == 0)
        sum->waiters = true;
}

/* The pass-wide facts to the sink, and the running totals to the profile
 * (the sampler's, or those a still pass was given). */
static void finish_pass(struct sampler_still *s, struct sample_sink *sink, struct profile *p,
                        uint32_t profile_process, const struct pass_summary *sum,
                        uint64_t now_ns, uint64_t rel_ns)
{
    /* GIL hogs: who holds the GIL while others wait, and whether it has held
     * it, without one hand-off, for longer than the switch interval. */
    if (sum->holder != s->hold_tstate || sum->switches != s->hold_switches) {
        s->hold_tstate = sum->holder;
        s->hold_switches = sum->switches;
        s->hold_since_ns = now_ns;
    }
    bool hog = sum->holder && sum->waiters && sum->holder_stack != UINT32_MAX;
    bool hog_native = now_ns - s->hold_since_ns > GIL_SWITCH_INTERVAL_NS;
    struct sample_pass facts = {
        .failed = sum->failed,
        .gil_busy = sum->holder != 0,
        .gc = sum->gc_now,
        .gc_started = sum->gc_now && !s->gc_was_collecting,
        .hog_stack = hog ? sum->holder_stack : UINT32_MAX,
        .hog_native = hog && hog_native,
        .stacks_sampled = (uint16_t)sum->sampled,
        .stacks_torn = (uint16_t)sum->torn,
    };
    sink->ops->end_pass(sink, &facts);

    p->meta.stacks_sampled += sum->sampled;
    p->meta.stacks_torn += sum->torn;
    p->meta.passes++;
    if (sum->failed)
        p->meta.passes_failed++;
    if (sum->holder)
        p->meta.gil_busy_passes++;
    if (profile_process < p->n_processes) {
        struct profile_process *proc = &p->processes[profile_process];
        if (proc->passes++ == 0)
            proc->first_ns = rel_ns;
        proc->last_ns = rel_ns;
        proc->passes_failed += sum->failed;
        proc->gil_busy_passes += sum->holder != 0;
    }
    if (sum->gc_now) {
        p->meta.gc_passes++;
        if (!s->gc_was_collecting)
            p->meta.gc_collections++;
    }
    s->gc_was_collecting = sum->gc_now;
}

static void mark_pass(struct sample_sink *sink, struct sampler_still *st)
{
    if (sink->ops->mark)
        sink->ops->mark(sink, &st->last_mark);
}

/* Every thread as the last pass found it: none has run since. The sink
 * copies the last pass's samples where it can, which spares touching every
 * thread of every quiet process at every pass; else (or when a still pass
 * left it open, STILL_ADD) they are added one by one. */
static int repeat_pass(struct sampler *s, uint64_t now_ns, uint64_t rel_ns, bool opened)
{
    struct sampler_still *st = s->st;
    const struct sample_sink_ops *ops = s->sink->ops;
    bool copied = !opened && ops->repeat && ops->repeat(s->sink, rel_ns, &st->last_mark);
    if (!ops->repeat)
        ops->begin_pass(s->sink, rel_ns);
    for (size_t i = 0; i < s->n_threads && !copied; i++)
        if (s->threads[i].has_sample)
            ops->add(s->sink, &s->threads[i].sink, &s->threads[i].sample);
    finish_pass(st, s->sink, s->profile, s->profile_process, &st->last_sum, now_ns, rel_ns);
    mark_pass(s->sink, st);
    st->passes_repeated++;
    return 0;
}

/* Repeating a pass is the agent's, and only without C stacks or task
 * stacks (which a repeat would not carry). */
static bool clock_used(const struct sampler *s)
{
    return s->st->usable && !s->native && !s->tasks;
}

struct run_clock *sampler_clock_to_look(struct sampler_still *st)
{
    return st->usable && st->clock_skip == 0 ? &st->clock : NULL;
}

/* Whether this pass can give the last one's samples again. The clock is
 * looked at before anything is read, so that "still" covers the time since
 * the last read pass's reads (a look skipped only widens the span the next
 * one covers). */
static bool still_since_last_pass(struct sampler_still *st)
{
    /* A process that has run at every look lately is looked at less often
     * (up to every 16th pass): its clock then costs little, and "still"
     * stays exact, as it spans everything since the last look. */
    if (st->clock_skip > 0) {
        st->clock_skip--;
        return false;
    }
    bool still = run_clock_still(&st->clock);
    if (still) {
        st->clock_ran = 0;
    } else {
        if (st->clock_ran < 16)
            st->clock_ran++;
        st->clock_skip = st->clock_ran - 1;
    }
    return still && st->repeatable;
}

bool sampler_still_pass(struct sampler_still *st, uint64_t now_ns)
{
    if (!st->usable || st->pending != STILL_LOOK)
        return false;
    if (!still_since_last_pass(st)) {
        st->pending = STILL_READ;
        return false;
    }
    uint64_t rel_ns = now_ns > st->start_ns ? now_ns - st->start_ns : 0;
    const struct sample_sink_ops *ops = st->sink->ops;
    if (!ops->repeat || !ops->repeat(st->sink, rel_ns, &st->last_mark)) {
        /* The sampler adds the samples, to the pass the sink opened. */
        st->pending = STILL_ADD;
        return false;
    }
    finish_pass(st, st->sink, st->profile, st->profile_process, &st->last_sum, now_ns, rel_ns);
    mark_pass(st->sink, st);
    st->passes_repeated++;
    return true;
}

/* The GIL free while a thread waits for it is the GIL changing hands, and
 * the waiter has it some tens of microseconds later. Passes meet that
 * moment more often than it lasts: the timer interrupt that wakes us can
 * also end the waiter's timed wait, which starts the hand-over, and we
 * then share a CPU with it. With gil_truth.sh's uprobes in, the hand-over
 * took 1.3% of the time and a pass saw the GIL free in 2.8% of passes (8%
 * on one run on CI), all of it counted as waiting. Looked at again a
 * moment later, the GIL is counted to the thread that took it. A thread
 * that waited at the last pass tells the hand-over from a GIL nobody
 * wants. */
#define HANDOVER_LOOKS 3
static void settle_handover(struct sampler *s, int n_pass)
{
    static const unsigned pause_us[HANDOVER_LOOKS] = {0, 20, 100};
    for (int k = 0; k < s->n_interps; k++) {
        struct py_interp *pi = &s->interps[k];
        if (pi->gil_holder || !pi->gil)
            continue;
        bool waiter = false;
        for (int i = 0; i < n_pass && !waiter; i++) {
            const struct sampled_thread *th = s->pass[i].th;
            waiter = s->pass[i].interp == k && th && th->has_sample &&
                     th->sample.state == PROFILE_WAITING_GIL;
        }
        if (!waiter)
            continue;
        for (int look = 0; look < HANDOVER_LOOKS; look++) {
            if (pause_us[look])
                usleep(pause_us[look]);
            struct py_interp now = *pi;
            if (py_interp_read_gil(&s->reader, &now) != 0)
                break;
            if (now.gil_holder) {
                pi->gil_holder = now.gil_holder;
                pi->gil_switches = now.gil_switches;
                /* --native: a C stack taken before this read may still be
                 * the new holder's wait in take_gil. */
                if (s->native)
                    s->states_read_ns = monotonic_ns();
                break;
            }
        }
    }
}

static int pass_body(struct sampler *s, uint64_t now_ns)
{
    uint64_t rel_ns = now_ns > s->start_ns ? now_ns - s->start_ns : 0;
    /* Before anything is read, the interpreters' periodic lookup and the
     * exec check included: a process that has not run cannot have exec'd
     * or started an interpreter. */
    enum still_pending pending = s->st->pending;
    s->st->pending = STILL_LOOK;
    if (pending == STILL_ADD)
        return repeat_pass(s, now_ns, rel_ns, true);
    if (pending == STILL_LOOK && clock_used(s) && still_since_last_pass(s->st))
        return repeat_pass(s, now_ns, rel_ns, false);
    s->st->repeatable = false;
    int ready = prepare_pass(s, now_ns);
    if (ready <= 0)
        return ready;
    int n_pass = read_thread_states(s, now_ns);
    if (s->native)
        s->states_read_ns = monotonic_ns();
    if (n_pass < 0 && s->exec_seen)
        return -1;
    if (n_pass < 0) {
        s->profile->meta.passes_failed++;
        return target_gone(s->target) ? -1 : 0;
    }
    remember_chain(s, n_pass);
    match_threads(s, n_pass);
    note_read_states(s, n_pass, now_ns);
    read_uncovered_stacks(s, n_pass);
    settle_handover(s, n_pass);

    struct pass_summary sum = {.holder_stack = UINT32_MAX};
    for (int k = 0; k < s->n_interps; k++)
        sum.gc_now |= s->interps[k].gc_collecting;
    s->sink->ops->begin_pass(s->sink, rel_ns);
    for (int i = 0; i < n_pass; i++)
        if (s->pass[i].th)
            sample_thread(s, &s->pass[i], &sum, now_ns);
    for (size_t i = s->n_threads; i-- > 0;)
        if (!s->threads[i].seen) {
            forget_thread(s, i, rel_ns);
            sum.changed++;
        }
    finish_pass(s->st, s->sink, s->profile, s->profile_process, &sum, now_ns, rel_ns);
    bool repeatable = !sum.failed && sum.torn == 0 && s->n_threads > 0;
    for (size_t i = 0; i < s->n_threads && repeatable; i++)
        repeatable = s->threads[i].has_sample;
    s->st->repeatable = repeatable;
    if (repeatable && sum.changed == 0 && sum.gc_now == s->st->last_sum.gc_now)
        s->st->passes_alike++;
    s->st->last_sum = sum;
    mark_pass(s->sink, s->st);

    /* A new thread is named within a second; the names of known ones are
     * looked at again at the owner's pace. */
    uint64_t names_every = s->names_refresh_ns && !s->thread_unnamed ? s->names_refresh_ns
                                                                    : NAMES_REFRESH_NS;
    if (now_ns - s->last_names_ns > names_every) {
        refresh_names(s);
        s->last_names_ns = now_ns;
        s->thread_unnamed = false;
    }
    return 0;
}

bool sampler_thread_name(void *ctx, uint64_t thread_id, pid_t tid, char out[64])
{
    const struct sampler *s = ctx;
    for (size_t i = 0; i < s->n_threads; i++) {
        const struct sampled_thread *th = &s->threads[i];
        if (th->thread_id != thread_id || th->tid != tid)
            continue;
        if (!th->python_named || th->profile_thread >= s->profile->n_threads)
            return false;
        memcpy(out, s->profile->threads[th->profile_thread].name, 64);
        out[63] = '\0';
        return true;
    }
    return false;
}

int sampler_pass(struct sampler *s, uint64_t now_ns)
{
    if (!s->native)
        return pass_body(s, now_ns);
    native_sampler_begin_pass(s->native, now_ns);
    int rc = pass_body(s, now_ns);
    native_sampler_end_pass(s->native);
    return rc;
}

int sampler_repeat_still(struct sampler *s, struct sampler_still *home)
{
    if (home && home != s->st) {
        *home = *s->st;
        s->st = home;
    }
    struct sampler_still *st = s->st;
    st->clock_open = run_clock_open(&st->clock, s->pid) == 0;
    st->usable = st->clock_open && !s->native && !s->tasks;
    st->sink = s->sink;
    st->profile = s->profile;
    st->profile_process = s->profile_process;
    st->start_ns = s->start_ns;
    return st->clock_open ? 0 : -1;
}

int sampler_enable_native(struct sampler *s, int mode, bool all, double rate_hz,
                          char *note, size_t note_size, struct pyscope_error *err)
{
    s->entry_flags = malloc(sizeof *s->entry_flags * MAX_STACK_DEPTH);
    if (!s->entry_flags) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        return -1;
    }
    s->st->usable = false; /* a repeat would not carry C stacks */
    s->native = native_sampler_open(s->target, s->pid, s->rt.binary, (enum native_mode)mode, all, rate_hz,
                                    s->profile, note, note_size, err);
    return s->native ? 0 : -1;
}

