/* Thread listing (py_snapshot_read), frame walking (py_walk_frames) and the
 * wait analysis (python/waits.c with diagnosis/waits.c) on in-memory images
 * of a process, laid out with the generated layout of each version: 3.8 and
 * 3.10 (PyFrameObject chains, kernel tids found through the pthread struct),
 * 3.11 (cframe, is_entry), 3.13 (current_frame, a C-stack entry frame) and
 * 3.14 (tagged executables, an interpreter base frame). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_target.h"
#include "fake_python.h"
#include "python/code.h"
#include "python/frames.h"
#include "python/layout.h"
#include "python/objects.h"
#include "python/runtime.h"
#include "python/stacks.h"
#include "python/threads.h"
#include "python/waits.h"
#include "target/process.h"
#include "target/syscalls.h"
#include "unit.h"

#define BASE FAKE_BASE
#define IMAGE_SIZE (4u << 20)
#define PTHREAD_TID 720            /* glibc's struct pthread.tid, what threads.c looks for */

/* One frame running code, linked to previous (outer); returns its address. */
static uint64_t make_frame(struct fake_image *img, uint64_t code, uint64_t previous, int owner)
{
    const struct py_layout *L = img->L;
    if (L->frames == PY_FRAMES_OBJECTS) {
        uint64_t f = fake_object(img, img->frame_type, (size_t)L->frame_size);
        fake_put_u64(img, f, L->frame_back, previous);
        fake_put_u64(img, f, L->frame_code, code);
        fake_put_i32(img, f, L->frame_lasti, 4);
        if (L->frame_executing != PY_OFF_NONE)
            fake_put_u8(img, f, L->frame_executing, 1);
        else
            fake_put_u8(img, f, L->frame_state, 0); /* FRAME_EXECUTING */
        return f;
    }
    uint64_t f = fake_alloc(img, (size_t)L->iframe_size + 64);
    /* 3.14+ executables are stack references: a tag bit must not matter */
    fake_put_u64(img, f, L->iframe_executable, code ? code | (L->stackref_tagged ? 1 : 0) : 0);
    fake_put_u64(img, f, L->iframe_previous, previous);
    fake_put_u64(img, f, L->iframe_instr_ptr, code ? code + (uint64_t)L->code_code_adaptive + 4 : 0);
    fake_put_u8(img, f, L->iframe_owner, (uint8_t)owner);
    return f;
}

struct process {
    struct fake_image img;
    struct target *t;
    struct py_runtime rt;
    struct py_reader r;
    uint64_t tstates[2];
    uint64_t top[2];
    uint64_t codes[3];
    pid_t tids[2];
    uint64_t gil;
};

/* The bottom of a thread's chain, where C entered Python: a C-stack or base
 * frame (3.12+), or is_entry on the outermost Python frame (3.11). */
static uint64_t entry_frame(struct fake_image *img)
{
    const struct py_layout *L = img->L;
    if (L->frames == PY_FRAMES_OBJECTS)
        return 0;
    if (L->owner_interpreter >= 0)
        return make_frame(img, 0, 0, L->owner_interpreter);
    if (L->owner_cstack >= 0)
        return make_frame(img, 0, 0, L->owner_cstack);
    return 0;
}

/* A process with two threads: the main one in inner <- middle <- <module>,
 * holding the GIL; a worker in run. */
static void build(struct process *p, unsigned version)
{
    memset(p, 0, sizeof *p);
    const struct py_layout *L = py_layout_for_version(version);
    CHECK(L != NULL);
    struct fake_image *img = &p->img;
    fake_image_init(img, L, IMAGE_SIZE);

    uint64_t runtime = fake_alloc(img, (size_t)L->runtime_size);
    uint64_t interp = fake_alloc(img, (size_t)L->interp_size);
    fake_put_u64(img, runtime, L->runtime_interpreters_head, interp);
    uint64_t gil = L->interp_gil_ptr != PY_OFF_NONE ? fake_alloc(img, (size_t)L->gil_size)
                                                    : runtime + (uint64_t)L->runtime_gil;
    if (L->interp_gil_ptr != PY_OFF_NONE)
        fake_put_u64(img, interp, L->interp_gil_ptr, gil);

    p->codes[0] = fake_code(img, "<module>", "<module>");
    p->codes[1] = fake_code(img, "middle", "App.middle");
    p->codes[2] = fake_code(img, "inner", "App.inner");
    uint64_t run = fake_code(img, "run", "Worker.run");

    uint64_t outer = make_frame(img, p->codes[0], entry_frame(img), L->owner_thread);
    if (L->iframe_is_entry != PY_OFF_NONE)
        fake_put_u8(img, outer, L->iframe_is_entry, 1);
    uint64_t middle = make_frame(img, p->codes[1], outer, L->owner_thread);
    p->top[0] = make_frame(img, p->codes[2], middle, L->owner_thread);
    p->top[1] = make_frame(img, run, entry_frame(img), L->owner_thread);
    if (L->iframe_is_entry != PY_OFF_NONE)
        fake_put_u8(img, p->top[1], L->iframe_is_entry, 1);

    p->tids[0] = 4242;
    p->tids[1] = 4243;
    for (int i = 0; i < 2; i++) {
        uint64_t ts = fake_alloc(img, (size_t)L->tstate_size);
        p->tstates[i] = ts;
        fake_put_u64(img, ts, L->tstate_interp, interp);
        /* pthread_t is the address of glibc's struct pthread */
        uint64_t pthread = fake_alloc(img, 2048);
        fake_put_i32(img, pthread, PTHREAD_TID, p->tids[i]);
        fake_put_u64(img, ts, L->tstate_thread_id, pthread);
        if (L->tstate_native_thread_id != PY_OFF_NONE)
            fake_put_u64(img, ts, L->tstate_native_thread_id, (uint64_t)p->tids[i]);
        if (L->tstate_frame != PY_OFF_NONE) {
            fake_put_u64(img, ts, L->tstate_frame, p->top[i]);
        } else if (L->tstate_current_frame != PY_OFF_NONE) {
            fake_put_u64(img, ts, L->tstate_current_frame, p->top[i]);
        } else {
            uint64_t cframe = fake_alloc(img, 64);
            fake_put_u64(img, cframe, L->cframe_current_frame, p->top[i]);
            fake_put_u64(img, ts, L->tstate_cframe, cframe);
        }
    }
    fake_put_u64(img, interp, L->interp_threads_head, p->tstates[0]);
    fake_put_u64(img, p->tstates[0], L->tstate_next, p->tstates[1]);
    fake_put_u64(img, p->tstates[1], L->tstate_prev, p->tstates[0]);
    p->gil = gil;
    fake_put_u64(img, gil, L->gil_last_holder, p->tstates[0]);
    fake_put_i32(img, gil, L->gil_locked, 1);

    p->t = fake_target_new();
    CHECK_EQ_INT(fake_target_map(p->t, BASE, img->bytes, img->used), 0);
    p->rt.target = p->t;
    p->rt.layout = *L;
    p->rt.version_hex = version;
    p->rt.runtime_addr = runtime;
    py_reader_init(&p->r, &p->rt);
}

static void destroy(struct process *p)
{
    fake_target_free(p->t);
    fake_image_free(&p->img);
}

/* Maps the image again after a change to its bytes. */
static void remap(struct process *p)
{
    fake_target_free(p->t);
    p->t = fake_target_new();
    CHECK_EQ_INT(fake_target_map(p->t, BASE, p->img.bytes, p->img.used), 0);
    p->rt.target = p->t;
    py_reader_init(&p->r, &p->rt);
}

static enum py_walk_status walk(struct process *p, uint64_t top, char names[][256], size_t *count)
{
    struct py_code_cache *codes = calloc(1, sizeof *codes);
    struct py_walker w = {.reader = &p->r, .codes = codes, .skip_lines = true};
    struct py_frame frames[16];
    enum py_walk_status st = py_walk_frames(&w, top, frames, 16, count);
    for (size_t i = 0; i < *count; i++) {
        const struct py_code *c = py_code_get(codes, &p->r, frames[i].code_addr);
        snprintf(names[i], 256, "%s", c ? c->qualname : "?");
    }
    py_code_cache_clear(codes);
    free(codes);
    return st;
}

static void test_version(unsigned version)
{
    struct process p;
    build(&p, version);
    const struct py_layout *L = &p.rt.layout;
    bool qualified = L->code_qualname != PY_OFF_NONE;

    struct py_snapshot snap;
    CHECK_EQ_INT(py_snapshot_read(&p.r, p.tids, 2, &snap), 0);
    CHECK_EQ_INT(snap.n_interps, 1);
    CHECK_EQ_INT(snap.n_threads, 2);
    CHECK(!snap.truncated);
    for (int i = 0; i < snap.n_threads && i < 2; i++) {
        CHECK_EQ_INT(snap.threads[i].tstate, p.tstates[i]);
        CHECK_EQ_INT(snap.threads[i].tid, p.tids[i]);
        CHECK_EQ_INT(snap.threads[i].top_frame, p.top[i]);
        CHECK_EQ_INT(snap.threads[i].holds_gil, i == 0);
    }
    CHECK_EQ_INT(snap.interps[0].gil_holder, p.tstates[0]);
    py_snapshot_free(&snap);

    char names[16][256];
    size_t n = 0;
    CHECK_EQ_INT(walk(&p, p.top[0], names, &n), PY_WALK_OK);
    CHECK_EQ_INT(n, 3);
    if (n == 3) {
        CHECK_EQ_STR(names[0], qualified ? "App.inner" : "inner");
        CHECK_EQ_STR(names[1], qualified ? "App.middle" : "middle");
        CHECK_EQ_STR(names[2], "<module>");
    }
    CHECK_EQ_INT(walk(&p, p.top[1], names, &n), PY_WALK_OK);
    CHECK_EQ_INT(n, 1);

    /* Each walked frame still running the code walked: yes, until the
     * middle one's slot holds a call of another function (a copy torn by
     * a thread that came back to the same top frame). */
    {
        struct py_code_cache *codes = calloc(1, sizeof *codes);
        struct py_walker w = {.reader = &p.r, .codes = codes, .skip_lines = true};
        struct py_frame frames[16];
        size_t count = 0;
        CHECK_EQ_INT(py_walk_frames(&w, p.top[0], frames, 16, &count), PY_WALK_OK);
        CHECK_EQ_INT(count, 3);
        CHECK(py_frames_still(&p.r, frames, count));
        long at = L->frames == PY_FRAMES_OBJECTS ? L->frame_code : L->iframe_executable;
        unsigned char was[8];
        memcpy(was, p.img.bytes + (frames[1].frame_addr - BASE) + at, 8);
        fake_put_u64(&p.img, frames[1].frame_addr, at, fake_code(&p.img, "other", "other"));
        remap(&p);
        CHECK(!py_frames_still(&p.r, frames, count));
        CHECK(py_frames_still(&p.r, frames, 1)); /* the top alone does not tell */
        fake_put(&p.img, frames[1].frame_addr, at, was, 8);
        remap(&p);
        CHECK(py_frames_still(&p.r, frames, count));
        py_code_cache_clear(codes);
        free(codes);
    }

    /* A frame pointer into unmapped memory is unreadable, not a frame. */
    CHECK_EQ_INT(walk(&p, BASE + IMAGE_SIZE + 0x1000, names, &n), PY_WALK_UNREADABLE);

    /* A chain read while it changed: the middle frame's code replaced by a
     * str (3.8-3.12: no frame runs anything but code), or on 3.11+ a chain
     * that no longer reaches its entry frame. */
    unsigned char saved[8];
    long code_off = L->frames == PY_FRAMES_OBJECTS ? L->frame_code : L->iframe_executable;
    long back_off = L->frames == PY_FRAMES_OBJECTS ? L->frame_back : L->iframe_previous;
    uint64_t second;
    memcpy(&second, p.img.bytes + (p.top[0] - BASE) + back_off, 8);
    memcpy(saved, p.img.bytes + (second - BASE) + code_off, 8);
    fake_put_u64(&p.img, second, code_off, fake_str(&p.img, "not code"));
    remap(&p);
    enum py_walk_status torn = walk(&p, p.top[0], names, &n);
    if (L->executable_any)
        CHECK(torn == PY_WALK_OK && n == 2); /* a non-code executable is skipped */
    else
        CHECK_EQ_INT(torn, PY_WALK_INVALID);
    fake_put(&p.img, second, code_off, saved, 8);

    if (L->frames == PY_FRAMES_OBJECTS) {
        /* A frame object that finished executing belongs to no live stack. */
        long flag = L->frame_executing != PY_OFF_NONE ? L->frame_executing : L->frame_state;
        fake_put_u8(&p.img, second, flag, L->frame_executing != PY_OFF_NONE ? 0 : 1);
        remap(&p);
        CHECK_EQ_INT(walk(&p, p.top[0], names, &n), PY_WALK_INVALID);
        fake_put_u8(&p.img, second, flag, L->frame_executing != PY_OFF_NONE ? 1 : 0);
    } else {
        /* Cut below the middle frame: the chain ends without an entry. */
        fake_put_u64(&p.img, second, back_off, 0);
        remap(&p);
        CHECK_EQ_INT(walk(&p, p.top[0], names, &n), PY_WALK_INVALID);
    }

    /* A thread list that leads back to a state already read ends there. */
    fake_put_u64(&p.img, p.tstates[1], L->tstate_next, p.tstates[0]);
    remap(&p);
    CHECK_EQ_INT(py_snapshot_read(&p.r, p.tids, 2, &snap), 0);
    CHECK_EQ_INT(snap.n_threads, 2);
    CHECK(snap.truncated);
    py_snapshot_free(&snap);
    destroy(&p);
}

/* Memory outside the process image for what a syscall's arguments point
 * to (a nanosleep's timespec). */
#define ARGS_BASE 0x900000u

/* The main thread runs holding the GIL; the worker is as the kernel reports
 * it in a. Collects the report as dump and why do, analyses its waits, and
 * returns the worker's (NULL when the report is not what was built). */
static const struct report_wait *worker_wait(struct process *p, const struct thread_activity *a,
                                             struct stack_report *report, struct stacks_raw *raw)
{
    const struct thread_activity running = {.run_state = 'R', .on_cpu = true, .syscall_nr = -1};
    CHECK_EQ_INT(fake_target_set_thread(p->t, p->tids[0], &running), 0);
    CHECK_EQ_INT(fake_target_set_thread(p->t, p->tids[1], a), 0);
    memset(report, 0, sizeof *report);
    memset(raw, 0, sizeof *raw);
    struct stacks_options opts = {.paused = true, .raw = raw};
    struct pyscope_error err = {0};
    CHECK_EQ_INT(stacks_collect(&p->rt, &opts, report, &err), 0);
    CHECK_EQ_INT(report->n_threads, 2);
    if (report->n_threads != 2)
        return NULL;
    CHECK_EQ_INT(report->threads[0].tid, p->tids[0]);
    CHECK_EQ_INT(report->threads[1].tid, p->tids[1]);
    struct waits_ctx *ctx = waits_new(&p->rt);
    CHECK(ctx != NULL);
    CHECK_EQ_INT(ctx ? waits_analyze(ctx, report, raw) : -1, 0);
    waits_free(ctx);
    const struct report_wait *main_wait = report->threads[0].wait;
    CHECK(main_wait && main_wait->kind == WAIT_NONE);
    return report->threads[1].wait;
}

static void done(struct stack_report *report, struct stacks_raw *raw)
{
    stack_report_free(report);
    stacks_raw_free(raw);
}

/* A cache kept between walks takes its entry for an address only while the
 * object there is the code object it read: one compiled anew from the same
 * source (same names, same first line) has a line table of its own. */
static void test_verified_codes(unsigned version)
{
    struct process p;
    build(&p, version);
    const struct py_layout *L = &p.rt.layout;
    struct py_code_cache *codes = calloc(1, sizeof *codes);
    uint64_t addr = p.codes[1];
    const struct py_code *c = py_code_get_verified(codes, &p.r, addr);
    CHECK(c != NULL);
    uint64_t first = c ? c->serial : 0;
    c = py_code_get_verified(codes, &p.r, addr);
    CHECK(c && c->serial == first);
    uint64_t table = fake_object(&p.img, p.img.bytes_type, (size_t)L->bytes_sval + 1);
    fake_put_u64(&p.img, table, L->ob_size, 0);
    fake_put_u64(&p.img, addr, L->code_linetable, table);
    remap(&p);
    c = py_code_get_verified(codes, &p.r, addr);
    CHECK(c && c->serial != first && c->linetable_obj == table);
    uint64_t second = c ? c->serial : 0;
    fake_put_u64(&p.img, addr, L->code_name, fake_str(&p.img, "other"));
    remap(&p);
    c = py_code_get_verified(codes, &p.r, addr);
    CHECK(c && c->serial != second && strcmp(c->name, "other") == 0);
    py_code_cache_clear(codes);
    free(codes);
    destroy(&p);
}

static void test_waits(unsigned version)
{
    struct process p;
    build(&p, version);
    struct stack_report report;
    struct stacks_raw raw;
    const struct report_wait *w;

    /* In futex on the GIL's own memory: a GIL wait, on the thread holding it. */
    struct thread_activity a = {.run_state = 'S', .syscall_nr = SYSCALL_NR_FUTEX,
                                .syscall_args = {p.gil, 0x80, 0, 0}};
    w = worker_wait(&p, &a, &report, &raw);
    CHECK(w && w->kind == WAIT_GIL && w->gil_holder == 0 && w->syscall == NULL);
    CHECK_EQ_INT(report.threads[1].state, THREAD_WAITING_GIL);
    done(&report, &raw);

    /* A futex no lock in its frames sleeps on: a futex wait, its timeout
     * the fourth argument's. */
    uint64_t elsewhere = BASE + IMAGE_SIZE - 64;
    a = (struct thread_activity){.run_state = 'S', .syscall_nr = SYSCALL_NR_FUTEX,
                                 .syscall_args = {elsewhere, 0x80, 0, 0}};
    w = worker_wait(&p, &a, &report, &raw);
    CHECK(w && w->kind == WAIT_FUTEX && w->timeout == WAIT_TIMEOUT_NONE && w->lock == 0);
    CHECK(w && w->syscall && strcmp(w->syscall, "futex") == 0);
    done(&report, &raw);
    a.syscall_args[3] = ARGS_BASE;
    w = worker_wait(&p, &a, &report, &raw);
    CHECK(w && w->kind == WAIT_FUTEX && w->timeout == WAIT_TIMEOUT_SET);
    done(&report, &raw);

    /* nanosleep(req): the time asked for, read where req points; only an
     * upper bound of what is left. */
    int64_t ts[2] = {2, 500000000};
    CHECK_EQ_INT(fake_target_map(p.t, ARGS_BASE, ts, sizeof ts), 0);
    a = (struct thread_activity){.run_state = 'S', .syscall_nr = NR_NANOSLEEP,
                                 .syscall_args = {ARGS_BASE, 0}};
    w = worker_wait(&p, &a, &report, &raw);
    CHECK(w && w->kind == WAIT_SLEEP && w->timeout == WAIT_TIMEOUT_SET);
    CHECK(w && w->sleep_seconds == 2.5 && w->sleep_upper_bound);
    done(&report, &raw);
    /* clock_nanosleep to an absolute deadline: the time left needs the
     * target's clock now, which an instant of memory cannot tell. */
    a = (struct thread_activity){.run_state = 'S', .syscall_nr = NR_CLOCK_NANOSLEEP,
                                 .syscall_args = {1 /* CLOCK_MONOTONIC */, 1 /* TIMER_ABSTIME */,
                                                  ARGS_BASE, 0}};
    w = worker_wait(&p, &a, &report, &raw);
    CHECK(w && w->kind == WAIT_SLEEP && w->sleep_seconds < 0);
    done(&report, &raw);
    /* A request pointer into nothing: still a sleep, of unknown length. */
    a.syscall_args[2] = 0x10;
    w = worker_wait(&p, &a, &report, &raw);
    CHECK(w && w->kind == WAIT_SLEEP && w->sleep_seconds < 0);
    done(&report, &raw);

    /* wait4(777) and waitid(P_ALL): a child, without timeout; the child's
     * name needs other processes, which this target cannot show. */
    a = (struct thread_activity){.run_state = 'S', .syscall_nr = NR_WAIT4,
                                 .syscall_args = {777, 0, 0, 0}};
    w = worker_wait(&p, &a, &report, &raw);
    CHECK(w && w->kind == WAIT_CHILD && w->child == 777 && w->timeout == WAIT_TIMEOUT_NONE);
    CHECK(w && w->child_command[0] == '\0');
    done(&report, &raw);
    a = (struct thread_activity){.run_state = 'S', .syscall_nr = NR_WAITID,
                                 .syscall_args = {0 /* P_ALL */, 0, 0, 4}};
    w = worker_wait(&p, &a, &report, &raw);
    CHECK(w && w->kind == WAIT_CHILD && w->child == -1);
    done(&report, &raw);

    /* read(5): file or pipe I/O on fd 5; without /proc, neither a socket
     * nor the fd's target can be told. */
    a = (struct thread_activity){.run_state = 'S', .syscall_nr = NR_READ,
                                 .syscall_args = {5, 0x1000, 64}};
    w = worker_wait(&p, &a, &report, &raw);
    CHECK(w && w->kind == WAIT_IO && w->io_fd == 5 && w->io_target[0] == '\0' &&
          !w->uninterruptible && w->syscall && strcmp(w->syscall, "read") == 0);
    done(&report, &raw);

    /* The same read in uninterruptible sleep (D): I/O, said so. */
    a.run_state = 'D';
    w = worker_wait(&p, &a, &report, &raw);
    CHECK(w && w->kind == WAIT_IO && w->io_fd == 5 && w->uninterruptible);
    done(&report, &raw);

    /* pause(): blocked in a syscall no analysis explains. */
    a = (struct thread_activity){.run_state = 'S', .syscall_nr = 34};
    w = worker_wait(&p, &a, &report, &raw);
    CHECK(w && w->kind == WAIT_SYSCALL && w->syscall && strcmp(w->syscall, "pause") == 0);
    done(&report, &raw);

    /* On a CPU without the GIL, its innermost frame at an instruction that
     * calls nothing: no bytecode runs without the GIL, so it is between the
     * futex wake-up and taking the GIL, a GIL wait on the holder. */
    a = (struct thread_activity){.run_state = 'R', .on_cpu = true, .syscall_nr = -1};
    w = worker_wait(&p, &a, &report, &raw);
    CHECK_EQ_INT(report.threads[1].state, THREAD_WAITING_GIL);
    CHECK(w && w->kind == WAIT_GIL && w->gil_holder == 0);
    done(&report, &raw);
    destroy(&p);
}

/* A copy grown to a thread found deeper than it: only the bytes it lacked
 * are read, and a copy that cannot grow is left as it was. */
static void test_copy_extend(void)
{
    enum { MAPPED = 256 };
    unsigned char mem[MAPPED];
    for (size_t i = 0; i < MAPPED; i++)
        mem[i] = (unsigned char)(i * 7 + 1);
    struct target *t = fake_target_new();
    CHECK_EQ_INT(fake_target_map(t, BASE, mem, MAPPED), 0);
    struct py_reader r = {.t = t};
    struct py_stack_copy copy = {0};
    CHECK_EQ_INT(py_stack_copy_extend(&r, &copy, BASE + 64), -1); /* nothing to grow */
    copy.base = BASE;
    copy.len = 32;
    copy.cap = 32;
    copy.buf = malloc(32);
    CHECK(copy.buf != NULL);
    memset(copy.buf, 0xee, 32); /* the copy's older bytes stay as they were */
    CHECK_EQ_INT(py_stack_copy_extend(&r, &copy, BASE + 16), 0);
    CHECK_EQ_INT(copy.len, 32);
    CHECK_EQ_INT(py_stack_copy_extend(&r, &copy, BASE + 200), 0);
    CHECK_EQ_INT(copy.len, 200);
    CHECK(copy.buf[31] == 0xee);
    CHECK(memcmp(copy.buf + 32, mem + 32, 168) == 0);
    CHECK_EQ_INT(py_stack_copy_extend(&r, &copy, BASE + MAPPED + 64), -1); /* unmapped */
    CHECK_EQ_INT(copy.len, 200);
    CHECK_EQ_INT(py_stack_copy_extend(&r, &copy, BASE + PY_STACK_COPY_MAX + 8), -1);
    CHECK_EQ_INT(copy.len, 200);
    py_stack_copy_free(&copy);
    fake_target_free(t);
}

int main(void)
{
    test_copy_extend();
    test_version(0x030812f0); /* 3.8.18 */
    test_version(0x030a0df0); /* 3.10.13 */
    test_version(0x030b07f0); /* 3.11.7 */
    test_version(0x030d00f0); /* 3.13.0 */
    test_version(0x030e0af0); /* 3.14.10 */
    test_verified_codes(0x030812f0);
    test_verified_codes(0x030b07f0);
    test_verified_codes(0x030e0af0);
    test_waits(0x030812f0);
    test_waits(0x030a0df0);
    test_waits(0x030b07f0);
    test_waits(0x030d00f0);
    test_waits(0x030e0af0);
    return unit_report("test_frames_threads");
}
