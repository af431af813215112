/* Re-entry of Python functions: a hardware watchpoint on a field of the code
 * object that every start of a frame of it reads (where a layout has none,
 * on its reference count, which every new frame takes, then single steps to
 * the new frame's push; 3.11's generator functions: the int3 alone). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>

#include "watch/session.h"
#include "native/symbol_find.h"
#include "python/eval_loop.h"
#include "python/threads.h"
#include "target/process.h"

/* Every frame of a function holds a reference to its code object
 * (3.8-3.15), so the watchpoint traps, in the very thread, whenever a frame
 * of the function is created. If the function is already on that thread's
 * stack, the thread is single-stepped until the new frame is pushed and the
 * report is made at that instant. On 3.11+ (without --exact) the watchpoint
 * is armed on a thread only while C has entered Python above a running
 * activation, which an int3 at _PyEval_EvalFrameDefault shows.
 *
 * A function not found yet is waited for at the same int3: every module's
 * code is entered there (import, the main script, exec) before any of it
 * runs, and holds in its constants the code objects of its functions, of
 * its classes' methods and of the functions nested in those. So each code
 * object entered is searched once, with its constants, and FUNC's code is
 * watched before FUNC can even be called.
 *
 * Where the version has one (the layout's code_entry_read: every version
 * from 3.8), the watchpoint is on a field of the code object that the
 * interpreter reads each time a frame of it starts or resumes instead of
 * on the count: a trap comes once per call, with the new frame already on
 * top (no stepping), and also when a generator or coroutine of FUNC is
 * resumed, which takes no reference: from C (send(), next()) and, on 3.12+,
 * inside the interpreter loop (a for loop over a generator, an await or
 * yield from of one already started), where no C frame is in between.
 * 3.11's field is the first code unit, which a resumption does not fetch:
 * its generators keep the reference count and the int3. */

/* Between a code object's reference being taken and its frame being
 * pushed the interpreter runs a few hundred instructions; more when a
 * collection or a finalizer runs in between, which is stepped through. */
#define CONFIRM_MAX_STEPS 200000
/* How long a function may stay unfound before the closest names are listed. */
#define HINT_AFTER_MS 2000
/* ... and, while none come close (the program may still be starting),
 * how often and how many times they are looked for again. */
#define HINT_AGAIN_MS 500
#define HINT_TRIES 8

static int raw_u64(struct watch_session *s, uint64_t addr, uint64_t *out);

static uint32_t read_refcnt(struct watch_session *s, uint64_t code)
{
    uint32_t v = 0;
    s->t->ops->read_raw(s->t, code, &v, sizeof v);
    return v;
}

/* The entry field's value (4 or 8 bytes, little-endian). */
static uint64_t read_entry_field(struct watch_session *s, const struct py_watch *w)
{
    uint64_t v = 0;
    s->t->ops->read_raw(s->t, w->watch_addr, &v, (size_t)w->watch_len);
    return v;
}

/* The thread state of tid, which traps while running Python code. Up to
 * 3.11 that is the GIL holder, which the runtime names; else the cache or
 * a fresh snapshot (3.12+ record each thread's kernel tid). */
static uint64_t tstate_of(struct watch_session *s, pid_t tid)
{
    struct watch_thread *wt = watch_thread_get(s, tid);
    if (!wt)
        return 0;
    const struct py_layout *L = s->reader.L;
    uint64_t current = 0;
    if (L->runtime_tstate_current != PY_OFF_NONE &&
        target_read_u64(s->t, s->rt.runtime_addr + (uint64_t)L->runtime_tstate_current,
                        &current) == 0 && current)
        return current;
    if (wt->tstate)
        return wt->tstate;
    pid_t *tids = malloc(sizeof *tids * TRACER_MAX_THREADS);
    if (!tids)
        return 0;
    int n = target_list_threads(s->t, tids, TRACER_MAX_THREADS);
    struct py_snapshot snap;
    if (py_snapshot_read(&s->reader, tids, n > 0 ? n : 0, &snap) == 0) {
        for (int i = 0; i < snap.n_threads; i++) {
            struct watch_thread *other =
                snap.threads[i].tid ? watch_thread_get(s, snap.threads[i].tid) : NULL;
            if (other)
                other->tstate = snap.threads[i].tstate;
        }
        py_snapshot_free(&snap);
    }
    free(tids);
    wt = watch_thread_get(s, tid);
    return wt ? wt->tstate : 0;
}

/* Walks the thread's Python stack into s->frames. */
static size_t walk(struct watch_session *s, uint64_t top, enum py_walk_status *status)
{
    struct py_walker walker = {.reader = &s->reader, .codes = s->codes, .skip_lines = true};
    size_t count = 0;
    *status = py_walk_frames(&walker, top, s->frames, PY_MAX_FRAMES, &count);
    return count;
}

static int find_code(const struct watch_session *s, size_t count, uint64_t code)
{
    for (size_t i = 0; i < count; i++)
        if (s->frames[i].code_addr == code)
            return (int)i;
    return -1;
}

static void arm(struct watch_session *s, pid_t tid, unsigned slots)
{
    struct watch_thread *wt = watch_thread_get(s, tid);
    if (!wt)
        return;
    unsigned mask = wt->dr_mask | slots;
    for (int i = 0; i < s->n_py; i++) {
        const struct py_watch *w = &s->py[i];
        if (!(slots & (1u << i)) || (wt->dr_mask & (1u << i)))
            continue;
        /* A generator function's count moves when one is created (its
         * frame runs RETURN_GENERATOR, never the body) or destroyed; its
         * resumptions are what the int3 at the interpreter's entry sees. */
        if (!w->entry && w->generator)
            continue;
        if (w->entry)
            dr_arm_access(tid, i, w->watch_addr, w->watch_len, mask);
        else
            dr_arm(tid, i, w->code, mask);
    }
    wt->dr_mask = mask;
}

static void disarm(struct watch_session *s, pid_t tid, unsigned slots)
{
    struct watch_thread *wt = watch_thread_get(s, tid);
    if (!wt || !(wt->dr_mask & slots))
        return;
    wt->dr_mask &= ~slots;
    dr_enable(tid, wt->dr_mask);
}

void watch_python_disarm_all(struct watch_session *s)
{
    for (int i = 0; i < s->tr.n; i++) {
        const struct tracer_thread *th = &s->tr.threads[i];
        struct watch_thread *wt = watch_thread_get(s, th->tid);
        if (th->stopped && wt && wt->dr_mask) {
            dr_enable(th->tid, 0);
            wt->dr_mask = 0;
        }
    }
}

static unsigned all_slots(const struct watch_session *s)
{
    return (1u << s->n_py) - 1;
}

void watch_python_thread_started(struct watch_session *s, pid_t tid)
{
    if (s->n_py && !s->lazy && !s->no_dr)
        arm(s, tid, all_slots(s));
}

static void resync_counts(struct watch_session *s)
{
    for (int i = 0; i < s->n_py; i++) {
        if (s->py[i].entry)
            s->py[i].last_value = read_entry_field(s, &s->py[i]);
        else
            s->py[i].last_refcnt = read_refcnt(s, s->py[i].code);
    }
}

/* Steps tid until a new frame of code is pushed above prev_top (true), or
 * prev_top is popped (false): then the reference was not for a call. */
static bool confirm_entry(struct watch_session *s, pid_t tid, uint64_t tstate, uint64_t code,
                          uint64_t prev_top)
{
    s->stats.candidates++;
    uint64_t settled = prev_top;   /* a top already judged: keep stepping */
    bool found = false;
    for (int step = 0; step < CONFIRM_MAX_STEPS; step++) {
        /* Tens of thousands of steps through a collection take seconds on
         * a loaded machine: a signal to stop must not wait for them. */
        if ((step & 1023) == 1023 && watch_stop_requested(s))
            break;
        if (watch_single_step(s, tid) != 0)
            break;
        s->stats.steps++;
        target_cache_invalidate(s->t);
        uint64_t top = py_tstate_top_frame(&s->reader, tstate);
        if (top == settled)
            continue;
        if (top == 0)
            break;
        enum py_walk_status status;
        size_t count = walk(s, top, &status);
        if (status != PY_WALK_OK && count == 0)
            continue;              /* pushed but not marked executing yet (<=3.10) */
        int below = -1;
        for (size_t i = 0; i < count; i++) {
            if (s->frames[i].frame_addr == prev_top) {
                below = (int)i;
                break;
            }
        }
        if (below < 0)
            break;
        int at = find_code(s, (size_t)below, code);
        if (at >= 0) {
            found = true;
            break;
        }
        /* Something else runs above prev_top first (a finalizer, say):
         * the frame of code comes when it returns. */
        settled = top;
    }
    if (!s->lazy)
        resync_counts(s);
    return found;
}

/* ---- the cheap check at a watchpoint trap (every call of FUNC when the
 * watchpoint is always armed) ---- */

/* The span of a frame holding its link to the frame below and its code. */
struct frame_fields {
    long lo, len, back, code;  /* offsets relative to the frame; back/code relative to lo */
};

static bool frame_fields_of(const struct py_layout *L, struct frame_fields *ff)
{
    long back = L->frame_back != PY_OFF_NONE ? L->frame_back : L->iframe_previous;
    long code = L->frame_code != PY_OFF_NONE ? L->frame_code : L->iframe_executable;
    if (back == PY_OFF_NONE || code == PY_OFF_NONE)
        return false;
    ff->lo = back < code ? back : code;
    ff->len = (back > code ? back : code) - ff->lo + 8;
    ff->back = back - ff->lo;
    ff->code = code - ff->lo;
    return ff->len <= 64;
}

struct fast_read {
    uint64_t watched;
    uint64_t tstate_current, top_or_cframe, cframe_top;
    unsigned char pairs[WATCH_CHAIN_MAX][64];
    struct target_span spans[4 + WATCH_CHAIN_MAX];
    size_t n;
    int first_pair;
};

static void add_span(struct fast_read *fr, uint64_t addr, void *buf, size_t len)
{
    fr->spans[fr->n++] = (struct target_span){.addr = addr, .buf = buf, .len = len};
}

/* Whether w's code may be on the thread's Python stack (below the top
 * frame, with below_top): 0 when it surely is not (the frame chain was read
 * whole and the code is not in it), 1 when it is or that could not be told
 * (the full walk decides). *value: the watched bytes (the reference count,
 * or the entry field), read in the same system call. */
static int fast_check(struct watch_session *s, struct watch_thread *wt, const struct py_watch *w,
                      bool below_top, uint64_t *value)
{
    uint64_t code = w->code;
    const struct py_layout *L = s->reader.L;
    struct frame_fields ff;
    if (!s->fast && !(s->fast = calloc(1, sizeof *s->fast)))
        return -1;
    struct fast_read *fr = s->fast;
    fr->n = 0;
    fr->watched = 0;
    add_span(fr, w->watch_addr, &fr->watched, (size_t)w->watch_len);
    /* The GIL holder tells which thread state runs (3.8-3.11). A lone
     * thread's is the one seen last time, unless it switched interpreters:
     * then its top frame is not FUNC's new one, which is checked below. */
    bool lone = below_top && wt->tstate && s->tr.n == 1;
    bool have_current = L->runtime_tstate_current != PY_OFF_NONE && !lone;
    if (have_current)
        add_span(fr, s->rt.runtime_addr + (uint64_t)L->runtime_tstate_current,
                 &fr->tstate_current, 8);
    long top_off = L->tstate_frame != PY_OFF_NONE ? L->tstate_frame
                   : L->tstate_current_frame != PY_OFF_NONE ? L->tstate_current_frame
                                                            : L->tstate_cframe;
    bool via_cframe = top_off == L->tstate_cframe;
    if (wt->tstate && top_off != PY_OFF_NONE)
        add_span(fr, wt->tstate + (uint64_t)top_off, &fr->top_or_cframe, 8);
    if (via_cframe && wt->cframe)
        add_span(fr, wt->cframe + (uint64_t)L->cframe_current_frame, &fr->cframe_top, 8);
    bool fields = frame_fields_of(L, &ff);
    fr->first_pair = (int)fr->n;
    for (int k = 0; fields && k < wt->chain_n; k++)
        add_span(fr, wt->chain[k] + (uint64_t)ff.lo, fr->pairs[k], (size_t)ff.len);
    target_read_spans(s->t, fr->spans, fr->n);
    if (!fr->spans[0].ok)
        return -1;
    *value = fr->watched;
    if (!fields || top_off == PY_OFF_NONE)
        return 1;
    size_t at = 1;
    uint64_t tstate = wt->tstate;
    if (have_current) {
        if (!fr->spans[at].ok)
            return 1;
        if (fr->tstate_current)
            tstate = fr->tstate_current;
        at++;
    }
    if (!tstate)
        return 1;
    uint64_t top = 0;
    if (tstate == wt->tstate && at < fr->n && fr->spans[at].ok && fr->spans[at].buf == &fr->top_or_cframe)
        top = fr->top_or_cframe;
    else if (raw_u64(s, tstate + (uint64_t)top_off, &top) != 0)
        return 1;
    wt->tstate = tstate;
    if (via_cframe) {
        uint64_t cframe = top;
        if (!cframe)
            return 1;
        bool known = cframe == wt->cframe && fr->first_pair > 0 &&
                     fr->spans[fr->first_pair - 1].buf == &fr->cframe_top &&
                     fr->spans[fr->first_pair - 1].ok;
        if (known)
            top = fr->cframe_top;
        else if (raw_u64(s, cframe + (uint64_t)L->cframe_current_frame, &top) != 0)
            return 1;
        wt->cframe = cframe;
    }
    /* Down the chain: frames seen last time come from the scattered read,
     * the others (the new top ones) are read one by one. */
    uint64_t chain[WATCH_CHAIN_MAX];
    int n = 0, k = 0;
    for (uint64_t f = top; f; n++) {
        if (n >= WATCH_CHAIN_MAX)
            return 1;
        unsigned char own[64];
        const unsigned char *pair = NULL;
        int seen = -1;
        for (int j = k; j < wt->chain_n && seen < 0; j++)
            if (wt->chain[j] == f)
                seen = j;
        if (seen >= 0 && fr->spans[fr->first_pair + seen].ok) {
            pair = fr->pairs[seen];
            k = seen + 1;
        } else if (s->t->ops->read_raw(s->t, f + (uint64_t)ff.lo, own, (size_t)ff.len) == 0) {
            pair = own;
        } else {
            return 1;
        }
        uint64_t back, frame_code;
        memcpy(&back, pair + ff.back, 8);
        memcpy(&frame_code, pair + ff.code, 8);
        if (L->stackref_tagged)
            frame_code &= ~(uint64_t)7;
        chain[n] = f;
        if (frame_code == code && (n > 0 || !below_top))
            return 1;
        if (n == 0 && lone && frame_code != code)
            return 1;              /* not the frame that trapped: look properly */
        f = back;
    }
    memcpy(wt->chain, chain, sizeof chain[0] * (size_t)n);
    wt->chain_n = n;
    return 0;
}

/* Whether the entry field is the code's first code unit, which the
 * interpreter fetches at a frame's start (3.11): then also code that reads
 * the whole bytecode (quickening it, co_code) traps, with the frame past its
 * first instruction. */
static bool entry_is_first_unit(const struct py_layout *L)
{
    return L->code_code_adaptive != PY_OFF_NONE && L->code_entry_read == L->code_code_adaptive;
}

/* A trap on watch i's entry field: the thread has just started or resumed
 * a frame, which is then its top frame. FUNC's code there and further down
 * too is a re-entry, reported at once. */
static void on_entry_read(struct watch_session *s, pid_t tid, int i)
{
    struct py_watch *w = &s->py[i];
    struct watch_thread *wt = watch_thread_get(s, tid);
    uint64_t now = 0;
    int below = wt ? fast_check(s, wt, w, true, &now) : -1;
    if (below < 0)
        now = read_entry_field(s, w);
    /* The interpreter writing the field (3.8-3.10 count their first 1024
     * entries right after reading; 3.12+ re-instrumenting the code) is the
     * same start as the read just before it. */
    bool written = now != w->last_value;
    w->last_value = now;
    if (written)
        return;
    if (below == 0) {
        /* FUNC is not running further down: lazy mode stops looking. */
        if (s->lazy)
            disarm(s, tid, 1u << i);
        return;
    }
    uint64_t tstate = tstate_of(s, tid);
    if (!tstate)
        return;
    enum py_walk_status status;
    size_t count = walk(s, py_tstate_top_frame(&s->reader, tstate), &status);
    if (count == 0 || s->frames[0].code_addr != w->code)
        return;                    /* another reader of the field */
    if (entry_is_first_unit(s->reader.L) && s->frames[0].instr_offset >= 0)
        return;                    /* FUNC's running frame reading its bytecode */
    bool again = false;
    for (size_t k = 1; k < count && !again; k++)
        again = s->frames[k].code_addr == w->code;
    if (again)
        watch_report(s, tid, i, -1);
    else if (s->lazy)
        disarm(s, tid, 1u << i);
}

/* The watch whose code is at index i of s->py that a trap concerns. */
static void on_code_write(struct watch_session *s, pid_t tid, int i)
{
    struct py_watch *w = &s->py[i];
    if (w->entry) {
        on_entry_read(s, tid, i);
        return;
    }
    if (w->generator)
        return;                    /* not armed (see arm()) */
    if (!s->lazy) {
        struct watch_thread *wt = watch_thread_get(s, tid);
        uint64_t value = 0;
        int may_run = wt ? fast_check(s, wt, w, false, &value) : -1;
        uint32_t now = (uint32_t)value;
        if (may_run < 0)
            now = read_refcnt(s, w->code);
        int32_t delta = (int32_t)(now - w->last_refcnt);
        w->last_refcnt = now;
        if (delta <= 0)
            return;                /* a frame going away, not one coming */
        if (may_run == 0)
            return;                /* FUNC is not on this thread's stack */
    }
    uint64_t tstate = tstate_of(s, tid);
    if (!tstate)
        return;
    uint64_t top = py_tstate_top_frame(&s->reader, tstate);
    enum py_walk_status status;
    size_t count = walk(s, top, &status);
    if (find_code(s, count, w->code) < 0) {
        /* Not running on this thread (any more): lazy mode stops looking. */
        if (s->lazy)
            disarm(s, tid, 1u << i);
        return;
    }
    if (confirm_entry(s, tid, tstate, w->code, top))
        watch_report(s, tid, i, -1);
}

void watch_python_dr_trap(struct watch_session *s, pid_t tid, const siginfo_t *si)
{
    s->stats.dr_traps++;
    /* With one slot armed on the thread there is nothing to look up. */
    struct watch_thread *wt = watch_thread_get(s, tid);
    unsigned armed = wt ? wt->dr_mask : 0;
    unsigned hits = armed && !(armed & (armed - 1)) ? armed : dr_hits_of(tid, si);
    target_cache_invalidate(s->t);
    for (int i = 0; i < s->n_py && !s->done; i++)
        if (hits & (1u << i))
            on_code_write(s, tid, i);
}

/* Reads at every trap go straight to the target, a few bytes each: the
 * page cache would copy a whole page per read. */
static int raw_u64(struct watch_session *s, uint64_t addr, uint64_t *out)
{
    return s->t->ops->read_raw(s->t, addr, out, sizeof *out);
}

/* The code object of the frame _PyEval_EvalFrameDefault was entered with. */
static uint64_t entered_code(struct watch_session *s, const struct user_regs_struct *regs)
{
    const struct py_layout *L = s->reader.L;
    uint64_t frame = L->eval_frame_arg == 0 ? regs->rdi : regs->rsi, code = 0;
    long off = L->iframe_executable != PY_OFF_NONE ? L->iframe_executable : L->frame_code;
    if (!frame || off == PY_OFF_NONE || raw_u64(s, frame + (uint64_t)off, &code) != 0)
        return 0;
    if (L->stackref_tagged)
        code &= ~(uint64_t)7;
    return code;
}

static void label_of(const struct py_func_match *m, char *out, size_t outsize);
static int add_watches(struct watch_session *s, int f, const struct py_func_match *matches, int n);
static void start_new_watches(struct watch_session *s, int first_new, pid_t except);

/* A code object freed and another allocated at its address must be
 * searched again: a seen entry also keeps what identifies the object. */
static uint64_t code_identity(struct watch_session *s, uint64_t code)
{
    const struct py_layout *L = s->reader.L;
    long lo = L->code_filename, hi = L->code_filename;
    if (L->code_consts != PY_OFF_NONE) {
        lo = L->code_consts < lo ? L->code_consts : lo;
        hi = L->code_consts > hi ? L->code_consts : hi;
    }
    uint64_t words[32] = {0};
    size_t n = (size_t)(hi - lo) / 8 + 1;
    if (n > 32 || s->t->ops->read_raw(s->t, code + (uint64_t)lo, words, n * 8) != 0)
        return 1;
    uint64_t consts = L->code_consts != PY_OFF_NONE ? words[(L->code_consts - lo) / 8] : 0;
    uint64_t filename = words[(L->code_filename - lo) / 8];
    /* The kernel filter computes the same from the same two words. */
    return ufilter_identity(consts, filename);
}

/* Whether code still has to be scanned; mark: and note it scanned, here
 * and in the kernel filter's set, so that its frames no longer stop. */
static bool first_scan(struct watch_session *s, uint64_t code, bool mark)
{
    if (!s->scanned && !(s->scanned = calloc(WATCH_SCAN_SLOTS * 2, sizeof *s->scanned)))
        return true;
    uint64_t id = code_identity(s, code);
    if (mark)
        watch_filter_mark_seen(s, code, id);
    size_t slot = (size_t)((code >> 4) * 0x9e3779b97f4a7c15ull >> 40) & (WATCH_SCAN_SLOTS - 1);
    for (unsigned probe = 0; probe < 32; probe++) {
        uint64_t *e = &s->scanned[2 * ((slot + probe) & (WATCH_SCAN_SLOTS - 1))];
        if (e[0] == code) {
            if (e[1] == id)
                return false;
            if (mark)
                e[1] = id;
            return true;
        }
        if (e[0] == 0) {
            if (mark) {
                e[0] = code;
                e[1] = id;
            }
            return true;
        }
    }
    return true;
}

static bool wants_more(const struct watch_session *s, const struct watch_func *wf);

struct scan_ctx {
    struct watch_session *s;
    struct py_func_match found[WATCH_MAX_FUNCS][DR_SLOTS];
    int n_found[WATCH_MAX_FUNCS];
};

static int scan_visit(void *ctx, uint64_t code, const char *qualname)
{
    struct scan_ctx *c = ctx;
    struct watch_session *s = c->s;
    if (!first_scan(s, code, true))
        return 1;
    for (int f = 0; f < s->n_funcs; f++) {
        struct watch_func *wf = &s->funcs[f];
        if (!wants_more(s, wf) || c->n_found[f] >= DR_SLOTS ||
            !py_func_spec_matches_name(&wf->spec, qualname))
            continue;
        const struct py_code *pc = py_code_get_verified(s->codes, &s->reader, code);
        if (!pc || !py_func_spec_matches_file(&wf->spec, pc->filename))
            continue;
        py_func_match_fill(&s->reader, pc, qualname, &c->found[f][c->n_found[f]++]);
    }
    return 0;
}

/* Whether more definitions of --reentry f are looked for: until one is
 * found; without a FILE, also afterwards while debug registers are free
 * (a bare `walk` may meet os.walk before the program's own). */
static bool wants_more(const struct watch_session *s, const struct watch_func *wf)
{
    return wf->want_python && (!wf->found_python || (!wf->spec.file[0] && s->n_py < DR_SLOTS));
}

/* Whether the int3 at the interpreter's entry is still needed to find
 * functions: always while one is missing; for more definitions only when
 * it is there anyway (3.11+, or for a generator), as up to 3.10 it
 * stops every call. */
static bool any_generator(const struct watch_session *s);

static bool python_pending(const struct watch_session *s)
{
    bool int3_anyway = s->lazy || any_generator(s);
    for (int f = 0; f < s->n_funcs; f++)
        if (int3_anyway ? wants_more(s, &s->funcs[f])
                    : s->funcs[f].want_python && !s->funcs[f].found_python)
            return true;
    return false;
}

bool watch_python_wants_more(const struct watch_session *s)
{
    for (int f = 0; f < s->n_funcs; f++)
        if (wants_more(s, &s->funcs[f]))
            return true;
    return false;
}

/* No longer waiting: the int3 stays only where re-entry detection needs it. */
static bool any_generator(const struct watch_session *s);

/* Without debug registers up to 3.10, the breakpoint at
 * _PyEval_EvalFrameDefault is where every frame starts or resumes. */
static bool starts_at_eval(const struct watch_session *s)
{
    return s->no_dr && s->reader.L->opcode_resume < 0;
}

static void stop_waiting(struct watch_session *s)
{
    s->waiting = false;
    watch_filter_sync(s);
    if (!s->lazy && !any_generator(s) && s->eval_bp_used && !starts_at_eval(s)) {
        bp_remove(&s->mem, &s->eval_bp);
        bp_forget(&s->eval_bp);
        s->eval_bp_used = false;
    }
}

/* Waiting: searches a code object being entered for the functions still
 * missing (tid is stopped at the int3). */
static void scan_entered(struct watch_session *s, pid_t tid, uint64_t code)
{
    if (!code)
        return;
    if (!first_scan(s, code, false)) {
        /* Searched before, yet the filter stopped it (it had no room): tell
         * it again. */
        watch_filter_mark_seen(s, code, code_identity(s, code));
        return;
    }
    struct scan_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->s = s;
    struct py_code_tree tree;
    py_code_tree_init(&tree, &s->reader);
    py_code_tree_walk(&tree, code, NULL, scan_visit, c);
    int first_new = s->n_py;
    for (int f = 0; f < s->n_funcs; f++)
        if (c->n_found[f] > 0)
            add_watches(s, f, c->found[f], c->n_found[f]);
    free(c);
    if (s->n_py > first_new)
        start_new_watches(s, first_new, tid);
    if (!python_pending(s))
        stop_waiting(s);
}

/* Watch i's code is being entered from C while an activation of it is on
 * the thread's stack (top is the frame below the new one). Its reference
 * was taken before this call, or never is (a generator resumed): confirm
 * from here. */
static bool entered_again(struct watch_session *s, pid_t tid, uint64_t tstate, uint64_t top, int i)
{
    bool window = false;
    int sig = 0;
    if (bp_step_over(&s->tr, &s->mem, tid, &s->eval_bp, &window, &sig) != 0)
        return false;
    if (sig)
        watch_note_signal(s, tid, sig);
    if (confirm_entry(s, tid, tstate, s->py[i].code, top))
        watch_report(s, tid, i, -1);
    return true;
}

/* Without the lazy mode the int3 stays for generators and coroutines only:
 * resuming one creates no frame and takes no reference to the code. */
static bool generator_entry(struct watch_session *s, pid_t tid, const struct user_regs_struct *regs)
{
    uint64_t code = entered_code(s, regs);
    for (int i = 0; i < s->n_py; i++) {
        bool seen_here = starts_at_eval(s) || (s->py[i].generator && !s->py[i].entry);
        if (!seen_here || s->py[i].code != code)
            continue;
        /* 3.9+ pass the thread state first; 3.8 only the frame. */
        uint64_t tstate = s->reader.L->eval_frame_arg == 1 ? regs->rdi : tstate_of(s, tid);
        uint64_t top = tstate ? py_tstate_top_frame(&s->reader, tstate) : 0;
        if (!top)
            return false;
        enum py_walk_status status;
        size_t count = walk(s, top, &status);
        if (find_code(s, count, code) < 0)
            return false;
        return entered_again(s, tid, tstate, top, i);
    }
    return false;
}

/* A generator or coroutine function whose resumption only the int3 at the
 * interpreter's entry shows (3.11: its entry field is not read then). */
static bool any_generator(const struct watch_session *s)
{
    for (int i = 0; i < s->n_py; i++)
        if (s->py[i].generator && !s->py[i].entry)
            return true;
    return false;
}

bool watch_python_eval_needs_all(const struct watch_session *s)
{
    /* With debug registers the breakpoint at the interpreter's entry also
     * arms them (lazy mode) and sees 3.11's generators resumed: then every
     * entry is looked at in pyscope, as without a filter. */
    return !s->no_dr && s->n_py > 0 && (s->lazy || any_generator(s));
}

bool watch_python_eval_entry(struct watch_session *s, pid_t tid, const struct user_regs_struct *regs)
{
    s->stats.eval_entries++;
    target_cache_invalidate(s->t);
    if (s->waiting)
        scan_entered(s, tid, entered_code(s, regs));
    if (!s->n_py || !s->eval_bp.inserted)
        return false;
    if (s->no_dr && !starts_at_eval(s))
        return false;              /* 3.11+: the RESUME breakpoints see every start */
    if (!s->lazy)
        return generator_entry(s, tid, regs);
    /* _PyEval_EvalFrameDefault(tstate, frame, throwflag) on 3.11+. */
    uint64_t tstate = regs->rdi;
    struct watch_thread *wt = watch_thread_get(s, tid);
    if (wt)
        wt->tstate = tstate;
    /* Most entries happen with no activation of a watched function on the
     * stack: the frames seen at this thread's last trap, read again in one
     * scattered read, tell that without a walk. */
    bool maybe = !wt;
    for (int i = 0; i < s->n_py && !maybe; i++) {
        uint64_t value;
        maybe = fast_check(s, wt, &s->py[i], false, &value) != 0;
    }
    if (!maybe)
        return false;
    uint64_t top = py_tstate_top_frame(&s->reader, tstate);
    if (!top)
        return false;
    enum py_walk_status status;
    size_t count = walk(s, top, &status);
    unsigned present = 0;
    for (int i = 0; i < s->n_py; i++)
        if (find_code(s, count, s->py[i].code) >= 0)
            present |= 1u << i;
    if (!present)
        return false;
    /* C entered Python above a running activation: from now on, until that
     * activation is gone, every new frame of the function on this thread
     * must be seen. */
    arm(s, tid, present);
    uint64_t code = entered_code(s, regs);
    /* An entry watch, just armed, traps when this frame starts. */
    for (int i = 0; i < s->n_py; i++)
        if ((present & (1u << i)) && s->py[i].code == code && !s->py[i].entry)
            return entered_again(s, tid, tstate, top, i);
    return false;
}

static void label_of(const struct py_func_match *m, char *out, size_t outsize)
{
    const char *base = strrchr(m->filename, '/');
    snprintf(out, outsize, "%s (%s:%d)", m->qualname, base ? base + 1 : m->filename,
             m->firstlineno);
}

/* The interpreter loop's entry, in the file that holds the runtime. */
static int plant_eval_breakpoint(struct watch_session *s)
{
    struct native_symbol found[4];
    int n = native_find_symbol(s->t, "_PyEval_EvalFrameDefault", NULL, 0, found, 4);
    for (int i = 0; i < n; i++) {
        if (strcmp(found[i].module, s->rt.binary) != 0 && n > 1)
            continue;
        memset(&s->eval_bp, 0, sizeof s->eval_bp);
        s->eval_bp.addr = found[i].addr;
        watch_filter_prepare(s, &s->eval_bp, WATCH_FILTER_EVAL, starts_at_eval(s));
        struct pyscope_error err = {0};
        if (watch_insert_breakpoint(s, &s->eval_bp, true, &err) != 0) {
            fprintf(stderr, "pyscope: %s\n", err.message);
            return -1;
        }
        s->eval_bp_used = true;
        if (s->verbose)
            fprintf(stderr, "pyscope: C-to-Python entries: breakpoint at _PyEval_EvalFrameDefault "
                            "(0x%llx, %s%s%s)\n", (unsigned long long)s->eval_bp.addr,
                    s->eval_bp.uprobe ? "a uprobe" : "an int3",
                    watch_filter_active(s, &s->eval_bp) ? ", filtered in the kernel"
                    : s->no_dr ? ", not filtered in the kernel: " : "",
                    watch_filter_active(s, &s->eval_bp) || !s->no_dr ? "" : watch_filter_why(s));
        if (s->eval_bp.first.kind == INSN_UNKNOWN && !s->eval_bp.uprobe)
            fprintf(stderr, "pyscope: note: _PyEval_EvalFrameDefault starts with an instruction "
                            "pyscope does not emulate; see docs/watch.md (stepping window)\n");
        return 0;
    }
    return -1;
}

/* ---- without debug registers: breakpoints where every frame starts ---- */

/* 3.11+: every frame runs RESUME when it starts and again when it resumes
 * after a yield or an await, with the frame already the thread's top frame
 * (a call from C, an inlined Python-to-Python call, a generator stepped by
 * a for loop alike). Its handler in the interpreter loop, and the
 * quickened form's, come from the loop's table of handlers. */
static int plant_start_breakpoints(struct watch_session *s)
{
    const struct py_layout *L = s->reader.L;
    int ops[2] = {L->opcode_resume, L->opcode_resume_quick};
    int n = L->opcode_resume_quick >= 0 ? 2 : 1;
    uint64_t addr[2] = {0, 0};
    if (py_opcode_handlers(s->t, s->rt.binary, ops, n, addr) != 0)
        return -1;
    if (n == 2 && addr[1] == addr[0])
        n = 1;
    for (int i = 0; i < n; i++) {
        memset(&s->start_bp[i], 0, sizeof s->start_bp[i]);
        s->start_bp[i].addr = addr[i];
        watch_filter_prepare(s, &s->start_bp[i], WATCH_FILTER_RESUME, true);
        struct pyscope_error err = {0};
        if (watch_insert_breakpoint(s, &s->start_bp[i], false, &err) != 0) {
            fprintf(stderr, "pyscope: %s\n", err.message);
            for (int j = 0; j < i; j++)
                bp_remove(&s->mem, &s->start_bp[j]);
            return -1;
        }
        s->n_start_bp = i + 1;
    }
    if (s->verbose)
        fprintf(stderr, "pyscope: frame starts: breakpoints at the RESUME handlers (0x%llx, "
                        "0x%llx%s)\n", (unsigned long long)addr[0],
                (unsigned long long)(n > 1 ? addr[1] : 0),
                watch_filter_active(s, &s->start_bp[0]) ? ", filtered in the kernel" : "");
    return 0;
}

/* Where debug registers do not trap, every frame start is a breakpoint:
 * said once, with what it costs. */
static void plant_frame_starts(struct watch_session *s)
{
    if (s->frame_starts_planted)
        return;
    bool at_eval = starts_at_eval(s);
    int rc = at_eval ? (s->eval_bp_used ? 0 : plant_eval_breakpoint(s))
                     : plant_start_breakpoints(s);
    s->frame_starts_planted = rc == 0;
    bool filtered = at_eval ? watch_filter_active(s, &s->eval_bp) : s->n_start_bp > 0;
    for (int i = 0; !at_eval && i < s->n_start_bp; i++)
        filtered &= watch_filter_active(s, &s->start_bp[i]);
    const char *where = at_eval ? "_PyEval_EvalFrameDefault" : "the interpreter loop's RESUME";
    if (rc == 0 && filtered)
        fprintf(stderr, "pyscope: this machine's debug registers never trap (its hypervisor "
                        "does not pass them on), so every start of a Python frame meets a "
                        "breakpoint instead (%s), filtered in the kernel by an eBPF program: a "
                        "thread stops only where a watched function starts while it is "
                        "already running on that thread; every other Python call costs a few "
                        "microseconds\n", where);
    else if (rc == 0)
        fprintf(stderr, "pyscope: this machine's debug registers never trap (its hypervisor "
                        "does not pass them on), so every start of a Python frame stops at a "
                        "breakpoint instead (%s): the program runs slower while watched, "
                        "some tens of microseconds per Python call (not filtered in the "
                        "kernel: %s)\n", where, watch_filter_why(s));
    else {
        /* Watching on would end in "0 re-entries reported", which would
         * read as none happening. */
        fprintf(stderr, "pyscope: error: this machine's debug registers never trap, and no "
                        "breakpoint that sees every start of a Python frame could be placed: "
                        "re-entries of Python functions cannot be seen here\n");
        s->blind = true;
        s->done = true;
    }
}

void watch_python_frame_start(struct watch_session *s, pid_t tid)
{
    s->stats.frame_starts++;
    if (!s->n_py)
        return;
    target_cache_invalidate(s->t);
    uint64_t tstate = tstate_of(s, tid);
    uint64_t top = tstate ? py_tstate_top_frame(&s->reader, tstate) : 0;
    const struct py_layout *L = s->reader.L;
    long off = L->iframe_executable != PY_OFF_NONE ? L->iframe_executable : L->frame_code;
    uint64_t code = 0;
    if (!top || off == PY_OFF_NONE || raw_u64(s, top + (uint64_t)off, &code) != 0)
        return;
    if (L->stackref_tagged)
        code &= ~(uint64_t)7;
    int i = 0;
    while (i < s->n_py && s->py[i].code != code)
        i++;
    if (i == s->n_py)
        return;                    /* the common case: another function */
    enum py_walk_status status;
    size_t count = walk(s, top, &status);
    if (count == 0 || s->frames[0].code_addr != code)
        return;
    for (size_t k = 1; k < count; k++) {
        if (s->frames[k].code_addr == code) {
            watch_report(s, tid, i, -1);
            return;
        }
    }
}

/* Starts watching the matches of --reentry number f (not watched yet),
 * as far as debug registers last. Returns how many were added. */
static int add_watches(struct watch_session *s, int f, const struct py_func_match *matches, int n)
{
    struct watch_func *wf = &s->funcs[f];
    wf->found_python = true;
    int added = 0, fresh = 0;
    for (int m = 0; m < n; m++) {
        bool known = false;
        for (int i = 0; i < s->n_py; i++)
            known |= s->py[i].code == matches[m].code;
        fresh += !known;
    }
    if (fresh > 1)
        fprintf(stderr, "pyscope: %s matches %d functions; watching each of them\n", wf->arg,
                fresh);
    for (int m = 0; m < n; m++) {
        bool known = false;
        for (int i = 0; i < s->n_py; i++)
            known |= s->py[i].code == matches[m].code;
        if (known)
            continue;
        char label[512];
        label_of(&matches[m], label, sizeof label);
        if (s->n_py >= DR_SLOTS) {
            fprintf(stderr, "pyscope: cannot also watch %s: the %d hardware watchpoints "
                            "are in use\n", label, DR_SLOTS);
            continue;
        }
        struct py_watch *w = &s->py[s->n_py];
        memset(w, 0, sizeof *w);
        w->code = matches[m].code;
        w->slot = s->n_py;
        w->func = f;
        w->generator = (matches[m].flags &
                        (PY_CO_GENERATOR | PY_CO_COROUTINE | PY_CO_ASYNC_GENERATOR)) != 0;
        const struct py_layout *L = s->reader.L;
        int len = L->code_entry_read_size;
        /* A generator resumes after its last yield, not at its first code
         * unit: where that unit is the entry field (3.11), the int3 at the
         * interpreter's entry sees its resumptions (all from C there). */
        w->entry = L->code_entry_read != PY_OFF_NONE && (len == 2 || len == 4 || len == 8) &&
                   ((w->code + (uint64_t)L->code_entry_read) & (uint64_t)(len - 1)) == 0 &&
                   !(w->generator && entry_is_first_unit(L));
        w->watch_addr = w->entry ? w->code + (uint64_t)L->code_entry_read : w->code;
        w->watch_len = w->entry ? len : 4;
        snprintf(w->label, sizeof w->label, "%s", label);
        s->n_py++;
        added++;
        fprintf(stderr, "pyscope: watching Python function %s, %s\n", label,
                matches[m].filename);
        if (w->generator)
            fprintf(stderr, "pyscope: %s is a generator or coroutine function: watched when "
                            "one is resumed%s, too\n", label, w->entry ? "" : " from C");
    }
    return added;
}

/* Arms what watches first_new.. need; the process is stopped for it and
 * resumed after, except thread except. */
static void start_new_watches(struct watch_session *s, int first_new, pid_t except)
{
    tracer_stop_all(&s->tr);
    if (s->no_dr) {
        plant_frame_starts(s);
        watch_filter_sync(s);
        resync_counts(s);
        watch_resume_others(s, except);
        return;
    }
    if (!s->lazy && any_generator(s) && !s->eval_bp_used && plant_eval_breakpoint(s) != 0)
        fprintf(stderr, "pyscope: warning: cannot break on entries into Python here: a "
                        "generator or coroutine resumed is not seen\n");
    if (s->lazy && !s->eval_bp_used && plant_eval_breakpoint(s) != 0) {
        fprintf(stderr, "pyscope: warning: cannot break on C-to-Python entries here; "
                        "watching every call instead (as with --exact)\n");
        s->lazy = false;
    }
    if (!s->lazy) {
        unsigned fresh = all_slots(s) & ~((1u << first_new) - 1);
        for (int i = 0; i < s->tr.n; i++)
            if (s->tr.threads[i].stopped)
                arm(s, s->tr.threads[i].tid, fresh);
    }
    watch_filter_sync(s);
    resync_counts(s);
    watch_resume_others(s, except);
}

/* A function still missing: from now on every code object entered is
 * searched for it (see the top of this file). */
static void begin_waiting(struct watch_session *s, pid_t except)
{
    tracer_stop_all(&s->tr);
    if (s->eval_bp_used || plant_eval_breakpoint(s) == 0) {
        s->waiting = true;
        watch_filter_sync(s);
        clock_gettime(CLOCK_MONOTONIC, &s->wait_start);
    } else {
        fprintf(stderr, "pyscope: warning: cannot break on entries into Python here; "
                        "functions not defined yet are looked for every 0.2 s\n");
    }
    watch_resume_others(s, except);
}

int watch_python_resolve(struct watch_session *s, pid_t except)
{
    if (s->awaiting_exec || !watch_python_wants_more(s))
        return 0;
    if (!s->have_rt) {
        struct pyscope_error err = {0};
        target_refresh_maps(s->t);
        if (py_runtime_find_now(s->t, &s->rt, &err) != 0) {
            /* A shared libpython is not loaded yet: wait for the linker. */
            watch_native_plant_dl_hook(s);
            return 0;
        }
        s->have_rt = true;
        py_reader_init(&s->reader, &s->rt);
        s->lazy = !s->exact && !s->no_dr && s->rt.layout.frames == PY_FRAMES_INTERPRETER;
    }
    /* While every code object entered is searched, walking sys.modules
     * again finds nothing new, and would hold up the threads that trap
     * meanwhile. */
    if (s->waiting)
        return 0;
    target_cache_invalidate(s->t);
    int first_new = s->n_py;
    for (int f = 0; f < s->n_funcs; f++) {
        struct watch_func *wf = &s->funcs[f];
        if (!wants_more(s, wf))
            continue;
        struct py_func_match matches[8];
        int n = py_find_functions(&s->rt, s->codes, &wf->spec, matches, 8);
        if (n > 0)
            add_watches(s, f, matches, n);
    }
    if (s->n_py > first_new)
        start_new_watches(s, first_new, except);
    if (python_pending(s) && !s->waiting)
        begin_waiting(s, except);
    else if (!python_pending(s) && s->waiting) {
        tracer_stop_all(&s->tr);
        stop_waiting(s);
        watch_resume_others(s, except);
    }
    return s->n_py - first_new;
}

static long ms_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

void watch_python_hint(struct watch_session *s)
{
    if (!s->have_rt || !s->waiting || ms_since(&s->wait_start) < HINT_AFTER_MS)
        return;
    for (int f = 0; f < s->n_funcs; f++) {
        struct watch_func *wf = &s->funcs[f];
        if (!wf->want_python || wf->found_python || wf->hinted || wf->hint_tries >= HINT_TRIES ||
            ms_since(&s->wait_start) < HINT_AFTER_MS + HINT_AGAIN_MS * (long)wf->hint_tries)
            continue;
        struct py_func_match near[4];
        /* The module dicts are read with the threads stopped: a program
         * running at full speed (the kernel filter lets it) rebuilds its
         * dicts under a reader, which then misses names. */
        tracer_stop_all(&s->tr);
        target_cache_invalidate(s->t);
        int n = py_find_similar(&s->rt, s->codes, &wf->spec, near, 4);
        watch_resume_others(s, 0);
        size_t len = 0;
        for (int i = 0; i < n && len < sizeof wf->hint; i++) {
            char label[512];
            label_of(&near[i], label, sizeof label);
            len += (size_t)snprintf(wf->hint + len, sizeof wf->hint - len, "%s%s",
                                    i ? (i == n - 1 ? " or " : ", ") : "", label);
        }
        wf->hinted = n > 0;
        if (n > 0)
            fprintf(stderr, "pyscope: %s not found yet; did you mean %s?\n", wf->arg, wf->hint);
        else if (wf->hint_tries++ == 0)
            fprintf(stderr, "pyscope: %s not found yet, nor any name close to it; still "
                            "watching for its definition\n", wf->arg);
    }
}

void watch_python_reset(struct watch_session *s)
{
    s->have_rt = false;
    s->waiting = false;
    watch_filter_close(s);
    if (s->scanned)
        memset(s->scanned, 0, WATCH_SCAN_SLOTS * 2 * sizeof *s->scanned);
    s->n_py = 0;
    s->eval_bp_used = false;
    s->eval_bp.inserted = false;
    s->n_start_bp = 0;
    s->frame_starts_planted = false;
    for (int f = 0; f < s->n_funcs; f++)
        s->funcs[f].found_python = false;
    for (int i = 0; i < s->n_threads; i++) {
        s->threads[i].tstate = 0;
        s->threads[i].dr_mask = 0;
    }
    if (s->codes)
        py_code_cache_clear(s->codes);
}
