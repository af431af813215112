/* Reading an uncaught exception out of a stopped thread: the thread state's
 * pending exception, its type and message, and its traceback chain
 * (tb_frame, tb_lasti/tb_lineno, tb_next) down to the frame that raised. */
#include "python/uncaught.h"

#include <stdlib.h>
#include <string.h>

#include "python/code.h"
#include "python/frame_vars.h"
#include "python/objects.h"
#include "python/threads.h"
#include "target/process.h"

/* Py_TPFLAGS_BASE_EXC_SUBCLASS: set on BaseException and every subclass. */
#define TPFLAGS_BASE_EXC_SUBCLASS (1ul << 30)

static bool is_exception_type(struct py_reader *r, uint64_t type)
{
    uint64_t flags = 0;
    return type && r->L->type_flags != PY_OFF_NONE &&
           target_read_u64(r->t, type + (uint64_t)r->L->type_flags, &flags) == 0 &&
           (flags & TPFLAGS_BASE_EXC_SUBCLASS) != 0;
}

/* The thread state of kernel thread tid, or 0. */
static uint64_t tstate_of(struct py_reader *r, pid_t tid, char *name, size_t namesize)
{
    pid_t *tids = malloc(PROCESS_MAX_THREADS * sizeof *tids);
    if (!tids)
        return 0;
    int n = target_list_threads(r->t, tids, PROCESS_MAX_THREADS);
    struct py_snapshot snap;
    uint64_t tstate = 0;
    if (n > 0 && py_snapshot_read(r, tids, n, &snap) == 0) {
        char (*names)[64] = calloc((size_t)(snap.n_threads ? snap.n_threads : 1), sizeof *names);
        if (names)
            py_thread_names(r, &snap, names);
        for (int i = 0; i < snap.n_threads; i++) {
            if (snap.threads[i].tid != tid)
                continue;
            tstate = snap.threads[i].tstate;
            if (names && names[i][0])
                snprintf(name, namesize, "%s", names[i]);
            else
                target_thread_comm(r->t, tid, name, namesize);
        }
        free(names);
        py_snapshot_free(&snap);
    }
    free(tids);
    return tstate;
}

/* What str(exc) shows: the one str argument as it is (KeyError: its repr),
 * any other single argument or several as their repr. */
static void exception_message(struct py_reader *r, uint64_t value, bool is_instance,
                              bool key_error, char *out,
                              size_t outsize)
{
    out[0] = '\0';
    if (!value)
        return;
    if (!is_instance) {
        /* 3.8-3.11 may keep an unnormalized value: the constructor's argument. */
        if (py_str(r, value, out, outsize) != 0)
            py_object_repr(r, value, &(struct repr_limits)REPR_DEFAULT_LIMITS, out, outsize);
        return;
    }
    uint64_t args = 0;
    int64_t n = -1;
    if (target_read_u64(r->t, value + (uint64_t)r->L->exc_args, &args) != 0 ||
        !py_is_type(r, args, "tuple") ||
        target_read(r->t, args + (uint64_t)r->L->ob_size, &n, sizeof n) != 0 || n < 0)
        return;
    if (n == 0)
        return;
    struct repr_limits limits = REPR_DEFAULT_LIMITS;
    if (n == 1) {
        uint64_t first = 0;
        if (target_read_u64(r->t, args + (uint64_t)r->L->tuple_items, &first) != 0)
            return;
        if (!key_error && py_str(r, first, out, outsize) == 0)
            return;
        py_object_repr(r, first, &limits, out, outsize);
        return;
    }
    py_object_repr(r, args, &limits, out, outsize);
}

/* Fills f from one traceback entry's frame; returns -1 when it is not one. */
static int read_tb_frame(struct py_reader *r, struct py_code_cache *codes, uint64_t frame,
                         int32_t lasti, int32_t lineno, struct py_tb_frame *f)
{
    const struct py_layout *L = r->L;
    memset(f, 0, sizeof *f);
    f->line = -1;
    if (!py_is_type(r, frame, "frame"))
        return -1;
    uint64_t code = 0;
    if (L->frames == PY_FRAMES_OBJECTS) {
        f->frame_addr = frame;
        if (target_read_u64(r->t, frame + (uint64_t)L->frame_code, &code) != 0)
            return -1;
    } else {
        uint64_t iframe = 0;
        if (L->frameobj_iframe == PY_OFF_NONE ||
            target_read_u64(r->t, frame + (uint64_t)L->frameobj_iframe, &iframe) != 0 || !iframe ||
            target_read_u64(r->t, iframe + (uint64_t)L->iframe_executable, &code) != 0)
            return -1;
        if (L->stackref_tagged > 0)
            code &= ~(uint64_t)7;
        f->frame_addr = iframe;
    }
    f->code_addr = code;
    const struct py_code *c = py_code_get(codes, r, code);
    if (!c) {
        snprintf(f->function, sizeof f->function, "<unreadable code>");
        snprintf(f->file, sizeof f->file, "?");
        return 0;
    }
    snprintf(f->function, sizeof f->function, "%s", c->qualname);
    snprintf(f->file, sizeof f->file, "%s", c->filename);
    /* 3.11+ may leave tb_lineno at -1 until Python asks for it: the line
     * then comes from the instruction, which tb_lasti gives in bytes. */
    f->line = lineno > 0 ? lineno : lasti >= 0 ? py_code_line(c, L, lasti) : -1;
    return 0;
}

int py_uncaught_read(struct py_runtime *rt, pid_t tid, struct py_uncaught *out,
                     char *why, size_t whysize)
{
    memset(out, 0, sizeof *out);
    out->tid = tid;
    const struct py_layout *L = &rt->layout;
    if ((L->tstate_current_exception == PY_OFF_NONE && L->tstate_curexc_type == PY_OFF_NONE) ||
        L->exc_args == PY_OFF_NONE || L->exc_traceback == PY_OFF_NONE || L->tb_next == PY_OFF_NONE) {
        snprintf(why, whysize, "exceptions of CPython %s are not known to pyscope", rt->version);
        return -1;
    }
    target_cache_invalidate(rt->target);
    struct py_reader reader;
    py_reader_init(&reader, rt);
    struct py_reader *r = &reader;
    uint64_t tstate = tstate_of(r, tid, out->thread_name, sizeof out->thread_name);
    if (!tstate) {
        snprintf(why, whysize, "thread %d has no Python thread state", (int)tid);
        return -1;
    }
    uint64_t type = 0, value = 0, tb = 0;
    bool is_instance = false;
    if (L->tstate_current_exception != PY_OFF_NONE) {
        if (target_read_u64(r->t, tstate + (uint64_t)L->tstate_current_exception, &value) != 0 || !value ||
            py_type_of(r, value, &type, NULL) != 0) {
            snprintf(why, whysize, "no exception is set in thread %d", (int)tid);
            return -1;
        }
        is_instance = true;
    } else {
        if (target_read_u64(r->t, tstate + (uint64_t)L->tstate_curexc_type, &type) != 0 || !type ||
            target_read_u64(r->t, tstate + (uint64_t)L->tstate_curexc_value, &value) != 0 ||
            target_read_u64(r->t, tstate + (uint64_t)L->tstate_curexc_traceback, &tb) != 0) {
            snprintf(why, whysize, "no exception is set in thread %d", (int)tid);
            return -1;
        }
        uint64_t value_type = 0;
        is_instance = value && py_type_of(r, value, &value_type, NULL) == 0 &&
                      is_exception_type(r, value_type);
        if (is_instance)
            type = value_type;
    }
    const char *name = NULL;
    if (!is_exception_type(r, type) || py_type_name(r, type, &name) != 0) {
        snprintf(why, whysize, "the exception set in thread %d does not look like one", (int)tid);
        return -1;
    }
    snprintf(out->type_name, sizeof out->type_name, "%s", name);
    out->system_exit = strcmp(name, "SystemExit") == 0;
    exception_message(r, value, is_instance, strcmp(name, "KeyError") == 0, out->message,
                      sizeof out->message);
    if (is_instance && !tb &&
        target_read_u64(r->t, value + (uint64_t)L->exc_traceback, &tb) != 0)
        tb = 0;

    struct py_code_cache *codes = calloc(1, sizeof *codes);
    if (!codes) {
        snprintf(why, whysize, "out of memory");
        return -1;
    }
    size_t cap = 0;
    for (size_t guard = 0; tb; guard++) {
        if (guard >= PY_TRACEBACK_MAX || !py_is_type(r, tb, "traceback")) {
            out->truncated = true;
            break;
        }
        uint64_t frame = 0, next = 0;
        int32_t lasti = -1, lineno = -1;
        if (target_read_u64(r->t, tb + (uint64_t)L->tb_frame, &frame) != 0 ||
            target_read_u64(r->t, tb + (uint64_t)L->tb_next, &next) != 0 ||
            target_read_i32(r->t, tb + (uint64_t)L->tb_lasti, &lasti) != 0 ||
            target_read_i32(r->t, tb + (uint64_t)L->tb_lineno, &lineno) != 0) {
            out->truncated = true;
            break;
        }
        if (out->n_frames == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct py_tb_frame *grown = realloc(out->frames, ncap * sizeof *grown);
            if (!grown) {
                out->truncated = true;
                break;
            }
            out->frames = grown;
            cap = ncap;
        }
        if (read_tb_frame(r, codes, frame, lasti, lineno, &out->frames[out->n_frames]) != 0) {
            out->truncated = true;
            break;
        }
        out->n_frames++;
        tb = next;
    }
    py_code_cache_clear(codes);
    free(codes);
    return 0;
}

static void print_locals(FILE *out, struct py_reader *r, const struct py_tb_frame *f,
                         const struct repr_limits *limits, struct frame_local *scratch, char *text)
{
    int n = frame_locals_read(r, f->frame_addr, f->code_addr, scratch, FRAME_LOCALS_MAX);
    if (n < 0) {
        fprintf(out, "      (locals unreadable)\n");
        return;
    }
    for (int i = 0; i < n; i++) {
        if (scratch[i].tagged_int)
            snprintf(text, REPR_MAX_BYTES + 1, "%lld", (long long)scratch[i].int_value);
        else
            py_object_repr(r, scratch[i].obj, limits, text, REPR_MAX_BYTES + 1);
        fprintf(out, "      %s = %s\n", scratch[i].name, text);
    }
}

void py_uncaught_print(FILE *out, struct py_runtime *rt, const struct py_uncaught *u,
                       const struct repr_limits *limits)
{
    struct py_reader reader;
    py_reader_init(&reader, rt);
    struct frame_local *scratch = malloc(sizeof *scratch * FRAME_LOCALS_MAX);
    char *text = malloc(REPR_MAX_BYTES + 1);
    fprintf(out, "\npyscope: uncaught %s in thread %d", u->type_name, (int)u->tid);
    if (u->thread_name[0])
        fprintf(out, " \"%s\"", u->thread_name);
    fprintf(out, "; its traceback, with each frame's locals:\n");
    fprintf(out, "Traceback (most recent call last):\n");
    for (size_t i = 0; i < u->n_frames; i++) {
        const struct py_tb_frame *f = &u->frames[i];
        if (f->line > 0)
            fprintf(out, "  File \"%s\", line %d, in %s\n", f->file, f->line, f->function);
        else
            fprintf(out, "  File \"%s\", in %s\n", f->file, f->function);
        if (scratch && text)
            print_locals(out, &reader, f, limits, scratch, text);
    }
    if (u->truncated)
        fprintf(out, "  ... (the rest of the traceback could not be read)\n");
    if (u->message[0])
        fprintf(out, "%s: %s\n", u->type_name, u->message);
    else
        fprintf(out, "%s\n", u->type_name);
    fflush(out);
    free(scratch);
    free(text);
}

void py_uncaught_free(struct py_uncaught *u)
{
    free(u->frames);
    u->frames = NULL;
    u->n_frames = 0;
}
