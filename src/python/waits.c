/* Wait analysis. A thread idle in futex is matched to a lock object found in
 * its frames (locals, their attributes, globals, the value stack) whose
 * sleeping address equals the futex's; the threading/queue frames above the
 * wait then say which primitive it is (Condition, Event, Queue, ...). Other
 * syscalls are explained from their arguments and /proc. Every read can
 * fail: a wait that cannot be tied to an object is reported as such. */
#include "python/waits.h"
#include "diagnosis/waits.h"
#include "python/object_repr.h"
#include "target/sched_clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "python/asyncio_tasks.h"
#include "python/code.h"
#include "python/frame_vars.h"
#include "python/primitives.h"
#include "target/process.h"
#include "target/pipe_peers.h"
#include "target/procnet.h"
#include "target/syscalls.h"
#include "util/text.h"

/* How far the searches look, to stay bounded on deep or odd stacks. */
#define LOCK_SEARCH_FRAMES 12
#define REFERENCE_SEARCH_FRAMES 12
#define HELD_SEARCH_FRAMES 64
#define REACH_SEARCH_FRAMES 64
#define ATTRS_PER_OBJECT 64
#define GLOBALS_PER_DICT 4096
#define MAX_HELD DIAGNOSIS_MAX_HELD
#define REACH_GLOBALS_PER_THREAD 32
#define REACH_CONTAINER_ITEMS 256
#define REACH_SET_MAX (1u << 20)
/* Objects taken from one loop's handles, each with its attributes. */
#define LOOP_HANDLE_OBJECTS 256

struct held_locks {
    uint64_t locks[MAX_HELD];
    int frame[MAX_HELD];       /* frame index holding it */
    int count;
    bool done;
};

/* A sorted set of object addresses. */
struct obj_set {
    uint64_t *items;
    size_t count, capacity;
};

/* What one thread's frames can reach, and the globals dicts they use. */
struct thread_reach {
    bool done;
    struct obj_set objects;
    uint64_t globals[REACH_GLOBALS_PER_THREAD];
    int n_globals;
};

struct globals_reach {
    uint64_t dict;
    struct obj_set objects;
};

struct waits_ctx {
    struct py_runtime *rt;
    struct py_reader reader;
    struct py_code_cache codes;
    struct py_vars_cache vars_cache;
    struct py_frame_vars vars;        /* scratch, large */
    struct procnet_table net;
    struct held_locks *held;          /* per thread, computed on demand */
    size_t n_held;
    struct thread_reach *reach;       /* per thread, computed on demand */
    size_t n_reach;
    const struct stacks_raw *raw;     /* what the last waits_analyze was given */
    const struct stack_report *report;   /* ... and its report (asyncio loops) */
    struct globals_reach *globals;    /* per module globals dict */
    int n_globals, cap_globals;
};

struct waits_ctx *waits_new(struct py_runtime *rt)
{
    struct waits_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->rt = rt;
    py_reader_init(&c->reader, rt);
    return c;
}

static void reach_free(struct waits_ctx *c)
{
    for (size_t i = 0; c->reach && i < c->n_reach; i++)
        free(c->reach[i].objects.items);
    free(c->reach);
    for (int k = 0; k < c->n_globals; k++)
        free(c->globals[k].objects.items);
    free(c->globals);
    c->reach = NULL;
    c->globals = NULL;
    c->n_reach = 0;
    c->n_globals = c->cap_globals = 0;
}

void waits_free(struct waits_ctx *c)
{
    if (!c)
        return;
    py_code_cache_clear(&c->codes);
    py_vars_cache_clear(&c->vars_cache);
    procnet_table_free(&c->net);
    free(c->held);
    reach_free(c);
    free(c);
}

/* ------------------------------------------------------------------------ */
/* Walking the objects a frame can see */

/* Where an object was found, turned into text only on a match. */
struct found_path {
    const char *local;       /* variable name, NULL for a value-stack slot */
    uint64_t attr[2];        /* str objects of attribute names, 0 when unused */
    uint64_t global_key;     /* str object when found among the globals */
    uint64_t holder;         /* the local's object when found as its attribute, else 0 */
};

typedef bool (*object_test)(struct waits_ctx *c, uint64_t obj, void *arg);

struct attr_scan {
    struct waits_ctx *c;
    object_test test;
    void *arg;
    uint64_t found_key, found_value;
    uint64_t self_attrs[ATTRS_PER_OBJECT]; /* kept to look one level deeper */
    uint64_t self_keys[ATTRS_PER_OBJECT];
    int n_self;
    bool keep;
};

static int attr_visit(void *vctx, uint64_t key, uint64_t value)
{
    struct attr_scan *s = vctx;
    if (s->test(s->c, value, s->arg)) {
        s->found_key = key;
        s->found_value = value;
        return 1;
    }
    if (s->keep && s->n_self < ATTRS_PER_OBJECT) {
        s->self_keys[s->n_self] = key;
        s->self_attrs[s->n_self++] = value;
    }
    return 0;
}

/* Values that never have instance attributes worth a look. */
static bool plain_value(struct py_reader *r, uint64_t obj)
{
    static const char *const plain[] = {"str", "int", "float", "bool", "NoneType", "bytes", "tuple",
                                        "list", "dict", "set", "frozenset", "function", "code",
                                        "module", "type", "builtin_function_or_method", "method",
                                        "cell", "frame", "method_descriptor", "range", "slice"};
    const char *name;
    if (py_type_of(r, obj, NULL, &name) != 0)
        return true;
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (strcmp(name, plain[i]) == 0)
            return true;
    return false;
}

/* Searches what the frame in c->vars can see, named things first: named
 * slots, attributes of named slots, attributes of self's attributes,
 * globals, then value-stack slots. Returns the matching object or 0. */
static uint64_t search_frame(struct waits_ctx *c, object_test test, void *arg, bool with_globals,
                             bool with_stack, struct found_path *path)
{
    const struct py_frame_vars *v = &c->vars;
    struct py_reader *r = &c->reader;
    memset(path, 0, sizeof *path);
    for (int i = 0; i < v->n_named; i++) {
        if (v->values[i] && test(c, v->values[i], arg)) {
            path->local = py_frame_var_name(v, i);
            return v->values[i];
        }
    }
    struct attr_scan scan;
    for (int i = 0; i < v->n_named; i++) {
        uint64_t value = v->values[i];
        bool duplicate = false;
        for (int j = 0; j < i && !duplicate; j++)
            duplicate = v->values[j] == value;
        if (!value || duplicate || plain_value(r, value))
            continue;
        const char *name = py_frame_var_name(v, i);
        memset(&scan, 0, sizeof scan);
        scan.c = c;
        scan.test = test;
        scan.arg = arg;
        scan.keep = name && strcmp(name, "self") == 0;
        py_attr_items(r, value, ATTRS_PER_OBJECT, attr_visit, &scan);
        if (scan.found_value) {
            path->local = name;
            path->attr[0] = scan.found_key;
            path->holder = value;
            return scan.found_value;
        }
        if (!scan.keep)
            continue;
        int n_self = scan.n_self;
        uint64_t keys[ATTRS_PER_OBJECT], attrs[ATTRS_PER_OBJECT];
        memcpy(keys, scan.self_keys, sizeof keys);
        memcpy(attrs, scan.self_attrs, sizeof attrs);
        for (int k = 0; k < n_self; k++) {
            if (plain_value(r, attrs[k]))
                continue;
            memset(&scan, 0, sizeof scan);
            scan.c = c;
            scan.test = test;
            scan.arg = arg;
            py_attr_items(r, attrs[k], ATTRS_PER_OBJECT, attr_visit, &scan);
            if (scan.found_value) {
                path->local = name;
                path->attr[0] = keys[k];
                path->attr[1] = scan.found_key;
                path->holder = value;
                return scan.found_value;
            }
        }
    }
    if (with_globals && v->globals) {
        memset(&scan, 0, sizeof scan);
        scan.c = c;
        scan.test = test;
        scan.arg = arg;
        py_dict_items(r, v->globals, GLOBALS_PER_DICT, attr_visit, &scan);
        if (scan.found_value) {
            path->global_key = scan.found_key;
            return scan.found_value;
        }
    }
    /* Last, unnamed values: the arguments of a call in progress. */
    for (int i = 0; with_stack && i < v->n_stack; i++) {
        uint64_t value = v->values[v->n_named + i];
        if (value && test(c, value, arg))
            return value;
    }
    return 0;
}

static void path_text(struct waits_ctx *c, const struct found_path *path, char *out, size_t outsize)
{
    char part[PY_VAR_NAME_MAX];
    out[0] = '\0';
    if (path->global_key) {
        if (py_str(&c->reader, path->global_key, out, outsize) != 0)
            snprintf(out, outsize, "?");
        return;
    }
    if (!path->local)
        return;
    snprintf(out, outsize, "%s", path->local);
    for (int i = 0; i < 2 && path->attr[i]; i++) {
        if (py_str(&c->reader, path->attr[i], part, sizeof part) != 0)
            snprintf(part, sizeof part, "?");
        size_t len = strlen(out);
        snprintf(out + len, outsize - len, ".%s", part);
    }
}

static bool read_frame_vars(struct waits_ctx *c, const struct py_frame *f)
{
    return py_frame_vars_read(&c->vars_cache, &c->reader, f->frame_addr, f->code_addr, &c->vars) == 0;
}

/* ------------------------------------------------------------------------ */
/* Locks and the primitives built on them */

/* A lock, or a C SimpleQueue, whose sleeping address is the futex's. */
static bool matches_futex(struct waits_ctx *c, uint64_t obj, void *arg)
{
    const struct py_futex_wait *wait = arg;
    const char *name;
    if (py_type_of(&c->reader, obj, NULL, &name) != 0)
        return false;
    if (strcmp(name, "_queue.SimpleQueue") == 0)
        return py_simple_queue_matches_wait(&c->reader, obj, wait);
    if (strcmp(name, "_thread.lock") != 0 && strcmp(name, "_thread.RLock") != 0)
        return false;
    struct py_lock lock;
    return py_lock_read(&c->reader, obj, &lock) == 0 && py_lock_matches_wait(&lock, wait);
}

static bool is_object(struct waits_ctx *c, uint64_t obj, void *arg)
{
    (void)c;
    return obj == *(const uint64_t *)arg;
}

static const char *path_suffix_library[] = {"/threading.py", "/queue.py", "/concurrent/futures/_base.py"};

static bool ends_with(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lf = strlen(suffix);
    return ls >= lf && strcmp(s + ls - lf, suffix) == 0;
}

/* A frame of the standard library's blocking calls: the methods of
 * threading, queue and concurrent.futures objects that wait. Thread.run
 * and the like are not: a C callable they run may be what blocks. */
static bool library_frame(const struct py_code *code)
{
    static const char *const waiting[] = {"wait", "wait_for", "acquire", "__enter__", "get", "put",
                                          "join", "_wait_for_tstate_lock", "result", "exception",
                                          "_wait", "_enter", "_acquire_restore"};
    bool library = false;
    for (size_t i = 0; i < sizeof path_suffix_library / sizeof path_suffix_library[0]; i++)
        library |= ends_with(code->filename, path_suffix_library[i]);
    if (!library)
        return false;
    for (size_t i = 0; i < sizeof waiting / sizeof waiting[0]; i++)
        if (strcmp(code->name, waiting[i]) == 0)
            return true;
    return false;
}

static void type_name_of(struct waits_ctx *c, uint64_t obj, char *out, size_t outsize)
{
    const char *name;
    if (py_type_of(&c->reader, obj, NULL, &name) != 0) {
        snprintf(out, outsize, "?");
        return;
    }
    /* Show the class name users know: "Lock", not "_thread.lock". */
    if (strcmp(name, "_thread.lock") == 0)
        name = "Lock";
    else if (strcmp(name, "_thread.RLock") == 0)
        name = "RLock";
    snprintf(out, outsize, "%s", name);
}

/* The state behind a wait: the plain attributes (numbers, booleans, None,
 * short strings) of the object whose attribute the waited-on object is,
 * e.g. "RWLock: _readers=1, _writer=False". */
struct owner_scan {
    struct waits_ctx *c;
    struct report_wait *w;
};

static int owner_attr_visit(void *vctx, uint64_t key, uint64_t value)
{
    static const char *const scalars[] = {"int", "bool", "NoneType", "float", "str"};
    struct owner_scan *s = vctx;
    struct report_wait *w = s->w;
    struct py_reader *r = &s->c->reader;
    char name[40];
    const char *type;
    if (w->n_owner_attrs >= WAIT_MAX_OWNER_ATTRS)
        return 1;
    if (py_str(r, key, name, sizeof name) != 0 || strncmp(name, "__", 2) == 0 ||
        py_type_of(r, value, NULL, &type) != 0)
        return 0;
    bool scalar = false;
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0] && !scalar; i++)
        scalar = strcmp(type, scalars[i]) == 0;
    if (!scalar)
        return 0;
    const struct repr_limits limits = {1, 1, 24};
    char repr[sizeof w->owner_attr_reprs[0]];
    if (py_object_repr(r, value, &limits, repr, sizeof repr) != 0)
        return 0;
    text_copy(w->owner_attr_names[w->n_owner_attrs], sizeof w->owner_attr_names[0], name);
    text_copy(w->owner_attr_reprs[w->n_owner_attrs], sizeof w->owner_attr_reprs[0], repr);
    w->n_owner_attrs++;
    return 0;
}

static void owner_state(struct waits_ctx *c, uint64_t holder, struct report_wait *w)
{
    w->n_owner_attrs = 0;
    if (!holder)
        return;
    struct owner_scan scan = {c, w};
    if (py_attr_items(&c->reader, holder, ATTRS_PER_OBJECT, owner_attr_visit, &scan) < 0 ||
        !w->n_owner_attrs) {
        w->n_owner_attrs = 0;
        return;
    }
    w->owner_object = holder;
    type_name_of(c, holder, w->owner_type, sizeof w->owner_type);
}

/* importlib's per-module lock (_ModuleLock of importlib._bootstrap, all
 * versions): a thread importing a module another thread is importing sleeps
 * on its `wakeup` Lock, and the lock records its owner's ident in `owner`. */
static void module_lock_owner(struct waits_ctx *c, uint64_t holder, const char *reference,
                              struct report_wait *w)
{
    char type[48];
    uint64_t owner;
    int64_t ident;
    if (!holder || !ends_with(reference, ".wakeup"))
        return;
    type_name_of(c, holder, type, sizeof type);
    if (strcmp(type, "_ModuleLock") != 0 || py_attr_get(&c->reader, holder, "owner", &owner) != 0 ||
        py_int(&c->reader, owner, &ident) != 0 || ident == 0)
        return;
    w->owner_ident = (uint64_t)ident;
    w->owner_source = WAIT_OWNER_SOURCE_RECORDED;
}

/* The reference by which frames [from, from + span) name obj. */
static void name_reference(struct waits_ctx *c, const struct stacks_thread_raw *raw, size_t from,
                           uint64_t obj, char *out, size_t outsize, int *frame_index,
                           uint64_t *holder)
{
    out[0] = '\0';
    *frame_index = -1;
    *holder = 0;
    for (size_t k = from; k < raw->n_frames && k < from + REFERENCE_SEARCH_FRAMES; k++) {
        if (!read_frame_vars(c, &raw->frames[k]))
            continue;
        struct found_path path;
        if (search_frame(c, is_object, &obj, true, false, &path)) {
            path_text(c, &path, out, outsize);
            *frame_index = (int)k;
            *holder = path.holder;
            return;
        }
    }
}

static void read_timeout_local(struct waits_ctx *c, struct report_wait *w)
{
    uint64_t value;
    double seconds;
    if (py_frame_var_get(&c->vars, "timeout", &value) == 0 && !py_is_none(&c->reader, value) &&
        py_number(&c->reader, value, &seconds) == 0 && seconds >= 0)
        w->timeout_seconds = seconds;
}

static void analyze_futex(struct waits_ctx *c, const struct stacks_thread_raw *raw, struct report_wait *w)
{
    struct py_reader *r = &c->reader;
    const struct thread_activity *a = &raw->activity;
    struct py_futex_wait fw;
    py_futex_wait_read(r, a->syscall_args[0], &fw);
    w->kind = WAIT_FUTEX;
    /* futex(uaddr, op, val, timeout, ...): a NULL timeout waits forever. */
    w->timeout = a->syscall_args[3] ? WAIT_TIMEOUT_SET : WAIT_TIMEOUT_NONE;

    uint64_t lock = 0, lock_holder = 0, holder = 0;
    int lock_frame = -1;
    char lock_reference[160] = "";
    for (size_t k = 0; k < raw->n_frames && k < LOCK_SEARCH_FRAMES && !lock; k++) {
        if (!read_frame_vars(c, &raw->frames[k]))
            continue;
        struct found_path path;
        lock = search_frame(c, matches_futex, &fw, true, true, &path);
        if (lock) {
            lock_frame = (int)k;
            lock_holder = path.holder;
            path_text(c, &path, lock_reference, sizeof lock_reference);
        }
    }
    if (lock && py_is_type(r, lock, "_queue.SimpleQueue")) {
        /* SimpleQueue.get is a C method: no Python frame names it. */
        w->kind = WAIT_NOTIFY;
        w->object = lock;
        text_copy(w->object_type, sizeof w->object_type, "SimpleQueue");
        text_copy(w->operation, sizeof w->operation, "get");
        text_copy(w->reference, sizeof w->reference, lock_reference);
        w->reference_frame = lock_reference[0] ? lock_frame : -1;
        int64_t length;
        if (py_simple_queue_length(r, lock, &length) == 0)
            w->queue_length = length;
        return;
    }
    if (lock) {
        struct py_lock state;
        py_lock_read(r, lock, &state);
        w->lock = lock;
        w->lock_recursive = state.recursive;
        w->lock_locked = state.impl == PY_LOCK_UNKNOWN ? -1 : state.locked;
        if (state.recursive && state.locked) {
            w->owner_ident = state.owner;
            w->owner_source = WAIT_OWNER_SOURCE_RECORDED;
        }
    }

    /* The threading/queue frames directly above the wait say what the
     * program called: their outermost `self` is the primitive. */
    int top = -1;
    bool notify = false, join = false;
    for (size_t k = 0; k < raw->n_frames; k++) {
        const struct py_code *code = py_code_get(&c->codes, r, raw->frames[k].code_addr);
        if (!code || !library_frame(code))
            break;
        if (!read_frame_vars(c, &raw->frames[k]))
            break;
        uint64_t self, unused;
        if (py_frame_var_get(&c->vars, "self", &self) != 0)
            break;
        top = (int)k;
        if (strcmp(code->name, "wait") == 0 && py_frame_var_get(&c->vars, "waiter", &unused) == 0)
            notify = true;
        if (strcmp(code->name, "join") == 0 || strcmp(code->name, "_wait_for_tstate_lock") == 0) {
            if (py_attr_get(r, self, "_ident", &unused) == 0 &&
                py_attr_get(r, self, "_started", &unused) == 0)
                join = true;
        }
        read_timeout_local(c, w);
        w->object = self;
        type_name_of(c, self, w->object_type, sizeof w->object_type);
        text_copy(w->operation, sizeof w->operation, code->name);
    }
    if (top >= 0) {
        w->kind = join ? WAIT_JOIN : notify ? WAIT_NOTIFY : WAIT_LOCK;
        if (strcmp(w->operation, "__enter__") == 0)
            snprintf(w->operation, sizeof w->operation, "acquire");
        name_reference(c, raw, (size_t)top + 1, w->object, w->reference, sizeof w->reference,
                       &w->reference_frame, &holder);
    } else if (lock) {
        w->kind = WAIT_LOCK;
        w->object = lock;
        type_name_of(c, lock, w->object_type, sizeof w->object_type);
        snprintf(w->operation, sizeof w->operation, "acquire");
        text_copy(w->reference, sizeof w->reference, lock_reference);
        w->reference_frame = lock_reference[0] ? lock_frame : -1;
        holder = lock_holder;
        module_lock_owner(c, holder, lock_reference, w);
    }
    if (w->kind != WAIT_JOIN)
        owner_state(c, holder, w);
    if (w->kind == WAIT_JOIN) {
        uint64_t ident_obj;
        int64_t ident;
        if (py_attr_get(r, w->object, "_ident", &ident_obj) == 0 && py_int(r, ident_obj, &ident) == 0)
            w->join_ident = (uint64_t)ident;
    }
    if (w->kind == WAIT_NOTIFY) {
        uint64_t items;
        int64_t length;
        if (py_attr_get(r, w->object, "queue", &items) == 0 &&
            py_sequence_length(r, items, &length) == 0)
            w->queue_length = length;
    }
}

/* ------------------------------------------------------------------------ */
/* File descriptors, sockets, select */

/* The process whose /proc tells file descriptors and sockets; 0 for a
 * target without TARGET_CAN_PROC (a core: its notes keep none of them, and
 * its PID may belong to another process by now). */
static pid_t proc_pid(const struct waits_ctx *c)
{
    return target_can(c->rt->target, TARGET_CAN_PROC) ? c->rt->target->pid : 0;
}

static const struct procnet_socket *find_socket(struct waits_ctx *c, uint64_t inode)
{
    return proc_pid(c) ? procnet_table_lookup(&c->net, proc_pid(c), inode) : NULL;
}

static void describe_fd(struct waits_ctx *c, int fd, char *out, size_t outsize)
{
    char link[160];
    uint64_t inode;
    if (!proc_pid(c)) {
        snprintf(out, outsize, "not recorded in a core");
        return;
    }
    if (procnet_fd_link(proc_pid(c), fd, link, sizeof link) != 0) {
        snprintf(out, outsize, "closed or unreadable");
        return;
    }
    if (procnet_socket_inode(link, &inode) == 0) {
        const struct procnet_socket *s = find_socket(c, inode);
        if (s) {
            if (s->remote[0])
                text_format(out, outsize, "socket %s %s -> %s %s", procnet_kind_name(s->kind), s->local,
                         s->remote, s->state);
            else
                text_format(out, outsize, "socket %s %s %s", procnet_kind_name(s->kind),
                         s->local[0] ? s->local : "(unnamed)", s->state);
            return;
        }
    }
    text_copy(out, outsize, link);
}

static bool socket_with_fd(struct waits_ctx *c, uint64_t obj, void *arg)
{
    struct py_socket s;
    const char *name;
    /* Cheap rejections first: most values are not sockets. */
    if (py_type_of(&c->reader, obj, NULL, &name) != 0 || plain_value(&c->reader, obj))
        return false;
    return py_socket_read(&c->reader, obj, &s) == 0 && s.fd == *(const int *)arg;
}

/* Fills w->socket for fd; true when fd is a socket. */
static bool fill_socket(struct waits_ctx *c, const struct stacks_thread_raw *raw, int fd,
                        struct report_wait *w)
{
    char link[160];
    uint64_t inode;
    struct wait_socket *s = &w->socket;
    s->fd = fd;
    /* In a core only a Python socket object holding fd tells a socket. */
    bool live = proc_pid(c) != 0;
    if (live && (procnet_fd_link(proc_pid(c), fd, link, sizeof link) != 0 ||
                 procnet_socket_inode(link, &inode) != 0))
        return false;
    const struct procnet_socket *ps = live ? find_socket(c, inode) : NULL;
    if (ps) {
        s->found = true;
        text_copy(s->protocol, sizeof s->protocol, procnet_kind_name(ps->kind));
        text_copy(s->local, sizeof s->local, ps->local);
        text_copy(s->remote, sizeof s->remote, ps->remote);
        text_copy(s->state, sizeof s->state, ps->state);
        s->rx_queue = ps->rx_queue;
        s->accepted = procnet_accepted(&c->net, ps);
    }
    for (size_t k = 0; k < raw->n_frames && k < REFERENCE_SEARCH_FRAMES; k++) {
        if (!read_frame_vars(c, &raw->frames[k]))
            continue;
        struct found_path path;
        uint64_t obj = search_frame(c, socket_with_fd, &fd, false, true, &path);
        if (obj) {
            struct py_socket ps_obj;
            s->object = obj;
            path_text(c, &path, s->reference, sizeof s->reference);
            s->reference_frame = s->reference[0] ? (int)k : -1;
            if (py_socket_read(&c->reader, obj, &ps_obj) == 0) {
                w->timeout = ps_obj.timeout_ns < 0 ? WAIT_TIMEOUT_NONE : WAIT_TIMEOUT_SET;
                w->timeout_seconds = ps_obj.timeout_ns < 0 ? -1 : (double)ps_obj.timeout_ns / 1e9;
            }
            break;
        }
    }
    return live || s->object;
}

/* The fds a select/poll/epoll call watches; returns the count, -1 unknown. */
static int watched_fds(struct waits_ctx *c, const struct thread_activity *a, int *fds, int max)
{
    struct py_reader *r = &c->reader;
    long nr = a->syscall_nr;
    int n = 0;
    if (nr == NR_POLL || nr == NR_PPOLL) {
        uint64_t nfds = a->syscall_args[1];
        struct {
            int32_t fd;
            int16_t events, revents;
        } entries[64];
        if (nfds > 64)
            nfds = 64;
        if (nfds && target_read(r->t, a->syscall_args[0], entries, nfds * sizeof entries[0]) != 0)
            return -1;
        for (uint64_t i = 0; i < nfds && n < max; i++)
            if (entries[i].fd >= 0)
                fds[n++] = entries[i].fd;
        return n;
    }
    if (nr == NR_SELECT || nr == NR_PSELECT6) {
        int64_t nfds = (int64_t)a->syscall_args[0];
        if (nfds < 0 || nfds > 1024)
            return -1;
        uint64_t sets[2][16];
        memset(sets, 0, sizeof sets);
        size_t bytes = (size_t)((nfds + 63) / 64) * 8;
        for (int s = 0; s < 2; s++)
            if (a->syscall_args[1 + s] && bytes &&
                target_read(r->t, a->syscall_args[1 + s], sets[s], bytes) != 0)
                return -1;
        for (int64_t fd = 0; fd < nfds && n < max; fd++)
            if (((sets[0][fd / 64] | sets[1][fd / 64]) >> (fd % 64)) & 1)
                fds[n++] = (int)fd;
        return n;
    }
    if (nr == NR_EPOLL_WAIT || nr == NR_EPOLL_PWAIT || nr == NR_EPOLL_PWAIT2) {
        char path[64], text[8192];
        snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)proc_pid(c),
                 (int)a->syscall_args[0]);
        FILE *f = proc_pid(c) ? fopen(path, "r") : NULL;
        if (!f)
            return -1;
        size_t len = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[len] = '\0';
        return procnet_parse_epoll_fdinfo(text, fds, max);
    }
    return -1;
}

/* The timeout of a select/poll/epoll call from its arguments. */
static void select_timeout(struct waits_ctx *c, const struct thread_activity *a, struct report_wait *w)
{
    long nr = a->syscall_nr;
    int64_t ms = (int64_t)(int32_t)a->syscall_args[2];
    if (nr == NR_POLL || nr == NR_EPOLL_WAIT || nr == NR_EPOLL_PWAIT) {
        if (nr != NR_POLL)
            ms = (int64_t)(int32_t)a->syscall_args[3];
        w->timeout = ms < 0 ? WAIT_TIMEOUT_NONE : WAIT_TIMEOUT_SET;
        w->timeout_seconds = ms < 0 ? -1 : (double)ms / 1000.0;
        return;
    }
    uint64_t ptr = nr == NR_PPOLL ? a->syscall_args[2]
                   : nr == NR_EPOLL_PWAIT2 ? a->syscall_args[3]
                                           : a->syscall_args[4];
    if (!ptr) {
        w->timeout = WAIT_TIMEOUT_NONE;
        return;
    }
    w->timeout = WAIT_TIMEOUT_SET;
    int64_t tv[2];
    if (target_read(c->reader.t, ptr, tv, sizeof tv) == 0 && tv[0] >= 0 && tv[1] >= 0)
        w->timeout_seconds = (double)tv[0] + (double)tv[1] / (nr == NR_SELECT ? 1e6 : 1e9);
}

static void analyze_select(struct waits_ctx *c, const struct stacks_thread_raw *raw, struct report_wait *w)
{
    const struct thread_activity *a = &raw->activity;
    /* time.sleep before 3.11 is select(0, NULL, NULL, NULL, &timeout),
     * which glibc issues as pselect6 (a timespec) or select (a timeval). */
    if ((a->syscall_nr == NR_SELECT || a->syscall_nr == NR_PSELECT6) && a->syscall_args[0] == 0 &&
        !a->syscall_args[1] && !a->syscall_args[2] && !a->syscall_args[3]) {
        int64_t tv[2];
        double unit = a->syscall_nr == NR_SELECT ? 1e6 : 1e9;
        w->kind = WAIT_SLEEP;
        w->timeout = WAIT_TIMEOUT_SET;
        if (a->syscall_args[4] && target_read(c->reader.t, a->syscall_args[4], tv, sizeof tv) == 0 &&
            tv[0] >= 0 && tv[1] >= 0) {
            w->sleep_seconds = (double)tv[0] + (double)tv[1] / unit;
            w->sleep_upper_bound = true;
        }
        return;
    }
    int fds[WAIT_MAX_FDS * 4];
    int n = watched_fds(c, a, fds, (int)(sizeof fds / sizeof fds[0]));
    select_timeout(c, a, w);
    enum wait_timeout timeout = w->timeout;
    double seconds = w->timeout_seconds;
    bool poll_one = a->syscall_nr == NR_POLL || a->syscall_nr == NR_PPOLL;
    if (poll_one && n == 1 && fill_socket(c, raw, fds[0], w)) {
        /* One socket polled: how CPython waits on a socket with a timeout.
         * The syscall's own timeout, not the socket's, bounds this wait. */
        w->kind = WAIT_SOCKET;
        w->timeout = timeout;
        w->timeout_seconds = seconds;
        return;
    }
    w->kind = WAIT_SELECT;
    w->total_fds = n;
    for (int i = 0; i < n && w->n_fds < WAIT_MAX_FDS; i++) {
        w->fds[w->n_fds].fd = fds[i];
        describe_fd(c, fds[i], w->fds[w->n_fds].what, sizeof w->fds[w->n_fds].what);
        w->n_fds++;
    }
}

static void analyze_fd_io(struct waits_ctx *c, const struct stacks_thread_raw *raw, struct report_wait *w)
{
    const struct thread_activity *a = &raw->activity;
    int fd = (int)(int32_t)a->syscall_args[0];
    if (fill_socket(c, raw, fd, w)) {
        w->kind = WAIT_SOCKET;
        /* Only a socket without timeout blocks inside recv/send/accept:
         * CPython polls first on a socket that has one. */
        if (w->timeout == WAIT_TIMEOUT_UNKNOWN)
            w->timeout = WAIT_TIMEOUT_NONE;
        return;
    }
    w->kind = WAIT_IO;
    w->io_fd = fd;
    if (!proc_pid(c) || procnet_fd_link(proc_pid(c), fd, w->io_target, sizeof w->io_target) != 0)
        w->io_target[0] = '\0';
}

static void analyze_sleep(struct waits_ctx *c, const struct thread_activity *a, struct report_wait *w)
{
    w->kind = WAIT_SLEEP;
    w->timeout = WAIT_TIMEOUT_SET;
    bool absolute = false;
    uint64_t request = a->syscall_args[0];
    clockid_t clock = CLOCK_MONOTONIC;
    if (a->syscall_nr == NR_CLOCK_NANOSLEEP) {
        clock = (clockid_t)a->syscall_args[0];
        absolute = (a->syscall_args[1] & 1) != 0; /* TIMER_ABSTIME */
        request = a->syscall_args[2];
    }
    int64_t ts[2];
    if (!request || target_read(c->reader.t, request, ts, sizeof ts) != 0 || ts[0] < 0 || ts[1] < 0)
        return;
    double when = (double)ts[0] + (double)ts[1] / 1e9;
    if (!absolute) {
        w->sleep_seconds = when;
        w->sleep_upper_bound = true;
        return;
    }
    /* A core does not say what the clock read when it was taken: the time
     * left until an absolute deadline is unknown there. */
    struct timespec now;
    if (!target_can(c->reader.t, TARGET_CAN_CLOCK) || clock_gettime(clock, &now) != 0)
        return;
    double left = when - ((double)now.tv_sec + (double)now.tv_nsec / 1e9);
    w->sleep_seconds = left > 0 ? left : 0;
}

static void analyze_thread(struct waits_ctx *c, const struct report_thread *th,
                           const struct stacks_thread_raw *raw, struct report_wait *w)
{
    switch (waits_classify(th, &raw->activity, w)) {
    case WAIT_PROBE_FUTEX:
        analyze_futex(c, raw, w);
        break;
    case WAIT_PROBE_SLEEP:
        analyze_sleep(c, &raw->activity, w);
        break;
    case WAIT_PROBE_SELECT:
        analyze_select(c, raw, w);
        break;
    case WAIT_PROBE_FD_IO:
        analyze_fd_io(c, raw, w);
        break;
    case WAIT_PROBE_NONE:
        break;
    }
    if (w->kind == WAIT_CHILD && w->child > 0 &&
        target_peer_comm(c->rt->target, w->child, w->child_command, sizeof w->child_command) != 0)
        w->child_command[0] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Cross-thread facts */

static bool is_lock(struct waits_ctx *c, uint64_t obj, void *arg)
{
    (void)arg;
    const char *name;
    return py_type_of(&c->reader, obj, NULL, &name) == 0 &&
           (strcmp(name, "_thread.lock") == 0 || strcmp(name, "_thread.RLock") == 0);
}

/* The locks a thread holds through `with` blocks, innermost frame first. */
static const struct held_locks *held_by(struct waits_ctx *c, const struct stacks_raw *raw, size_t i)
{
    struct held_locks *h = &c->held[i];
    if (h->done)
        return h;
    h->done = true;
    const struct stacks_thread_raw *t = &raw->threads[i];
    for (size_t k = 0; k < t->n_frames && k < HELD_SEARCH_FRAMES && h->count < MAX_HELD; k++) {
        if (!read_frame_vars(c, &t->frames[k]))
            continue;
        uint64_t targets[MAX_HELD];
        int n = py_frame_with_targets(&c->reader, &c->vars, targets, MAX_HELD);
        for (int j = 0; j < n && h->count < MAX_HELD; j++) {
            uint64_t lock = targets[j], inner;
            /* `with condition:` holds the condition's lock. */
            if (!is_lock(c, lock, NULL) &&
                !(py_attr_get(&c->reader, lock, "_lock", &inner) == 0 && is_lock(c, inner, NULL)))
                continue;
            if (!is_lock(c, lock, NULL))
                lock = inner;
            h->locks[h->count] = lock;
            h->frame[h->count++] = (int)k;
        }
    }
    return h;
}

int waits_analyze(struct waits_ctx *c, struct stack_report *report, const struct stacks_raw *raw)
{
    free(c->held);
    reach_free(c);
    c->raw = raw;
    c->report = report;
    c->n_held = raw->n_threads;
    c->held = calloc(raw->n_threads ? raw->n_threads : 1, sizeof *c->held);
    c->n_reach = raw->n_threads;
    c->reach = calloc(raw->n_threads ? raw->n_threads : 1, sizeof *c->reach);
    if (!c->held || !c->reach)
        return -1;
    struct sched_clock clock;
    sched_clock_init(&clock);
    size_t n = report->n_threads < raw->n_threads ? report->n_threads : raw->n_threads;
    for (size_t i = 0; i < n; i++) {
        struct report_thread *th = &report->threads[i];
        struct report_wait *w = malloc(sizeof *w);
        if (!w)
            return -1;
        th->wait = w;
        wait_report_init(w);
        analyze_thread(c, th, &raw->threads[i], w);
        if (target_can(c->rt->target, TARGET_CAN_PROC) && w->kind != WAIT_NONE && w->kind != WAIT_GIL)
            w->waited_ms = sched_clock_off_cpu_ms(&clock, c->rt->target->pid, th->tid);
    }
    struct diagnosis_queries q;
    waits_queries(c, &q);
    waits_link(report, n, &q);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Reachability: which objects a thread's frames can get at */

static void set_add(struct obj_set *set, uint64_t obj)
{
    if (!obj || set->count >= REACH_SET_MAX)
        return;
    if (set->count == set->capacity) {
        size_t capacity = set->capacity ? set->capacity * 2 : 256;
        uint64_t *items = realloc(set->items, capacity * sizeof *items);
        if (!items)
            return;
        set->items = items;
        set->capacity = capacity;
    }
    set->items[set->count++] = obj;
}

static int compare_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static void set_finish(struct obj_set *set)
{
    if (set->count)
        qsort(set->items, set->count, sizeof *set->items, compare_u64);
}

static bool set_has(const struct obj_set *set, uint64_t obj)
{
    return set->count && bsearch(&obj, set->items, set->count, sizeof obj, compare_u64) != NULL;
}

struct collect_ctx {
    struct waits_ctx *c;
    struct obj_set *set;
    int depth;
};

static void collect_value(struct waits_ctx *c, struct obj_set *set, uint64_t value, int depth);

static int collect_visit(void *vctx, uint64_t key, uint64_t value)
{
    struct collect_ctx *ctx = vctx;
    (void)key;
    collect_value(ctx->c, ctx->set, value, ctx->depth);
    return 0;
}

/* The items of a list, tuple or dict (values), one level. */
static void collect_items(struct waits_ctx *c, struct obj_set *set, uint64_t container, const char *type)
{
    struct py_reader *r = &c->reader;
    if (strcmp(type, "dict") == 0) {
        struct collect_ctx ctx = {c, set, -1};
        py_dict_items(r, container, REACH_CONTAINER_ITEMS, collect_visit, &ctx);
        return;
    }
    int64_t n;
    uint64_t items = container + (uint64_t)r->L->tuple_items;
    if (py_sequence_length(r, container, &n) != 0)
        return;
    if (strcmp(type, "list") == 0 &&
        target_read_u64(r->t, container + (uint64_t)r->L->list_items, &items) != 0)
        return;
    if (n > REACH_CONTAINER_ITEMS)
        n = REACH_CONTAINER_ITEMS;
    uint64_t values[REACH_CONTAINER_ITEMS];
    if (n > 0 && target_read(r->t, items, values, (size_t)n * 8) == 0)
        for (int64_t i = 0; i < n; i++)
            set_add(set, values[i]);
}

/* Adds value, the items of a container value, and (depth > 0) the
 * attributes of an instance, recursively to depth. */
static void collect_value(struct waits_ctx *c, struct obj_set *set, uint64_t value, int depth)
{
    const char *type;
    if (!value)
        return;
    set_add(set, value);
    if (depth < 0 || py_type_of(&c->reader, value, NULL, &type) != 0)
        return;
    if (strcmp(type, "list") == 0 || strcmp(type, "tuple") == 0 || strcmp(type, "dict") == 0) {
        collect_items(c, set, value, type);
        return;
    }
    if (depth == 0 || plain_value(&c->reader, value))
        return;
    struct collect_ctx ctx = {c, set, depth - 1};
    py_attr_items(&c->reader, value, ATTRS_PER_OBJECT, collect_visit, &ctx);
}

static const struct obj_set *globals_reach(struct waits_ctx *c, uint64_t dict)
{
    for (int k = 0; k < c->n_globals; k++)
        if (c->globals[k].dict == dict)
            return &c->globals[k].objects;
    if (c->n_globals == c->cap_globals) {
        int capacity = c->cap_globals ? c->cap_globals * 2 : 16;
        struct globals_reach *more = realloc(c->globals, sizeof *more * (size_t)capacity);
        if (!more)
            return NULL;
        c->globals = more;
        c->cap_globals = capacity;
    }
    struct globals_reach *g = &c->globals[c->n_globals++];
    memset(g, 0, sizeof *g);
    g->dict = dict;
    /* Module globals and, one level down, the attributes of the instances
     * they hold (a module-level executor's work queue, say). */
    struct collect_ctx ctx = {c, &g->objects, 1};
    py_dict_items(&c->reader, dict, GLOBALS_PER_DICT, collect_visit, &ctx);
    set_finish(&g->objects);
    return &g->objects;
}

/* A thread running an asyncio loop will run the loop's handles: what their
 * callbacks are bound to or close over, and their arguments, are its to act
 * on (run_coroutine_threadsafe's Future, completed by a callback queued on
 * the loop). */
static void loop_handles_reach(struct waits_ctx *c, size_t index, struct obj_set *set)
{
    const struct report_tasks *tasks = c->report ? c->report->tasks : NULL;
    if (!tasks || index >= c->report->n_threads)
        return;
    for (size_t l = 0; l < tasks->n_loops; l++) {
        if (!tasks->loops[l].tid || tasks->loops[l].tid != c->report->threads[index].tid)
            continue;
        uint64_t objects[LOOP_HANDLE_OBJECTS];
        size_t n = asyncio_loop_handle_objects(c->rt, tasks->loops[l].addr, objects,
                                               LOOP_HANDLE_OBJECTS);
        for (size_t k = 0; k < n; k++)
            collect_value(c, set, objects[k], 1);
    }
}

static void thread_reach_build(struct waits_ctx *c, size_t index, struct thread_reach *tr)
{
    const struct stacks_thread_raw *t = &c->raw->threads[index];
    tr->done = true;
    loop_handles_reach(c, index, &tr->objects);
    for (size_t k = 0; k < t->n_frames && k < REACH_SEARCH_FRAMES; k++) {
        if (!read_frame_vars(c, &t->frames[k]))
            continue;
        const struct py_frame_vars *v = &c->vars;
        for (int i = 0; i < v->n_named; i++) {
            const char *name = py_frame_var_name(v, i);
            collect_value(c, &tr->objects, v->values[i], name && strcmp(name, "self") == 0 ? 2 : 1);
        }
        for (int i = 0; i < v->n_stack; i++)
            set_add(&tr->objects, v->values[v->n_named + i]);
        bool known = false;
        for (int g = 0; g < tr->n_globals && !known; g++)
            known = tr->globals[g] == v->globals;
        if (v->globals && !known && tr->n_globals < REACH_GLOBALS_PER_THREAD)
            tr->globals[tr->n_globals++] = v->globals;
    }
    set_finish(&tr->objects);
}

static bool thread_reaches(struct waits_ctx *c, const struct stacks_raw *raw, size_t index, uint64_t obj)
{
    if (index >= raw->n_threads || index >= c->n_reach)
        return false;
    struct thread_reach *tr = &c->reach[index];
    if (!tr->done)
        thread_reach_build(c, index, tr);
    if (set_has(&tr->objects, obj))
        return true;
    for (int g = 0; g < tr->n_globals; g++) {
        const struct obj_set *set = globals_reach(c, tr->globals[g]);
        if (set && set_has(set, obj))
            return true;
    }
    return false;
}

/* The queries the diagnoses ask, answered from the last analysed snapshot. */
static bool query_reaches(void *ctx, size_t thread, uint64_t obj)
{
    struct waits_ctx *c = ctx;
    return c->raw && thread_reaches(c, c->raw, thread, obj);
}

static int query_held_locks(void *ctx, size_t thread, uint64_t *locks, int *frames, int max)
{
    struct waits_ctx *c = ctx;
    if (!c->raw || thread >= c->n_held || thread >= c->raw->n_threads)
        return 0;
    const struct held_locks *h = held_by(c, c->raw, thread);
    int n = h->count < max ? h->count : max;
    for (int k = 0; k < n; k++) {
        locks[k] = h->locks[k];
        frames[k] = h->frame[k];
    }
    return n;
}

static int query_blocked_pipe_writer(void *ctx, uint64_t read_pipe, pid_t only_child,
                                     struct pipe_blocked_writer *out)
{
    struct target *t = ((struct waits_ctx *)ctx)->rt->target;
    return target_can(t, TARGET_CAN_PEERS)
               ? pipe_find_blocked_writer(t->pid, read_pipe, only_child, 16, out)
               : -1;
}

void waits_queries(struct waits_ctx *c, struct diagnosis_queries *q)
{
    *q = (struct diagnosis_queries){c, query_reaches, query_held_locks, query_blocked_pipe_writer,
                                       NULL, NULL};
}
