/* The asyncio tasks of a target, read from outside: where the tasks are kept
 * (asyncio.tasks' registries up to 3.13, the intrusive per-thread lists from
 * 3.14), the await chain below each task and what its innermost await waits
 * on, the tasks that await tasks, and the loop each thread runs. Every walk
 * is bounded; a pointer that does not lead to an object of the expected type
 * ends that walk instead of being followed. */
#include "python/asyncio_tasks.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "elf/elf_image.h"
#include "python/callable.h"
#include "python/code.h"
#include "python/debug_offsets.h"
#include "python/frame_vars.h"
#include "python/objects.h"
#include "python/primitives.h"
#include "python/threads.h"
#include "report/stack_report.h"
#include "util/addrset.h"

#define MAX_TIDS 4096
/* The most tasks a sampler's pass looks at (--async --idle). */
#define ASYNCIO_SAMPLED_TASKS 4096

/* A task of a registry, with the fields every task is filtered by, read
 * while its page is at hand: at 100,000 tasks, reading them again later
 * read each page again, the page cache long since overrun. */
struct found_task {
    uint64_t addr, loop;
    int32_t state;               /* -1: unreadable */
    uint8_t kind;                /* enum task_kind */
};

/* What a task object is: asyncio's C Task (its fields at the generated
 * offsets) or the pure-Python one (asyncio.tasks._PyTask and subclasses:
 * a program without _asyncio, or whose task factory makes them), whose
 * fields are instance attributes. */
enum task_kind { KIND_NONE = 0, KIND_C, KIND_PY };

#define TYPE_MEMO_SLOTS 256       /* a power of two */
#define TYPE_MEMO_PROBES 8

struct tctx {
    struct py_reader r;
    const struct py_layout *L;
    const struct py_asyncio_layout *A;
    struct py_code_cache *codes;
    struct py_vars_cache *vars;   /* variable names per code object */
    struct py_frame_vars *frame;  /* the variables of the frame last read */
    uint64_t frame_read, frame_read_code;   /* ... that frame and its code, 0 when none */
    uint64_t when_type;           /* the TimerHandle class whose _when offset is known */
    int64_t when_offset;
    uint64_t extra_type;          /* ... a transport class and its _extra slot's */
    int64_t extra_offset;
    /* What each type met is to the walks: a task's kind, and what the
     * holder scan does with its instances. A big container's items share a
     * handful of types; without this each cost a walk up the bases. */
    struct type_memo {
        uint64_t type;            /* 0: a free slot */
        uint8_t task, hold;       /* the kind + 1; 0 when not known yet */
    } types[TYPE_MEMO_SLOTS];
    uint64_t py_task_type;        /* asyncio.tasks._PyTask, 0 when unknown */
    uint64_t py_future_type;      /* asyncio.futures._PyFuture, 0 when unknown */
    struct found_task *found;
    size_t n_found, cap_found, max_found;   /* max_found 0: ASYNCIO_MAX_TASKS */
    struct addrset seen;
    bool truncated;
    /* Tasks waiting in a TaskGroup's __aexit__, and the group: its
     * children are the tasks of the group's _tasks set. */
    struct { uint64_t task, group; } groups[256];
    int n_groups;
};

static uint64_t u64_at(struct tctx *c, uint64_t addr)
{
    uint64_t v = 0;
    if (!addr || target_read_u64(c->r.t, addr, &v) != 0)
        return 0;
    return v;
}

/* The first of n records (size bytes each) sorted by the uint64_t at offset
 * in each whose key is not below key; n when none. */
static size_t first_at_least(const void *base, size_t n, size_t size, size_t offset, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k;
        memcpy(&k, (const char *)base + mid * size + offset, sizeof k);
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* One read's context: the reader and the caches its walks use, and the
 * pure-Python task classes a report found (tasks may be NULL); false when
 * out of memory (tctx_release frees what was made either way). */
static bool tctx_init(struct tctx *c, struct py_runtime *rt, const struct report_tasks *tasks)
{
    memset(c, 0, sizeof *c);
    py_reader_init(&c->r, rt);
    if (tasks) {
        c->py_task_type = tasks->py_task_type;
        c->py_future_type = tasks->py_future_type;
    }
    c->L = c->r.L;
    c->A = &c->r.L->asyncio;
    c->codes = calloc(1, sizeof *c->codes);
    c->vars = calloc(1, sizeof *c->vars);
    c->frame = malloc(sizeof *c->frame);
    return c->codes && c->vars && c->frame;
}

static void tctx_release(struct tctx *c)
{
    addrset_free(&c->seen);
    free(c->found);
    if (c->codes) {
        py_code_cache_clear(c->codes);
        free(c->codes);
    }
    if (c->vars) {
        py_vars_cache_clear(c->vars);
        free(c->vars);
    }
    free(c->frame);
    memset(c, 0, sizeof *c);
}

static bool type_named(struct tctx *c, uint64_t obj, const char *name)
{
    return obj && py_is_type(&c->r, obj, name);
}

/* Is type, or one of its bases, the class at want? */
static bool type_derives(struct tctx *c, uint64_t type, uint64_t want)
{
    for (int depth = 0; want && type && depth < 16; depth++) {
        if (type == want)
            return true;
        type = u64_at(c, type + (uint64_t)c->L->type_base);
    }
    return false;
}

/* The memo of type, or NULL when its probes are all taken by others
 * (then its facts are found again each time). */
static struct type_memo *type_memo(struct tctx *c, uint64_t type)
{
    size_t h = (size_t)((type >> 4) * 0x9E3779B97F4A7C15ull >> 56);
    for (size_t k = 0; type && k < TYPE_MEMO_PROBES; k++) {
        struct type_memo *m = &c->types[(h + k) & (TYPE_MEMO_SLOTS - 1)];
        if (m->type == type)
            return m;
        if (!m->type) {
            m->type = type;
            return m;
        }
    }
    return NULL;
}

/* _asyncio.Task or a subclass of it, or the pure-Python Task or a subclass
 * (checked once per type). */
static enum task_kind task_kind(struct tctx *c, uint64_t obj)
{
    uint64_t type;
    if (!obj || py_type_of(&c->r, obj, &type, NULL) != 0)
        return KIND_NONE;
    struct type_memo *m = type_memo(c, type);
    if (m && m->task)
        return (enum task_kind)(m->task - 1);
    enum task_kind kind = py_type_is_or_inherits(&c->r, obj, "_asyncio.Task") ? KIND_C
                          : type_derives(c, type, c->py_task_type) ? KIND_PY : KIND_NONE;
    if (m)
        m->task = (uint8_t)(kind + 1);
    return kind;
}

static bool is_task(struct tctx *c, uint64_t obj)
{
    return task_kind(c, obj) != KIND_NONE;
}

/* A Future's kind, as a task's: the C one, the pure-Python one (tasks are
 * Futures too), or neither. */
static enum task_kind future_kind(struct tctx *c, uint64_t obj)
{
    enum task_kind kind = task_kind(c, obj);
    uint64_t type;
    if (kind != KIND_NONE || py_type_of(&c->r, obj, &type, NULL) != 0)
        return kind;
    if (py_type_is_or_inherits(&c->r, obj, "_asyncio.Future"))
        return KIND_C;
    return type_derives(c, type, c->py_future_type) ? KIND_PY : KIND_NONE;
}

/* A pure-Python Future's attribute, 0 when it has none or holds None (the
 * class defaults: _fut_waiter, _exception). */
static uint64_t py_field(struct tctx *c, uint64_t obj, const char *name)
{
    uint64_t v;
    if (py_attr_get(&c->r, obj, name, &v) != 0 || py_is_none(&c->r, v))
        return 0;
    return v;
}

static uint64_t fut_loop(struct tctx *c, uint64_t fut, enum task_kind kind)
{
    return kind == KIND_PY ? py_field(c, fut, "_loop")
                           : u64_at(c, fut + (uint64_t)c->A->fut_loop);
}

/* 0 pending, 1 cancelled, 2 finished, -1 unreadable. A pure-Python Future
 * keeps its state as a str, in the instance once it is done (a pending one
 * has the class's "PENDING"). */
static int32_t fut_state(struct tctx *c, uint64_t fut, enum task_kind kind)
{
    int32_t state = -1;
    if (kind == KIND_C) {
        if (target_read_i32(c->r.t, fut + (uint64_t)c->A->fut_state, &state) != 0)
            return -1;
        return state;
    }
    uint64_t v;
    char text[16];
    if (py_attr_get(&c->r, fut, "_state", &v) != 0)
        return 0;
    if (py_str(&c->r, v, text, sizeof text) != 0)
        return -1;
    return !strcmp(text, "PENDING") ? 0 : !strcmp(text, "CANCELLED") ? 1
           : !strcmp(text, "FINISHED") ? 2 : -1;
}

static uint64_t task_coro(struct tctx *c, uint64_t task, enum task_kind kind)
{
    return kind == KIND_PY ? py_field(c, task, "_coro")
                           : u64_at(c, task + (uint64_t)c->A->task_coro);
}

/* The future the task's step waits on, 0 when none. */
static uint64_t task_waiter(struct tctx *c, uint64_t task, enum task_kind kind)
{
    if (kind == KIND_PY)
        return py_field(c, task, "_fut_waiter");
    uint64_t w = u64_at(c, task + (uint64_t)c->A->task_fut_waiter);
    return w && !py_is_none(&c->r, w) ? w : 0;
}

static uint64_t task_name_obj(struct tctx *c, uint64_t task, enum task_kind kind)
{
    return kind == KIND_PY ? py_field(c, task, "_name")
                           : u64_at(c, task + (uint64_t)c->A->task_name);
}

static void task_name(struct tctx *c, uint64_t task, char *out, size_t size)
{
    uint64_t nm = task_name_obj(c, task, task_kind(c, task));
    int64_t n;
    if (py_str(&c->r, nm, out, size) == 0)
        return;
    /* 3.12+ keep a default name as the bare counter. */
    if (py_int(&c->r, nm, &n) == 0)
        snprintf(out, size, "Task-%lld", (long long)n);
    else
        snprintf(out, size, "<unreadable name>");
}

/* A Future's done callbacks: the first (C Futures keep it apart), and the
 * list of (callback, context) tuples of the rest (all, for a pure-Python
 * one); 0 when none. */
static void fut_callbacks(struct tctx *c, uint64_t fut, enum task_kind kind, uint64_t *first,
                          uint64_t *list)
{
    *first = 0;
    if (kind == KIND_PY) {
        *list = py_field(c, fut, "_callbacks");
        return;
    }
    *first = u64_at(c, fut + (uint64_t)c->A->fut_callback0);
    if (*first && py_is_none(&c->r, *first))
        *first = 0;
    *list = u64_at(c, fut + (uint64_t)c->A->fut_callbacks);
    if (*list && py_is_none(&c->r, *list))
        *list = 0;
}

/* The set of tasks seen grows with them: sized for the bound up front, its
 * zeroing and page faults cost more than a small program's whole walk. */
static bool seen_add(struct tctx *c, uint64_t task)
{
    if ((c->seen.n + 1) * 2 >= c->seen.cap) {
        struct addrset bigger;
        if (addrset_init(&bigger, c->seen.cap) != 0)
            return false;
        for (size_t i = 0; i < c->n_found; i++)
            addrset_add(&bigger, c->found[i].addr);
        addrset_free(&c->seen);
        c->seen = bigger;
    }
    return addrset_add(&c->seen, task);
}

static void add_task(struct tctx *c, uint64_t task)
{
    enum task_kind kind = task_kind(c, task);
    if (kind == KIND_NONE || !seen_add(c, task))
        return;
    if (c->n_found >= (c->max_found ? c->max_found : ASYNCIO_MAX_TASKS)) {
        c->truncated = true;
        return;
    }
    if (c->n_found == c->cap_found) {
        size_t cap = c->cap_found ? c->cap_found * 2 : 256;
        struct found_task *grown = realloc(c->found, cap * sizeof *grown);
        if (!grown)
            return;
        c->found = grown;
        c->cap_found = cap;
    }
    struct found_task *f = &c->found[c->n_found++];
    *f = (struct found_task){.addr = task, .loop = fut_loop(c, task, kind),
                             .state = fut_state(c, task, kind), .kind = (uint8_t)kind};
}

/* The keys of a set object (at most max; a bigger table is refused as a
 * misread); returns how many, or -1. Free *keys. */
static long set_keys(struct tctx *c, uint64_t set, size_t max, uint64_t **keys)
{
    *keys = NULL;
    if (!type_named(c, set, "set"))
        return -1;
    int64_t mask = (int64_t)u64_at(c, set + (uint64_t)c->A->set_mask);
    uint64_t table = u64_at(c, set + (uint64_t)c->A->set_table);
    if (mask <= 0 || (uint64_t)mask >= 4 * (uint64_t)max || !table)
        return -1;
    size_t n = (size_t)mask + 1, esize = (size_t)c->A->set_entry_size;
    unsigned char *buf = malloc(n * esize);
    *keys = malloc(n * sizeof **keys);
    if (!buf || !*keys || target_read(c->r.t, table, buf, n * esize) != 0) {
        free(buf);
        free(*keys);
        *keys = NULL;
        return -1;
    }
    long count = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t key;
        memcpy(&key, buf + i * esize + c->A->set_entry_key, sizeof key);
        if (key)
            (*keys)[count++] = key;
    }
    free(buf);
    return count;
}

/* Addresses in ascending order, a byte at a time (bytes all keys share are
 * skipped): qsort took longer than the whole walk at 100,000 keys. */
static void sort_addresses(uint64_t *keys, size_t n)
{
    uint64_t *tmp = n > 64 ? malloc(n * sizeof *tmp) : NULL;
    if (!tmp)
        return;
    uint64_t *from = keys, *to = tmp;
    for (int shift = 0; shift < 64; shift += 8) {
        size_t count[256] = {0};
        for (size_t i = 0; i < n; i++)
            count[(from[i] >> shift) & 0xff]++;
        if (count[(from[0] >> shift) & 0xff] == n)
            continue;
        size_t at = 0;
        for (int d = 0; d < 256; d++) {
            size_t k = count[d];
            count[d] = at;
            at += k;
        }
        for (size_t i = 0; i < n; i++)
            to[count[(from[i] >> shift) & 0xff]++] = from[i];
        uint64_t *swap = from;
        from = to;
        to = swap;
    }
    if (from != keys)
        memcpy(keys, from, n * sizeof *keys);
    free(tmp);
}

/* The tasks of a set; weakrefs are followed to their referents. */
static void add_set_members(struct tctx *c, uint64_t set, bool weak)
{
    uint64_t *keys;
    long n = set_keys(c, set, ASYNCIO_MAX_TASKS, &keys);
    /* In address order, so that each chunk below lies on a few pages (a
     * set's hash order spreads 256 keys over 256 pages, which overran the
     * page cache), and tasks are listed in about the order they were made. */
    if (n > 0)
        sort_addresses(keys, (size_t)n);
    /* The weak references, then the tasks they lead to, a chunk at a time
     * (what fits the page cache) in a few reads. */
    enum { CHUNK = 256 };
    struct target_range r[CHUNK];
    for (long i = 0; i < n; i++) {
        if (i % CHUNK == 0) {
            long m = n - i < CHUNK ? n - i : CHUNK;
            for (long k = 0; k < m; k++)
                r[k] = (struct target_range){keys[i + k], 32};
            if (weak) {
                target_prefetch(c->r.t, r, (size_t)m);
                for (long k = 0; k < m; k++)
                    r[k] = (struct target_range){
                        u64_at(c, keys[i + k] + (uint64_t)c->A->weakref_object),
                        (size_t)c->A->task_size};
            }
            target_prefetch(c->r.t, r, (size_t)m);
        }
        uint64_t key = keys[i];
        if (weak) {
            /* A cleared reference points at None, which is no task. */
            if (!py_type_is_or_inherits(&c->r, key, "weakref.ReferenceType") &&
                !type_named(c, key, "weakref"))
                continue;
            key = u64_at(c, key + (uint64_t)c->A->weakref_object);
        }
        add_task(c, key);
    }
    free(keys);
}

/* A circular list of llist_nodes embedded in tasks (3.14+). */
static void add_list_members(struct tctx *c, uint64_t head)
{
    uint64_t node = u64_at(c, head);
    for (size_t n = 0; node && node != head && n <= ASYNCIO_MAX_TASKS; n++) {
        uint64_t task = node - (uint64_t)c->A->task_node;
        add_task(c, task);
        if (c->truncated)
            return;
        node = u64_at(c, node);
    }
}

static uint64_t module_dict(struct tctx *c, uint64_t interp, const char *name)
{
    uint64_t modules = u64_at(c, interp + (uint64_t)c->L->interp_modules), mod;
    if (!modules || py_dict_get_str(&c->r, modules, name, &mod) != 0)
        return 0;
    return u64_at(c, mod + (uint64_t)c->L->module_dict);
}

/* ---- the offsets ---------------------------------------------------------- */

/* 3.14+: the asyncio offsets checked against the AsyncioDebug section of
 * the file holding _asyncio (the executable where it is built in, else its
 * extension module, mapped once asyncio is imported): once one is found. */
static void asyncio_offsets_check(struct py_runtime *rt)
{
    if (rt->asyncio_checked || rt->layout.asyncio.task_node == PY_OFF_NONE)
        return;
    const struct target *t = rt->target;
    for (size_t i = 0; i <= t->nmaps && !rt->asyncio_checked; i++) {
        const char *path = i == 0 ? rt->binary : t->maps[i - 1].path;
        if (!path || !path[0])
            continue;
        const char *base = strrchr(path, '/');
        if (i > 0 && strncmp(base ? base + 1 : path, "_asyncio", 8) != 0)
            continue;
        bool seen = false;
        for (size_t k = 0; i > 0 && k + 1 < i && !seen; k++)
            seen = t->maps[k].path && strcmp(t->maps[k].path, path) == 0;
        if (seen)
            continue;
        int fd = target_open_file(t, path);
        struct elf_image *img = fd >= 0 ? elf_image_open_fd(fd) : NULL;
        size_t len = 0;
        const void *bytes = img ? elf_image_section_bytes(img, ".AsyncioDebug", &len) : NULL;
        if (bytes) {
            char err[256];
            struct py_asyncio_layout A = rt->layout.asyncio;
            rt->asyncio_checked = true;
            if (py_asyncio_debug_decode(bytes, len, &A, err, sizeof err) == 0) {
                rt->layout.asyncio = A;
                snprintf(rt->asyncio_offsets, sizeof rt->asyncio_offsets,
                         "checked against the AsyncioDebug section of %.3900s", path);
            } else {
                rt->asyncio_mismatch = true;
                snprintf(rt->asyncio_offsets, sizeof rt->asyncio_offsets, "%.250s (%.3900s)", err,
                         path);
            }
        }
        if (img)
            elf_image_close(img);
    }
}

/* ---- the await chain ---------------------------------------------------- */

static int suspended_depth(struct tctx *c, const struct task_link *l);

static char *dup_text(const char *s)
{
    return strdup(s ? s : "");
}

/* One coroutine, generator or async generator: its link of the chain and
 * the object it awaits (0 when none). Returns -1 when gen is not readable
 * as one. */
static int read_gen(struct tctx *c, uint64_t gen, const char *kind, struct task_link *link,
                    uint64_t *awaited)
{
    const struct py_layout *L = c->L;
    const struct py_asyncio_layout *A = c->A;
    *awaited = 0;
    uint64_t code_addr = 0, frame = 0;
    long offset = -1;
    bool suspended_in_await = false;
    uint64_t stack_slot = 0;
    if (L->frames == PY_FRAMES_OBJECTS) {
        frame = u64_at(c, gen + (uint64_t)L->gen_frame);
        if (!frame)
            return -1;                       /* finished: no frame left */
        code_addr = u64_at(c, frame + (uint64_t)L->frame_code);
        int32_t lasti;
        if (target_read_i32(c->r.t, frame + (uint64_t)L->frame_lasti, &lasti) != 0)
            return -1;
        const bool units = L->linetable == PY_LINETABLE_310;
        offset = units ? (long)lasti * 2 : lasti;
        if (lasti >= 0) {
            uint64_t co_code = u64_at(c, code_addr + (uint64_t)L->code_code);
            uint8_t op = 0;
            long next = units ? ((long)lasti + 1) * 2 : lasti + 2;
            if (co_code &&
                target_read_u8(c->r.t, co_code + (uint64_t)L->bytes_sval + (uint64_t)next, &op) == 0 &&
                op == A->op_yield_from) {
                if (A->frame_stacktop != PY_OFF_NONE) {
                    uint64_t top = u64_at(c, frame + (uint64_t)A->frame_stacktop);
                    if (top)
                        stack_slot = top - 8;
                } else {
                    uint64_t base = u64_at(c, frame + (uint64_t)A->frame_valuestack);
                    int32_t depth = 0;
                    if (base && target_read_i32(c->r.t, frame + (uint64_t)A->frame_stackdepth,
                                                &depth) == 0 && depth > 0 && depth < 4096)
                        stack_slot = base + 8 * (uint64_t)(depth - 1);
                }
                suspended_in_await = stack_slot != 0;
            }
        }
    } else {
        int8_t state;
        if (target_read(c->r.t, gen + (uint64_t)A->gen_frame_state, &state, 1) != 0 ||
            state >= A->state_cleared)
            return -1;
        frame = gen + (uint64_t)L->gen_iframe;
        uint64_t mask = L->stackref_tagged ? ~(uint64_t)7 : ~(uint64_t)0;
        code_addr = u64_at(c, frame + (uint64_t)L->iframe_executable) & mask;
        uint64_t instr = u64_at(c, frame + (uint64_t)L->iframe_instr_ptr);
        offset = (long)(instr - (code_addr + (uint64_t)L->code_code_adaptive));
        bool yield_from;
        if (A->state_yield_from != -100) {
            yield_from = state == A->state_yield_from;
        } else {
            /* 3.11/3.12: the RESUME after the yield says await (oparg >= 2). */
            uint8_t unit[2] = {0, 0};
            yield_from = state != A->state_created &&
                         target_read(c->r.t, instr + 2, unit, 2) == 0 &&
                         (unit[0] == A->op_resume || unit[0] == A->op_resume_alt) && unit[1] >= 2;
        }
        if (yield_from) {
            if (L->stackref_tagged) {
                uint64_t sp = u64_at(c, frame + (uint64_t)L->iframe_stackpointer);
                if (sp)
                    stack_slot = sp - 8 * (uint64_t)A->yield_from_slot;
            } else {
                int32_t top = 0;
                if (target_read_i32(c->r.t, frame + (uint64_t)L->iframe_stackpointer, &top) == 0 &&
                    top > 0 && top < 1 << 16)
                    stack_slot = frame + (uint64_t)L->iframe_localsplus + 8 * (uint64_t)(top - 1);
            }
            suspended_in_await = stack_slot != 0;
        }
    }
    const struct py_code *code = py_code_get(c->codes, &c->r, code_addr);
    if (!code)
        return -1;
    link->function = dup_text(code->qualname);
    link->file = dup_text(code->filename);
    link->line = py_code_line(code, L, offset);
    link->kind = kind;
    link->frame_addr = frame;
    link->code_addr = code_addr;
    link->offset = offset;
    if (suspended_in_await)
        *awaited = u64_at(c, stack_slot) & (L->stackref_tagged ? ~(uint64_t)3 : ~(uint64_t)0);
    return 0;
}

static const char *gen_kind(struct tctx *c, uint64_t obj)
{
    const char *name;
    if (py_type_of(&c->r, obj, NULL, &name) != 0)
        return NULL;
    if (!strcmp(name, "coroutine") || !strcmp(name, "generator") ||
        !strcmp(name, "async_generator"))
        return name;
    return NULL;
}

/* From the task's coroutine down to what the innermost one awaits, into
 * links (outermost first); returns that object, 0 when none. */
static uint64_t follow_chain(struct tctx *c, uint64_t coro, struct task_link *links,
                             size_t *n_links, bool *complete, uint64_t *innermost_frame_code)
{
    *complete = true;
    uint64_t obj = coro;
    for (int depth = 0; obj; depth++) {
        if (depth == ASYNCIO_MAX_CHAIN) {
            *complete = false;
            return 0;
        }
        const char *kind = gen_kind(c, obj);
        if (!kind) {
            const char *name;
            if (py_type_of(&c->r, obj, NULL, &name) != 0)
                break;
            if (!strcmp(name, "async_generator_asend")) {
                obj = u64_at(c, obj + (uint64_t)c->A->asend_gen);
                continue;
            }
            if (!strcmp(name, "_asyncio.FutureIter"))
                return u64_at(c, obj + (uint64_t)c->A->future_iter_future);
            return obj;     /* something else yields: name it as it is */
        }
        uint64_t next;
        if (read_gen(c, obj, kind, &links[*n_links], &next) != 0) {
            if (depth == 0)
                *complete = false;
            break;
        }
        (*n_links)++;
        *innermost_frame_code = obj;
        obj = next;
    }
    return 0;
}

/* The chain innermost first, as stacks are shown, in an array of its own
 * size (a thousand tasks' worth of the longest chain faulted in megabytes);
 * returns the object the innermost coroutine waits on (a future, usually),
 * 0 when none. */
static uint64_t read_chain(struct tctx *c, uint64_t coro, struct report_task *out,
                           uint64_t *innermost)
{
    struct task_link links[ASYNCIO_MAX_CHAIN];
    size_t n = 0;
    uint64_t waited = follow_chain(c, coro, links, &n, &out->chain_complete, innermost);
    out->chain = malloc((n ? n : 1) * sizeof *out->chain);
    if (!out->chain) {
        for (size_t i = 0; i < n; i++) {
            free(links[i].function);
            free(links[i].file);
        }
        out->chain_complete = false;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        out->chain[i] = links[n - 1 - i];
    out->n_chain = n;
    return waited;
}

/* ---- what a task waits on ------------------------------------------------ */

/* The variables of a chain link's frame into c->frame; the frame last read
 * is not read again (describing one task asks its innermost frame up to
 * three times). */
static int link_vars(struct tctx *c, const struct task_link *l)
{
    if (l->frame_addr && c->frame_read == l->frame_addr && c->frame_read_code == l->code_addr)
        return 0;
    c->frame_read = 0;
    if (py_frame_vars_read(c->vars, &c->r, l->frame_addr, l->code_addr, c->frame) != 0)
        return -1;
    c->frame_read = l->frame_addr;
    c->frame_read_code = l->code_addr;
    return 0;
}

/* The object bound to a local variable of a chain link's frame. */
static int link_local(struct tctx *c, const struct task_link *l, const char *name, uint64_t *value)
{
    return link_vars(c, l) == 0 && py_frame_var_get(c->frame, name, value) == 0 ? 0 : -1;
}

/* obj.name for a __slots__ member of obj's class or one of its bases. */
static int slot_get(struct tctx *c, uint64_t obj, const char *name, int64_t *cached_offset,
                    uint64_t *cached_type, uint64_t *value)
{
    uint64_t type;
    if (py_type_of(&c->r, obj, &type, NULL) != 0)
        return -1;
    if (type != *cached_type) {
        int64_t offset;
        if (py_member_offset(&c->r, type, name, &offset) != 0)
            return -1;
        *cached_type = type;
        *cached_offset = offset;
    }
    *value = u64_at(c, obj + (uint64_t)*cached_offset);
    return *value ? 0 : -1;
}

/* When the TimerHandle of the innermost asyncio.sleep is due, in the loop's
 * clock (time.monotonic for the standard loops); -1 when unknown. */
static int sleep_due(struct tctx *c, const struct report_task *t, double *when)
{
    for (size_t k = 0; k < t->n_chain; k++) {
        const struct task_link *l = &t->chain[k];
        uint64_t h, value;
        if (!strstr(l->file, "asyncio") || strcmp(l->function, "sleep") ||
            link_local(c, l, "h", &h) != 0 || !type_named(c, h, "TimerHandle"))
            continue;
        return slot_get(c, h, "_when", &c->when_offset, &c->when_type, &value) == 0
                   ? py_number(&c->r, value, when) : -1;
    }
    return -1;
}

/* The asyncio primitive behind the innermost await: the method of a
 * queue, event, lock... that the chain entered, named after the class of
 * its `self` (3.8-3.10 code objects carry no qualified name). */
static bool primitive_of(struct tctx *c, const struct report_task *t, char *out, size_t size,
                         uint64_t *self_out)
{
    static const char *const classes[] = {
        "Queue", "LifoQueue", "PriorityQueue", "Event", "Lock", "Condition", "Semaphore",
        "BoundedSemaphore", "Barrier", "StreamReader", "TaskGroup", "Timeout",
    };
    bool found = false;
    for (size_t k = 0; k < t->n_chain; k++) {
        const struct task_link *l = &t->chain[k];
        if (!strstr(l->file, "asyncio")) {
            if (found)
                break;              /* the program's own code: the wait is the inner one */
            continue;
        }
        uint64_t self;
        const char *type;
        if (link_local(c, l, "self", &self) != 0 || py_type_of(&c->r, self, NULL, &type) != 0)
            continue;
        const char *dot = strrchr(l->function, '.');
        const char *method = dot ? dot + 1 : l->function;
        for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
            if (strcmp(type, classes[i]))
                continue;
            /* Queue.join waits on the queue's own Event, a Barrier on its
             * Condition: the outer primitive is the one the program used,
             * and the one whose state tells why nothing ends the wait. */
            if (found && !(strstr(type, "Queue") && !strcmp(method, "join")) &&
                strcmp(type, "Barrier") != 0)
                break;
            snprintf(out, size, "%s.%s", type, method);
            *self_out = self;
            found = true;
            break;
        }
    }
    return found;
}

/* The innermost asyncio function of the chain named fn, if any. */
static bool chain_has(const struct report_task *t, const char *fn)
{
    for (size_t k = 0; k < t->n_chain; k++)
        if (strstr(t->chain[k].file, "asyncio") && !strcmp(t->chain[k].function, fn))
            return true;
    return false;
}

/* The innermost link of the chain running fn (its last dotted part: 3.8-3.10
 * names carry no class) in a file whose path contains file. */
static const struct task_link *chain_link(const struct report_task *t, const char *file,
                                          const char *fn)
{
    for (size_t k = 0; k < t->n_chain; k++) {
        const struct task_link *l = &t->chain[k];
        const char *dot = strrchr(l->function, '.');
        if (strstr(l->file, file) && !strcmp(dot ? dot + 1 : l->function, fn))
            return &t->chain[k];
    }
    return NULL;
}

/* When the wait gives up by itself, in the loop's clock: the timeout_handle
 * of a wait_for (up to 3.11) or of an asyncio.wait, or the
 * asyncio.timeouts.Timeout of an `async with asyncio.timeout()` (wait_for's
 * own from 3.12), which the statement keeps on its frame's value stack, bare
 * or as the bound __aexit__; the earliest of the chain. -1 when none (a
 * timeout of None sets no deadline). */
static int chain_deadline(struct tctx *c, const struct report_task *t, double *when)
{
    bool found = false;
    for (size_t k = 0; k < t->n_chain; k++) {
        const struct task_link *l = &t->chain[k];
        uint64_t h, value;
        double due;
        const char *dot = strrchr(l->function, '.');
        const char *fn = dot ? dot + 1 : l->function;
        if (strstr(l->file, "asyncio") && (!strcmp(fn, "wait_for") || !strcmp(fn, "_wait")) &&
            link_local(c, l, "timeout_handle", &h) == 0 && type_named(c, h, "TimerHandle") &&
            slot_get(c, h, "_when", &c->when_offset, &c->when_type, &value) == 0 &&
            py_number(&c->r, value, &due) == 0 && (!found || due < *when)) {
            *when = due;
            found = true;
        }
        /* An `async with` keeps its context manager's __aexit__ on the
         * value stack: only the stack is looked at (a type read for every
         * variable of every frame cost a page read each). */
        if (link_vars(c, l) != 0)
            continue;
        int depth = c->frame->stack_exact ? c->frame->n_stack : suspended_depth(c, l);
        if (depth > c->frame->n_stack)
            depth = -1;
        for (int i = c->frame->n_named; i < c->frame->n_named + depth; i++) {
            uint64_t v = c->frame->values[i];
            if (type_named(c, v, "method"))
                v = u64_at(c, v + (uint64_t)c->A->method_self);
            if (type_named(c, v, "Timeout") && py_attr_get(&c->r, v, "_when", &value) == 0 &&
                py_number(&c->r, value, &due) == 0 && (!found || due < *when)) {
                *when = due;
                found = true;
            }
        }
    }
    return found ? 0 : -1;
}

/* ", <what> in 1.5 s" from now, or at a time of the loop's clock from a
 * core (no clock to compare). */
static void append_due(struct tctx *c, char **out, size_t *room, const char *what, double when)
{
    struct timespec now;
    int n;
    if (target_can(c->r.t, TARGET_CAN_CLOCK) && clock_gettime(CLOCK_MONOTONIC, &now) == 0)
        /* Same machine, same clock as the loop's time.monotonic(). */
        n = snprintf(*out, *room, ", %s in %.1f s", what,
                     when - ((double)now.tv_sec + (double)now.tv_nsec / 1e9));
    else
        n = snprintf(*out, *room, ", %s at %.3f s of the loop's clock", what, when);
    if (n > 0 && (size_t)n < *room)
        *out += n, *room -= (size_t)n;
}

/* "host:port" from a ('host', port, ...) address tuple. */
static int address_text(struct tctx *c, uint64_t tuple, char *out, size_t size)
{
    char host[64];
    int64_t port;
    if (!type_named(c, tuple, "tuple") || u64_at(c, tuple + (uint64_t)c->L->ob_size) < 2 ||
        py_str(&c->r, u64_at(c, tuple + (uint64_t)c->L->tuple_items), host, sizeof host) != 0 ||
        py_int(&c->r, u64_at(c, tuple + (uint64_t)c->L->tuple_items + 8), &port) != 0)
        return -1;
    snprintf(out, size, strchr(host, ':') ? "[%s]:%lld" : "%s:%lld", host, (long long)port);
    return 0;
}

/* What the await's own objects tell beyond its kind: the peer of a stream
 * read and whether anything times it out, a subprocess's pid, when
 * wait_for gives up. */
static void append_details(struct tctx *c, struct report_task *t)
{
    size_t len = strlen(t->awaits);
    char *out = t->awaits + len;
    size_t room = sizeof t->awaits - len;
    const struct task_link *l;
    uint64_t self, transport, extra, peer, sock;
    char text[96], local[96];
    int64_t pid, fd;
    double when = 0;
    t->timed = chain_deadline(c, t, &when) == 0;
    if ((l = chain_link(t, "asyncio/streams.py", "_wait_for_data")) &&
        link_local(c, l, "self", &self) == 0 &&
        py_attr_get(&c->r, self, "_transport", &transport) == 0 &&
        slot_get(c, transport, "_extra", &c->extra_offset, &c->extra_type, &extra) == 0 &&
        py_dict_get_str(&c->r, extra, "peername", &peer) == 0 &&
        address_text(c, peer, text, sizeof text) == 0) {
        uint64_t server;
        snprintf(t->stream_peer, sizeof t->stream_peer, "%s", text);
        t->stream_no_timeout = !t->timed;
        /* A server's transports keep their Server in _server; a client's None. */
        t->stream_opened = py_attr_get(&c->r, transport, "_server", &server) == 0 &&
                           py_is_none(&c->r, server);
        /* The socket: the selector transport's _sock_fd, and its own end. */
        int n = snprintf(out, room, ", reading from %s", text);
        if (n > 0 && (size_t)n < room)
            out += n, room -= (size_t)n;
        if (py_attr_get(&c->r, transport, "_sock_fd", &sock) == 0 && py_int(&c->r, sock, &fd) == 0 &&
            py_dict_get_str(&c->r, extra, "sockname", &peer) == 0 &&
            address_text(c, peer, local, sizeof local) == 0)
            n = snprintf(out, room, " (socket fd %lld, local %s)", (long long)fd, local);
        else
            n = 0;
        if (n > 0 && (size_t)n < room)
            out += n, room -= (size_t)n;
        n = snprintf(out, room, "%s", t->timed ? "" : ", no timeout");
        if (n > 0 && (size_t)n < room)
            out += n, room -= (size_t)n;
    }
    if ((l = chain_link(t, "asyncio/base_subprocess.py", "_wait")) &&
        link_local(c, l, "self", &self) == 0 &&
        py_attr_get(&c->r, self, "_pid", &transport) == 0 && py_int(&c->r, transport, &pid) == 0) {
        t->subprocess_pid = pid > 0 && pid <= INT32_MAX ? (pid_t)pid : 0;
        int n = snprintf(out, room, ", subprocess pid %lld", (long long)pid);
        if (n > 0 && (size_t)n < room)
            out += n, room -= (size_t)n;
    }
    if (t->timed)
        append_due(c, &out, &room, chain_link(t, "asyncio", "wait_for") ? "wait_for times out"
                                                                         : "times out", when);
}

static void describe_wait(struct tctx *c, struct report_task *t, uint64_t waited)
{
    t->awaits_addr = waited;
    const char *tp_name = "?";
    char type[64];
    py_type_of(&c->r, waited, NULL, &tp_name);
    size_t len = strnlen(tp_name, sizeof type - 1);  /* the type cache may reuse its slot */
    memcpy(type, tp_name, len);
    type[len] = '\0';
    char prim[160];
    uint64_t self = 0;
    const struct task_link *l;
    if (is_task(c, waited)) {
        char name[128];
        task_name(c, waited, name, sizeof name);
        snprintf(t->awaits, sizeof t->awaits, "Task \"%s\"", name);
    } else if (!strcmp(type, "_GatheringFuture")) {
        uint64_t children;
        int64_t n = -1;
        if (py_attr_get(&c->r, waited, "_children", &children) == 0)
            py_sequence_length(&c->r, children, &n);
        snprintf(t->awaits, sizeof t->awaits, "gather of %lld", (long long)n);
    } else if (primitive_of(c, t, prim, sizeof prim, &self)) {
        uint64_t items;
        /* Whoever can set, put, release or notify it ends the wait; a
         * TaskGroup's, a Timeout's or a stream's end comes from elsewhere. */
        if (strncmp(prim, "TaskGroup.", 10) && strncmp(prim, "Timeout.", 8) &&
            strncmp(prim, "StreamReader.", 13)) {
            t->wait_obj = self;
            snprintf(t->wait_obj_type, sizeof t->wait_obj_type, "%.*s",
                     (int)(strchr(prim, '.') - prim), prim);
        }
        if (!strncmp(prim, "TaskGroup.", 10) &&
            c->n_groups < (int)(sizeof c->groups / sizeof c->groups[0])) {
            c->groups[c->n_groups].task = t->addr;
            c->groups[c->n_groups++].group = self;
        }
        int64_t n, max;
        bool semaphore = strstr(prim, "Semaphore.acquire") != NULL;
        if (strstr(prim, "Queue.get") && py_attr_get(&c->r, self, "_queue", &items) == 0 &&
            py_sequence_length(&c->r, items, &n) == 0)
            snprintf(t->awaits, sizeof t->awaits, "%s (%s), %lld items queued", prim, type,
                     (long long)n);
        else if (strstr(prim, "Queue.join") &&
                 py_attr_get(&c->r, self, "_unfinished_tasks", &items) == 0 &&
                 py_int(&c->r, items, &n) == 0)
            snprintf(t->awaits, sizeof t->awaits, "%.60s (%.60s), %lld unfinished (put and not "
                     "yet marked done with task_done())", prim, type, (long long)n);
        else if (strstr(prim, "Queue.put") && py_attr_get(&c->r, self, "_queue", &items) == 0 &&
                 py_sequence_length(&c->r, items, &n) == 0 &&
                 py_attr_get(&c->r, self, "_maxsize", &items) == 0 && py_int(&c->r, items, &max) == 0)
            snprintf(t->awaits, sizeof t->awaits, "%s (%s), %lld items queued of maxsize %lld",
                     prim, type, (long long)n, (long long)max);
        else if ((!strncmp(prim, "Lock.acquire", 12) &&
                  py_attr_get(&c->r, self, "_locked", &items) == 0 && type_named(c, items, "bool") &&
                  py_int(&c->r, items, &n) == 0 && n == 1) ||
                 (semaphore && py_attr_get(&c->r, self, "_value", &items) == 0 &&
                  py_int(&c->r, items, &n) == 0 && n <= 0))
        {
            /* asyncio's locks and semaphores keep a flag or a count, not
             * who holds them: lock_holders may find the tasks inside an
             * `async with` of it. */
            snprintf(t->awaits, sizeof t->awaits, "%.100s (%.60s), held (asyncio %s record no "
                     "owner)", prim, type, semaphore ? "semaphores" : "locks");
            t->lock_waited = self;
        }
        else
            snprintf(t->awaits, sizeof t->awaits, "%s (%s)", prim, type);
    } else if (chain_has(t, "sleep")) {
        double when;
        struct timespec now;
        t->sleep_due = sleep_due(c, t, &when) == 0 ? when : NAN;
        if (isnan(t->sleep_due))
            snprintf(t->awaits, sizeof t->awaits, "asyncio.sleep (%s)", type);
        else if (target_can(c->r.t, TARGET_CAN_CLOCK) && clock_gettime(CLOCK_MONOTONIC, &now) == 0)
            /* Same machine, same clock as the loop's time.monotonic(). */
            snprintf(t->awaits, sizeof t->awaits, "asyncio.sleep (%s), %.1f s left", type,
                     when - ((double)now.tv_sec + (double)now.tv_nsec / 1e9));
        else
            snprintf(t->awaits, sizeof t->awaits, "asyncio.sleep (%s), due at %.3f s of the "
                     "loop's clock", type, when);
    } else if (chain_has(t, "wait_for")) {
        snprintf(t->awaits, sizeof t->awaits, "asyncio.wait_for (%s)", type);
    } else if (chain_link(t, "asyncio/base_subprocess.py", "_wait")) {
        snprintf(t->awaits, sizeof t->awaits, "subprocess wait (%s)", type);
    } else if ((l = chain_link(t, "asyncio/tasks.py", "_wait"))) {
        /* asyncio.wait: how many it waits for, and until which ends */
        uint64_t fs, when, *keys;
        char until[32] = "";
        long n = link_local(c, l, "fs", &fs) == 0 ? set_keys(c, fs, ASYNCIO_MAX_TASKS, &keys) : -1;
        long futures = 0;
        for (long k = 0; k < n; k++)
            futures += future_kind(c, keys[k]) != KIND_NONE;
        if (n >= 0)
            free(keys);
        if (link_local(c, l, "return_when", &when) == 0 && py_str(&c->r, when, until, sizeof until) == 0)
            t->awaits_any = strcmp(until, "ALL_COMPLETED") != 0;
        if (n >= 0)
            snprintf(t->awaits, sizeof t->awaits, "asyncio.wait (%s) of %ld, %s", type, futures,
                     until[0] ? until : "?");
        else
            snprintf(t->awaits, sizeof t->awaits, "asyncio.wait (%s)", type);
    } else if (chain_has(t, "wait")) {
        snprintf(t->awaits, sizeof t->awaits, "asyncio.wait (%s)", type);
    } else {
        snprintf(t->awaits, sizeof t->awaits, "%s", type);
    }
    append_details(c, t);
}

/* ---- loops and threads --------------------------------------------------- */

struct loop_thread {
    uint64_t loop, current_task;
    pid_t tid;
};

struct current_ctx {
    uint64_t loop, task;
};

static int match_current(void *vctx, uint64_t key, uint64_t value)
{
    struct current_ctx *cur = vctx;
    if (key == cur->loop)
        cur->task = value;
    return 0;
}

/* The task the dict {loop: task} (asyncio.tasks._current_tasks) holds for
 * loop, 0 when none. */
static uint64_t current_task_in(struct tctx *c, uint64_t current, uint64_t loop)
{
    struct current_ctx cur = {.loop = loop};
    if (!current || py_dict_items(&c->r, current, 1024, match_current, &cur) < 0)
        return 0;
    return cur.task;
}

/* The classes of pure-Python tasks and futures, by which such objects are
 * known (their names are plain "Task" and "Future"). */
static void py_task_classes(struct tctx *c, uint64_t interp, uint64_t tasks_dict)
{
    uint64_t futures = module_dict(c, interp, "asyncio.futures");
    if (py_dict_get_str(&c->r, tasks_dict, "_PyTask", &c->py_task_type) != 0 ||
        !type_named(c, c->py_task_type, "type"))
        c->py_task_type = 0;
    if (!futures || py_dict_get_str(&c->r, futures, "_PyFuture", &c->py_future_type) != 0 ||
        !type_named(c, c->py_future_type, "type"))
        c->py_future_type = 0;
}

static uint64_t running_loop_of(struct tctx *c, uint64_t tstate)
{
    const struct py_asyncio_layout *A = c->A;
    if (A->tstate_running_loop != PY_OFF_NONE)
        return u64_at(c, tstate + (uint64_t)A->tstate_running_loop);
    uint64_t dict = u64_at(c, tstate + (uint64_t)A->tstate_dict), value;
    if (!dict || py_dict_get_str(&c->r, dict, "__asyncio_running_event_loop__", &value) != 0)
        return 0;
    if (A->holder_loop != PY_OFF_NONE)
        value = u64_at(c, value + (uint64_t)A->holder_loop);
    return py_is_none(&c->r, value) ? 0 : value;
}

/* Loops of the tasks found that no thread state names as its running loop
 * (without _asyncio, the running loop is kept in a threading.local): the
 * thread whose threading.get_ident() the loop's run_forever keeps in
 * _thread_id runs it (asyncio's own loops). Returns the new count. */
static int loops_by_thread_id(struct tctx *c, const struct py_snapshot *snap, uint64_t current,
                              struct loop_thread *lt, int n_lt, int max_lt)
{
    uint64_t tried[16];
    int n_tried = 0;
    for (size_t i = 0; i < c->n_found && n_lt < max_lt; i++) {
        uint64_t loop = c->found[i].loop, value;
        bool known = !loop;
        for (int k = 0; k < n_lt && !known; k++)
            known = lt[k].loop == loop;
        for (int k = 0; k < n_tried && !known; k++)
            known = tried[k] == loop;
        if (known)
            continue;
        if (n_tried == (int)(sizeof tried / sizeof tried[0]))
            break;
        tried[n_tried++] = loop;
        int64_t ident;
        if (py_attr_get(&c->r, loop, "_thread_id", &value) != 0 ||
            py_int(&c->r, value, &ident) != 0 || ident == 0)
            continue;
        for (int t = 0; t < snap->n_threads; t++)
            if (snap->threads[t].thread_id == (uint64_t)ident) {
                lt[n_lt++] = (struct loop_thread){.loop = loop, .tid = snap->threads[t].tid,
                                                  .current_task = current_task_in(c, current, loop)};
                break;
            }
    }
    return n_lt;
}

/* ---- the report ---------------------------------------------------------- */

static struct report_loop *loop_for(struct report_tasks *out, uint64_t loop)
{
    for (size_t i = 0; i < out->n_loops; i++)
        if (out->loops[i].addr == loop)
            return &out->loops[i];
    struct report_loop *grown = realloc(out->loops, (out->n_loops + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    out->loops = grown;
    struct report_loop *l = &out->loops[out->n_loops++];
    memset(l, 0, sizeof *l);
    l->addr = loop;
    l->left_selector = NAN;
    l->callback_s = -1;
    l->callback_frame = -1;
    l->ready_count = -1;
    l->sleep_timers = l->other_timers = -1;
    return l;
}


/* Task address -> index in its loop, hashed: a loop may hold 100,000. */
struct task_index {
    uint64_t *keys;
    size_t *values;
    size_t cap;                  /* a power of two; 0 when it could not be made */
    const struct report_loop *loop;
};

static void task_index_build(struct task_index *x, const struct report_loop *loop)
{
    x->loop = loop;
    x->cap = 16;
    while (x->cap < 2 * loop->n_tasks)
        x->cap *= 2;
    x->keys = calloc(x->cap, sizeof *x->keys);
    x->values = malloc(x->cap * sizeof *x->values);
    if (!x->keys || !x->values) {
        x->cap = 0;
        return;
    }
    for (size_t i = 0; i < loop->n_tasks; i++) {
        uint64_t a = loop->tasks[i].addr;
        for (size_t h = (size_t)((a * 0x9e3779b97f4a7c15ull) >> 32) & (x->cap - 1);;
             h = (h + 1) & (x->cap - 1))
            if (!x->keys[h] || x->keys[h] == a) {
                x->keys[h] = a;
                x->values[h] = i;
                break;
            }
    }
}

static size_t index_of(const struct task_index *x, uint64_t addr)
{
    if (!addr)
        return (size_t)-1;
    if (!x->cap) {
        for (size_t i = 0; i < x->loop->n_tasks; i++)
            if (x->loop->tasks[i].addr == addr)
                return i;
        return (size_t)-1;
    }
    for (size_t h = (size_t)((addr * 0x9e3779b97f4a7c15ull) >> 32) & (x->cap - 1);;
         h = (h + 1) & (x->cap - 1)) {
        if (!x->keys[h])
            return (size_t)-1;
        if (x->keys[h] == addr)
            return x->values[h];
    }
}

/* Appended without a duplicate check (a gather of 100,000 children made
 * that quadratic); children_settle drops the duplicates afterwards. */
static void add_child(struct report_task *t, size_t child)
{
    size_t n = t->n_children;
    if (n == 0 || (n & (n - 1)) == 0) {        /* full at each power of two */
        size_t *grown = realloc(t->children, (n ? 2 * n : 1) * sizeof *grown);
        if (!grown)
            return;
        t->children = grown;
    }
    t->children[t->n_children++] = child;
}

static int by_index(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Each child once, in the order first added when there are few. */
static void children_settle(struct report_task *t)
{
    size_t n = t->n_children, kept = 0;
    if (n <= 8) {
        for (size_t i = 0; i < n; i++) {
            bool dup = false;
            for (size_t k = 0; k < kept && !dup; k++)
                dup = t->children[k] == t->children[i];
            if (!dup)
                t->children[kept++] = t->children[i];
        }
    } else {
        qsort(t->children, n, sizeof *t->children, by_index);
        for (size_t i = 0; i < n; i++)
            if (kept == 0 || t->children[kept - 1] != t->children[i])
                t->children[kept++] = t->children[i];
    }
    t->n_children = kept;
}

/* Marks the tasks that reach themselves through single awaits (each task
 * of such a cycle awaits exactly one task): every task is visited once,
 * a walk stopping at the first task an earlier walk settled. */
static void mark_cycles(struct report_loop *loop)
{
    enum { UNSEEN, ON_WALK, SETTLED };
    unsigned char *mark = calloc(loop->n_tasks ? loop->n_tasks : 1, 1);
    if (!mark)
        return;
    for (size_t i = 0; i < loop->n_tasks; i++) {
        size_t at = i;
        while (mark[at] == UNSEEN && loop->tasks[at].n_children == 1) {
            mark[at] = ON_WALK;
            at = loop->tasks[at].children[0];
        }
        if (mark[at] == ON_WALK) {
            /* at is on the walk begun at i: the walk from at round to at is the cycle. */
            size_t c = at;
            do {
                loop->tasks[c].in_cycle = true;
                c = loop->tasks[c].children[0];
            } while (c != at);
        }
        for (at = i; mark[at] == ON_WALK; at = loop->tasks[at].children[0])
            mark[at] = SETTLED;
        mark[at] = SETTLED;
    }
    free(mark);
}

/* A task that a task with a deadline awaits (through any number of
 * others) ends by that deadline too: the awaiting task's timeout cancels
 * it. Each task is pushed once. */
static void mark_timed(struct report_loop *loop)
{
    size_t *stack = malloc((loop->n_tasks ? loop->n_tasks : 1) * sizeof *stack), n = 0;
    unsigned char *pushed = calloc(loop->n_tasks ? loop->n_tasks : 1, 1);
    if (stack && pushed)
        for (size_t i = 0; i < loop->n_tasks; i++)
            if (loop->tasks[i].timed) {
                pushed[i] = 1;
                stack[n++] = i;
            }
    while (stack && pushed && n) {
        struct report_task *t = &loop->tasks[stack[--n]];
        t->timed = true;
        for (size_t k = 0; k < t->n_children; k++)
            if (t->children[k] < loop->n_tasks && !pushed[t->children[k]]) {
                pushed[t->children[k]] = 1;
                stack[n++] = t->children[k];
            }
    }
    free(stack);
    free(pushed);
}

/* The tasks a gather gathers, into t's children: its _children, and
 * those of the gathers among them (gather(gather(a, b), c)). */
static void add_gathered(struct tctx *c, const struct task_index *x, struct report_task *t,
                         uint64_t gathering, int depth)
{
    uint64_t children;
    if (depth > 8 || py_attr_get(&c->r, gathering, "_children", &children) != 0 ||
        !type_named(c, children, "list"))
        return;
    int64_t n = (int64_t)u64_at(c, children + (uint64_t)c->L->ob_size);
    uint64_t items = u64_at(c, children + (uint64_t)c->L->list_items);
    for (int64_t k = 0; items && k < n && k < ASYNCIO_MAX_TASKS; k++) {
        uint64_t child = u64_at(c, items + 8 * (uint64_t)k);
        size_t ci = index_of(x, child);
        if (ci != (size_t)-1)
            add_child(t, ci);
        else if (type_named(c, child, "_GatheringFuture"))
            add_gathered(c, x, t, child, depth + 1);
    }
}

/* Who awaits whom: a task whose waiter is a task, a gather of tasks (and
 * of gathers), or asyncio.wait of tasks. */
static void link_children(struct tctx *c, struct report_loop *loop)
{
    struct task_index x;
    task_index_build(&x, loop);
    for (size_t i = 0; i < loop->n_tasks; i++) {
        struct report_task *t = &loop->tasks[i];
        uint64_t w = t->awaits_addr;
        if (!w)
            continue;
        size_t j = index_of(&x, w);
        if (j != (size_t)-1) {
            add_child(t, j);
            continue;
        }
        const struct task_link *l;
        uint64_t fs, *keys;
        size_t ci;
        if (type_named(c, w, "_GatheringFuture")) {
            add_gathered(c, &x, t, w, 0);
        } else if ((l = chain_link(t, "asyncio/tasks.py", "wait_for")) &&
                   link_local(c, l, "fut", &fs) == 0 && (ci = index_of(&x, fs)) != (size_t)-1) {
            /* wait_for up to 3.11 runs what it waits for as a task of its
             * own, and awaits a future that task's end completes */
            add_child(t, ci);
        } else if ((l = chain_link(t, "asyncio/tasks.py", "_wait")) &&
                   link_local(c, l, "fs", &fs) == 0) {
            /* asyncio.wait(fs): the tasks of its set */
            long n = set_keys(c, fs, ASYNCIO_MAX_TASKS, &keys);
            for (long k = 0; k < n; k++) {
                size_t ci = index_of(&x, keys[k]);
                if (ci != (size_t)-1)
                    add_child(t, ci);
            }
            if (n >= 0)
                free(keys);
        }
    }
    for (int g = 0; g < c->n_groups; g++) {
        size_t owner = index_of(&x, c->groups[g].task);
        uint64_t set, *keys;
        if (owner == (size_t)-1 || py_attr_get(&c->r, c->groups[g].group, "_tasks", &set) != 0)
            continue;
        long n = set_keys(c, set, ASYNCIO_MAX_TASKS, &keys);
        for (long k = 0; k < n; k++) {
            size_t ci = index_of(&x, keys[k]);
            if (ci != (size_t)-1)
                add_child(&loop->tasks[owner], ci);
        }
        free(keys);
    }
    for (size_t i = 0; i < loop->n_tasks; i++)
        children_settle(&loop->tasks[i]);
    mark_cycles(loop);
    mark_timed(loop);
    free(x.keys);
    free(x.values);
}

/* The value-stack depth of a suspended generator's frame object (up to
 * 3.10, where the frame reader knows only the capacity): f_stacktop, or
 * f_stackdepth from 3.10; -1 when unknown. */
static int suspended_depth(struct tctx *c, const struct task_link *l)
{
    if (c->L->frames != PY_FRAMES_OBJECTS || c->L->frame_valuestack == PY_OFF_NONE)
        return -1;
    uint64_t base = u64_at(c, l->frame_addr + (uint64_t)c->L->frame_valuestack);
    if (!base)
        return -1;
    if (c->A->frame_stacktop != PY_OFF_NONE) {
        uint64_t top = u64_at(c, l->frame_addr + (uint64_t)c->A->frame_stacktop);
        return top >= base && top - base < 8 * 4096 ? (int)((top - base) / 8) : -1;
    }
    int32_t depth = -1;
    if (target_read_i32(c->r.t, l->frame_addr + (uint64_t)c->A->frame_stackdepth, &depth) != 0 ||
        depth < 0 || depth > 4096)
        return -1;
    return depth;
}

/* Is the function at func asyncio's __aexit__ (of a lock's context manager
 * mixin)? */
static bool is_aexit(struct tctx *c, uint64_t func)
{
    if (!type_named(c, func, "function"))
        return false;
    const struct py_code *code = py_code_get(c->codes, &c->r, u64_at(c, func + (uint64_t)c->L->func_code));
    if (!code || !strstr(code->filename, "asyncio"))
        return false;
    const char *dot = strrchr(code->qualname, '.');
    return !strcmp(dot ? dot + 1 : code->qualname, "__aexit__");
}

/* Is task inside `async with lock`? The statement keeps the lock's
 * __aexit__ on the frame's value stack for as long as its body runs: a
 * bound method of the lock up to 3.13, the function then the lock itself
 * from 3.14 (LOAD_SPECIAL). Only value stacks of known depth are read (a
 * stale slot must not make a holder); the task waiting for the lock keeps
 * the same while it acquires, so waiters are not asked. */
static bool inside_async_with(struct tctx *c, const struct report_task *task, uint64_t lock,
                              size_t from)
{
    for (size_t k = from; k < task->n_chain; k++) {
        if (link_vars(c, &task->chain[k]) != 0)
            continue;
        int depth = c->frame->stack_exact ? c->frame->n_stack : suspended_depth(c, &task->chain[k]);
        if (depth > c->frame->n_stack)
            depth = -1;
        const uint64_t *stack = c->frame->values + c->frame->n_named;
        for (int i = 0; i < depth; i++) {
            uint64_t v = stack[i];
            if (type_named(c, v, "method")) {
                if (u64_at(c, v + (uint64_t)c->L->method_self) == lock &&
                    is_aexit(c, u64_at(c, v + (uint64_t)c->L->method_func)))
                    return true;
            } else if (i + 1 < depth && stack[i + 1] == lock && is_aexit(c, v)) {
                return true;
            }
        }
    }
    return false;
}

/* Names the holders of each held lock or semaphore a task of the loop
 * waits for: the other tasks of the loop inside an `async with` of it (not
 * its waiters, which keep the same while they acquire). One holder of a
 * lock is the one the wait depends on. */
static void lock_holders(struct tctx *c, struct report_loop *loop)
{
    enum { NAMED = 4 };
    for (size_t i = 0; i < loop->n_tasks; i++) {
        struct report_task *t = &loop->tasks[i];
        uint64_t lock = t->lock_waited;
        if (!lock)
            continue;
        size_t holders[NAMED], found = 0;
        /* A Lock its own waiter holds: an `async with` of it further up
         * the waiter's stack than the frame acquiring it (the innermost of
         * the program's own). asyncio.Lock is not reentrant: that task
         * waits for itself. */
        size_t acquiring = 0;
        while (acquiring < t->n_chain && t->chain[acquiring].file &&
               strstr(t->chain[acquiring].file, "asyncio/"))
            acquiring++;
        bool self_holds = acquiring < t->n_chain && type_named(c, lock, "Lock") &&
                          inside_async_with(c, t, lock, acquiring + 1);
        if (self_holds)
            holders[found++] = i;
        for (size_t j = 0; j < loop->n_tasks && !self_holds && found < NAMED; j++)
            if (loop->tasks[j].lock_waited != lock && inside_async_with(c, &loop->tasks[j], lock, 0))
                holders[found++] = j;
        char *held = found ? strstr(t->awaits, ", held (asyncio ") : NULL;
        if (!held)
            continue;
        if (found == 1)
            t->lock_holder = loop->tasks[holders[0]].addr;
        size_t room = sizeof t->awaits - (size_t)(held - t->awaits);
        int n = snprintf(held, room, ", held by task%s", found > 1 ? "s" : "");
        for (size_t k = 0; k < found && n > 0 && (size_t)n < room; k++)
            n += snprintf(held + n, room - (size_t)n, "%s \"%.60s\"", k ? "," : "",
                          loop->tasks[holders[k]].name);
        if (n > 0 && (size_t)n < room)
            snprintf(held + n, room - (size_t)n, " (inside %s async with)",
                     found > 1 ? "their" : "its");
    }
}

/* ---- who can end a wait -------------------------------------------------- */

static uint64_t callback_task(struct tctx *c, uint64_t cb, int depth);

/* An object's reference count, -1 when unreadable or out of the range a
 * mortal object's count has (immortal objects, 3.14's flag bits). */
static int64_t refcount(struct tctx *c, uint64_t obj)
{
    uint64_t refs;
    if (!obj || target_read_u64(c->r.t, obj, &refs) != 0 || refs == 0 || refs >= (1u << 30))
        return -1;
    return (int64_t)refs;
}

/* Calls fn for each reference the frame of chain link l owns: its
 * variables (in_cell: the variable's cell owns it, and closures may share
 * the cell), its value stack as deep as it is known to be live (3.14's
 * borrowed slots own none), and for a bound method there that nothing else
 * holds (an `async with`'s __aexit__ up to 3.13), its self. Returns -1 when
 * the frame is unreadable or its stack's live depth unknown (the variables
 * are still reported). Never more than there are: a count that misses one
 * only makes "nothing else refers to it" fail. */
static int frame_owned(struct tctx *c, const struct task_link *l,
                       void (*fn)(void *ctx, uint64_t obj, bool in_cell), void *ctx)
{
    if (link_vars(c, l) != 0)
        return -1;
    const struct py_frame_vars *f = c->frame;
    for (int i = 0; i < f->n_named; i++)
        if (f->values[i] && !f->uncounted[i])
            fn(ctx, f->values[i], f->code->is_cell[i]);
    int depth = f->stack_exact ? f->n_stack : suspended_depth(c, l);
    if (depth < 0 || depth > f->n_stack)
        return -1;
    for (int i = f->n_named; i < f->n_named + depth; i++) {
        uint64_t v = f->values[i];
        if (!v || f->uncounted[i])
            continue;
        fn(ctx, v, false);
        if (type_named(c, v, "method") && refcount(c, v) == 1)
            fn(ctx, u64_at(c, v + (uint64_t)c->L->method_self), false);
    }
    return 0;
}

struct ref_count {
    uint64_t obj;
    int n;
    bool unknown;
};

static void count_ref(void *ctx, uint64_t obj, bool in_cell)
{
    struct ref_count *rc = ctx;
    if (obj != rc->obj)
        return;
    rc->n++;
    rc->unknown = rc->unknown || in_cell;
}

/* The references to obj that the frame of chain link l owns, -1 unknown. */
static int link_refs(struct tctx *c, const struct task_link *l, uint64_t obj)
{
    struct ref_count rc = {.obj = obj};
    if (frame_owned(c, l, count_ref, &rc) != 0 || rc.unknown)
        return -1;
    return rc.n;
}

/* The references to obj that task t's chain owns, -1 when unknown. */
static int chain_refs(struct tctx *c, const struct report_task *t, uint64_t obj)
{
    int n = 0;
    for (size_t k = 0; k < t->n_chain; k++) {
        int r = link_refs(c, &t->chain[k], obj);
        if (r < 0)
            return -1;
        n += r;
    }
    return n;
}

/* Is the task's own wake-up the Future's one done callback? Another
 * callback may complete it. */
static bool only_own_wakeup(struct tctx *c, uint64_t fut, uint64_t task)
{
    uint64_t first, list, items;
    fut_callbacks(c, fut, future_kind(c, fut), &first, &list);
    int64_t n = 0;
    if (list && (!type_named(c, list, "list") ||
                 py_sequence_length(&c->r, list, &n) != 0 || n < 0 || n > 1))
        return false;
    if (first)
        return n == 0 && callback_task(c, first, 0) == task;
    uint64_t pair = 0;
    if (n == 1 && (items = u64_at(c, list + (uint64_t)c->L->list_items)))
        pair = u64_at(c, items);
    return type_named(c, pair, "tuple") &&
           callback_task(c, u64_at(c, pair + (uint64_t)c->L->tuple_items), 0) == task;
}

/* The plain Future a task waits on (C or pure-Python, not a subclass: a
 * Task or gather ends on its own) as what must act for the wait to end,
 * unless describe_wait found a primitive; and the references to it the
 * task accounts for: its waiter slot, the FutureIter its innermost
 * coroutine awaits (via_iter), and its frames'. */
static void wait_own_refs(struct tctx *c, struct report_task *t, uint64_t task, uint64_t waiter,
                          bool via_iter)
{
    t->own_refs = -1;
    if (!t->wait_obj && waiter) {
        uint64_t type;
        const char *name;
        if (py_type_of(&c->r, waiter, &type, &name) != 0 ||
            (strcmp(name, "_asyncio.Future") != 0 && (!type || type != c->py_future_type)))
            return;
        t->wait_obj = waiter;
        snprintf(t->wait_obj_type, sizeof t->wait_obj_type, "%s", name);
    }
    if (!t->wait_obj)
        return;
    int base = 0;
    if (t->wait_obj == waiter) {
        if (!only_own_wakeup(c, waiter, task))
            return;
        base = 1 + (via_iter ? 1 : 0);
    }
    int frames = chain_refs(c, t, t->wait_obj);
    t->own_refs = frames < 0 ? -1 : base + frames;
}

/* The frames in the tracebacks of the loop's finished tasks' exceptions:
 * frames that never run again (a producer that died keeps there the queue
 * it fed). */
#define DEAD_FRAMES_MAX 64

struct dead_frames {
    uint64_t frame[DEAD_FRAMES_MAX], code[DEAD_FRAMES_MAX];   /* as py_frame_vars_read takes them */
    size_t n;
};

static void dead_frames_read(struct tctx *c, const struct report_loop *loop, struct dead_frames *d)
{
    const struct py_layout *L = c->L;
    d->n = 0;
    if (L->exc_traceback == PY_OFF_NONE || L->tb_frame == PY_OFF_NONE || L->tb_next == PY_OFF_NONE)
        return;
    for (size_t i = 0; i < loop->n_tasks && d->n < DEAD_FRAMES_MAX; i++) {
        uint64_t tb = loop->tasks[i].exception ? u64_at(c, loop->tasks[i].exception +
                                                           (uint64_t)L->exc_traceback) : 0;
        for (int depth = 0; depth < DEAD_FRAMES_MAX && d->n < DEAD_FRAMES_MAX &&
                            type_named(c, tb, "traceback");
             depth++, tb = u64_at(c, tb + (uint64_t)L->tb_next)) {
            uint64_t frame = u64_at(c, tb + (uint64_t)L->tb_frame);
            if (!type_named(c, frame, "frame"))
                break;
            if (L->frames != PY_FRAMES_OBJECTS)
                frame = L->frameobj_iframe == PY_OFF_NONE ? 0
                        : u64_at(c, frame + (uint64_t)L->frameobj_iframe);
            if (!frame)
                continue;
            d->frame[d->n] = frame;
            d->code[d->n++] = L->frames == PY_FRAMES_OBJECTS
                                  ? u64_at(c, frame + (uint64_t)L->frame_code)
                                  : u64_at(c, frame + (uint64_t)L->iframe_executable) &
                                        (L->stackref_tagged ? ~(uint64_t)7 : ~(uint64_t)0);
        }
    }
}

/* The references to obj the variables of those frames hold; -1 when one
 * is in a cell, shared with who knows what. Value stacks, unwound by the
 * exception, are not read: a reference missed only makes "nothing else
 * refers to it" fail. */
static int dead_refs(struct tctx *c, const struct dead_frames *d, uint64_t obj)
{
    int n = 0;
    for (size_t i = 0; i < d->n; i++) {
        c->frame_read = 0;
        if (py_frame_vars_read(c->vars, &c->r, d->frame[i], d->code[i], c->frame) != 0)
            continue;
        for (int v = 0; v < c->frame->n_named; v++)
            if (c->frame->values[v] == obj) {
                if (c->frame->code->is_cell[v])
                    return -1;
                n += !c->frame->uncounted[v];
            }
    }
    return n;
}

static int by_wait_obj(const void *a, const void *b)
{
    const struct report_task *x = *(const struct report_task *const *)a;
    const struct report_task *y = *(const struct report_task *const *)b;
    return x->wait_obj < y->wait_obj ? -1 : x->wait_obj > y->wait_obj;
}

/* The tasks of a loop waiting on the same object, each run of them: the
 * object is orphaned when its reference count is all theirs. */
static void settle_orphans(struct tctx *c, struct report_loop *loop)
{
    size_t n = 0;
    struct report_task **w = malloc((loop->n_tasks ? loop->n_tasks : 1) * sizeof *w);
    struct dead_frames *dead = malloc(sizeof *dead);
    if (!w || !dead) {
        free(w);
        free(dead);
        return;
    }
    dead_frames_read(c, loop, dead);
    for (size_t i = 0; i < loop->n_tasks; i++)
        if (loop->tasks[i].wait_obj && loop->tasks[i].own_refs >= 0)
            w[n++] = &loop->tasks[i];
    qsort(w, n, sizeof *w, by_wait_obj);
    for (size_t i = 0, end; i < n; i = end) {
        int64_t own = 0;
        for (end = i; end < n && w[end]->wait_obj == w[i]->wait_obj; end++)
            own += w[end]->own_refs;
        /* A waiter past the cap, or running, holds references not counted. */
        int64_t refs = refcount(c, w[i]->wait_obj);
        int64_t dead_n = refs > own && dead->n ? dead_refs(c, dead, w[i]->wait_obj) : 0;
        /* A wait with a deadline ends by itself. */
        for (size_t k = i; k < end; k++) {
            w[k]->orphan = refs > 0 && dead_n >= 0 && refs == own + dead_n && !w[k]->timed;
            if (w[k]->orphan) {
                free(w[k]->held_by);     /* the dead frames' references, counted */
                w[k]->held_by = NULL;
            }
        }
    }
    free(w);
    free(dead);
}

/* A finished task's exception that nobody has looked at: asyncio would log
 * "Task exception was never retrieved" when the task is collected. */
static void exception_unretrieved(struct tctx *c, uint64_t task, enum task_kind kind,
                                  char *out, size_t size)
{
    uint8_t flag = 0;
    const char *name;
    uint64_t exc, log_tb;
    int64_t set;
    if (kind == KIND_PY) {
        /* _log_traceback: the class's False until an exception is set */
        exc = py_field(c, task, "_exception");
        log_tb = py_field(c, task, "_log_traceback");
        flag = log_tb && type_named(c, log_tb, "bool") && py_int(&c->r, log_tb, &set) == 0 && set;
    } else {
        exc = u64_at(c, task + (uint64_t)c->A->fut_exception);
        if (target_read_u8(c->r.t, task + (uint64_t)c->A->fut_log_tb, &flag) != 0)
            return;
        flag &= (uint8_t)c->A->fut_log_tb_mask;
    }
    if (!exc || !flag || py_type_of(&c->r, exc, NULL, &name) != 0)
        return;
    snprintf(out, size, "%s", name);
}

static void fill_task(struct tctx *c, struct report_task *t, uint64_t task, enum task_kind kind,
                      int32_t state, const struct loop_thread *lt, int n_lt)
{
    t->addr = task;
    t->state = state == 0 ? "pending" : state == 1 ? "cancelled" : "finished";
    task_name(c, task, t->name, sizeof t->name);
    for (int i = 0; i < n_lt; i++)
        if (lt[i].current_task == task)
            t->running = true;
    uint64_t coro = task_coro(c, task, kind);
    uint64_t innermost = 0;
    uint64_t yielded = read_chain(c, coro, t, &innermost);
    if (state != 0 && t->n_chain == 0)
        t->chain_complete = true;     /* a done task's coroutine has no frame left */
    uint64_t waiter = task_waiter(c, task, kind);
    t->own_refs = -1;
    if (state == 2)
        t->exception = kind == KIND_PY ? py_field(c, task, "_exception")
                                       : u64_at(c, task + (uint64_t)c->A->fut_exception);
    if (waiter)
        describe_wait(c, t, waiter);
    else if (yielded && state == 0 && !t->running)
        describe_wait(c, t, yielded);
    if (waiter && state == 0 && !t->running)
        wait_own_refs(c, t, task, waiter, yielded == waiter);
}

/* A task of the given state into its loop's report, as the mode asks: a
 * pending one, a finished one whose exception nobody retrieved, any with
 * --tasks=all; past the loop's cap, counted. 0, or -1 out of memory. */
static int report_task_add(struct tctx *c, struct report_tasks *out, uint64_t task,
                           enum task_kind kind, int32_t state, uint64_t loop_addr,
                           const struct loop_thread *lt, int n_lt)
{
    char unretrieved[96] = "";
    if (state == 2)
        exception_unretrieved(c, task, kind, unretrieved, sizeof unretrieved);
    if (state != 0 && out->mode != TASKS_ALL && !unretrieved[0])
        return 0;
    struct report_loop *loop = loop_for(out, loop_addr);
    if (!loop)
        return -1;
    out->n_found++;
    if (loop->n_tasks >= out->max_shown) {
        loop->n_hidden++;
        return 0;
    }
    if (loop->n_tasks == loop->cap_tasks) {
        size_t cap = loop->cap_tasks ? 2 * loop->cap_tasks : 64;
        struct report_task *grown = realloc(loop->tasks, cap * sizeof *grown);
        if (!grown)
            return -1;
        loop->tasks = grown;
        loop->cap_tasks = cap;
    }
    struct report_task *t = &loop->tasks[loop->n_tasks++];
    memset(t, 0, sizeof *t);
    t->sleep_due = NAN;
    fill_task(c, t, task, kind, state, lt, n_lt);
    memcpy(t->unretrieved, unretrieved, sizeof t->unretrieved);
    return 0;
}

/* What reading each task will touch, brought into the page cache a stage
 * at a time (the tasks, then their coroutines and what they wait on, then
 * frames kept apart from their coroutine), in a few scattered reads instead
 * of one read per page: a loop's tasks and coroutines lie on a few hundred
 * pages. */
static void prefetch_tasks(struct tctx *c, size_t max_shown)
{
    const struct py_layout *L = c->L;
    size_t n = c->n_found < max_shown ? c->n_found : max_shown;
    if (n > 4 * ASYNCIO_SAMPLED_TASKS)
        n = 4 * ASYNCIO_SAMPLED_TASKS;
    struct target_range *r = malloc(2 * n * sizeof *r + 1);
    if (!r)
        return;
    for (size_t i = 0; i < n; i++)
        r[i] = (struct target_range){c->found[i].addr, (size_t)c->A->task_size};
    target_prefetch(c->r.t, r, n);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (c->found[i].kind != KIND_C)
            continue;          /* a pure-Python task's fields are attributes */
        uint64_t coro = u64_at(c, c->found[i].addr + (uint64_t)c->A->task_coro);
        uint64_t waiter = u64_at(c, c->found[i].addr + (uint64_t)c->A->task_fut_waiter);
        /* From 3.11 the frame is inside the coroutine, locals after it. */
        size_t gen_bytes = L->frames == PY_FRAMES_OBJECTS ? 128 : (size_t)L->gen_iframe + 256;
        if (coro)
            r[m++] = (struct target_range){coro, gen_bytes};
        if (waiter)
            r[m++] = (struct target_range){waiter, (size_t)c->A->task_size};
    }
    target_prefetch(c->r.t, r, m);
    if (L->frames == PY_FRAMES_OBJECTS) {
        m = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t coro = task_coro(c, c->found[i].addr, c->found[i].kind);
            uint64_t frame = coro ? u64_at(c, coro + (uint64_t)L->gen_frame) : 0;
            if (frame)
                r[m++] = (struct target_range){frame, 512};
        }
        target_prefetch(c->r.t, r, m);
    }
    free(r);
}

struct report_tasks *asyncio_tasks_read(struct py_runtime *rt, enum tasks_mode mode,
                                        size_t max_shown)
{
    if (mode == TASKS_NONE)
        return NULL;
    const struct py_asyncio_layout *A = &rt->layout.asyncio;
    if (A->task_coro == PY_OFF_NONE || A->task_coro == 0)
        return NULL;
    asyncio_offsets_check(rt);
    struct tctx c;
    bool ready = tctx_init(&c, rt, NULL);
    struct report_tasks *out = calloc(1, sizeof *out);
    pid_t *tids = calloc(MAX_TIDS, sizeof *tids);
    struct py_snapshot snap = {0};
    struct loop_thread lt[64];
    int n_lt = 0;
    if (!ready || !out || !tids || addrset_init(&c.seen, 1024) != 0)
        goto fail;
    out->mode = mode;
    out->max_shown = max_shown;
    out->walk_max = ASYNCIO_MAX_TASKS;
    if (rt->asyncio_checked)
        snprintf(out->offsets, sizeof out->offsets, "%.*s", (int)sizeof out->offsets - 1,
                 rt->asyncio_offsets);
    if (rt->asyncio_mismatch) {
        snprintf(out->error, sizeof out->error, "cannot be read: %.*s",
                 (int)sizeof out->error - 20, rt->asyncio_offsets);
        goto done;
    }
    /* From 3.14 a task leaves its thread's list once done. */
    out->done_seen = c.A->tstate_tasks_head != PY_OFF_NONE ? TASKS_DONE_REACHABLE : TASKS_DONE_ALL;
    /* Whether asyncio was imported at all, before the threads are read: in
     * most processes it was not (the agent asks every process, at each why). */
    uint64_t interp = py_runtime_first_interpreter(rt);
    if (!interp)
        goto fail;
    uint64_t tasks_dict = module_dict(&c, interp, "asyncio.tasks");
    if (!tasks_dict) {
        task_report_free(out);     /* asyncio never imported: nothing to say */
        out = NULL;
        goto done;
    }
    int n_tids = target_list_threads(c.r.t, tids, MAX_TIDS);
    if (py_snapshot_read(&c.r, tids, n_tids > 0 ? n_tids : 0, &snap) != 0 || snap.n_interps == 0 ||
        snap.interps[0].addr != interp)
        goto fail;
    out->main_dict = module_dict(&c, interp, "__main__");
    py_task_classes(&c, interp, tasks_dict);
    out->py_task_type = c.py_task_type;
    out->py_future_type = c.py_future_type;
    /* Registries that hold tasks: 3.8-3.11 one WeakSet, 3.12-3.13 the
     * scheduled WeakSet and the eager set; 3.14+ tasks of pure-Python
     * Task classes (the C ones are on the lists read below). */
    uint64_t reg;
    if (py_dict_get_str(&c.r, tasks_dict, "_all_tasks", &reg) == 0 ||
        py_dict_get_str(&c.r, tasks_dict, "_scheduled_tasks", &reg) == 0) {
        uint64_t data;
        if (py_attr_get(&c.r, reg, "data", &data) == 0)
            add_set_members(&c, data, true);
    }
    if (py_dict_get_str(&c.r, tasks_dict, "_eager_tasks", &reg) == 0)
        add_set_members(&c, reg, false);
    uint64_t current = 0;
    py_dict_get_str(&c.r, tasks_dict, "_current_tasks", &current);
    for (int i = 0; i < snap.n_threads; i++) {
        uint64_t ts = snap.threads[i].tstate;
        if (c.A->tstate_tasks_head != PY_OFF_NONE)
            add_list_members(&c, ts + (uint64_t)c.A->tstate_tasks_head);
        uint64_t loop = running_loop_of(&c, ts);
        if (!loop || n_lt == (int)(sizeof lt / sizeof lt[0]))
            continue;
        struct loop_thread *l = &lt[n_lt++];
        l->loop = loop;
        l->tid = snap.threads[i].tid;
        l->current_task = 0;
        if (c.A->tstate_running_task != PY_OFF_NONE)
            l->current_task = u64_at(&c, ts + (uint64_t)c.A->tstate_running_task);
        /* A pure-Python task's steps are entered in the dict (3.14+ too). */
        if (!l->current_task)
            l->current_task = current_task_in(&c, current, loop);
    }
    if (c.A->interp_tasks_head != PY_OFF_NONE)
        add_list_members(&c, interp + (uint64_t)c.A->interp_tasks_head);
    n_lt = loops_by_thread_id(&c, &snap, current, lt, n_lt, (int)(sizeof lt / sizeof lt[0]));
    out->truncated = c.truncated;
    prefetch_tasks(&c, max_shown);

    for (size_t i = 0; i < c.n_found; i++) {
        uint64_t task = c.found[i].addr;
        int32_t state = c.found[i].state;
        if (state < 0 || state > 2)
            continue;
        if (report_task_add(&c, out, task, (enum task_kind)c.found[i].kind, state,
                            c.found[i].loop, lt, n_lt) != 0)
            goto fail;
    }
    for (size_t l = 0; l < out->n_loops; l++) {
        for (int i = 0; i < n_lt; i++)
            if (lt[i].loop == out->loops[l].addr)
                out->loops[l].tid = lt[i].tid;
        link_children(&c, &out->loops[l]);
        lock_holders(&c, &out->loops[l]);
    }
    goto done;
fail:
    if (out) {
        task_report_free(out);
        out = calloc(1, sizeof *out);
        if (out)
            snprintf(out->error, sizeof out->error, "could not be read (out of memory or "
                     "no interpreter)");
    }
done:
    py_snapshot_free(&snap);
    tctx_release(&c);
    free(tids);
    return out;
}

/* ---- how long the current callback has run -------------------------------- */

static bool frame_is(const struct report_frame *f, const char *file, const char *fn)
{
    if (!f->function || !f->file || !strstr(f->file, file))
        return false;
    const char *dot = strrchr(f->function, '.');
    return !strcmp(dot ? dot + 1 : f->function, fn);   /* 3.8-3.10 names carry no class */
}

static int local_int(struct tctx *c, const char *name, int64_t *out)
{
    for (int i = 0; i < c->frame->n_named; i++) {
        if (strcmp(c->frame->code->names[i], name) != 0)
            continue;
        if (c->frame->is_tagged_int[i]) {
            *out = c->frame->tagged_int[i];
            return 0;
        }
        return py_int(&c->r, c->frame->values[i], out);
    }
    return -1;
}

static int local_number(struct tctx *c, const char *name, double *out)
{
    uint64_t v;
    return py_frame_var_get(c->frame, name, &v) == 0 ? py_number(&c->r, v, out) : -1;
}

#define UVLOOP_MAX_FRAMES 64        /* frames looked at for the one running uvloop */

static bool uvloop_run_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return !strncmp(name, "uvloop.", 7) && dot &&
           (!strcmp(dot, ".run_forever") || !strcmp(dot, ".run_until_complete"));
}

/* uvloop runs its loop in C, with no _run_once and no clock of a callback's
 * start: the frame whose call site calls its run_until_complete or
 * run_forever runs the loop. Innermost, the loop waits in libuv (or runs
 * its own C); with frames above it, the first of them is a callback's or a
 * task step's. */
static void uvloop_step(struct tctx *c, struct report_loop *loop, const struct report_thread *th)
{
    for (size_t k = 0; k < th->n_frames && k < UVLOOP_MAX_FRAMES; k++) {
        const struct report_frame *f = &th->frames[k];
        char name[PY_C_CALLABLE_MAX] = "";
        struct py_frame pf = {.frame_addr = f->frame_addr, .code_addr = f->code_addr,
                              .instr_offset = f->instr_offset, .line = f->line};
        if (k == 0)
            snprintf(name, sizeof name, "%s", th->c_callable);
        else if (!f->frame_addr || py_frame_c_callable(&c->r, c->vars, &pf, name, sizeof name) != 0)
            continue;
        if (!uvloop_run_name(name))
            continue;
        if (k == 0) {
            loop->step = LOOP_STEP_SELECTOR;
            return;
        }
        loop->step = LOOP_STEP_CALLBACK;
        loop->callback_frame = (int)k - 1;
        if (th->frames[k - 1].function)
            snprintf(loop->callback, sizeof loop->callback, "%s", th->frames[k - 1].function);
        return;
    }
}

/* One loop thread: where its innermost _run_once is, and from that frame's
 * variables when the iteration left select (end_time, which asyncio takes
 * right after select returns and its events are queued), which callback of
 * the iteration runs (i of ntodo) and, in debug mode, when it began (t0).
 * asyncio keeps no start time of a callback outside debug mode: the time
 * since end_time is the callback's own for the first of an iteration, and
 * its upper bound for a later one. */
static void loop_ready(struct tctx *c, struct report_loop *loop);

static void loop_step(struct tctx *c, struct report_loop *loop, const struct report_thread *th,
                      double stacks_at)
{
    size_t r = 0;
    while (r < th->n_frames && !frame_is(&th->frames[r], "asyncio/base_events.py", "_run_once"))
        r++;
    if (r == th->n_frames) {
        uvloop_step(c, loop, th);            /* or no loop iteration under way */
        return;
    }
    const struct report_frame *inner = r ? &th->frames[r - 1] : NULL;
    if (inner && frame_is(inner, "selectors.py", "select")) {
        loop->step = LOOP_STEP_SELECTOR;
        loop_ready(c, loop);
        return;
    }
    if (!inner || !frame_is(inner, "asyncio/events.py", "_run")) {
        loop->step = LOOP_STEP_OTHER;
        return;
    }
    loop->step = LOOP_STEP_CALLBACK;
    if (r >= 2 && th->frames[r - 2].function)
        snprintf(loop->callback, sizeof loop->callback, "%s", th->frames[r - 2].function);
    const struct report_frame *f = &th->frames[r];
    if (py_frame_vars_read(c->vars, &c->r, f->frame_addr, f->code_addr, c->frame) != 0)
        return;
    c->frame_read = 0;
    double end_time, t0;
    int64_t i, ntodo;
    if (local_number(c, "end_time", &end_time) != 0)
        return;
    bool debug_t0 = local_number(c, "t0", &t0) == 0;
    if (local_int(c, "i", &i) == 0 && local_int(c, "ntodo", &ntodo) == 0 && i >= 0 && i < ntodo) {
        loop->callback_index = (long)i + 1;
        loop->callback_count = (long)ntodo;
    }
    /* An end_time later than the stacks belongs to an iteration begun
     * since: the loop moved on while the tasks were read. */
    if (!isnan(stacks_at) && end_time > stacks_at)
        return;
    loop->left_selector = end_time;
    loop->callback_exact = debug_t0 || loop->callback_index == 1;
    if (!isnan(stacks_at))
        loop->callback_s = stacks_at - (debug_t0 && t0 >= end_time ? t0 : end_time);
}

/* ---- who else holds the plain Future a task awaits ------------------------ */

/* One pass over the roots (the loops' handles, __main__'s globals, the
 * tasks' and threads' frames) and the objects they lead to, a few levels
 * deep, checking every reference against the set of awaited Futures. */
#define HOLDER_MAX_FRAMES 8192     /* frames of tasks and threads read, per dump */
#define HOLDER_MAX_HANDLES 1000    /* the loop's scheduled and ready handles looked at */
#define HOLDER_MAX_DEPTH 3         /* containers from a root to the reference */
#define HOLDER_MAX_OBJECTS 4096    /* containers and instances walked, per dump */
#define HOLDER_MAX_ITEMS 131072    /* references read in them, per dump */
#define HOLDER_MAX_NAMED 4         /* holders described per Future */
#define HOLDER_TEXT_MAX 768        /* ... in at most this much text */
/* collections.deque after its PyObject_VAR_HEAD, in every version's
 * Modules/_collectionsmodule.c: leftblock, rightblock, leftindex; a block
 * is a left link, 64 items and a right link. */
#define DEQUE_BLOCKLEN 64

struct holders {
    char *out;
    size_t room;
    int found;                     /* references found, one per variable or slot */
    int named;                     /* ... of which described */
};

struct hold_cand {                 /* a task awaiting a plain Future held elsewhere */
    struct report_task *t;
    uint64_t fut;
    char *text;                    /* HOLDER_TEXT_MAX bytes, the task's held_by once done */
    struct holders h;
};

struct hold_root {                 /* where a walk started */
    const char *who;               /* "task \"x\"", "thread 12"; NULL: a global of __main__ */
    const char *var;
    const char *function, *file;
    int line;
};

#define HOLDER_MAX_DONE 256        /* finished tasks found on the way, per dump */

struct hold_scan {
    struct tctx *c;
    struct hold_cand *cand;        /* sorted by fut */
    size_t n;
    struct addrset futs, visited;
    int frames, objects, items;
    bool partial;                  /* a bound cut the scan short: no counts */
    /* Finished tasks, where the interpreter keeps them on no list (3.14+):
     * every task met on the way not in the report yet. */
    bool find_done;
    struct addrset known;          /* tasks in the report, or met */
    uint64_t done[HOLDER_MAX_DONE];
    size_t n_done;
    const struct hold_root *root;
    char path[256];                /* from the root's object to the one walked */
    char what[16];                 /* the root's object: "the object", "the dict" */
    int depth;
};

/* A finished (or cancelled) task met on the way that the report lacks. */
static void hold_task(struct hold_scan *s, uint64_t value)
{
    if (!s->find_done || !value || s->n_done == HOLDER_MAX_DONE || addrset_has(&s->known, value))
        return;
    enum task_kind kind = task_kind(s->c, value);
    if (kind == KIND_NONE || !addrset_add(&s->known, value))
        return;
    int32_t state = fut_state(s->c, value, kind);
    if (state == 1 || state == 2)
        s->done[s->n_done++] = value;
}

static void holder_add(struct holders *h, const char *text)
{
    h->found++;
    if (h->named >= HOLDER_MAX_NAMED || h->room < 3)
        return;
    int n = snprintf(h->out, h->room, "%s%s", h->named ? "; " : "", text);
    if (n > 0 && (size_t)n < h->room) {
        h->out += n;
        h->room -= (size_t)n;
        h->named++;
    } else {
        *h->out = '\0';
        h->room = 0;
    }
}

static int cand_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct hold_cand *)a)->fut, y = ((const struct hold_cand *)b)->fut;
    return x < y ? -1 : x > y;
}

/* A reference to fut, described by text, for every task awaiting it but
 * not_for (whose own frames' variables are its own share). */
static void credit(struct hold_scan *s, uint64_t fut, const struct report_task *not_for,
                   const char *text)
{
    size_t lo = first_at_least(s->cand, s->n, sizeof *s->cand, offsetof(struct hold_cand, fut), fut);
    for (size_t i = lo; i < s->n && s->cand[i].fut == fut; i++)
        if (s->cand[i].t != not_for)
            holder_add(&s->cand[i].h, text);
}

static void root_text(const struct hold_root *root, char *out, size_t size)
{
    if (root->who)
        snprintf(out, size, "local '%s' of %s in %s(), %s:%d", root->var, root->who,
                 root->function, stack_report_short_path(root->file), root->line);
    else
        snprintf(out, size, "global '%s' of __main__", root->var);
}

/* A reference found in a container: "held by RpcClient._pending[7] (the
 * object in local 'client' of task "main" in main(), rpc.py:40)". */
static void credit_in(struct hold_scan *s, uint64_t fut, const char *how, const char *suffix)
{
    char where[256], text[640];
    root_text(s->root, where, sizeof where);
    snprintf(text, sizeof text, "held by %s%s%s (%s in %s)", how, s->path, suffix, s->what, where);
    credit(s, fut, NULL, text);
}

enum hold_kind { HOLD_NONE, HOLD_INSTANCE, HOLD_DICT, HOLD_LIST, HOLD_TUPLE, HOLD_SET,
                 HOLD_DEQUE };

/* What the walk looks into: the builtin containers, and instances of
 * classes defined in Python (heap types; not classes themselves). */
static enum hold_kind hold_kind_of(struct tctx *c, uint64_t obj)
{
    uint64_t type, flags = 0;
    const char *name;
    if (py_type_of(&c->r, obj, &type, NULL) != 0)
        return HOLD_NONE;
    struct type_memo *m = type_memo(c, type);
    if (m && m->hold)
        return (enum hold_kind)(m->hold - 1);
    if (py_type_of(&c->r, obj, NULL, &name) != 0)
        return HOLD_NONE;
    static const struct { const char *name; enum hold_kind kind; } builtin[] = {
        {"dict", HOLD_DICT}, {"list", HOLD_LIST}, {"tuple", HOLD_TUPLE}, {"set", HOLD_SET},
        {"collections.deque", HOLD_DEQUE},
    };
    enum hold_kind kind = HOLD_NONE;
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0] && kind == HOLD_NONE; i++)
        if (strcmp(name, builtin[i].name) == 0)
            kind = builtin[i].kind;
    /* A task's or a Future's attributes are asyncio's (a pure-Python
     * task's own _fut_waiter among them), not a holder of the program's.
     * (Flags unread: not known, so not kept.) */
    if (kind == HOLD_NONE) {
        if (target_read_u64(c->r.t, type + (uint64_t)c->L->type_flags, &flags) != 0)
            return HOLD_NONE;
        kind = !(flags & (uint64_t)c->L->tpflags_heaptype) ||
                       py_type_is_or_inherits(&c->r, obj, "type") || future_kind(c, obj) != KIND_NONE
                   ? HOLD_NONE
                   : HOLD_INSTANCE;
    }
    if (m)
        m->hold = (uint8_t)(kind + 1);
    return kind;
}

static void hold_walk(struct hold_scan *s, uint64_t obj);

/* One reference out of the object walked: fut itself, or an object to
 * walk into with the path grown by suffix. */
static void hold_ref(struct hold_scan *s, uint64_t value, const char *how, const char *suffix,
                     bool walk)
{
    if (++s->items > HOLDER_MAX_ITEMS) {
        s->partial = true;
        return;
    }
    hold_task(s, value);
    if (addrset_has(&s->futs, value)) {
        credit_in(s, value, how, suffix);
        return;
    }
    size_t at = strlen(s->path);
    if (!walk || s->depth >= HOLDER_MAX_DEPTH || at + strlen(suffix) >= sizeof s->path)
        return;
    memcpy(s->path + at, suffix, strlen(suffix) + 1);
    s->depth++;
    hold_walk(s, value);
    s->depth--;
    s->path[at] = '\0';
}

/* An item that is no awaited Future and nothing the walk would enter (a
 * float of a list of 60,000): counted and met, as hold_ref does, without
 * its path being written. True when it was such an item. */
static bool hold_plain(struct hold_scan *s, uint64_t value)
{
    if (addrset_has(&s->futs, value))
        return false;
    /* Its type read once: most items are of a type already met. */
    uint64_t type = 0;
    const struct type_memo *m = py_type_of(&s->c->r, value, &type, NULL) == 0
                                    ? type_memo(s->c, type)
                                    : NULL;
    bool known = m && m->hold && m->task;
    if (s->depth < HOLDER_MAX_DEPTH &&
        (known ? (enum hold_kind)(m->hold - 1) : hold_kind_of(s->c, value)) != HOLD_NONE)
        return false;
    if (++s->items > HOLDER_MAX_ITEMS) {
        s->partial = true;
        return true;
    }
    if (!known || (enum task_kind)(m->task - 1) != KIND_NONE)
        hold_task(s, value);
    return true;
}

static void key_text(struct tctx *c, uint64_t key, char *out, size_t size)
{
    int64_t i;
    char str[48];
    const char *name;
    if (py_int(&c->r, key, &i) == 0)
        snprintf(out, size, "[%lld]", (long long)i);
    else if (py_str(&c->r, key, str, sizeof str) == 0)
        snprintf(out, size, "['%s']", str);
    else if (py_type_of(&c->r, key, NULL, &name) == 0)
        snprintf(out, size, "[<%s>]", name);
    else
        snprintf(out, size, "[?]");
}

static int hold_dict_item(void *ctx, uint64_t key, uint64_t value)
{
    struct hold_scan *s = ctx;
    char suffix[64];
    if (addrset_has(&s->futs, key))
        hold_ref(s, key, "a key of ", "", false);
    if (hold_plain(s, value))
        return s->partial;
    key_text(s->c, key, suffix, sizeof suffix);
    hold_ref(s, value, "", suffix, true);
    return s->partial;
}

static int hold_attr(void *ctx, uint64_t key, uint64_t value)
{
    struct hold_scan *s = ctx;
    char name[64], suffix[66];
    if (hold_plain(s, value))
        return s->partial;
    if (py_str(&s->c->r, key, name, sizeof name) != 0)
        snprintf(name, sizeof name, "?");
    snprintf(suffix, sizeof suffix, ".%s", name);
    hold_ref(s, value, "", suffix, true);
    return s->partial;
}

/* The items of a list, tuple or deque, at most max of them, in *out (to
 * free); their count, or -1 when unreadable or longer. */
static long sequence_items(struct tctx *c, uint64_t obj, enum hold_kind kind, uint64_t **out,
                           long max)
{
    int64_t n = 0;
    *out = NULL;
    if (target_read_u64(c->r.t, obj + (uint64_t)c->L->ob_size, (uint64_t *)&n) != 0 || n < 0 ||
        n > max || !(*out = malloc(sizeof **out * (size_t)(n ? n : 1))))
        return -1;
    if (kind == HOLD_TUPLE)
        return n == 0 || target_read(c->r.t, obj + (uint64_t)c->L->tuple_items, *out,
                                     (size_t)n * 8) == 0 ? n : -1;
    if (kind == HOLD_LIST) {
        uint64_t items = u64_at(c, obj + (uint64_t)c->L->list_items);
        return n == 0 || (items && target_read(c->r.t, items, *out, (size_t)n * 8) == 0) ? n : -1;
    }
    uint64_t head = obj + (uint64_t)c->L->ob_size + 8, block = u64_at(c, head);
    int64_t index = (int64_t)u64_at(c, head + 16);
    if (index < 0 || index >= DEQUE_BLOCKLEN)
        return -1;
    uint64_t words[DEQUE_BLOCKLEN + 2];
    for (int64_t i = 0; i < n;) {
        if (!block || target_read(c->r.t, block, words, sizeof words) != 0)
            return -1;
        for (; index < DEQUE_BLOCKLEN && i < n; index++)
            (*out)[i++] = words[1 + index];
        block = words[DEQUE_BLOCKLEN + 1];
        index = 0;
    }
    return n;
}

/* What a handle's callback calls: a Python function's qualified name (a
 * pure-Python Future's own method) or a C callable's (the C Future's
 * set_result). */
static void callback_name(struct tctx *c, uint64_t cb, char *name, size_t size)
{
    const struct py_code *code;
    if (type_named(c, cb, "method") &&
        (code = py_code_get(c->codes, &c->r,
                            u64_at(c, u64_at(c, cb + (uint64_t)c->L->method_func) +
                                          (uint64_t)c->L->func_code))))
        snprintf(name, size, "%.*s", (int)size - 1, code->qualname);
    else if (type_named(c, cb, "function") &&
             (code = py_code_get(c->codes, &c->r, u64_at(c, cb + (uint64_t)c->L->func_code))))
        snprintf(name, size, "%.*s", (int)size - 1, code->qualname);
    else
        py_c_callable_name(&c->r, cb, name, size);
}

#define LOOP_READY_MAX 4096

/* A loop's handle: in _ready a Handle (or a subclass: 3.13's
 * _ThreadSafeHandle, which call_soon_threadsafe queues), in _scheduled a
 * TimerHandle. */
static bool is_handle(struct tctx *c, uint64_t obj, bool ready)
{
    return obj && py_type_is_or_inherits(&c->r, obj, ready ? "Handle" : "TimerHandle");
}

/* asyncio.sleep's wake-up: futures._set_result_unless_cancelled, a plain
 * function of asyncio's own (a program's function of that name is not). */
static bool wakes_sleeper(struct tctx *c, uint64_t cb)
{
    const struct py_code *code;
    return type_named(c, cb, "function") &&
           (code = py_code_get(c->codes, &c->r, u64_at(c, cb + (uint64_t)c->L->func_code))) &&
           strcmp(code->name, "_set_result_unless_cancelled") == 0 &&
           strstr(code->filename, "asyncio/futures.py") != NULL;
}

/* The loop's timers, by whether they only wake a sleeping task; left
 * unknown (-1) when any handle cannot be read as a TimerHandle. */
static void loop_timers(struct tctx *c, struct report_loop *loop)
{
    uint64_t seq, *items = NULL, cb, cancelled;
    int64_t cb_offset = 0, cancelled_offset = 0;
    uint64_t cb_type = 0, cancelled_type = 0;
    if (py_attr_get(&c->r, loop->addr, "_scheduled", &seq) != 0 || !type_named(c, seq, "list"))
        return;
    long n = sequence_items(c, seq, HOLD_LIST, &items, LOOP_READY_MAX);
    long sleeps = 0, others = 0;
    for (long i = 0; i < n; i++) {
        int64_t off = 0;
        if (!is_handle(c, items[i], false) ||
            slot_get(c, items[i], "_cancelled", &cancelled_offset, &cancelled_type,
                     &cancelled) != 0 ||
            py_int(&c->r, cancelled, &off) != 0) {
            n = -1;
            break;
        }
        if (off)
            continue;            /* cancelled: dropped when it comes due */
        if (slot_get(c, items[i], "_callback", &cb_offset, &cb_type, &cb) == 0 &&
            wakes_sleeper(c, cb))
            sleeps++;
        else
            others++;
    }
    free(items);
    if (n < 0)
        return;
    loop->sleep_timers = sleeps;
    loop->other_timers = others;
}

static void loop_ready(struct tctx *c, struct report_loop *loop)
{
    uint64_t seq, *items = NULL, cb;
    int64_t cb_offset = 0;
    uint64_t cb_type = 0;
    if (py_attr_get(&c->r, loop->addr, "_ready", &seq) != 0 ||
        !type_named(c, seq, "collections.deque"))
        return;
    long n = sequence_items(c, seq, HOLD_DEQUE, &items, LOOP_READY_MAX);
    if (n < 0) {
        free(items);
        return;
    }
    loop->ready_count = n;
    if (n > 0 && is_handle(c, items[0], true) &&
        slot_get(c, items[0], "_callback", &cb_offset, &cb_type, &cb) == 0)
        callback_name(c, cb, loop->ready_callback, sizeof loop->ready_callback);
    free(items);
    loop_timers(c, loop);
}

static void hold_walk(struct hold_scan *s, uint64_t obj)
{
    struct tctx *c = s->c;
    enum hold_kind kind = hold_kind_of(c, obj);
    if (kind == HOLD_NONE || s->partial)
        return;
    if (!addrset_add(&s->visited, obj)) {
        s->partial = s->partial || s->visited.n * 2 >= s->visited.cap;
        return;
    }
    if (++s->objects > HOLDER_MAX_OBJECTS) {
        s->partial = true;
        return;
    }
    if (s->depth == 1) {
        static const char *const kinds[] = {"object", "object", "dict", "list", "tuple", "set",
                                            "deque"};
        snprintf(s->what, sizeof s->what, "the %s", kinds[kind]);
        const char *name;
        if (kind == HOLD_INSTANCE && py_type_of(&c->r, obj, NULL, &name) == 0)
            snprintf(s->path, sizeof s->path, "%s", name);
    }
    int limit = HOLDER_MAX_ITEMS - s->items + 1;
    /* An instance without a __dict__ has no attributes; a container that
     * cannot be read may hold anything. */
    if (kind == HOLD_INSTANCE) {
        py_attr_items(&c->r, obj, limit, hold_attr, s);
    } else if (kind == HOLD_DICT) {
        if (py_dict_items(&c->r, obj, limit, hold_dict_item, s) < 0)
            s->partial = true;
    } else if (kind == HOLD_SET) {
        uint64_t *keys;
        long n = set_keys(c, obj, (size_t)limit, &keys);
        if (n < 0)
            s->partial = true;
        for (long i = 0; i < n && !s->partial; i++) {
            hold_task(s, keys[i]);
            if (addrset_has(&s->futs, keys[i]))
                hold_ref(s, keys[i], "a member of ", "", false);
        }
        s->items += n > 0 ? (int)n : 0;
        free(keys);
    } else {
        uint64_t *items;
        long n = sequence_items(c, obj, kind, &items, limit);
        if (n < 0)
            s->partial = true;
        for (long i = 0; i < n && !s->partial; i++) {
            char suffix[32];
            if (hold_plain(s, items[i]))
                continue;
            snprintf(suffix, sizeof suffix, "[%ld]", i);
            hold_ref(s, items[i], "", suffix, true);
        }
        free(items);
    }
}

/* A root variable: fut itself (named after the variable), or an object
 * to walk into. */
static void hold_root_value(struct hold_scan *s, const struct hold_root *root, uint64_t value,
                            bool direct, const struct report_task *own)
{
    if (!value)
        return;
    hold_task(s, value);
    if (addrset_has(&s->futs, value)) {
        char text[400];
        if (!direct)
            return;
        if (root->who)
            snprintf(text, sizeof text, "held by %s (local '%s' in %s(), %s:%d)", root->who,
                     root->var, root->function, stack_report_short_path(root->file), root->line);
        else
            snprintf(text, sizeof text, "held by global '%s' of __main__", root->var);
        credit(s, value, own, text);
        return;
    }
    s->root = root;
    s->path[0] = '\0';
    snprintf(s->path, sizeof s->path, "%s", root->var);
    s->depth = 1;
    hold_walk(s, value);
    s->depth = 0;
}

/* The named variables of c->frame (cells are shared with closures: their
 * cell is the holder, not the frame; what they lead to is walked). */
static void hold_frame(struct hold_scan *s, const char *who, const char *function,
                       const char *file, int line, const struct report_task *own)
{
    struct tctx *c = s->c;
    for (int i = 0; i < c->frame->n_named && !s->partial; i++) {
        struct hold_root root = {who, c->frame->code->names[i], function, file, line};
        hold_root_value(s, &root, c->frame->values[i], !c->frame->code->is_cell[i], own);
    }
}

static void hold_tasks(struct hold_scan *s, const struct report_tasks *tasks, bool waiting)
{
    struct tctx *c = s->c;
    char who[160];
    for (size_t l = 0; l < tasks->n_loops; l++)
        for (size_t j = 0; j < tasks->loops[l].n_tasks && !s->partial; j++) {
            const struct report_task *o = &tasks->loops[l].tasks[j];
            /* A running task's frames are on its thread's stack: named there. */
            if (o->running || addrset_has(&s->futs, o->awaits_addr) != waiting)
                continue;
            snprintf(who, sizeof who, "task \"%.120s\"", o->name);
            for (size_t k = 0; k < o->n_chain; k++) {
                if (++s->frames > HOLDER_MAX_FRAMES) {
                    s->partial = true;
                    return;
                }
                if (link_vars(c, &o->chain[k]) == 0)
                    hold_frame(s, who, o->chain[k].function, o->chain[k].file, o->chain[k].line,
                               o);
            }
        }
}

static void hold_threads(struct hold_scan *s, const struct stack_report *report)
{
    struct tctx *c = s->c;
    char who[48];
    for (size_t i = 0; i < report->n_threads && !s->partial; i++) {
        const struct report_thread *th = &report->threads[i];
        snprintf(who, sizeof who, "thread %d", (int)th->tid);
        for (size_t k = 0; k < th->n_frames; k++) {
            const struct report_frame *f = &th->frames[k];
            if (++s->frames > HOLDER_MAX_FRAMES) {
                s->partial = true;
                return;
            }
            c->frame_read = 0;
            if (f->frame_addr && f->function && f->file &&
                py_frame_vars_read(c->vars, &c->r, f->frame_addr, f->code_addr, c->frame) == 0)
                hold_frame(s, who, f->function, f->file, f->line, NULL);
        }
    }
}

static int hold_global(void *ctx, uint64_t key, uint64_t value)
{
    struct hold_scan *s = ctx;
    char name[64];
    if (py_str(&s->c->r, key, name, sizeof name) != 0)
        return 0;
    struct hold_root root = {.var = name};
    hold_root_value(s, &root, value, true, NULL);
    return s->partial;
}

/* A loop's handles, due later (_scheduled: call_later, call_at) or ready to
 * run (_ready: call_soon), whose callback is a method of an awaited Future
 * or whose arguments include one. Their argument tuples are marked seen:
 * no walk counts them twice. */
static void hold_handles(struct hold_scan *s, uint64_t loop, bool ready)
{
    struct tctx *c = s->c;
    uint64_t seq, cb, args;
    int64_t cb_offset = 0, args_offset = 0, when_offset = 0;
    uint64_t cb_type = 0, args_type = 0, when_type = 0;
    if (py_attr_get(&c->r, loop, ready ? "_ready" : "_scheduled", &seq) != 0 ||
        !type_named(c, seq, ready ? "collections.deque" : "list"))
        return;
    uint64_t *items;
    long n = sequence_items(c, seq, ready ? HOLD_DEQUE : HOLD_LIST, &items, HOLDER_MAX_HANDLES);
    if (n < 0)
        s->partial = true;      /* more than the bound, or unreadable */
    struct timespec now;
    bool clock = target_can(c->r.t, TARGET_CAN_CLOCK) && clock_gettime(CLOCK_MONOTONIC, &now) == 0;
    for (long i = 0; i < n; i++) {
        uint64_t handle = items[i], value, fut = 0;
        if (!is_handle(c, handle, ready) ||
            slot_get(c, handle, "_callback", &cb_offset, &cb_type, &cb) != 0)
            continue;
        int refs = 0;
        uint64_t self = 0;
        /* builtin_method (METH_METHOD, Future's own from 3.9) derives from it */
        if (py_type_is_or_inherits(&c->r, cb, "builtin_function_or_method"))
            self = u64_at(c, cb + (uint64_t)c->L->cfunction_self);
        else if (type_named(c, cb, "method"))
            self = u64_at(c, cb + (uint64_t)c->L->method_self);
        if (addrset_has(&s->futs, self)) {
            fut = self;
            refs++;
        }
        int64_t n_args = 0;
        if (slot_get(c, handle, "_args", &args_offset, &args_type, &args) == 0 &&
            type_named(c, args, "tuple") && addrset_add(&s->visited, args) &&
            target_read_u64(c->r.t, args + (uint64_t)c->L->ob_size, (uint64_t *)&n_args) == 0 &&
            n_args >= 0 && n_args <= 64)
            for (int64_t a = 0; a < n_args; a++) {
                uint64_t arg = u64_at(c, args + (uint64_t)c->L->tuple_items + 8 * (uint64_t)a);
                hold_task(s, arg);
                if (addrset_has(&s->futs, arg) && (!fut || arg == fut)) {
                    fut = arg;
                    refs++;
                }
            }
        if (!refs)
            continue;
        char name[128] = "?", due[64] = ", ready to run", text[256];
        callback_name(c, cb, name, sizeof name);
        double when;
        if (!ready && slot_get(c, handle, "_when", &when_offset, &when_type, &value) == 0 &&
            py_number(&c->r, value, &when) == 0)
            snprintf(due, sizeof due, clock ? " in %.1f s" : " at %.3f s of the loop's clock",
                     clock ? when - ((double)now.tv_sec + (double)now.tv_nsec / 1e9) : when);
        else if (!ready)
            due[0] = '\0';
        snprintf(text, sizeof text, "scheduled callback %s%s", name, due);
        for (int k = 0; k < refs; k++)
            credit(s, fut, NULL, k == 0 ? text : "");
    }
    free(items);
}

/* A finished task the walk from the roots met (3.14+ keep them on no
 * list): into its loop's tasks, as the registries' would have been. */
static void add_done_task(struct tctx *c, struct report_tasks *tasks, uint64_t task)
{
    enum task_kind kind = task_kind(c, task);
    int32_t state = fut_state(c, task, kind);
    if (state == 1 || state == 2)
        report_task_add(c, tasks, task, kind, state, fut_loop(c, task, kind), NULL, 0);
}

/* For each task awaiting a plain Future someone else holds: who, and when
 * the reference count says more than were found (and the task's own share
 * is known), how many are unaccounted for. */
static void future_holders(struct tctx *c, struct report_tasks *tasks,
                           const struct stack_report *report)
{
    struct hold_scan s = {.c = c, .find_done = tasks->done_seen == TASKS_DONE_REACHABLE};
    size_t shown = 0;
    for (size_t l = 0; l < tasks->n_loops; l++) {
        shown += tasks->loops[l].n_tasks;
        s.partial = s.partial || tasks->loops[l].n_hidden;   /* unread frames */
    }
    s.cand = calloc(shown ? shown : 1, sizeof *s.cand);
    if (!s.cand || addrset_init(&s.futs, shown) != 0 ||
        addrset_init(&s.visited, HOLDER_MAX_OBJECTS + HOLDER_MAX_HANDLES) != 0 ||
        addrset_init(&s.known, 2 * shown + 2 * HOLDER_MAX_DONE) != 0)
        goto done;
    for (size_t l = 0; l < tasks->n_loops; l++)
        for (size_t i = 0; i < tasks->loops[l].n_tasks; i++)
            addrset_add(&s.known, tasks->loops[l].tasks[i].addr);
    for (size_t l = 0; l < tasks->n_loops; l++)
        for (size_t i = 0; i < tasks->loops[l].n_tasks; i++) {
            struct report_task *t = &tasks->loops[l].tasks[i];
            /* a plain Future (C or pure-Python) awaited directly: not a
             * sleep's, whose timer holds it */
            if (!t->awaits_addr || t->orphan || t->wait_obj != t->awaits_addr ||
                strcmp(t->awaits, t->wait_obj_type) != 0 || t->state[0] != 'p')
                continue;
            s.cand[s.n++] = (struct hold_cand){.t = t, .fut = t->awaits_addr};
            addrset_add(&s.futs, t->awaits_addr);
        }
    if (!s.n && !s.find_done)
        goto done;
    qsort(s.cand, s.n, sizeof *s.cand, cand_cmp);
    for (size_t i = 0; i < s.n; i++) {
        if (!(s.cand[i].text = calloc(1, HOLDER_TEXT_MAX)))
            goto done;
        s.cand[i].h = (struct holders){.out = s.cand[i].text, .room = HOLDER_TEXT_MAX};
    }
    for (size_t l = 0; l < tasks->n_loops; l++) {
        hold_handles(&s, tasks->loops[l].addr, false);
        hold_handles(&s, tasks->loops[l].addr, true);
    }
    if (tasks->main_dict)
        py_dict_items(&c->r, tasks->main_dict, HOLDER_MAX_ITEMS, hold_global, &s);
    /* Tasks that wait on no such Future first: a holder reached from
     * several roots is named after the first. */
    hold_tasks(&s, tasks, false);
    hold_threads(&s, report);
    hold_tasks(&s, tasks, true);
    c->frame_read = 0;
    for (size_t i = 0; i < s.n; i++) {
        struct hold_cand *k = &s.cand[i];
        int64_t refs = (int64_t)u64_at(c, k->fut);
        int64_t left = refs - k->t->own_refs - k->h.found;
        /* Frames or objects left unread may hold the rest: then no count. */
        if (k->t->own_refs > 0 && refs > 0 && refs < (1 << 30) && left > 0 &&
            k->h.room > 2 && !s.partial)
            snprintf(k->h.out, k->h.room, "%s%lld reference%s unaccounted for",
                     k->h.named ? "; " : "", (long long)left, left == 1 ? "" : "s");
        if (k->text[0]) {
            char *fit = realloc(k->text, strlen(k->text) + 1);
            k->t->held_by = fit ? fit : k->text;
            k->text = NULL;
        }
    }
    tasks->done_partial = s.partial;
    for (size_t i = 0; i < s.n_done; i++)
        add_done_task(c, tasks, s.done[i]);
done:
    for (size_t i = 0; s.cand && i < s.n; i++)
        free(s.cand[i].text);
    free(s.cand);
    addrset_free(&s.futs);
    addrset_free(&s.visited);
    addrset_free(&s.known);
}

void asyncio_loop_steps_read(struct py_runtime *rt, struct report_tasks *tasks,
                             const struct stack_report *report, double stacks_at)
{
    if (!tasks)
        return;
    struct tctx c;
    if (tctx_init(&c, rt, tasks)) {
        for (size_t l = 0; l < tasks->n_loops; l++)
            for (size_t i = 0; tasks->loops[l].tid && i < report->n_threads; i++)
                if (report->threads[i].tid == tasks->loops[l].tid)
                    loop_step(&c, &tasks->loops[l], &report->threads[i], stacks_at);
        /* Finished tasks found on the way may hold, in their exceptions'
         * tracebacks, the last references to what others wait on. */
        future_holders(&c, tasks, report);
        for (size_t l = 0; l < tasks->n_loops; l++)
            settle_orphans(&c, &tasks->loops[l]);
    }
    tctx_release(&c);
}

/* ---- who alone can end a wait (why) --------------------------------------- */

/* The tasks of a loop waiting on one object, and the references to it the
 * loop's other tasks' frames own. */
struct provided {
    uint64_t obj;
    int64_t own;                 /* the waiters' own references */
    int64_t others;              /* ... the other tasks' */
    const struct report_task *provider;   /* the first other task holding one */
    int n_providers;
    bool unknown;                /* one in a cell: shared, not only that task's */
};

struct provider_scan {
    struct provided *groups;     /* sorted by obj */
    size_t n;
    const struct report_task *task;   /* whose frames are being read */
};

static void credit_provider(void *ctx, uint64_t obj, bool in_cell)
{
    struct provider_scan *ps = ctx;
    size_t lo = first_at_least(ps->groups, ps->n, sizeof *ps->groups,
                               offsetof(struct provided, obj), obj);
    if (lo == ps->n || ps->groups[lo].obj != obj || ps->task->wait_obj == obj)
        return;              /* not waited on, or a waiter's own (counted) */
    struct provided *g = &ps->groups[lo];
    g->unknown = g->unknown || in_cell;
    g->others++;
    if (!g->provider)
        g->provider = ps->task;
    if (g->provider != ps->task)
        g->n_providers = 2;
    else if (!g->n_providers)
        g->n_providers = 1;
}

/* For each wait of the loop on an object that the waiters and exactly one
 * other task of the loop refer to, and nothing else (the reference count
 * says all are accounted for), that task: it alone can end the wait. */
static void loop_providers(struct tctx *c, struct report_loop *loop)
{
    size_t n = 0;
    struct report_task **w = malloc((loop->n_tasks ? loop->n_tasks : 1) * sizeof *w);
    struct provided *groups = calloc(loop->n_tasks ? loop->n_tasks : 1, sizeof *groups);
    struct dead_frames *dead = malloc(sizeof *dead);
    if (!w || !groups || !dead)
        goto done;
    dead_frames_read(c, loop, dead);
    for (size_t i = 0; i < loop->n_tasks; i++) {
        struct report_task *t = &loop->tasks[i];
        if (t->wait_obj && t->own_refs >= 0 && !t->orphan && !t->timed && !t->running)
            w[n++] = t;
    }
    qsort(w, n, sizeof *w, by_wait_obj);
    struct provider_scan ps = {.groups = groups};
    for (size_t i = 0; i < n; i++) {
        if (ps.n && groups[ps.n - 1].obj == w[i]->wait_obj) {
            groups[ps.n - 1].own += w[i]->own_refs;
            continue;
        }
        groups[ps.n++] = (struct provided){.obj = w[i]->wait_obj, .own = w[i]->own_refs};
    }
    /* A running task's frames move under the read: it provides nothing. */
    for (size_t i = 0; ps.n && i < loop->n_tasks; i++) {
        ps.task = &loop->tasks[i];
        for (size_t k = 0; !ps.task->running && k < ps.task->n_chain; k++)
            frame_owned(c, &ps.task->chain[k], credit_provider, &ps);
    }
    for (size_t i = 0, g = 0; i < n; i++) {
        while (groups[g].obj != w[i]->wait_obj)
            g++;
        int64_t refs = refcount(c, groups[g].obj), known = groups[g].own + groups[g].others;
        int64_t dead_n = refs > known && dead->n ? dead_refs(c, dead, groups[g].obj) : 0;
        if (!groups[g].unknown && groups[g].n_providers == 1 && dead_n >= 0 &&
            refs == known + dead_n)
            w[i]->provider = groups[g].provider->addr;
    }
done:
    free(w);
    free(groups);
    free(dead);
}

void asyncio_wait_providers(struct py_runtime *rt, struct report_tasks *tasks)
{
    if (!tasks)
        return;
    struct tctx c;
    if (tctx_init(&c, rt, tasks))
        for (size_t l = 0; l < tasks->n_loops; l++)
            loop_providers(&c, &tasks->loops[l]);
    tctx_release(&c);
}

/* ---- for why: what a loop's thread will touch ----------------------------- */

/* What a callback acts on when it runs: the object a method is bound to
 * (a C method's self), the contents of a function's closure cells. */
static size_t callback_objects(struct tctx *c, uint64_t cb, uint64_t *out, size_t max)
{
    const struct py_asyncio_layout *A = c->A;
    const char *name;
    size_t n = 0;
    if (max == 0 || py_type_of(&c->r, cb, NULL, &name) != 0)
        return 0;
    if (!strcmp(name, "method") && A->method_self != PY_OFF_NONE)
        out[n++] = u64_at(c, cb + (uint64_t)A->method_self);
    else if (py_type_is_or_inherits(&c->r, cb, "builtin_function_or_method") &&
             A->cfunction_self != PY_OFF_NONE)
        out[n++] = u64_at(c, cb + (uint64_t)A->cfunction_self);
    else if (!strcmp(name, "function") && A->func_closure != PY_OFF_NONE) {
        uint64_t closure = u64_at(c, cb + (uint64_t)A->func_closure);
        int64_t cells = type_named(c, closure, "tuple")
                            ? (int64_t)u64_at(c, closure + (uint64_t)c->L->ob_size) : 0;
        for (int64_t i = 0; i < cells && i < 16 && n < max; i++) {
            uint64_t cell = u64_at(c, closure + (uint64_t)c->L->tuple_items + 8 * (uint64_t)i);
            if (type_named(c, cell, "cell"))
                out[n++] = u64_at(c, cell + (uint64_t)c->L->cell_ref);
        }
    }
    return n;
}

size_t asyncio_loop_handle_objects(struct py_runtime *rt, uint64_t loop, uint64_t *out,
                                   size_t max)
{
    struct tctx c;
    size_t n = 0;
    int64_t cb_offset = 0, args_offset = 0, cancelled_offset = 0;
    uint64_t cb_type = 0, args_type = 0, cancelled_type = 0;
    bool ok = tctx_init(&c, rt, NULL);
    for (int ready = 1; ok && ready >= 0; ready--) {
        uint64_t seq, *items = NULL;
        if (py_attr_get(&c.r, loop, ready ? "_ready" : "_scheduled", &seq) != 0 ||
            !type_named(&c, seq, ready ? "collections.deque" : "list"))
            continue;
        long k = sequence_items(&c, seq, ready ? HOLD_DEQUE : HOLD_LIST, &items, LOOP_READY_MAX);
        for (long i = 0; i < k && n < max; i++) {
            uint64_t cb, args, cancelled;
            int64_t off = 0, n_args = 0;
            if (!is_handle(&c, items[i], ready) ||
                (slot_get(&c, items[i], "_cancelled", &cancelled_offset, &cancelled_type,
                          &cancelled) == 0 &&
                 py_int(&c.r, cancelled, &off) == 0 && off))
                continue;
            if (slot_get(&c, items[i], "_callback", &cb_offset, &cb_type, &cb) == 0)
                n += callback_objects(&c, cb, out + n, max - n);
            if (slot_get(&c, items[i], "_args", &args_offset, &args_type, &args) == 0 &&
                type_named(&c, args, "tuple") &&
                target_read_u64(c.r.t, args + (uint64_t)c.L->ob_size, (uint64_t *)&n_args) == 0)
                for (int64_t a = 0; a < n_args && a < 16 && n < max; a++)
                    out[n++] = u64_at(&c, args + (uint64_t)c.L->tuple_items + 8 * (uint64_t)a);
        }
        free(items);
    }
    tctx_release(&c);
    return n;
}

/* ---- for samplers: the running task and the tasks awaiting it ------------- */


struct asyncio_sampler {
    struct tctx c;
    uint64_t interp, current_dict;   /* asyncio.tasks._current_tasks (<=3.13) */
    unsigned lookups;                /* since current_dict was last looked for */
};

struct asyncio_sampler *asyncio_sampler_new(struct py_runtime *rt)
{
    struct asyncio_sampler *as = calloc(1, sizeof *as);
    if (!as)
        return NULL;
    asyncio_offsets_check(rt);
    py_reader_init(&as->c.r, rt);
    as->c.L = as->c.r.L;
    as->c.A = &as->c.r.L->asyncio;
    as->c.codes = calloc(1, sizeof *as->c.codes);
    as->c.max_found = ASYNCIO_SAMPLED_TASKS;
    if (!as->c.codes || addrset_init(&as->c.seen, 2 * ASYNCIO_SAMPLED_TASKS) != 0 ||
        as->c.A->task_coro == PY_OFF_NONE || as->c.A->task_coro == 0) {
        asyncio_sampler_free(as);
        return NULL;
    }
    return as;
}

void asyncio_sampler_free(struct asyncio_sampler *as)
{
    if (!as)
        return;
    addrset_free(&as->c.seen);
    free(as->c.found);
    if (as->c.codes) {
        py_code_cache_clear(as->c.codes);
        free(as->c.codes);
    }
    free(as);
}

void asyncio_sampler_flush(struct asyncio_sampler *as)
{
    py_code_cache_clear(as->c.codes);
    py_reader_init(&as->c.r, as->c.r.rt);
    memset(as->c.types, 0, sizeof as->c.types);
}

uint64_t asyncio_running_task(struct asyncio_sampler *as, uint64_t interp, uint64_t tstate)
{
    struct tctx *c = &as->c;
    if (c->r.rt->asyncio_mismatch)
        return 0;          /* the Task's fields are not where the tables say */
    if (c->A->tstate_running_task != PY_OFF_NONE)
        return u64_at(c, tstate + (uint64_t)c->A->tstate_running_task);
    uint64_t loop = running_loop_of(c, tstate);
    if (!loop)
        return 0;
    /* The registry is found once asyncio is imported; until then, and
     * after a failed look, it is looked for again now and then. */
    if (interp != as->interp || (!as->current_dict && as->lookups++ % 64 == 0)) {
        uint64_t dict = module_dict(c, interp, "asyncio.tasks"), current = 0;
        if (dict && py_dict_get_str(&c->r, dict, "_current_tasks", &current) == 0)
            as->current_dict = current;
        if (dict)
            py_task_classes(c, interp, dict);
        asyncio_offsets_check(c->r.rt);
        as->interp = interp;
    }
    if (!as->current_dict)
        return 0;
    struct current_ctx cur = {.loop = loop};
    if (py_dict_items(&c->r, as->current_dict, 1024, match_current, &cur) < 0)
        return 0;
    return cur.task && is_task(c, cur.task) ? cur.task : 0;
}

uint64_t asyncio_task_frame(struct asyncio_sampler *as, uint64_t task)
{
    struct tctx *c = &as->c;
    uint64_t coro = task_coro(c, task, task_kind(c, task));
    if (!coro || !gen_kind(c, coro))
        return 0;
    if (c->L->frames == PY_FRAMES_OBJECTS)
        return u64_at(c, coro + (uint64_t)c->L->gen_frame);
    return coro + (uint64_t)c->L->gen_iframe;
}

static uint64_t awaiter_of(struct tctx *c, uint64_t fut, int depth);

/* The task a done callback wakes or reports to: a waiter's wake-up, a
 * TaskGroup's _on_task_done (its parent task), or gather's _done_callback,
 * whose gathering future is awaited in turn. */
static uint64_t callback_task(struct tctx *c, uint64_t cb, int depth)
{
    const struct py_asyncio_layout *A = c->A;
    const char *name;
    if (py_type_of(&c->r, cb, NULL, &name) != 0)
        return 0;
    if (!strcmp(name, "TaskWakeupMethWrapper") && A->wakeup_task != PY_OFF_NONE) {
        uint64_t task = u64_at(c, cb + (uint64_t)A->wakeup_task);
        return is_task(c, task) ? task : 0;
    }
    if (!strcmp(name, "builtin_function_or_method")) {
        uint64_t task = u64_at(c, cb + (uint64_t)A->cfunction_self);
        return is_task(c, task) ? task : 0;
    }
    if (!strcmp(name, "method")) {
        uint64_t self = u64_at(c, cb + (uint64_t)A->method_self), parent;
        if (type_named(c, self, "TaskGroup") && py_attr_get(&c->r, self, "_parent_task", &parent) == 0)
            return is_task(c, parent) ? parent : 0;
        /* a pure-Python task's wake-up: its own __wakeup */
        return is_task(c, self) ? self : 0;
    }
    if (!strcmp(name, "function") && A->func_closure != PY_OFF_NONE) {
        uint64_t closure = u64_at(c, cb + (uint64_t)A->func_closure);
        if (!type_named(c, closure, "tuple"))
            return 0;
        int64_t n = (int64_t)u64_at(c, closure + (uint64_t)c->L->ob_size);
        for (int64_t i = 0; i < n && i < 16; i++) {
            uint64_t cell = u64_at(c, closure + (uint64_t)c->L->tuple_items + 8 * (uint64_t)i);
            uint64_t v = type_named(c, cell, "cell") ? u64_at(c, cell + (uint64_t)c->L->cell_ref) : 0;
            if (type_named(c, v, "_GatheringFuture"))
                return awaiter_of(c, v, depth + 1);
        }
    }
    return 0;
}

/* Who awaits fut, read from its done callbacks (the one place every
 * version keeps it); 0 when no task does. */
static uint64_t awaiter_of(struct tctx *c, uint64_t fut, int depth)
{
    if (depth > 8)
        return 0;
    uint64_t cb0, list, task;
    fut_callbacks(c, fut, future_kind(c, fut), &cb0, &list);
    if (cb0 && (task = callback_task(c, cb0, depth)))
        return task;
    if (!type_named(c, list, "list"))
        return 0;
    int64_t n = (int64_t)u64_at(c, list + (uint64_t)c->L->ob_size);
    uint64_t items = u64_at(c, list + (uint64_t)c->L->list_items);
    for (int64_t i = 0; items && i < n && i < 64; i++) {
        uint64_t pair = u64_at(c, items + 8 * (uint64_t)i);
        if (!type_named(c, pair, "tuple"))
            continue;
        uint64_t cb = u64_at(c, pair + (uint64_t)c->L->tuple_items);
        if ((task = callback_task(c, cb, depth)))
            return task;
    }
    return 0;
}

uint64_t asyncio_task_awaiter(struct asyncio_sampler *as, uint64_t task)
{
    return awaiter_of(&as->c, task, 0);
}

int asyncio_task_describe(struct asyncio_sampler *as, uint64_t task, struct report_task *out)
{
    struct tctx *c = &as->c;
    memset(out, 0, sizeof *out);
    if (!is_task(c, task))
        return -1;
    out->addr = task;
    task_name(c, task, out->name, sizeof out->name);
    uint64_t innermost = 0;
    read_chain(c, task_coro(c, task, task_kind(c, task)), out, &innermost);
    return 0;
}

void asyncio_task_name(struct asyncio_sampler *as, uint64_t task, char *out, size_t size)
{
    task_name(&as->c, task, out, size);
}

void asyncio_task_clear(struct report_task *t)
{
    for (size_t k = 0; k < t->n_chain; k++) {
        free(t->chain[k].function);
        free(t->chain[k].file);
    }
    free(t->chain);
    free(t->children);
    memset(t, 0, sizeof *t);
}

size_t asyncio_waiting_tasks(struct asyncio_sampler *as, uint64_t interp, uint64_t tstate,
                             uint64_t *out, size_t max)
{
    struct tctx *c = &as->c;
    uint64_t loop = running_loop_of(c, tstate);
    if (!loop)
        return 0;
    uint64_t running = asyncio_running_task(as, interp, tstate);
    addrset_clear(&c->seen);
    c->n_found = 0;
    c->truncated = false;
    if (c->A->tstate_tasks_head != PY_OFF_NONE) {
        /* 3.14+: a task is on the list of the thread that made it, which
         * for a loop's tasks is nearly always the loop's own thread. */
        add_list_members(c, tstate + (uint64_t)c->A->tstate_tasks_head);
    } else {
        uint64_t dict = module_dict(c, interp, "asyncio.tasks"), reg, data;
        if (!dict)
            return 0;
        if ((py_dict_get_str(&c->r, dict, "_all_tasks", &reg) == 0 ||
             py_dict_get_str(&c->r, dict, "_scheduled_tasks", &reg) == 0) &&
            py_attr_get(&c->r, reg, "data", &data) == 0)
            add_set_members(c, data, true);
        if (py_dict_get_str(&c->r, dict, "_eager_tasks", &reg) == 0)
            add_set_members(c, reg, false);
    }
    /* Of this loop's pending tasks, those no other task waits on to finish
     * (a task awaiting tasks is shown above each of them, not alone). */
    size_t n = 0;
    for (size_t i = 0; i < c->n_found; i++) {
        if (c->found[i].loop != loop || c->found[i].state != 0)
            continue;
        c->found[n++].addr = c->found[i].addr;
    }
    addrset_clear(&c->seen);
    for (size_t i = 0; i < n; i++) {
        uint64_t waiter = awaiter_of(c, c->found[i].addr, 0);
        if (waiter)
            addrset_add(&c->seen, waiter);
    }
    /* Adding a task that is some task's waiter finds it there already. */
    size_t kept = 0;
    for (size_t i = 0; i < n && kept < max; i++)
        if (addrset_add(&c->seen, c->found[i].addr) && c->found[i].addr != running)
            out[kept++] = c->found[i].addr;
    return kept;
}
