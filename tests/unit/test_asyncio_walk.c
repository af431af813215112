/* The bounds of the asyncio task walk (python/asyncio_tasks.c) on in-memory
 * images laid out with each version's generated layout: more tasks than it
 * reads (a 3.14 thread's task list, a 3.8 WeakSet registry), a task list
 * that loops without coming back to its head or leads into unmapped
 * memory, a coroutine that awaits itself (3.8 frame objects, 3.12's RESUME
 * rule, 3.14 stack references) and two tasks awaiting each other. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_python.h"
#include "fake_target.h"
#include "python/asyncio_tasks.h"
#include "python/layout.h"
#include "python/runtime.h"
#include "report/task_report.h"
#include "target/process.h"
#include "unit.h"

#define V38 0x030812f0u
#define V312 0x030c01f0u
#define V314 0x030e0af0u
#define LOOP 0x7f0000001000ull     /* the tasks' loop: never read */
#define TID 4242
#define PTHREAD_TID 720            /* glibc's struct pthread.tid */

struct process {
    struct fake_image img;
    struct target *t;
    struct py_runtime rt;
    uint64_t interp, tstate, tasks_dict;
    uint64_t task_type, coro_type;
};

/* An interpreter with one thread (sys.modules comes with add_tasks_module). */
static void build(struct process *p, unsigned version, size_t size)
{
    memset(p, 0, sizeof *p);
    const struct py_layout *L = py_layout_for_version(version);
    CHECK(L != NULL);
    fake_image_init(&p->img, L, size);
    struct fake_image *img = &p->img;
    p->task_type = fake_type(img, "_asyncio.Task");
    p->coro_type = fake_type(img, "coroutine");
    uint64_t runtime = fake_alloc(img, (size_t)L->runtime_size);
    p->interp = fake_alloc(img, (size_t)L->interp_size + 64);
    fake_put_u64(img, runtime, L->runtime_interpreters_head, p->interp);
    /* _PyThreadStateImpl is larger than PyThreadState: its asyncio part follows */
    p->tstate = fake_alloc(img, 4096);
    fake_put_u64(img, p->tstate, L->tstate_interp, p->interp);
    uint64_t pthread = fake_alloc(img, 2048);
    fake_put_i32(img, pthread, PTHREAD_TID, TID);
    fake_put_u64(img, p->tstate, L->tstate_thread_id, pthread);
    if (L->tstate_native_thread_id != PY_OFF_NONE)
        fake_put_u64(img, p->tstate, L->tstate_native_thread_id, TID);
    fake_put_u64(img, p->interp, L->interp_threads_head, p->tstate);
    p->rt.layout = *L;
    p->rt.version_hex = version;
    p->rt.runtime_addr = runtime;
}

/* sys.modules["asyncio.tasks"], whose dict holds names (its registries). */
static void add_tasks_module(struct process *p, const char *const *names, const uint64_t *values,
                             size_t n)
{
    struct fake_image *img = &p->img;
    uint64_t module = fake_object(img, fake_type(img, "module"), 64);
    fake_put_u64(img, module, img->L->module_dict, fake_dict(img, names, values, n));
    const char *key = "asyncio.tasks";
    fake_put_u64(img, p->interp, img->L->interp_modules, fake_dict(img, &key, &module, 1));
}

/* A set object (a plain one: 3.12's eager tasks; or a WeakSet's data). */
static uint64_t make_set(struct process *p, const uint64_t *keys, size_t n)
{
    struct fake_image *img = &p->img;
    const struct py_asyncio_layout *A = &img->L->asyncio;
    size_t slots = 8;
    while (slots < 2 * n)
        slots *= 2;
    uint64_t set = fake_object(img, fake_type(img, "set"), 256);
    uint64_t table = fake_alloc(img, slots * (size_t)A->set_entry_size);
    fake_put_u64(img, set, A->set_mask, slots - 1);
    fake_put_u64(img, set, A->set_table, table);
    for (size_t i = 0; i < n; i++)
        fake_put_u64(img, table + i * (uint64_t)A->set_entry_size, A->set_entry_key, keys[i]);
    return set;
}

static void map(struct process *p)
{
    p->t = fake_target_new();
    CHECK_EQ_INT(fake_target_map(p->t, FAKE_BASE, p->img.bytes, p->img.used), 0);
    struct thread_activity asleep = {0};
    fake_target_set_thread(p->t, TID, &asleep);
    p->rt.target = p->t;
}

static void destroy(struct process *p)
{
    fake_target_free(p->t);
    fake_image_free(&p->img);
}

/* A pending task of LOOP named "Task-N" running coro (0: none). */
static uint64_t make_task(struct process *p, uint64_t coro, int n)
{
    const struct py_asyncio_layout *A = &p->img.L->asyncio;
    uint64_t task = fake_object(&p->img, p->task_type, (size_t)A->task_size);
    fake_put_u64(&p->img, task, A->fut_loop, LOOP);
    fake_put_i32(&p->img, task, A->fut_state, 0);
    fake_put_u64(&p->img, task, A->task_coro, coro);
    char name[32];
    snprintf(name, sizeof name, "Task-%d", n);
    fake_put_u64(&p->img, task, A->task_name, fake_str(&p->img, name));
    return task;
}

/* 3.14+: tasks on the thread's circular list, in order (count of them). */
static void link_tasks(struct process *p, const uint64_t *tasks, size_t count)
{
    const struct py_asyncio_layout *A = &p->img.L->asyncio;
    uint64_t head = p->tstate + (uint64_t)A->tstate_tasks_head, prev = head;
    for (size_t i = 0; i < count; i++) {
        uint64_t node = tasks[i] + (uint64_t)A->task_node;
        fake_put_u64(&p->img, prev, 0, node);
        fake_put_u64(&p->img, node, 8, prev);
        prev = node;
    }
    fake_put_u64(&p->img, prev, 0, head);
    fake_put_u64(&p->img, head, 8, prev);
}

static size_t shown(const struct report_tasks *r)
{
    size_t n = 0;
    for (size_t l = 0; r && l < r->n_loops; l++)
        n += r->loops[l].n_tasks;
    return n;
}

static size_t hidden(const struct report_tasks *r)
{
    size_t n = 0;
    for (size_t l = 0; r && l < r->n_loops; l++)
        n += r->loops[l].n_hidden;
    return n;
}

/* The tasks of a process holding more than the walk reads: it stops at
 * its bound and says so, shows 1,000 and counts the rest. NULL when the
 * checks could not go on. */
static struct report_tasks *read_bounded(struct process *p)
{
    struct report_tasks *r = asyncio_tasks_read(&p->rt, TASKS_PENDING, 1000);
    CHECK(r != NULL && r->n_loops == 1);
    if (!r || r->n_loops != 1) {
        task_report_free(r);
        return NULL;
    }
    CHECK(r->truncated);
    CHECK_EQ_INT(r->n_found, ASYNCIO_MAX_TASKS);
    CHECK_EQ_INT(shown(r), 1000);
    CHECK_EQ_INT(hidden(r), ASYNCIO_MAX_TASKS - 1000);
    return r;
}

/* More tasks on a 3.14 thread's list than the walk reads: it stops at its
 * bound, says so, shows max_shown and counts the rest. */
static void test_list_bound(void)
{
    struct process p;
    size_t count = ASYNCIO_MAX_TASKS + 7;
    build(&p, V314, 64u << 20);
    add_tasks_module(&p, NULL, NULL, 0);
    uint64_t *tasks = malloc(count * sizeof *tasks);
    for (size_t i = 0; i < count; i++)
        tasks[i] = make_task(&p, 0, (int)i + 1);
    link_tasks(&p, tasks, count);
    map(&p);
    struct report_tasks *r = read_bounded(&p);
    if (r)
        CHECK_EQ_STR(r->loops[0].tasks[0].name, "Task-1");
    task_report_free(r);
    free(tasks);
    destroy(&p);
}

/* A list that loops back to its second node instead of its head, and one
 * that leads into unmapped memory: each task found once, the walk ends. */
static void test_list_broken(void)
{
    struct process p;
    build(&p, V314, 1u << 20);
    add_tasks_module(&p, NULL, NULL, 0);
    const struct py_asyncio_layout *A = &p.img.L->asyncio;
    uint64_t tasks[3];
    for (int i = 0; i < 3; i++)
        tasks[i] = make_task(&p, 0, i + 1);
    link_tasks(&p, tasks, 3);
    /* the third's next: back to the second */
    fake_put_u64(&p.img, tasks[2] + (uint64_t)A->task_node, 0, tasks[1] + (uint64_t)A->task_node);
    map(&p);
    struct report_tasks *r = asyncio_tasks_read(&p.rt, TASKS_PENDING, 1000);
    CHECK(r && !r->truncated);
    CHECK_EQ_INT(r ? r->n_found : 0, 3);
    CHECK_EQ_INT(shown(r), 3);
    task_report_free(r);
    fake_target_free(p.t);

    fake_put_u64(&p.img, tasks[1] + (uint64_t)A->task_node, 0, 0x66660000000ull);
    map(&p);
    r = asyncio_tasks_read(&p.rt, TASKS_PENDING, 1000);
    CHECK_EQ_INT(r ? r->n_found : 0, 2);
    task_report_free(r);
    destroy(&p);
}

/* A coroutine suspended in an await of what is_self says (itself, or
 * another coroutine): laid out as the version keeps it, its frame running
 * code. Returns it; *slot is where the awaited object goes. */
static uint64_t make_coro(struct process *p, uint64_t code, uint64_t *slot)
{
    const struct py_layout *L = p->img.L;
    const struct py_asyncio_layout *A = &L->asyncio;
    struct fake_image *img = &p->img;
    if (L->frames == PY_FRAMES_OBJECTS) {
        /* 3.8: f_lasti's next instruction is YIELD_FROM; f_stacktop above
         * the awaited object */
        uint64_t coro = fake_object(img, p->coro_type, 128);
        uint64_t frame = fake_object(img, img->frame_type, (size_t)L->frame_size + 64);
        fake_put_u64(img, coro, L->gen_frame, frame);
        fake_put_u64(img, frame, L->frame_code, code);
        fake_put_i32(img, frame, L->frame_lasti, 0);
        uint64_t co_code = fake_object(img, img->bytes_type, (size_t)L->bytes_sval + 8);
        fake_put_u64(img, co_code, L->ob_size, 4);
        uint8_t ops[4] = {0, 0, (uint8_t)A->op_yield_from, 0};
        fake_put(img, co_code, L->bytes_sval, ops, 4);
        fake_put_u64(img, code, L->code_code, co_code);
        *slot = frame + (uint64_t)L->frame_size;
        fake_put_u64(img, frame, A->frame_stacktop, *slot + 8);
        return coro;
    }
    uint64_t coro = fake_object(img, p->coro_type, (size_t)L->gen_iframe + 256);
    uint64_t frame = coro + (uint64_t)L->gen_iframe;
    fake_put_u8(img, coro, A->gen_frame_state,
                (uint8_t)(A->state_yield_from != -100 ? A->state_yield_from : -1));
    fake_put_u64(img, frame, L->iframe_executable, code);
    uint64_t instr = code + (uint64_t)L->code_code_adaptive;
    fake_put_u64(img, frame, L->iframe_instr_ptr, instr);
    /* 3.12: the RESUME after the instruction says "after an await" */
    uint8_t resume[4] = {0, 0, (uint8_t)A->op_resume, 3};
    fake_put(img, code, L->code_code_adaptive, resume, 4);
    uint64_t base = frame + (uint64_t)L->iframe_localsplus;
    if (L->stackpointer_is_pointer) {
        *slot = base;
        fake_put_u64(img, frame, L->iframe_stackpointer, base + 8 * (uint64_t)A->yield_from_slot);
    } else {
        *slot = base;
        fake_put_i32(img, frame, L->iframe_stackpointer, 1);
    }
    return coro;
}

/* A coroutine that awaits itself: the chain stops at its bound, said to
 * be incomplete. Two tasks that await each other: a cycle, each awaiting
 * the other once. On 3.14 the tasks are on their thread's list; on 3.12
 * in the eager set (strong references, no WeakSet to build). */
static void test_cycles(unsigned version)
{
    struct process p;
    build(&p, version, 4u << 20);
    const struct py_layout *L = p.img.L;
    uint64_t code = fake_code(&p.img, "spin", "spin"), slot, slots[2];
    uint64_t coro = make_coro(&p, code, &slot);
    fake_put_u64(&p.img, slot, 0, coro);
    uint64_t tasks[3];
    tasks[0] = make_task(&p, coro, 1);
    for (int i = 0; i < 2; i++)
        tasks[1 + i] = make_task(&p, make_coro(&p, fake_code(&p.img, "peer", "peer"), &slots[i]),
                                 2 + i);
    /* each peer awaits the other: its waiter is the other task */
    for (int i = 0; i < 2; i++)
        fake_put_u64(&p.img, tasks[1 + i], L->asyncio.task_fut_waiter, tasks[2 - i]);
    if (L->asyncio.tstate_tasks_head != PY_OFF_NONE) {
        link_tasks(&p, tasks, 3);
        add_tasks_module(&p, NULL, NULL, 0);
    } else {
        const char *eager = "_eager_tasks";
        uint64_t set = make_set(&p, tasks, 3);
        add_tasks_module(&p, &eager, &set, 1);
    }
    map(&p);
    struct report_tasks *r = asyncio_tasks_read(&p.rt, TASKS_PENDING, 1000);
    CHECK(r && r->n_loops == 1 && r->loops[0].n_tasks == 3);
    if (r && r->n_loops == 1 && r->loops[0].n_tasks == 3) {
        const struct report_loop *loop = &r->loops[0];
        for (size_t i = 0; i < 3; i++) {
            const struct report_task *t = &loop->tasks[i];
            if (t->addr == tasks[0]) {
                CHECK_EQ_INT(t->n_chain, ASYNCIO_MAX_CHAIN);
                CHECK(!t->chain_complete);
                CHECK_EQ_STR(t->chain[0].function, "spin");
                CHECK(!t->in_cycle);
                continue;
            }
            CHECK(t->in_cycle);
            CHECK_EQ_INT(t->n_children, 1);
            uint64_t other = t->addr == tasks[1] ? tasks[2] : tasks[1];
            CHECK_EQ_INT(t->n_children ? loop->tasks[t->children[0]].addr : 0, other);
        }
    }
    task_report_free(r);
    destroy(&p);
}

/* 3.8: a WeakSet registry (asyncio.tasks._all_tasks: an instance whose
 * __dict__ holds "data", a set of weak references) with more live tasks
 * than the walk reads, a cleared reference among them; and a coroutine
 * awaiting itself, through frame objects. */
static void test_weakset(void)
{
    struct process p;
    build(&p, V38, 96u << 20);
    struct fake_image *img = &p.img;
    const struct py_layout *L = img->L;
    const struct py_asyncio_layout *A = &L->asyncio;
    size_t count = ASYNCIO_MAX_TASKS + 3;
    uint64_t ref_type = fake_type(img, "weakref");
    uint64_t none = fake_object(img, fake_type(img, "NoneType"), 16);
    uint64_t *refs = malloc((count + 1) * sizeof *refs), spin = 0;
    for (size_t i = 0; i < count + 1; i++) {
        uint64_t task = none;              /* the last: a cleared reference */
        if (i == 0) {
            uint64_t slot, coro = make_coro(&p, fake_code(img, "spin", "spin"), &slot);
            fake_put_u64(img, slot, 0, coro);
            task = spin = make_task(&p, coro, 1);
        } else if (i < count) {
            task = make_task(&p, 0, (int)i + 1);
        }
        refs[i] = fake_object(img, ref_type, 64);
        fake_put_u64(img, refs[i], A->weakref_object, task);
    }
    uint64_t weakset_type = fake_type(img, "WeakSet");
    fake_put_u64(img, weakset_type, L->type_dictoffset, 16);
    const char *data = "data", *all = "_all_tasks";
    uint64_t set = make_set(&p, refs, count + 1);
    uint64_t weakset = fake_object(img, weakset_type, 64);
    fake_put_u64(img, weakset, 16, fake_dict(img, &data, &set, 1));
    add_tasks_module(&p, &all, &weakset, 1);
    map(&p);
    struct report_tasks *r = read_bounded(&p);
    if (r) {
        const struct report_task *t = NULL;
        for (size_t i = 0; r->n_loops && i < r->loops[0].n_tasks; i++)
            if (r->loops[0].tasks[i].addr == spin)
                t = &r->loops[0].tasks[i];
        CHECK(t != NULL);
        if (t) {
            CHECK_EQ_INT(t->n_chain, ASYNCIO_MAX_CHAIN);
            CHECK(!t->chain_complete);
        }
    }
    task_report_free(r);
    free(refs);
    destroy(&p);
}

int main(void)
{
    test_list_bound();
    test_list_broken();
    test_cycles(V312);
    test_cycles(V314);
    test_weakset();
    printf("test_asyncio_walk: %d passed, %d failed\n", unit_counters()[0], unit_counters()[1]);
    return unit_counters()[1] != 0;
}
