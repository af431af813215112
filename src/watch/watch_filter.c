/* The kernel filter of frame starts, where debug registers never trap and
 * every start of a Python frame is a uprobe: an eBPF program
 * (target/uprobe_filter.c) attached to those uprobes reads the code object
 * of the frame starting and lets the thread go on, without a stop, unless
 * that code is watched and already running further down the thread's
 * frames, or (while a function is still looked for) pyscope has not
 * searched it yet. With debug registers, the breakpoint at the interpreter's
 * entry is filtered the same way while it only serves that search. What it
 * reads comes from the layout. */
#include <asm/ptrace.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "watch/session.h"

/* Frames the program looks down for an earlier activation of the code;
 * deeper than that the thread stops and pyscope looks. */
#define FILTER_WALK_MAX 128
/* Code objects remembered as searched. */
#define FILTER_SEEN_MAX 65536

static bool filter_wanted(struct watch_session *s)
{
    if (s->filter_state)
        return s->filter_state > 0;
    s->filter_state = -1;
    const char *off = getenv("PYSCOPE_WATCH_NO_FILTER");
    if (off && strcmp(off, "1") == 0) {
        snprintf(s->filter_why, sizeof s->filter_why, "PYSCOPE_WATCH_NO_FILTER=1");
        return false;
    }
    if (!s->uprobes) {
        snprintf(s->filter_why, sizeof s->filter_why, "no uprobes");
        return false;
    }
    if (ufilter_open(&s->filter, FILTER_SEEN_MAX, s->filter_why, sizeof s->filter_why) != 0)
        return false;
    s->filter_state = 1;
    s->filter_prog[0] = s->filter_prog[1] = -1;
    watch_filter_sync(s);
    return true;
}

static long frame_code_off(const struct py_layout *L)
{
    return L->iframe_executable != PY_OFF_NONE ? L->iframe_executable : L->frame_code;
}

static void common_spec(struct watch_session *s, struct ufilter_spec *spec)
{
    const struct py_layout *L = s->reader.L;
    memset(spec, 0, sizeof *spec);
    spec->from_reg = -1;
    spec->tid_step = -1;
    spec->key_off = frame_code_off(L);
    spec->key_mask = L->stackref_tagged ? ~(uint64_t)7 : UINT64_MAX;
    spec->link_off = L->frame_back != PY_OFF_NONE ? L->frame_back : L->iframe_previous;
    spec->walk_max = FILTER_WALK_MAX;
    spec->id_off[0] = L->code_consts != PY_OFF_NONE ? L->code_consts : UFILTER_NONE;
    spec->id_off[1] = L->code_filename;
}

/* The main interpreter (id 0), found down the list from its head. */
static uint64_t main_interpreter(struct watch_session *s)
{
    const struct py_layout *L = s->reader.L;
    uint64_t interp = py_runtime_first_interpreter(&s->rt);
    for (int i = 0; interp && i < 64; i++) {
        int64_t id = -1;
        if (target_read(s->t, interp + (uint64_t)L->interp_id, &id, sizeof id) != 0)
            return 0;
        if (id == 0)
            return interp;
        if (target_read_u64(s->t, interp + (uint64_t)L->interp_next, &interp) != 0)
            return 0;
    }
    return 0;
}

/* Where the thread state running Python code is named, a word at a fixed
 * address: the runtime's current thread state (up to 3.11), else the main
 * interpreter's GIL holder (a thread runs bytecode only while it holds the
 * GIL, and takes it by writing itself there). 0: unknown. */
static uint64_t tstate_word(struct watch_session *s)
{
    const struct py_layout *L = s->reader.L;
    if (L->runtime_tstate_current != PY_OFF_NONE)
        return s->rt.runtime_addr + (uint64_t)L->runtime_tstate_current;
    if (L->gil_last_holder == PY_OFF_NONE)
        return 0;
    if (L->runtime_gil != PY_OFF_NONE)
        return s->rt.runtime_addr + (uint64_t)L->runtime_gil + (uint64_t)L->gil_last_holder;
    uint64_t interp = L->interp_gil_ptr != PY_OFF_NONE ? main_interpreter(s) : 0, gil = 0;
    if (!interp || target_read_u64(s->t, interp + (uint64_t)L->interp_gil_ptr, &gil) != 0 || !gil)
        return 0;
    return gil + (uint64_t)L->gil_last_holder;
}

/* The spec of kind's program: 0, or -1 with filter_why set. */
static int spec_of(struct watch_session *s, enum watch_filter_kind kind, bool check_keys,
                   struct ufilter_spec *spec)
{
    const struct py_layout *L = s->reader.L;
    common_spec(s, spec);
    spec->check_keys = check_keys;
    if (kind == WATCH_FILTER_EVAL) {
        /* _PyEval_EvalFrameDefault's frame argument, before its first
         * instruction (the uprobe's program runs at the breakpoint). */
        spec->from_reg = L->eval_frame_arg == 0 ? (long)offsetof(struct pt_regs, rdi)
                                                : (long)offsetof(struct pt_regs, rsi);
        spec->use_waiting = true;
        return 0;
    }
    spec->from_addr = tstate_word(s);
    if (!spec->from_addr) {
        snprintf(s->filter_why, sizeof s->filter_why,
                 "the thread state that runs could not be located");
        return -1;
    }
    spec->steps[spec->n_steps++] = 0;
    /* The GIL holder is the thread that runs, unless another interpreter
     * with a GIL of its own runs on it: the thread's id, in its process's
     * pid namespace, must be the one the state names. */
    char path[64];
    struct stat ns;
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)s->tr.pid);
    if (L->tstate_native_thread_id != PY_OFF_NONE && stat(path, &ns) == 0) {
        spec->tid_step = 0;
        spec->tid_off = L->tstate_native_thread_id;
        spec->ns_dev = (uint64_t)ns.st_dev;
        spec->ns_ino = (uint64_t)ns.st_ino;
    }
    if (L->tstate_current_frame != PY_OFF_NONE) {
        spec->steps[spec->n_steps++] = L->tstate_current_frame;
    } else if (L->tstate_cframe != PY_OFF_NONE && L->cframe_current_frame != PY_OFF_NONE) {
        spec->steps[spec->n_steps++] = L->tstate_cframe;
        spec->steps[spec->n_steps++] = L->cframe_current_frame;
    } else {
        snprintf(s->filter_why, sizeof s->filter_why, "no top frame in the layout");
        return -1;
    }
    return 0;
}

void watch_filter_prepare(struct watch_session *s, struct sw_breakpoint *bp,
                          enum watch_filter_kind kind, bool check_keys)
{
    bp->filtered = false;
    if (!filter_wanted(s))
        return;
    int *prog = &s->filter_prog[kind];
    if (*prog == -1) {
        struct ufilter_spec spec;
        *prog = spec_of(s, kind, check_keys, &spec) == 0
                    ? ufilter_load(&s->filter, &spec, s->filter_why, sizeof s->filter_why)
                    : -2;
        if (*prog < 0)
            *prog = -2;
    }
    if (*prog >= 0) {
        bp->filtered = true;
        bp->filter_prog = *prog;
    }
}

void watch_filter_sync(struct watch_session *s)
{
    if (s->filter_state <= 0)
        return;
    uint64_t keys[DR_SLOTS];
    for (int i = 0; i < s->n_py; i++)
        keys[i] = s->py[i].code;
    ufilter_set(&s->filter, keys, s->n_py, s->waiting, watch_python_eval_needs_all(s));
}

void watch_filter_mark_seen(struct watch_session *s, uint64_t code, uint64_t identity)
{
    if (s->filter_state > 0)
        ufilter_mark_seen(&s->filter, code, identity);
}

bool watch_filter_active(const struct watch_session *s, const struct sw_breakpoint *bp)
{
    return bp->inserted && bp->uprobe && bp->filtered && bp->filter_refused == 0 &&
           s->filter_state > 0;
}

const char *watch_filter_why(const struct watch_session *s)
{
    return s->filter_why[0] ? s->filter_why : "not tried";
}

int watch_filter_counts(const struct watch_session *s, struct ufilter_state *out)
{
    return s->filter_state > 0 ? ufilter_counts(&s->filter, out) : -1;
}

void watch_filter_close(struct watch_session *s)
{
    if (s->filter_state > 0) {
        for (int k = 0; k < 2; k++)
            if (s->filter_prog[k] >= 0)
                close(s->filter_prog[k]);
        ufilter_close(&s->filter);
    }
    s->filter_state = 0;
    s->filter_why[0] = 0;
}
