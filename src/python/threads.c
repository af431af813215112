/* Interpreter and thread-state enumeration. Lists are walked with hard bounds
 * because a running target can leave them half-linked; the kernel tid of a
 * thread comes from native_thread_id (3.11+) or from glibc's struct pthread. */
#include "python/threads.h"

#include <stdlib.h>
#include <string.h>

#include "util/addrset.h"

/* glibc 2.28-2.36 on x86-64 keep the tid here; other offsets are searched. */
#define GLIBC_PTHREAD_TID_OFFSET 720
#define PTHREAD_SEARCH_BYTES 1536

static uint64_t u64_at(const unsigned char *buf, long off)
{
    uint64_t v;
    memcpy(&v, buf + off, sizeof v);
    return v;
}

int py_interp_read_gil(struct py_reader *r, struct py_interp *interp)
{
    const struct py_layout *L = r->L;
    interp->gil_holder = 0;
    interp->gil_switches = 0;
    if (!interp->gil)
        return -1;
    /* One read of the whole struct, bypassing the cache, so the three
     * fields come from the same instant. */
    unsigned char gil[512];
    size_t need = (size_t)L->gil_size;
    if (need == 0 || need > sizeof gil || L->gil_locked + 4 > (long)need ||
        L->gil_last_holder + 8 > (long)need)
        return -1;
    if (r->t->ops->read_raw(r->t, interp->gil, gil, need) != 0)
        return -1;
    py_gil_decode(L, gil, interp);
    return 0;
}

void py_gil_decode(const struct py_layout *L, const unsigned char *gil, struct py_interp *interp)
{
    int32_t locked;
    memcpy(&locked, gil + L->gil_locked, sizeof locked);
    interp->gil_holder = locked ? u64_at(gil, L->gil_last_holder) : 0;
    interp->gil_switches = 0;
    if (L->gil_switch_number != PY_OFF_NONE && L->gil_switch_number + 8 <= L->gil_size)
        interp->gil_switches = u64_at(gil, L->gil_switch_number);
}

uint64_t py_interp_gc_flag(struct py_reader *r, uint64_t interp)
{
    const struct py_layout *L = r->L;
    if (L->gc_collecting == PY_OFF_NONE)
        return 0;
    if (L->interp_gc != PY_OFF_NONE)
        return interp + (uint64_t)L->interp_gc + (uint64_t)L->gc_collecting;
    if (L->runtime_gc != PY_OFF_NONE)
        return r->rt->runtime_addr + (uint64_t)L->runtime_gc + (uint64_t)L->gc_collecting;
    return 0;
}

void py_interp_read(struct py_reader *r, uint64_t addr, struct py_interp *out)
{
    const struct py_layout *L = r->L;
    memset(out, 0, sizeof *out);
    out->addr = addr;
    target_read(r->t, addr + (uint64_t)L->interp_id, &out->id, sizeof out->id);
    if (L->interp_gil_ptr != PY_OFF_NONE) {
        target_read_u64(r->t, addr + (uint64_t)L->interp_gil_ptr, &out->gil);
    } else if (L->runtime_gil != PY_OFF_NONE) {
        out->gil = r->rt->runtime_addr + (uint64_t)L->runtime_gil;
    }
    py_interp_read_gil(r, out);
    uint64_t flag = py_interp_gc_flag(r, addr);
    int32_t collecting = 0;
    if (flag && target_read_i32(r->t, flag, &collecting) == 0)
        out->gc_collecting = collecting != 0;
}

static uint64_t top_frame_of(struct py_reader *r, const unsigned char *ts)
{
    const struct py_layout *L = r->L;
    if (L->tstate_frame != PY_OFF_NONE)
        return u64_at(ts, L->tstate_frame);
    if (L->tstate_current_frame != PY_OFF_NONE)
        return u64_at(ts, L->tstate_current_frame);
    uint64_t cframe = u64_at(ts, L->tstate_cframe), frame = 0;
    if (cframe && target_read_u64(r->t, cframe + (uint64_t)L->cframe_current_frame, &frame) != 0)
        frame = 0;
    return frame;
}

/* The top frame through the page cache, or straight from the process. */
static int read_u64(struct py_reader *r, uint64_t addr, uint64_t *out, bool now)
{
    return now ? r->t->ops->read_raw(r->t, addr, out, sizeof *out) : target_read_u64(r->t, addr, out);
}

static uint64_t top_frame_read(struct py_reader *r, uint64_t tstate, bool now)
{
    const struct py_layout *L = r->L;
    uint64_t frame = 0, cframe = 0;
    long field = L->tstate_frame != PY_OFF_NONE ? L->tstate_frame : L->tstate_current_frame;
    if (field != PY_OFF_NONE)
        return read_u64(r, tstate + (uint64_t)field, &frame, now) == 0 ? frame : 0;
    if (L->tstate_cframe == PY_OFF_NONE ||
        read_u64(r, tstate + (uint64_t)L->tstate_cframe, &cframe, now) != 0 || !cframe ||
        read_u64(r, cframe + (uint64_t)L->cframe_current_frame, &frame, now) != 0)
        return 0;
    return frame;
}

uint64_t py_tstate_top_frame(struct py_reader *r, uint64_t tstate)
{
    return top_frame_read(r, tstate, false);
}

uint64_t py_tstate_top_frame_now(struct py_reader *r, uint64_t tstate)
{
    return top_frame_read(r, tstate, true);
}

int py_thread_reread(struct py_reader *r, struct py_thread *th)
{
    const struct py_layout *L = r->L;
    size_t ts_size = (size_t)L->tstate_size;
    if (ts_size == 0 || ts_size > TSTATE_READ_MAX)
        ts_size = TSTATE_READ_MAX;
    unsigned char ts[TSTATE_READ_MAX];
    if (r->t->ops->read_raw(r->t, th->tstate, ts, ts_size) != 0)
        return -1;
    struct py_thread now;
    py_thread_from_block_no_frame(r, th->tstate, ts, &now);
    th->datastack_chunk = now.datastack_chunk;
    th->datastack_top = now.datastack_top;
    th->datastack_limit = now.datastack_limit;
    /* From the same copy of the state where it holds the top itself. */
    uint64_t cframe = py_tstate_cframe(L, ts), frame = 0;
    if (L->tstate_frame != PY_OFF_NONE || L->tstate_current_frame != PY_OFF_NONE)
        th->top_frame = top_frame_of(r, ts);
    else
        th->top_frame = cframe && read_u64(r, cframe + (uint64_t)L->cframe_current_frame, &frame,
                                           true) == 0 ? frame : 0;
    return 0;
}

uint64_t py_tstate_cframe(const struct py_layout *L, const unsigned char *ts)
{
    return L->tstate_cframe != PY_OFF_NONE ? u64_at(ts, L->tstate_cframe) : 0;
}

void py_thread_from_block(struct py_reader *r, uint64_t tstate, const unsigned char *ts,
                          struct py_thread *th)
{
    py_thread_from_block_no_frame(r, tstate, ts, th);
    th->top_frame = top_frame_of(r, ts);
}

void py_thread_from_block_no_frame(struct py_reader *r, uint64_t tstate, const unsigned char *ts,
                                   struct py_thread *th)
{
    const struct py_layout *L = r->L;
    memset(th, 0, sizeof *th);
    th->tstate = tstate;
    th->thread_id = u64_at(ts, L->tstate_thread_id);
    if (L->tstate_native_thread_id != PY_OFF_NONE) {
        int64_t native;
        memcpy(&native, ts + L->tstate_native_thread_id, sizeof native);
        th->tid = native > 0 && native < (1 << 30) ? target_host_tid(r->t, (pid_t)native) : 0;
    }
    if (L->tstate_datastack_chunk != PY_OFF_NONE && L->tstate_datastack_top != PY_OFF_NONE) {
        th->datastack_chunk = u64_at(ts, L->tstate_datastack_chunk);
        th->datastack_top = u64_at(ts, L->tstate_datastack_top);
        if (L->tstate_datastack_limit != PY_OFF_NONE)
            th->datastack_limit = u64_at(ts, L->tstate_datastack_limit);
    }
}

static bool tid_known(const pid_t *tids, int n_tids, int32_t tid)
{
    for (int i = 0; i < n_tids; i++)
        if (tids[i] == tid)
            return true;
    return false;
}

static int32_t pthread_word(const int32_t *words, int thread, int word)
{
    return words[thread * (PTHREAD_SEARCH_BYTES / 4) + word];
}

/* Two thread states of one OS thread: the same pthread_t, in two
 * interpreters (a thread that entered a subinterpreter keeps its state in
 * the interpreter it came from). Within one interpreter a shared tid is a
 * state still carrying its creator's pthread_t, or a word that is no tid. */
static bool same_thread_elsewhere(const struct py_snapshot *snap, int i, int j)
{
    return snap->threads[i].thread_id == snap->threads[j].thread_id &&
           snap->threads[i].interp_index != snap->threads[j].interp_index;
}

/* At the known offset: a thread that is starting or exiting (its value not
 * a live tid), or a new thread state that still carries its creator's
 * pthread_t (the creator makes it, before 3.11), is only left without a
 * tid, as long as most threads show a live tid there. Returns how many
 * threads get one; *live counts those showing a live tid at all. */
static int tolerant_matches(const struct py_snapshot *snap, const int32_t *words, const bool *ok,
                            int n, int word, const pid_t *tids, int n_tids, bool *unique, int *live)
{
    int matched = 0;
    *live = 0;
    for (int i = 0; i < n; i++) {
        unique[i] = false;
        if (!ok[i] || !tid_known(tids, n_tids, pthread_word(words, i, word)))
            continue;
        ++*live;
        bool alone = true;
        for (int j = 0; j < n && alone; j++)
            if (j != i && ok[j] && pthread_word(words, j, word) == pthread_word(words, i, word) &&
                !same_thread_elsewhere(snap, i, j))
                alone = false;
        unique[i] = alone;
        matched += alone;
    }
    return matched;
}

/* Elsewhere: every thread must get a live tid, distinct but for the
 * states of one thread in two interpreters. */
static bool strict_match(const struct py_snapshot *snap, const int32_t *words, const bool *ok,
                         int n, int word, const pid_t *tids, int n_tids)
{
    int matched = 0;
    for (int i = 0; i < n; i++) {
        if (!ok[i])
            continue;
        int32_t v = pthread_word(words, i, word);
        if (!tid_known(tids, n_tids, v))
            return false;
        for (int j = 0; j < i; j++)
            if (ok[j] && pthread_word(words, j, word) == v && !same_thread_elsewhere(snap, i, j))
                return false;
        matched++;
    }
    return matched > 0;
}

/* Before 3.11 a thread state records only pthread_self(), the address of
 * glibc's struct pthread. Find the offset of the kernel tid inside it: the
 * known one first, else the first offset that gives every thread a distinct
 * live tid. The tid there is the one of the target's own pid namespace:
 * host_tids are turned into those numbers to match, and back. */
static void resolve_tids_from_pthread(struct py_reader *r, struct py_snapshot *snap,
                                      const pid_t *host_tids, int n_tids)
{
    int n = snap->n_threads;
    if (n == 0 || n_tids == 0)
        return;
    int32_t *words = calloc((size_t)n * (PTHREAD_SEARCH_BYTES / 4), sizeof *words);
    bool *ok = calloc((size_t)n, sizeof *ok);
    bool *unique = calloc((size_t)n, sizeof *unique);
    pid_t *tids = malloc((size_t)n_tids * sizeof *tids);
    if (!words || !ok || !unique || !tids)
        goto out;
    for (int i = 0; i < n_tids; i++)
        tids[i] = target_own_tid(r->t, host_tids[i]);
    int n_ok = 0;
    for (int i = 0; i < n; i++) {
        ok[i] = snap->threads[i].thread_id &&
                target_read(r->t, snap->threads[i].thread_id, &words[i * (PTHREAD_SEARCH_BYTES / 4)],
                            PTHREAD_SEARCH_BYTES) == 0;
        n_ok += ok[i];
    }
    int known = GLIBC_PTHREAD_TID_OFFSET / 4;
    int live;
    int matched = tolerant_matches(snap, words, ok, n, known, tids, n_tids, unique, &live);
    if (matched > 0 && 2 * live >= n_ok) {
        for (int i = 0; i < n; i++)
            if (unique[i])
                snap->threads[i].tid = target_host_tid(r->t, pthread_word(words, i, known));
        goto out;
    }
    for (int w = 0; w < PTHREAD_SEARCH_BYTES / 4; w++) {
        if (w != known && strict_match(snap, words, ok, n, w, tids, n_tids)) {
            for (int i = 0; i < n; i++)
                if (ok[i])
                    snap->threads[i].tid = target_host_tid(r->t, pthread_word(words, i, w));
            break;
        }
    }
out:
    free(words);
    free(ok);
    free(unique);
    free(tids);
}

/* On 3.11/3.12 the top frame hangs off a _PyCFrame on each thread's C
 * stack, one page per thread: those are read together. Until then
 * top_frame holds what the thread state block said (the frame itself, or
 * the cframe's address). */
static void resolve_top_frames(struct py_reader *r, struct py_snapshot *snap)
{
    const struct py_layout *L = r->L;
    if (L->tstate_frame != PY_OFF_NONE || L->tstate_current_frame != PY_OFF_NONE ||
        snap->n_threads == 0)
        return;
    struct target_range *ranges = calloc((size_t)snap->n_threads, sizeof *ranges);
    if (ranges) {
        for (int i = 0; i < snap->n_threads; i++)
            ranges[i] = (struct target_range){
                snap->threads[i].top_frame + (uint64_t)L->cframe_current_frame,
                snap->threads[i].top_frame ? 8 : 0};
        target_prefetch(r->t, ranges, (size_t)snap->n_threads);
        free(ranges);
    }
    for (int i = 0; i < snap->n_threads; i++) {
        uint64_t cframe = snap->threads[i].top_frame, frame = 0;
        if (cframe && target_read_u64(r->t, cframe + (uint64_t)L->cframe_current_frame, &frame) != 0)
            frame = 0;
        snap->threads[i].top_frame = frame;
    }
}

/* Before 3.11 a thread state made by Thread.start() carries its creator's
 * thread_id until the new thread runs (_PyThreadState_Init), so the
 * creator's tid resolves for both. The one without a frame is the new one,
 * not yet bound to its OS thread. */
static void unbind_preallocated(struct py_snapshot *snap)
{
    for (int i = 0; i < snap->n_threads; i++) {
        struct py_thread *a = &snap->threads[i];
        if (!a->tid || a->top_frame)
            continue;
        for (int j = 0; j < snap->n_threads; j++)
            if (j != i && snap->threads[j].thread_id == a->thread_id &&
                snap->threads[j].interp_index == a->interp_index) {
                a->tid = 0;
                break;
            }
    }
}

#define SNAPSHOT_FIRST_ROOM 64

int py_snapshot_read(struct py_reader *r, const pid_t *tids, int n_tids, struct py_snapshot *snap)
{
    const struct py_layout *L = r->L;
    memset(snap, 0, sizeof *snap);
    /* Grown as the lists are read: room for PY_MAX_THREADS at once is
     * 300 KB, mapped and unmapped by every snapshot (the agent's whys). */
    int cap = SNAPSHOT_FIRST_ROOM;
    snap->threads = calloc((size_t)cap, sizeof *snap->threads);
    if (!snap->threads)
        return -1;
    size_t ts_size = (size_t)L->tstate_size;
    if (ts_size == 0 || ts_size > TSTATE_READ_MAX)
        ts_size = TSTATE_READ_MAX;
    unsigned char ts[TSTATE_READ_MAX];

    /* Every thread state once: a live list read while a thread exits and
     * a new one takes its memory can lead back to a state already read. */
    struct addrset seen;
    if (addrset_init(&seen, PY_MAX_THREADS) != 0) {
        py_snapshot_free(snap);
        return -1;
    }
    uint64_t interp = py_runtime_first_interpreter(r->rt);
    while (interp && snap->n_interps < PY_MAX_INTERPRETERS) {
        int index = snap->n_interps++;
        struct py_interp *pi = &snap->interps[index];
        py_interp_read(r, interp, pi);
        uint64_t tstate;
        if (target_read_u64(r->t, interp + (uint64_t)L->interp_threads_head, &tstate) != 0) {
            snap->truncated = true;
            tstate = 0;
        }
        while (tstate) {
            if (snap->n_threads >= PY_MAX_THREADS) {
                snap->truncated = true;
                break;
            }
            if (snap->n_threads == cap) {
                int grown_cap = cap * 2 < PY_MAX_THREADS ? cap * 2 : PY_MAX_THREADS;
                struct py_thread *grown = realloc(snap->threads, (size_t)grown_cap * sizeof *grown);
                if (!grown) {
                    snap->truncated = true;
                    break;
                }
                memset(grown + cap, 0, (size_t)(grown_cap - cap) * sizeof *grown);
                snap->threads = grown;
                cap = grown_cap;
            }
            if (!addrset_add(&seen, tstate) || target_read(r->t, tstate, ts, ts_size) != 0 ||
                u64_at(ts, L->tstate_interp) != interp) {
                snap->truncated = true;
                break;
            }
            struct py_thread *th = &snap->threads[snap->n_threads++];
            py_thread_from_block_no_frame(r, tstate, ts, th);
            th->top_frame = L->tstate_frame != PY_OFF_NONE || L->tstate_current_frame != PY_OFF_NONE
                                ? top_frame_of(r, ts)
                                : py_tstate_cframe(L, ts); /* for now: resolve_top_frames */
            th->interp_index = index;
            th->holds_gil = pi->gil_holder == tstate;
            tstate = u64_at(ts, L->tstate_next);
        }
        uint64_t next;
        if (target_read_u64(r->t, interp + (uint64_t)L->interp_next, &next) != 0)
            break;
        interp = next;
    }
    addrset_free(&seen);
    resolve_top_frames(r, snap);
    if (L->tstate_native_thread_id == PY_OFF_NONE) {
        resolve_tids_from_pthread(r, snap, tids, n_tids);
        unbind_preallocated(snap);
    }
    return 0;
}

void py_snapshot_free(struct py_snapshot *snap)
{
    free(snap->threads);
    snap->threads = NULL;
}

struct names_ctx {
    struct py_reader *r;
    const struct py_snapshot *snap;
    char (*names)[64];
    int found;
};

static int collect_thread_name(void *vctx, uint64_t key, uint64_t value)
{
    struct names_ctx *ctx = vctx;
    int64_t ident;
    if (py_int(ctx->r, key, &ident) != 0)
        return 0;
    for (int i = 0; i < ctx->snap->n_threads; i++) {
        if (ctx->snap->threads[i].thread_id != (uint64_t)ident || ctx->names[i][0])
            continue;
        uint64_t name_obj;
        if (py_attr_get(ctx->r, value, "_name", &name_obj) == 0 &&
            py_str(ctx->r, name_obj, ctx->names[i], sizeof ctx->names[i]) == 0)
            ctx->found++;
        else
            ctx->names[i][0] = '\0';
    }
    return 0;
}

int py_thread_names(struct py_reader *r, const struct py_snapshot *snap, char (*names)[64])
{
    for (int i = 0; i < snap->n_threads; i++)
        names[i][0] = '\0';
    struct names_ctx ctx = {r, snap, names, 0};
    /* threading._active maps get_ident() to Thread objects, per interpreter. */
    for (int k = 0; k < snap->n_interps; k++) {
        uint64_t modules, threading, module_dict, active;
        if (target_read_u64(r->t, snap->interps[k].addr + (uint64_t)r->L->interp_modules,
                            &modules) != 0 ||
            py_dict_get_str(r, modules, "threading", &threading) != 0 ||
            target_read_u64(r->t, threading + (uint64_t)r->L->module_dict, &module_dict) != 0 ||
            py_dict_get_str(r, module_dict, "_active", &active) != 0)
            continue;
        py_dict_items(r, active, PY_MAX_THREADS, collect_thread_name, &ctx);
    }
    return ctx.found;
}
