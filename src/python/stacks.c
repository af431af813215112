/* Collecting every thread's stack and state. Without --pause the target keeps
 * running, so a thread whose walk hits a torn frame is re-read from its
 * thread state a few times; what still cannot be read is marked incomplete,
 * never filled in. */
#include "python/stacks.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "python/callable.h"
#include "python/frames.h"
#include "python/thread_state.h"
#include "python/threads.h"
#include "target/process.h"
#include "target/syscalls.h"


/* Each code object's names, copied into the report's pool once per dump. */
#define NAME_SLOTS 512

struct code_names {
    uint64_t code, func;
    const char *function, *file;
};

/* Pooled names of a frame, by code object and function object: wrappers
 * made by one decorator share their code but not their names. */
static bool names_for(struct code_names *table, struct report_names **pool, struct py_walker *w,
                      const struct py_frame *frame, const struct py_code *code,
                      const char **function, const char **file)
{
    uint64_t code_addr = frame->code_addr, func = frame->func_addr;
    struct code_names *slot = &table[((code_addr ^ func) >> 4) % NAME_SLOTS];
    if (code && slot->code == code_addr && slot->func == func) {
        *function = slot->function;
        *file = slot->file;
        return true;
    }
    *function = report_names_add(pool, code ? py_code_function_name(w->codes, w->reader, code,
                                                                     func)
                                            : "<unreadable code>");
    *file = report_names_add(pool, code ? code->filename : "?");
    if (!*function || !*file)
        return false;
    if (code)
        *slot = (struct code_names){code_addr, func, *function, *file};
    return true;
}

static int fill_frames(struct py_walker *w, const struct py_frame *frames, size_t n,
                       struct code_names *names, struct report_names **pool,
                       struct report_thread *out)
{
    out->frames = calloc(n ? n : 1, sizeof *out->frames);
    if (!out->frames)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct py_code *code = py_walker_code(w, frames[i].code_addr);
        struct report_frame *f = &out->frames[out->n_frames];
        const char *function, *file;
        if (!names_for(names, pool, w, &frames[i], code, &function, &file))
            return -1;
        f->function = (char *)function;
        f->file = (char *)file;
        f->names_pooled = true;
        f->line = code ? frames[i].line : -1;
        f->frame_addr = frames[i].frame_addr;
        f->code_addr = frames[i].code_addr;
        f->is_entry = frames[i].is_entry;
        f->instr_offset = frames[i].instr_offset;
        out->n_frames++;
    }
    return 0;
}

static bool gil_unchanged(const struct py_snapshot *snap, const uint64_t *holders,
                          const uint64_t *switches)
{
    for (int k = 0; k < snap->n_interps; k++)
        if (snap->interps[k].gil_holder != holders[k] || snap->interps[k].gil_switches != switches[k])
            return false;
    return true;
}

static bool in_gil_futex(const struct thread_activity *a, const struct py_interp *pi,
                         uint64_t gil_size)
{
    return thread_classify(a, false, pi->gil, gil_size) == THREAD_WAITING_GIL;
}

/* A thread waiting for the GIL wakes every few milliseconds (its timed wait
 * expires, or it was signalled but another thread got in first) and is on
 * CPU for a moment before it blocks again, longer when CPUs are scarce. A
 * thread seen on CPU without the GIL is therefore watched for up to one
 * switch interval: if it goes back into the GIL's futex, or takes the GIL,
 * it was inside take_gil at the snapshot, i.e. waiting. A thread running
 * native code does neither. */
#define RECHECK_ROUNDS 60
#define RECHECK_PAUSE_US 100

static void recheck_running_threads(struct py_reader *r, const struct py_snapshot *snap,
                                    struct thread_activity *activities)
{
    uint64_t gil_size = (uint64_t)r->L->gil_size;
    /* A core file does not move: nothing to watch. */
    if (!target_can(r->t, TARGET_CAN_CHANGE))
        return;
    bool *pending = calloc((size_t)(snap->n_threads ? snap->n_threads : 1), sizeof *pending);
    if (!pending)
        return;
    int n_pending = 0;
    for (int i = 0; i < snap->n_threads; i++) {
        const struct py_thread *pt = &snap->threads[i];
        const struct py_interp *pi = &snap->interps[pt->interp_index];
        pending[i] = pt->tid && pi->gil && pi->gil_holder != pt->tstate &&
                     activities[i].syscall_nr < 0 && activities[i].on_cpu;
        n_pending += pending[i];
    }
    for (int round = 0; round < RECHECK_ROUNDS && n_pending > 0; round++) {
        usleep(RECHECK_PAUSE_US);
        for (int i = 0; i < snap->n_threads; i++) {
            if (!pending[i])
                continue;
            const struct py_thread *pt = &snap->threads[i];
            struct py_interp now = snap->interps[pt->interp_index];
            struct thread_activity again;
            if (target_thread_activity(r->t, pt->tid, &again) != 0)
                continue;
            bool waiting = in_gil_futex(&again, &now, gil_size);
            bool took_it = !waiting && py_interp_read_gil(r, &now) == 0 && now.gil_holder == pt->tstate;
            if (waiting || took_it || again.syscall_nr >= 0) {
                if (waiting || took_it) {
                    /* Record it as the GIL wait it was. */
                    activities[i] = again;
                    activities[i].syscall_nr = SYSCALL_NR_FUTEX;
                    activities[i].syscall_args[0] = now.gil;
                    activities[i].on_cpu = false;
                }
                pending[i] = false;
                n_pending--;
            }
        }
    }
    free(pending);
}

/* The GIL changes hands every few milliseconds, while reading /proc for 100
 * threads takes about as long. Read every thread's kernel state between two
 * reads of the GIL and retry while a hand-off happened in between, so that
 * "holds the GIL" and "waits for it" describe the same instant. */
static void read_coherent_activity(struct py_reader *r, struct py_snapshot *snap, bool paused,
                                   struct thread_activity *activities)
{
    uint64_t holders[PY_MAX_INTERPRETERS], switches[PY_MAX_INTERPRETERS];
    for (int attempt = 0; attempt < 8; attempt++) {
        for (int k = 0; k < snap->n_interps; k++) {
            py_interp_read_gil(r, &snap->interps[k]);
            holders[k] = snap->interps[k].gil_holder;
            switches[k] = snap->interps[k].gil_switches;
        }
        for (int i = 0; i < snap->n_threads; i++) {
            memset(&activities[i], 0, sizeof activities[i]);
            activities[i].syscall_nr = -1;
            if (snap->threads[i].tid)
                target_thread_activity(r->t, snap->threads[i].tid, &activities[i]);
        }
        for (int k = 0; k < snap->n_interps; k++)
            py_interp_read_gil(r, &snap->interps[k]);
        if (gil_unchanged(snap, holders, switches))
            break;
    }
    if (!paused)
        recheck_running_threads(r, snap, activities);
}

void stacks_raw_free(struct stacks_raw *raw)
{
    for (size_t i = 0; raw->threads && i < raw->n_threads; i++)
        free(raw->threads[i].frames);
    free(raw->threads);
    raw->threads = NULL;
    raw->n_threads = 0;
}

static int keep_raw(struct stacks_raw *raw, size_t index, const struct py_thread *pt,
                    const struct thread_activity *activity, const struct py_frame *frames,
                    size_t count)
{
    struct stacks_thread_raw *out = &raw->threads[index];
    size_t keep = count < STACKS_RAW_FRAMES ? count : STACKS_RAW_FRAMES;
    out->tstate = pt->tstate;
    out->activity = *activity;
    out->frames = malloc(sizeof *out->frames * (keep ? keep : 1));
    if (!out->frames)
        return -1;
    memcpy(out->frames, frames, sizeof *out->frames * keep);
    out->n_frames = keep;
    raw->n_threads = index + 1;
    return 0;
}

/* Stacks of up to this size are read into the page cache, all threads'
 * in one system call; the wait analysis then finds their locals there too.
 * Deeper ones are copied whole, one read each. */
#define STACK_PREFETCH_MAX (32 * TARGET_PAGE_SIZE)

static bool stack_prefetched(const struct py_layout *L, const struct py_thread *pt)
{
    if (!pt->datastack_chunk || L->chunk_data == PY_OFF_NONE)
        return false;
    uint64_t base = pt->datastack_chunk + (uint64_t)L->chunk_data;
    return pt->datastack_top > base && pt->datastack_top - base <= STACK_PREFETCH_MAX;
}

/* Whether the thread's newest frame is still the one a walk started from,
 * and every frame walked still runs the code walked (the code tells a frame
 * slot reused by a new call from the one walked), the top read again after
 * them: a thread that left the top frame and came back to a new call in
 * the same slot between the copy and this check shows it only in a frame
 * below, and one that left it again while they were read, in the top. */
static bool still_at(struct py_reader *r, uint64_t tstate, const struct py_thread *walked,
                     const struct py_frame *frames, size_t count)
{
    uint64_t top = py_tstate_top_frame_now(r, tstate);
    if (top != walked->top_frame)
        return false;
    if (count == 0 || frames[0].frame_addr != top)
        return true;
    return py_frames_still(r, frames, count) && py_tstate_top_frame_now(r, tstate) == top;
}

static void prefetch_stacks(struct py_reader *r, const struct py_snapshot *snap)
{
    struct target_range *ranges = calloc((size_t)(snap->n_threads ? snap->n_threads : 1),
                                         sizeof *ranges);
    if (!ranges)
        return;
    size_t n = 0;
    for (int i = 0; i < snap->n_threads; i++) {
        const struct py_thread *pt = &snap->threads[i];
        if (!stack_prefetched(r->L, pt))
            continue;
        uint64_t base = pt->datastack_chunk + (uint64_t)r->L->chunk_data;
        ranges[n++] = (struct target_range){base, (size_t)(pt->datastack_top - base)};
    }
    target_prefetch(r->t, ranges, n);
    free(ranges);
}

/* A stopped process runs nothing: dump, why and top must say so instead of
 * what the last syscall state suggests. The leader's status answers for a
 * group stop (SIGSTOP) and a debugger; each thread is looked at only then. */
static void note_stopped(struct target *t, struct stack_report *report)
{
    char state;
    pid_t tracer;
    report->n_stopped = 0;
    report->tracer = 0;
    if (target_thread_stopped(t, t->pid, &state, &tracer) != 0 || !state)
        return;
    for (size_t i = 0; i < report->n_threads; i++) {
        struct report_thread *th = &report->threads[i];
        if (!th->tid || target_thread_stopped(t, th->tid, &th->stopped, &th->tracer) != 0)
            continue;
        if (!th->stopped)
            continue;
        report->n_stopped++;
        if (th->tracer && !report->tracer) {
            report->tracer = th->tracer;
            target_peer_comm(t, th->tracer, report->tracer_comm, sizeof report->tracer_comm);
        }
    }
}

static bool names_known(const struct stacks_names *known, const struct py_snapshot *snap,
                        char (*names)[64])
{
    if (!known || !known->name_of)
        return false;
    for (int i = 0; i < snap->n_threads; i++)
        if (!known->name_of(known->ctx, snap->threads[i].thread_id, snap->threads[i].tid,
                            names[i]))
            return false;
    return true;
}

/* Room for a walk of PY_MAX_FRAMES is 1.3 MB: kept from one collection to
 * the next in the same thread rather than mapped and unmapped by each (the
 * agent's whys make two per process every 30 s; only the pages deep
 * stacks touched are resident). */
static _Thread_local struct py_frame *walk_room;

static struct py_frame *frames_room(void)
{
    if (!walk_room)
        walk_room = malloc(sizeof *walk_room * PY_MAX_FRAMES);
    return walk_room;
}

int stacks_collect(struct py_runtime *rt, const struct stacks_options *opts,
                   struct stack_report *report, struct pyscope_error *err)
{
    struct target *t = rt->target;
    struct py_reader reader;
    py_reader_init(&reader, rt);
    struct py_code_cache *shared = opts->names ? opts->names->codes : NULL;
    struct py_code_cache *codes = shared ? shared : calloc(1, sizeof *codes);
    struct py_vars_cache *vars_cache = calloc(1, sizeof *vars_cache);
    struct code_names *names_of_code = calloc(NAME_SLOTS, sizeof *names_of_code);
    struct py_frame *frames = frames_room();
    pid_t *tids = malloc(sizeof *tids * PROCESS_MAX_THREADS);
    char (*names)[64] = NULL;
    struct thread_activity *activities = NULL;
    struct py_stack_copy stack_copy = {0};
    struct py_snapshot snap = {0};
    int rc = -1;
    if (!codes || !vars_cache || !names_of_code || !frames || !tids) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        goto out;
    }
    struct py_walker walker = {.reader = &reader, .codes = codes, .verify_codes = shared != NULL,
                               .stack = &stack_copy};

    int n_tids = target_list_threads(t, tids, PROCESS_MAX_THREADS);
    if (n_tids < 0)
        n_tids = 0;
    /* An interpreter that is starting up or shutting down has no thread
     * list for a moment; give it that moment, then tell which it was. */
    for (int attempt = 0; attempt < 30; attempt++) {
        py_snapshot_free(&snap);
        if (py_snapshot_read(&reader, tids, n_tids, &snap) != 0) {
            error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
            goto out;
        }
        if (snap.n_interps > 0 || opts->paused || !target_can(t, TARGET_CAN_CHANGE) || target_gone(t))
            break;
        usleep(10000);
        target_cache_invalidate(t);
    }
    if (snap.n_interps == 0 && target_gone(t)) {
        error_set(err, PYSCOPE_ERR_EXITED, "process %d exited during the dump", (int)t->pid);
        goto out;
    }
    if (snap.n_interps == 0) {
        report->no_interpreter = true;
        error_set(err, PYSCOPE_ERR_OTHER,
                  "process %d has CPython %s loaded but no interpreter running (starting up or "
                  "shutting down?)",
                  (int)t->pid, rt->version);
        goto out;
    }
    /* The stacks are copied right after the thread states that say where
     * their tops are, before the slow reads of /proc: each walk is checked
     * against its thread's top afterwards, and re-read if it moved. */
    prefetch_stacks(&reader, &snap);
    names = calloc((size_t)(snap.n_threads ? snap.n_threads : 1), sizeof *names);
    if (!names) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        goto out;
    }
    if (!names_known(opts->names, &snap, names))
        py_thread_names(&reader, &snap, names);

    report->threads = calloc((size_t)(snap.n_threads ? snap.n_threads : 1), sizeof *report->threads);
    if (!report->threads) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        goto out;
    }
    report->gc_collecting = false;
    for (int k = 0; k < snap.n_interps; k++)
        report->gc_collecting |= snap.interps[k].gc_collecting;

    activities = calloc((size_t)(snap.n_threads ? snap.n_threads : 1), sizeof *activities);
    if (!activities) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        goto out;
    }
    read_coherent_activity(&reader, &snap, opts->paused, activities);
    if (opts->raw) {
        opts->raw->gil_switches = 0;
        for (int k = 0; k < snap.n_interps; k++)
            opts->raw->gil_switches += snap.interps[k].gil_switches;
        opts->raw->threads = calloc((size_t)(snap.n_threads ? snap.n_threads : 1),
                                    sizeof *opts->raw->threads);
        if (!opts->raw->threads) {
            error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
            goto out;
        }
    }

    for (int i = 0; i < snap.n_threads; i++) {
        const struct py_thread *pt = &snap.threads[i];
        const struct py_interp *pi = &snap.interps[pt->interp_index];
        struct report_thread *th = &report->threads[report->n_threads++];
        th->tid = pt->tid;
        th->thread_id = pt->thread_id;
        th->interp_id = pi->id;
        th->holds_gil = pi->gil_holder == pt->tstate;
        th->gc = pi->gc_collecting && th->holds_gil;
        memcpy(th->name, names[i], sizeof th->name);

        const struct thread_activity activity = activities[i];
        th->state = thread_classify(&activity, th->holds_gil, pi->gil,
                                    (uint64_t)rt->layout.gil_size);
        if (activity.syscall_nr >= 0 && th->state != THREAD_WAITING_GIL)
            th->syscall = syscall_name(activity.syscall_nr);

        struct py_thread now = *pt;
        walker.stack = stack_prefetched(&rt->layout, pt) ? NULL : &stack_copy;
        if (walker.stack)
            py_stack_copy_read(&reader, pt->datastack_chunk, pt->datastack_top, &stack_copy);
        size_t count = 0;
        enum py_walk_status status = PY_WALK_OK;
        bool live = !opts->paused && target_can(t, TARGET_CAN_CHANGE);
        int attempts = live ? 1 + opts->max_retries : 1;
        for (int attempt = 0; attempt < attempts; attempt++) {
            if (attempt > 0) {
                /* The thread moved on: forget everything read of it. A
                 * thread looping over a short call can tear every walk
                 * that takes as long as one turn of its loop (an ASan
                 * build's reads do); naps of growing length break that
                 * lock-step after the first quick tries. */
                if (attempt > 3)
                    usleep(100u << (attempt - 4 < 4 ? attempt - 4 : 4));
                target_cache_invalidate(t);
                if (py_thread_reread(&reader, &now) != 0)
                    now.top_frame = py_tstate_top_frame(&reader, pt->tstate);
                walker.stack = &stack_copy;
                py_stack_copy_read(&reader, now.datastack_chunk, now.datastack_top, &stack_copy);
            }
            status = py_walk_frames(&walker, now.top_frame, frames, PY_MAX_FRAMES, &count);
            if (status != PY_WALK_OK && status != PY_WALK_TOO_DEEP)
                continue;
            /* A walk of a copy made after the top was read is the stack of
             * one moment only if the thread is still in that frame, running
             * that code: a frame it has returned from keeps its bytes, and
             * its caller may since have become another function. A thread
             * that never holds still for long enough keeps its last walk. */
            if (!live || attempt == attempts - 1 || still_at(&reader, pt->tstate, &now, frames, count))
                break;
            status = PY_WALK_INVALID;
        }
        th->complete = status == PY_WALK_OK;
        if (!th->complete)
            snprintf(th->error, sizeof th->error, "%s after %zu frames",
                     py_walk_status_text(status), count);
        if (count > 0 && py_frame_c_callable(&reader, vars_cache, &frames[0], th->c_callable,
                                             sizeof th->c_callable) != 0)
            th->c_callable[0] = '\0';
        /* On a CPU without the GIL, yet its innermost frame runs bytecode
         * that calls nothing: it is between the futex wake-up and taking the
         * GIL (what take_gil does when CPUs are scarce). */
        int oparg;
        if (th->state == THREAD_RUNNING && th->complete && count > 0 &&
            !py_frame_call_kind(&reader, &frames[0], &oparg)) {
            th->state = THREAD_WAITING_GIL;
            th->syscall = NULL;
        }
        if (fill_frames(&walker, frames, count, names_of_code, &report->names, th) != 0 ||
            (opts->raw && keep_raw(opts->raw, report->n_threads - 1, pt, &activity, frames, count) != 0)) {
            error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
            goto out;
        }
    }
    if (target_can(t, TARGET_CAN_PROC) && !opts->paused)
        note_stopped(t, report);
    rc = 0;
out:
    if (codes && !shared) {
        py_code_cache_clear(codes);
        free(codes);
    }
    py_stack_copy_free(&stack_copy);
    if (vars_cache) {
        py_vars_cache_clear(vars_cache);
        free(vars_cache);
    }
    free(names_of_code);
    free(tids);
    free(names);
    free(activities);
    py_snapshot_free(&snap);
    return rc;
}
