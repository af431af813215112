/* Lock, RLock, SimpleQueue and socket reading over object images laid out
 * as the live interpreters lay them out (see src/python/primitives.c):
 * the semaphore-based locks of 3.8-3.13.0 and the PyMutex locks of 3.13.x
 * (Debian), 3.14 and 3.15, and how a blocked thread's futex address is
 * matched to each. */
#include <stdint.h>
#include <string.h>

#include "fake_target.h"
#include "python/layout.h"
#include "python/objects.h"
#include "python/primitives.h"
#include "unit.h"

#define TYPES 0x10000u
#define NAMES 0x20000u
#define OBJECTS 0x30000u
#define SEMS 0x40000u
#define STACK 0x50000u

struct image {
    unsigned char types[0x1000];
    unsigned char names[0x400];
    unsigned char objects[0x1000];
    unsigned char sems[0x100];
    unsigned char stack[0x100];
};

static void put_u64(unsigned char *base, size_t off, uint64_t v)
{
    memcpy(base + off, &v, 8);
}

static void put_i32(unsigned char *base, size_t off, int32_t v)
{
    memcpy(base + off, &v, 4);
}

/* A type object at TYPES + slot * 0x200 named name, of basicsize, with base. */
static uint64_t make_type(struct image *img, int slot, const char *name, int64_t basicsize, uint64_t base)
{
    size_t off = (size_t)slot * 0x200, name_off = (size_t)slot * 0x40;
    memcpy(img->names + name_off, name, strlen(name) + 1);
    put_u64(img->types, off + 8, TYPES + 0xf00);      /* ob_type: anything readable */
    put_u64(img->types, off + 24, NAMES + name_off);  /* tp_name */
    put_u64(img->types, off + 32, (uint64_t)basicsize);
    put_u64(img->types, off + 256, base);             /* tp_base */
    return TYPES + off;
}

static uint64_t make_object(struct image *img, int slot, uint64_t type)
{
    size_t off = (size_t)slot * 0x80;
    put_u64(img->objects, off, 1);
    put_u64(img->objects, off + 8, type);
    return OBJECTS + off;
}

static struct target *load(struct image *img)
{
    struct target *t = fake_target_new();
    fake_target_map(t, TYPES, img->types, sizeof img->types);
    fake_target_map(t, NAMES, img->names, sizeof img->names);
    fake_target_map(t, OBJECTS, img->objects, sizeof img->objects);
    fake_target_map(t, SEMS, img->sems, sizeof img->sems);
    fake_target_map(t, STACK, img->stack, sizeof img->stack);
    return t;
}

static void reader_for(struct py_runtime *rt, struct py_reader *r, struct target *t, unsigned version)
{
    memset(rt, 0, sizeof *rt);
    rt->target = t;
    rt->layout = *py_layout_for_version(version);
    rt->version_hex = version;
    py_reader_init(r, rt);
}

static void test_semaphore_locks(void)
{
    static struct image img;
    memset(&img, 0, sizeof img);
    uint64_t lock_type = make_type(&img, 0, "_thread.lock", 40, 0);
    uint64_t rlock_type = make_type(&img, 1, "_thread.RLock", 48, 0);
    uint64_t lock = make_object(&img, 0, lock_type);
    uint64_t rlock = make_object(&img, 1, rlock_type);
    uint64_t free_lock = make_object(&img, 2, lock_type);
    /* lock: taken, two waiters; free_lock: value 1 */
    put_u64(img.objects, 0x10, SEMS);
    put_u64(img.sems, 0, (uint64_t)2 << 32);
    put_u64(img.objects, 0x80 + 0x10, SEMS + 0x20);
    put_u64(img.sems, 0x20, (uint64_t)1 << 32);
    put_u64(img.objects, 0x80 + 0x18, 0x7f0000001000); /* owner */
    put_u64(img.objects, 0x80 + 0x20, 2);              /* count */
    put_u64(img.objects, 0x100 + 0x10, SEMS + 0x40);
    put_u64(img.sems, 0x40, 1);
    struct target *t = load(&img);
    struct py_runtime rt;
    struct py_reader r;
    reader_for(&rt, &r, t, 0x030c01f0);

    struct py_lock state;
    CHECK_EQ_INT(py_lock_read(&r, lock, &state), 0);
    CHECK_EQ_INT(state.impl, PY_LOCK_SEMAPHORE);
    CHECK(!state.recursive);
    CHECK(state.locked);
    CHECK_EQ_INT(state.waiters, 2);
    CHECK_EQ_INT(state.wait_key, SEMS);
    struct py_futex_wait wait;
    py_futex_wait_read(&r, SEMS, &wait);
    CHECK_EQ_INT(wait.parked_on, 0); /* no parking lot before 3.13 */
    CHECK(py_lock_matches_wait(&state, &wait));
    py_futex_wait_read(&r, SEMS + 0x20, &wait);
    CHECK(!py_lock_matches_wait(&state, &wait));

    CHECK_EQ_INT(py_lock_read(&r, rlock, &state), 0);
    CHECK(state.recursive);
    CHECK(state.locked);
    CHECK_EQ_INT(state.owner, 0x7f0000001000);
    CHECK_EQ_INT(state.count, 2);
    CHECK(py_lock_matches_wait(&state, &wait));

    CHECK_EQ_INT(py_lock_read(&r, free_lock, &state), 0);
    CHECK(!state.locked);
    CHECK_EQ_INT(state.waiters, 0);

    /* Neither a lock nor readable: refused. */
    CHECK_EQ_INT(py_lock_read(&r, TYPES + 0x800, &state), -1);
    CHECK_EQ_INT(py_lock_read(&r, 0x99990000, &state), -1);
    fake_target_free(t);
}

static void test_pymutex_locks(void)
{
    static struct image img;
    memset(&img, 0, sizeof img);
    uint64_t lock_type = make_type(&img, 0, "_thread.lock", 24, 0);
    uint64_t rlock_type = make_type(&img, 1, "_thread.RLock", 40, 0);
    uint64_t odd_type = make_type(&img, 2, "_thread.lock", 32, 0);
    uint64_t lock = make_object(&img, 0, lock_type);
    uint64_t rlock = make_object(&img, 1, rlock_type);
    uint64_t odd = make_object(&img, 2, odd_type);
    img.objects[0x10] = 3;                               /* locked, parked */
    img.objects[0x80 + 0x10] = 1;                        /* locked */
    put_u64(img.objects, 0x80 + 0x18, 0x7f0000002000);  /* owner */
    put_u64(img.objects, 0x80 + 0x20, 0);               /* held once */
    /* A waiter's parking entry: park_arg, the awaited address, its semaphore. */
    put_u64(img.stack, 0x20, STACK + 0x80);
    put_u64(img.stack, 0x28, lock + 16);
    put_u64(img.stack, 0x30, (uint64_t)1 << 32);
    struct target *t = load(&img);
    struct py_runtime rt;
    struct py_reader r;
    reader_for(&rt, &r, t, 0x030e0af0);

    struct py_lock state;
    CHECK_EQ_INT(py_lock_read(&r, lock, &state), 0);
    CHECK_EQ_INT(state.impl, PY_LOCK_PYMUTEX);
    CHECK(state.locked);
    CHECK_EQ_INT(state.waiters, 1);
    CHECK_EQ_INT(state.wait_key, lock + 16);
    struct py_futex_wait wait;
    py_futex_wait_read(&r, STACK + 0x30, &wait);
    CHECK_EQ_INT(wait.parked_on, lock + 16);
    CHECK(py_lock_matches_wait(&state, &wait));

    struct py_lock rstate;
    CHECK_EQ_INT(py_lock_read(&r, rlock, &rstate), 0);
    CHECK(rstate.recursive && rstate.locked);
    CHECK_EQ_INT(rstate.owner, 0x7f0000002000);
    CHECK_EQ_INT(rstate.count, 1);
    CHECK(!py_lock_matches_wait(&rstate, &wait));

    /* A lock of a size no version has: recognised, state unknown, never matched. */
    CHECK_EQ_INT(py_lock_read(&r, odd, &state), 0);
    CHECK_EQ_INT(state.impl, PY_LOCK_UNKNOWN);
    CHECK(!py_lock_matches_wait(&state, &wait));
    fake_target_free(t);
}

static void test_simple_queue_and_socket(void)
{
    static struct image img;
    memset(&img, 0, sizeof img);
    uint64_t sq_old = make_type(&img, 0, "_queue.SimpleQueue", 56, 0);
    uint64_t sq_new = make_type(&img, 1, "_queue.SimpleQueue", 72, 0);
    uint64_t list_type = make_type(&img, 2, "list", 40, 0);
    uint64_t base = make_type(&img, 3, "_socket.socket", 72, 0);
    uint64_t sock_type = make_type(&img, 4, "socket", 72, base);
    uint64_t q_old = make_object(&img, 0, sq_old);
    uint64_t q_new = make_object(&img, 1, sq_new);
    uint64_t items = make_object(&img, 2, list_type);
    uint64_t sock = make_object(&img, 3, sock_type);
    put_u64(img.objects, 0x10, SEMS);
    put_u64(img.objects, 0x20, items);
    put_u64(img.objects, 0x28, 2);                 /* two items already taken */
    put_u64(img.objects, 0x100 + 16, 5);           /* the list holds five */
    put_u64(img.stack, 0x28, q_new + 16);          /* a parked get() on q_new */
    put_i32(img.objects, 0x180 + 16, 7);           /* fd */
    put_i32(img.objects, 0x180 + 20, 2);           /* AF_INET */
    put_i32(img.objects, 0x180 + 24, 1);           /* SOCK_STREAM */
    put_u64(img.objects, 0x180 + 40, (uint64_t)-1000000000LL);
    struct target *t = load(&img);
    struct py_runtime rt;
    struct py_reader r;
    reader_for(&rt, &r, t, 0x030c01f0);

    struct py_futex_wait wait;
    py_futex_wait_read(&r, SEMS, &wait);
    CHECK(py_simple_queue_matches_wait(&r, q_old, &wait));
    int64_t length = -1;
    CHECK_EQ_INT(py_simple_queue_length(&r, q_old, &length), 0);
    CHECK_EQ_INT(length, 3);
    CHECK_EQ_INT(py_simple_queue_length(&r, q_new, &length), -1);

    struct py_socket s;
    CHECK_EQ_INT(py_socket_read(&r, sock, &s), 0);
    CHECK_EQ_INT(s.fd, 7);
    CHECK_EQ_INT(s.family, 2);
    CHECK_EQ_INT(s.type, 1);
    CHECK(s.timeout_ns < 0);
    CHECK(py_type_is_or_inherits(&r, sock, "_socket.socket"));
    CHECK(!py_type_is_or_inherits(&r, q_old, "_socket.socket"));
    CHECK_EQ_INT(py_socket_read(&r, q_old, &s), -1);

    /* 3.14: the parking entry names an address inside the new queue. */
    struct py_runtime rt14;
    struct py_reader r14;
    reader_for(&rt14, &r14, t, 0x030e0af0);
    py_futex_wait_read(&r14, STACK + 0x30, &wait);
    CHECK(py_simple_queue_matches_wait(&r14, q_new, &wait));
    CHECK(!py_simple_queue_matches_wait(&r14, q_old, &wait));
    fake_target_free(t);
}

int main(void)
{
    test_semaphore_locks();
    test_pymutex_locks();
    test_simple_queue_and_socket();
    return unit_report("test_primitives");
}
