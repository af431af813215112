/* Lock, socket and container reading. The object layouts live in C files of
 * CPython (Modules/_threadmodule.c, Modules/socketmodule.h), not in installed
 * headers, so they were checked live on every supported interpreter:
 *
 *   _thread.lock, basicsize 40 (3.8-3.13.0): +16 PyThread_type_lock (sem_t*),
 *     a blocked acquire() sleeps in futex on that sem_t; its 64-bit word holds
 *     the value (low half, 0 = taken) and the waiter count (high half).
 *   _thread.lock, basicsize 24 (Debian 3.13.18, 3.14, 3.15): +16 PyMutex, a
 *     byte: bit 0 locked, bit 1 someone parked. A blocked acquire() sleeps on a
 *     semaphore inside a wait entry on its own stack; the word just before that
 *     semaphore is the address of the PyMutex it waits for.
 *   _thread.RLock, basicsize 48 (3.8-3.13, Debian 3.13.18 too): +16 sem_t*,
 *     +24 owner ident, +32 count.
 *   _thread.RLock, basicsize 40 (3.14, 3.15): +16 PyMutex, +24 owner ident,
 *     +32 extra recursion levels (0 when held once).
 *   _queue.SimpleQueue, basicsize 56 (3.8-3.12): +16 sem_t* that get() sleeps
 *     on, +32 list of items, +40 index of the first item not taken yet.
 *   _queue.SimpleQueue, basicsize 72 (3.13+): get() parks on an address
 *     inside the object (+16).
 *   socket: +16 int fd, +20 family, +24 type, +28 proto, +32 errorhandler,
 *     +40 sock_timeout in ns (negative: blocking without timeout). */
#include "python/primitives.h"

#include <string.h>

#define LOCK_SEM_SIZE 40
#define LOCK_PYMUTEX_SIZE 24
#define RLOCK_SEM_SIZE 48
#define RLOCK_PYMUTEX_SIZE 40
#define LOCK_FIELD 16
#define RLOCK_OWNER 24
#define RLOCK_COUNT 32
#define PYMUTEX_LOCKED 1
#define PYMUTEX_HAS_PARKED 2

#define SOCKET_FD 16
#define SOCKET_FAMILY 20
#define SOCKET_TYPE 24
#define SOCKET_PROTO 28
#define SOCKET_TIMEOUT 40


static int type_basicsize(struct py_reader *r, uint64_t obj, int64_t *size)
{
    uint64_t type;
    if (py_type_of(r, obj, &type, NULL) != 0 ||
        target_read(r->t, type + (uint64_t)r->L->type_basicsize, size, sizeof *size) != 0)
        return -1;
    return 0;
}

int py_lock_read(struct py_reader *r, uint64_t obj, struct py_lock *out)
{
    const char *name;
    memset(out, 0, sizeof *out);
    if (py_type_of(r, obj, NULL, &name) != 0)
        return -1;
    if (strcmp(name, "_thread.RLock") == 0)
        out->recursive = true;
    else if (strcmp(name, "_thread.lock") != 0)
        return -1;
    out->obj = obj;
    int64_t size;
    if (type_basicsize(r, obj, &size) != 0)
        return 0;
    unsigned char body[24];
    if (target_read(r->t, obj + LOCK_FIELD, body, sizeof body) != 0)
        return 0;
    uint64_t word;
    memcpy(&word, body, 8);
    if ((!out->recursive && size == LOCK_SEM_SIZE) || (out->recursive && size == RLOCK_SEM_SIZE)) {
        uint64_t sem_word;
        if (word == 0 || target_read_u64(r->t, word, &sem_word) != 0)
            return 0;
        out->impl = PY_LOCK_SEMAPHORE;
        out->wait_key = word;
        out->waiters_known = true;
        out->waiters = (uint32_t)(sem_word >> 32);
        out->locked = (uint32_t)sem_word == 0;
    } else if ((!out->recursive && size == LOCK_PYMUTEX_SIZE) ||
               (out->recursive && size == RLOCK_PYMUTEX_SIZE)) {
        uint8_t bits = body[0];
        out->impl = PY_LOCK_PYMUTEX;
        out->wait_key = obj + LOCK_FIELD;
        out->locked = (bits & PYMUTEX_LOCKED) != 0;
        out->waiters_known = true;
        out->waiters = (bits & PYMUTEX_HAS_PARKED) ? 1 : 0;
    } else {
        return 0;
    }
    if (out->recursive) {
        uint64_t owner, count;
        memcpy(&owner, body + 8, 8);
        memcpy(&count, body + 16, 8);
        out->owner = out->locked ? owner : 0;
        if (out->impl == PY_LOCK_PYMUTEX)
            out->count = out->locked ? count + 1 : 0;
        else
            out->count = count;
        /* The semaphore and the count are updated one after the other:
         * trust the count, which is what release() checks. */
        if (out->impl == PY_LOCK_SEMAPHORE) {
            out->locked = count > 0;
            out->owner = count > 0 ? owner : 0;
        }
    }
    return 0;
}

void py_futex_wait_read(struct py_reader *r, uint64_t uaddr, struct py_futex_wait *out)
{
    out->uaddr = uaddr;
    out->parked_on = 0;
    /* Only parking-lot interpreters (3.13+) have wait entries; elsewhere the
     * word before a sem_t is unrelated memory and matches no lock byte. */
    if (r->L->parking_lot && uaddr >= 8 && target_read_u64(r->t, uaddr - 8, &out->parked_on) != 0)
        out->parked_on = 0;
}

bool py_lock_matches_wait(const struct py_lock *lock, const struct py_futex_wait *wait)
{
    if (!lock->wait_key)
        return false;
    if (lock->impl == PY_LOCK_SEMAPHORE)
        return wait->uaddr == lock->wait_key;
    if (lock->impl == PY_LOCK_PYMUTEX)
        return wait->parked_on == lock->wait_key;
    return false;
}

#define SIMPLE_QUEUE_SEM_SIZE 56
#define SIMPLE_QUEUE_LIST 32
#define SIMPLE_QUEUE_POSITION 40

bool py_simple_queue_matches_wait(struct py_reader *r, uint64_t obj, const struct py_futex_wait *wait)
{
    int64_t size;
    if (!py_is_type(r, obj, "_queue.SimpleQueue") || type_basicsize(r, obj, &size) != 0 || size <= 0 ||
        size > 4096)
        return false;
    if (size == SIMPLE_QUEUE_SEM_SIZE) {
        uint64_t sem;
        return target_read_u64(r->t, obj + LOCK_FIELD, &sem) == 0 && sem && sem == wait->uaddr;
    }
    return wait->parked_on >= obj && wait->parked_on < obj + (uint64_t)size;
}

int py_simple_queue_length(struct py_reader *r, uint64_t obj, int64_t *length)
{
    int64_t size, position, items;
    uint64_t list;
    if (!py_is_type(r, obj, "_queue.SimpleQueue") || type_basicsize(r, obj, &size) != 0 ||
        size != SIMPLE_QUEUE_SEM_SIZE ||
        target_read_u64(r->t, obj + SIMPLE_QUEUE_LIST, &list) != 0 ||
        target_read(r->t, obj + SIMPLE_QUEUE_POSITION, &position, sizeof position) != 0 ||
        py_sequence_length(r, list, &items) != 0 || position < 0 || position > items)
        return -1;
    *length = items - position;
    return 0;
}

bool py_type_is_or_inherits(struct py_reader *r, uint64_t obj, const char *name)
{
    uint64_t type;
    if (py_type_of(r, obj, &type, NULL) != 0)
        return false;
    /* Each base's name through the reader's type cache: a dump asks this of
     * thousands of objects of the same few types. */
    for (int depth = 0; depth < 16 && type; depth++) {
        const char *actual;
        if (py_type_name(r, type, &actual) != 0)
            return false;
        if (strcmp(actual, name) == 0)
            return true;
        if (target_read_u64(r->t, type + (uint64_t)r->L->type_base, &type) != 0)
            return false;
    }
    return false;
}

int py_socket_read(struct py_reader *r, uint64_t obj, struct py_socket *out)
{
    memset(out, 0, sizeof *out);
    if (!py_type_is_or_inherits(r, obj, "_socket.socket"))
        return -1;
    int32_t head[4];
    int64_t timeout;
    if (target_read(r->t, obj + SOCKET_FD, head, sizeof head) != 0 ||
        target_read(r->t, obj + SOCKET_TIMEOUT, &timeout, sizeof timeout) != 0)
        return -1;
    out->obj = obj;
    out->fd = head[0];
    out->family = head[1];
    out->type = head[2];
    out->proto = head[3];
    out->timeout_ns = timeout;
    return 0;
}

int py_sequence_length(struct py_reader *r, uint64_t obj, int64_t *length)
{
    const char *name;
    if (py_type_of(r, obj, NULL, &name) != 0)
        return -1;
    if (strcmp(name, "list") != 0 && strcmp(name, "tuple") != 0 &&
        strcmp(name, "collections.deque") != 0)
        return -1;
    int64_t size;
    if (target_read(r->t, obj + (uint64_t)r->L->ob_size, &size, sizeof size) != 0 || size < 0)
        return -1;
    *length = size;
    return 0;
}

int py_number(struct py_reader *r, uint64_t obj, double *value)
{
    int64_t i;
    if (py_is_type(r, obj, "float"))
        return target_read(r->t, obj + (uint64_t)r->L->float_value, value, sizeof *value);
    if (py_int(r, obj, &i) != 0)
        return -1;
    *value = (double)i;
    return 0;
}

bool py_is_none(struct py_reader *r, uint64_t obj)
{
    return py_is_type(r, obj, "NoneType");
}

/* A C string in the target equal to want (short names only). */
static bool c_string_is(struct py_reader *r, uint64_t addr, const char *want)
{
    char buf[16];
    size_t n = strlen(want) + 1;
    if (n > sizeof buf || !addr || target_read(r->t, addr, buf, n) != 0)
        return false;
    return memcmp(buf, want, n) == 0;
}

static bool str_object_is(struct py_reader *r, uint64_t obj, const char *want)
{
    char buf[32];
    return py_str(r, obj, buf, sizeof buf) == 0 && strcmp(buf, want) == 0;
}

/* A live object: freed objects keep a reference count of zero until reused. */
static bool alive(struct py_reader *r, uint64_t obj)
{
    uint64_t refcnt;
    return obj && target_read_u64(r->t, obj, &refcnt) == 0 && refcnt != 0;
}

static bool function_named(struct py_reader *r, uint64_t func, const char *want)
{
    uint64_t name;
    return py_is_type(r, func, "function") &&
           target_read_u64(r->t, func + (uint64_t)r->L->func_name, &name) == 0 &&
           str_object_is(r, name, want);
}

/* Up to 3.13: the bound __exit__ of the managed object. */
static uint64_t bound_exit_self(struct py_reader *r, uint64_t value)
{
    const char *type;
    if (!alive(r, value) || py_type_of(r, value, NULL, &type) != 0)
        return 0;
    uint64_t self = 0;
    if (strcmp(type, "builtin_function_or_method") == 0) {
        uint64_t def, name;
        if (target_read_u64(r->t, value + (uint64_t)r->L->cfunction_ml, &def) != 0 || !def ||
            target_read_u64(r->t, def + (uint64_t)r->L->methoddef_name, &name) != 0 || !c_string_is(r, name, "__exit__") ||
            target_read_u64(r->t, value + (uint64_t)r->L->cfunction_self, &self) != 0)
            return 0;
    } else if (strcmp(type, "method") == 0) {
        uint64_t func;
        if (target_read_u64(r->t, value + (uint64_t)r->L->method_func, &func) != 0 ||
            !function_named(r, func, "__exit__") ||
            target_read_u64(r->t, value + (uint64_t)r->L->method_self, &self) != 0)
            return 0;
    }
    return alive(r, self) ? self : 0;
}

/* From 3.14: an unbound __exit__ (C method descriptor or Python function). */
static bool is_unbound_exit(struct py_reader *r, uint64_t value)
{
    const char *type;
    if (!value || py_type_of(r, value, NULL, &type) != 0)
        return false;
    if (strcmp(type, "method_descriptor") == 0) {
        uint64_t name;
        return target_read_u64(r->t, value + (uint64_t)r->L->descr_name, &name) == 0 &&
               str_object_is(r, name, "__exit__");
    }
    return function_named(r, value, "__exit__");
}

int py_frame_with_targets(struct py_reader *r, const struct py_frame_vars *vars, uint64_t *out, int max)
{
    int n = 0;
    const uint64_t *stack = vars->values + vars->n_named;
    if (r->L->with_exit_unbound) {
        /* Stale pairs outlive their block here, so only an exact depth will do. */
        if (!vars->stack_exact)
            return 0;
        for (int i = 0; i + 1 < vars->n_stack && n < max; i++)
            if (is_unbound_exit(r, stack[i]) && alive(r, stack[i + 1]))
                out[n++] = stack[i + 1];
        return n;
    }
    for (int i = 0; i < vars->n_stack && n < max; i++) {
        uint64_t self = bound_exit_self(r, stack[i]);
        if (self)
            out[n++] = self;
    }
    return n;
}
