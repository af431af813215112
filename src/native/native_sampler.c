/* The C-stack side of the sampler. perf_event path: per thread a task-clock
 * event (samples while it runs) and a context-switch event (a sample each
 * time it leaves the CPU) into one ring, each sample a copy of the user
 * registers and stack top, unwound with libdwfl from the copy. A C stack is
 * used with the Python stack of a pass only when both describe one instant:
 * a switch-out sample of a thread still off CPU, or a sample taken since the
 * last pass while the innermost Python frame did not move. The clock, whose
 * interrupts are most of what sampling costs the target, runs only for
 * threads whose samples can be used so. ptrace fallback: the process is
 * stopped for the pass and unwound live. */
#include "native/native_sampler.h"

#include <asm/perf_regs.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "native/merge.h"
#include "native/unwind.h"
#include "target/cleanup.h"
#include "target/process.h"
#include "target/tracer.h"

/* Bytes of user stack each perf sample copies: the frames of a C call
 * chain down to the innermost interpreter activation (a sample whose copy
 * ends before it is counted and not merged); outer frames are read live.
 * (Measured at 1 kHz on a loaded VM: a 16 KiB copy was some 40% of what
 * a sample cost the target, the interrupt and the record most of the rest.) */
#define STACK_COPY 8192u
#define RING_PAGES 32u          /* data pages per thread (a power of two) */
#define MAX_NATIVE 512
#define PC_SLOTS 65536u
#define MAX_SAMPLE_AGE_NS 1000000000ull
/* Registers asked for, in the order a sample carries them (bit order). */
#define REG_MASK ((1ull << PERF_REG_X86_AX) | (1ull << PERF_REG_X86_BX) | \
                  (1ull << PERF_REG_X86_CX) | (1ull << PERF_REG_X86_DX) | \
                  (1ull << PERF_REG_X86_SI) | (1ull << PERF_REG_X86_DI) | \
                  (1ull << PERF_REG_X86_BP) | (1ull << PERF_REG_X86_SP) | \
                  (1ull << PERF_REG_X86_IP) | (0xffull << PERF_REG_X86_R8))
#define N_REGS 17

struct ns_thread {
    pid_t tid;
    int fd_clock, fd_switch;
    bool clock_on;
    void *ring;
    uint64_t id_switch;          /* PERF_SAMPLE_ID of the switch event */
    /* the newest sample */
    bool have, from_switch;
    uint64_t time;
    uint64_t regs[N_REGS];       /* DWARF order */
    unsigned char *stack;
    size_t stack_len;
    /* the previous pass's look at this thread, and since which pass its
     * Python stack has been the same */
    uint64_t stable_since_ns;
    uint64_t prev_top;
    long prev_instr;
    uint64_t prev_hash;          /* of its Python frame ids */
    bool prev_known;
    bool poked;                  /* interrupted once to get a switch sample */
    bool poke_pending;           /* ... and not back in its call since it was let go */
    bool poke_inflight;          /* interrupted, and not let go yet */
    uint64_t poke_exec_ns;       /* its CPU time when let go */
    uint64_t poke_sleeps;        /* its voluntary switches then */
    /* The addresses of the newest sample, once unwound: passes that use
     * the same sample again (a thread still blocked, or one whose Python
     * stack stands still between two clock ticks) do not unwind it again. */
    uint64_t *pcs;
    int n_pcs, pcs_from_copy;    /* how many, and the first looked for past the copy (-1: none) */
    uint64_t pcs_time;           /* the sample's time; 0 when not unwound */
    /* The profile stack made from those addresses and the Python stack
     * below: a pass with the same C sample and the same Python frames (a
     * thread inside one long C call) takes it as it is. */
    struct {
        bool valid, merged, truncated;
        uint64_t pcs_time;
        uint32_t leaf;
        size_t n_py, n, cap_py, cap;
        uint32_t *py_ids;
        bool *py_entry;
        uint32_t *ids;
    } last;
};

struct pc_slot {
    uint64_t pc;
    uint32_t frame;
    bool internal, is_eval;
};

struct native_sampler {
    struct target *t;
    pid_t pid;
    struct profile *profile;
    enum native_mode mode;
    bool all;
    bool switch_events;          /* off-CPU samples are available */
    uint64_t period_ns;
    struct native_unwinder *u;
    struct ns_thread *threads;
    size_t n_threads, cap_threads;
    struct pc_slot *pcs;
    uint32_t marker;             /* "[C stack not merged]" */
    size_t pokes_open;           /* threads poked and not settled yet */
    uint64_t pass_ns;
    uint64_t refreshed_ns;       /* when modules were last looked for again */
    bool saw_unknown;            /* an address in no known file since */
    struct pc_slot transient;    /* for frames not cached */
    bool paused;
    /* ptrace fallback: the threads stopped for this pass (a signal that
     * arrives at one meanwhile is delivered when it is let go) */
    struct tracer tr;
    size_t page;
    unsigned char *scratch;      /* one sample record, when it wraps the ring */
};

bool native_mode_parse(const char *text, enum native_mode *mode)
{
    static const struct { const char *name; enum native_mode mode; } names[] = {
        {"auto", NATIVE_AUTO}, {"perf", NATIVE_PERF}, {"ptrace", NATIVE_PTRACE}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(text, names[i].name) == 0) {
            *mode = names[i].mode;
            return true;
        }
    return false;
}

enum native_mode native_sampler_mode(const struct native_sampler *ns)
{
    return ns->mode;
}

static int perf_open(pid_t tid, uint64_t config, uint64_t period, size_t ring_bytes)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = config;
    a.sample_period = period;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_REGS_USER |
                    PERF_SAMPLE_STACK_USER;
    a.sample_regs_user = REG_MASK;
    a.sample_stack_user = STACK_COPY;
    a.exclude_hv = 1;
    /* A switch-out happens in the kernel: that event must not exclude it
     * (perf_event_paranoid <= 1 or CAP_PERFMON); the clock samples only
     * user code, which paranoid 2 allows for one's own processes. */
    a.exclude_kernel = config == PERF_COUNT_SW_TASK_CLOCK;
    /* The clock starts when a pass finds a use for it. */
    a.disabled = config == PERF_COUNT_SW_TASK_CLOCK;
    /* Nobody waits on the ring (the passes read it): a wake-up only once
     * it is full, instead of every half ring (an interrupt each). */
    a.watermark = 1;
    a.wakeup_watermark = (uint32_t)ring_bytes;
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;
    return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void close_thread(struct native_sampler *ns, struct ns_thread *th)
{
    if (th->ring)
        munmap(th->ring, (RING_PAGES + 1) * ns->page);
    if (th->fd_switch >= 0)
        close(th->fd_switch);
    if (th->fd_clock >= 0)
        close(th->fd_clock);
    free(th->stack);
    free(th->pcs);
    free(th->last.py_ids);
    free(th->last.py_entry);
    free(th->last.ids);
}

/* Opens the thread's events; -1 with errno when the kernel refuses. */
static int open_events(struct native_sampler *ns, struct ns_thread *th)
{
    th->fd_clock = perf_open(th->tid, PERF_COUNT_SW_TASK_CLOCK, ns->period_ns,
                             RING_PAGES * ns->page);
    if (th->fd_clock < 0)
        return -1;
    th->ring = mmap(NULL, (RING_PAGES + 1) * ns->page, PROT_READ | PROT_WRITE, MAP_SHARED,
                    th->fd_clock, 0);
    if (th->ring == MAP_FAILED) {
        th->ring = NULL;
        return -1;
    }
    if (ns->switch_events) {
        th->fd_switch = perf_open(th->tid, PERF_COUNT_SW_CONTEXT_SWITCHES, 1,
                                  RING_PAGES * ns->page);
        if (th->fd_switch >= 0 &&
            (ioctl(th->fd_switch, PERF_EVENT_IOC_SET_OUTPUT, th->fd_clock) != 0 ||
             ioctl(th->fd_switch, PERF_EVENT_IOC_ID, &th->id_switch) != 0)) {
            close(th->fd_switch);
            th->fd_switch = -1;
        }
    }
    return 0;
}

static struct ns_thread *thread_of(struct native_sampler *ns, pid_t tid)
{
    for (size_t i = 0; i < ns->n_threads; i++)
        if (ns->threads[i].tid == tid)
            return &ns->threads[i];
    if (ns->n_threads == ns->cap_threads) {
        size_t cap = ns->cap_threads ? ns->cap_threads * 2 : 16;
        struct ns_thread *grown = realloc(ns->threads, cap * sizeof *grown);
        if (!grown)
            return NULL;
        ns->threads = grown;
        ns->cap_threads = cap;
    }
    struct ns_thread *th = &ns->threads[ns->n_threads];
    memset(th, 0, sizeof *th);
    th->tid = tid;
    th->fd_clock = th->fd_switch = -1;
    if (ns->mode == NATIVE_PERF) {
        th->stack = malloc(STACK_COPY);
        if (!th->stack || open_events(ns, th) != 0) {
            /* The thread may have exited, or hit a limit (descriptors,
             * locked memory): its samples go without C stacks. */
            close_thread(ns, th);
            th->stack = NULL;
            th->ring = NULL;
            th->fd_clock = th->fd_switch = -1;
        }
    }
    ns->n_threads++;
    return th;
}

void native_sampler_forget(struct native_sampler *ns, pid_t tid)
{
    for (size_t i = 0; i < ns->n_threads; i++)
        if (ns->threads[i].tid == tid) {
            ns->pokes_open -= ns->threads[i].poke_inflight || ns->threads[i].poke_pending;
            close_thread(ns, &ns->threads[i]);
            ns->threads[i] = ns->threads[--ns->n_threads];
            return;
        }
}

static void ring_copy(const unsigned char *data, size_t size, uint64_t pos, void *out, size_t len)
{
    size_t off = (size_t)(pos & (size - 1));
    size_t first = len < size - off ? len : size - off;
    memcpy(out, data + off, first);
    if (first < len)
        memcpy((unsigned char *)out + first, data, len - first);
}

/* Takes the newest sample out of the thread's ring and empties it. */
static void drain(struct native_sampler *ns, struct ns_thread *th)
{
    if (!th->ring)
        return;
    struct perf_event_mmap_page *meta = th->ring;
    const unsigned char *data = (const unsigned char *)th->ring + ns->page;
    size_t size = RING_PAGES * ns->page;
    uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = meta->data_tail;
    uint64_t last = UINT64_MAX;
    uint16_t last_size = 0;
    bool lost = false;
    for (int guard = 0; tail < head && guard < 100000; guard++) {
        struct perf_event_header h;
        ring_copy(data, size, tail, &h, sizeof h);
        if (h.size < sizeof h || tail + h.size > head)
            break;
        if (h.type == PERF_RECORD_SAMPLE) {
            last = tail;
            last_size = h.size;
            lost = false;
            uint64_t id = 0;
            if (h.size >= sizeof h + 24)
                ring_copy(data, size, tail + sizeof h + 16, &id, 8);
            if (th->fd_switch >= 0 && id == th->id_switch)
                ns->profile->meta.native_switch_samples++;
            else
                ns->profile->meta.native_clock_samples++;
        } else if (h.type == PERF_RECORD_LOST) {
            lost = true; /* newer samples than the last one kept were dropped */
            uint64_t n = 0;
            if (h.size >= sizeof h + 16)
                ring_copy(data, size, tail + sizeof h + 8, &n, 8);
            ns->profile->meta.native_lost_samples += n;
        }
        tail += h.size;
    }
    if (lost) {
        th->have = false;
    } else if (last != UINT64_MAX && last_size <= (RING_PAGES * ns->page) &&
               last_size > sizeof(struct perf_event_header) + 40) {
        unsigned char *rec = ns->scratch;
        ring_copy(data, size, last, rec, last_size);
        const unsigned char *p = rec + sizeof(struct perf_event_header);
        const unsigned char *end = rec + last_size;
        uint64_t time, id, abi, regs[N_REGS], stack_size;
        p += 8; /* pid, tid */
        memcpy(&time, p, 8);
        memcpy(&id, p + 8, 8);
        memcpy(&abi, p + 16, 8);
        p += 24;
        bool ok = abi != PERF_SAMPLE_REGS_ABI_NONE && p + sizeof regs + 8 <= end;
        if (ok) {
            memcpy(regs, p, sizeof regs);
            p += sizeof regs;
            memcpy(&stack_size, p, 8);
            p += 8;
            ok = stack_size <= STACK_COPY && p + stack_size + 8 <= end;
        }
        if (ok) {
            uint64_t dyn;
            memcpy(&dyn, p + stack_size, 8);
            size_t len = dyn < stack_size ? (size_t)dyn : (size_t)stack_size;
            memcpy(th->stack, p, len);
            th->stack_len = len;
            /* bit order ax bx cx dx si di bp sp ip r8..r15 -> DWARF order
             * rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */
            static const int from[N_REGS] = {0, 3, 2, 1, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15,
                                             16, 8};
            for (int i = 0; i < N_REGS; i++)
                th->regs[i] = regs[from[i]];
            th->time = time;
            th->from_switch = th->fd_switch >= 0 && id == th->id_switch;
            th->have = true;
        }
    }
    __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
}

/* A thread blocked since before its events were opened has no switch-out
 * sample: one ptrace interrupt (it is blocked anyway, and its system call
 * restarts) makes it leave and re-enter the wait, which the switch event
 * samples. Done once per thread. A thread that cannot stop at once (a
 * throttled cgroup, a busy CPU) is not waited for: it stays in flight, and
 * a later pass lets it go once it has stopped; it is never kept stopped. */
#define POKE_WAIT_US 2000
#define POKE_CLOSE_WAIT_US 1000000
/* Back in its call is asleep again: a voluntary switch since it was let
 * go. Until then it is on its way back, unless it has used more CPU than
 * that way could: it may have left the call for good. The bound is wide
 * because the CPU a thread is charged on the way includes our switch
 * samples of it (a stack copy each time it is preempted) and, on kernels
 * without IRQ_TIME_ACCOUNTING, the interrupts served meanwhile: 160 us
 * median, 320 us at most beside a loaded test run. At a 1 ms bound a
 * thread throttled on its way back read "running" for 220 ms. */
#define POKE_RETURN_MAX_NS 20000000ull

/* Its CPU time and voluntary switches, to tell when it has gone back. */
static bool poke_marks(pid_t pid, pid_t tid, uint64_t *exec_ns, uint64_t *sleeps)
{
    return process_thread_cpu_ns(pid, tid, exec_ns) == 0 &&
           process_thread_voluntary_switches(pid, tid, sleeps) == 0;
}

/* Sets a thread's poke state, counting the threads in one (so that the
 * sampler's questions cost nothing once every poke has settled). */
static void set_poke(struct native_sampler *ns, struct ns_thread *th, bool inflight, bool pending)
{
    bool was = th->poke_inflight || th->poke_pending, is = inflight || pending;
    th->poke_inflight = inflight;
    th->poke_pending = pending;
    ns->pokes_open += (size_t)is - (size_t)was;
}

/* A thread already known, without opening anything for it. */
static struct ns_thread *known_thread(struct native_sampler *ns, pid_t tid)
{
    for (size_t i = 0; ns && ns->pokes_open && i < ns->n_threads; i++)
        if (ns->threads[i].tid == tid)
            return &ns->threads[i];
    return NULL;
}

/* Lets go of a poked thread once it has stopped (waiting up to wait_us for
 * that); false while it has not. */
static bool release_poke(struct native_sampler *ns, struct ns_thread *th, int wait_us)
{
    for (int waited = 0;; waited += 100) {
        int status;
        pid_t got = waitpid(th->tid, &status, __WALL | WNOHANG);
        if (got == th->tid || (got < 0 && errno != EINTR)) {
            bool pending = false;
            if (got == th->tid && WIFSTOPPED(status)) {
                /* A signal that stopped it first is its own: given back. */
                int sig = (status >> 16) != PTRACE_EVENT_STOP ? WSTOPSIG(status) : 0;
                ptrace(PTRACE_DETACH, th->tid, NULL, (void *)(long)sig);
                /* Until it has run its way back, it is still in the call. */
                pending = poke_marks(ns->pid, th->tid, &th->poke_exec_ns, &th->poke_sleeps);
            }
            set_poke(ns, th, false, pending);
            cleanup_thread_released(th->tid);
            return true;
        }
        if (waited >= wait_us)
            return false;
        usleep(100);
    }
}

static void poke(struct native_sampler *ns, struct ns_thread *th)
{
    th->poked = true;
    if (ptrace(PTRACE_SEIZE, th->tid, NULL, NULL) != 0)
        return;
    cleanup_thread_traced(th->tid);
    if (ptrace(PTRACE_INTERRUPT, th->tid, NULL, NULL) != 0) {
        /* Not stopping: released as it is (a seized thread that was never
         * interrupted runs on untouched). */
        ptrace(PTRACE_DETACH, th->tid, NULL, NULL);
        cleanup_thread_released(th->tid);
        return;
    }
    set_poke(ns, th, true, false);
    release_poke(ns, th, POKE_WAIT_US);
}

enum poke_state native_sampler_poke_unrun(struct native_sampler *ns, pid_t tid)
{
    struct ns_thread *th = known_thread(ns, tid);
    uint64_t exec_ns, sleeps;
    if (!th)
        return POKE_NONE;
    if (th->poke_inflight)
        return POKE_ON_ITS_WAY; /* interrupted, not stopped yet: still in its wait */
    if (!th->poke_pending)
        return POKE_NONE;
    bool marked = poke_marks(ns->pid, tid, &exec_ns, &sleeps);
    if (marked && sleeps == th->poke_sleeps && exec_ns >= th->poke_exec_ns &&
        exec_ns - th->poke_exec_ns < POKE_RETURN_MAX_NS)
        return POKE_ON_ITS_WAY;
    set_poke(ns, th, false, false);
    return marked && sleeps != th->poke_sleeps ? POKE_SLEPT_SINCE : POKE_NONE;
}

void native_sampler_poke_settled(struct native_sampler *ns, pid_t tid)
{
    struct ns_thread *th = known_thread(ns, tid);
    uint64_t exec_ns, sleeps;
    /* Back in its call only once it has slept since it was let go: just
     * after, /proc may still show the interrupted call. */
    if (th && th->poke_pending && !th->poke_inflight &&
        poke_marks(ns->pid, tid, &exec_ns, &sleeps) && sleeps != th->poke_sleeps)
        set_poke(ns, th, false, false);
}

struct native_sampler *native_sampler_open(struct target *t, pid_t pid, const char *binary,
                                           enum native_mode mode, bool all, double rate_hz,
                                           struct profile *profile, char *note, size_t note_size,
                                           struct pyscope_error *err)
{
    note[0] = '\0';
    struct native_sampler *ns = calloc(1, sizeof *ns);
    if (!ns || !(ns->pcs = calloc(PC_SLOTS, sizeof *ns->pcs)) ||
        !(ns->scratch = malloc(RING_PAGES * (size_t)sysconf(_SC_PAGESIZE)))) {
        if (ns)
            free(ns->pcs);
        free(ns);
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        return NULL;
    }
    ns->t = t;
    ns->pid = pid;
    ns->profile = profile;
    ns->all = all;
    ns->page = (size_t)sysconf(_SC_PAGESIZE);
    /* Two clock samples per pass interval of CPU time, so that a thread
     * with half a CPU still has one since the last pass; 10 kHz at most.
     * (Four cost the target twice as many interrupts, for samples that are
     * only fresher.) */
    ns->period_ns = rate_hz > 0 ? (uint64_t)(1e9 / rate_hz / 2) : 100000;
    if (ns->period_ns < 100000)
        ns->period_ns = 100000;
    ns->marker = profile_frame_id(profile, PROFILE_NATIVE_NOT_MERGED, "<native>", -1, true);
    const char *interp[2];
    int n_interp = native_interp_paths(t, binary, interp);
    ns->u = native_open(t, interp, n_interp, all, err);
    if (!ns->u || ns->marker == UINT32_MAX) {
        native_sampler_close(ns);
        return NULL;
    }
    ns->mode = mode == NATIVE_PTRACE ? NATIVE_PTRACE : NATIVE_PERF;
    if (ns->mode == NATIVE_PERF) {
        /* Try the main thread's events now, to know whether the kernel
         * allows them at all. */
        int fd = perf_open(pid, PERF_COUNT_SW_TASK_CLOCK, ns->period_ns, RING_PAGES * ns->page);
        int saved = errno;
        if (fd >= 0) {
            close(fd);
            fd = perf_open(pid, PERF_COUNT_SW_CONTEXT_SWITCHES, 1, RING_PAGES * ns->page);
            saved = errno;
            ns->switch_events = fd >= 0;
            if (fd >= 0)
                close(fd);
            else
                snprintf(note, note_size,
                         "perf_event_open refused context-switch samples (%s): no C stacks for "
                         "threads off CPU", strerror(saved));
        } else {
            FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
            int paranoid = -9;
            if (f) {
                if (fscanf(f, "%d", &paranoid) != 1)
                    paranoid = -9;
                fclose(f);
            }
            char why[96];
            if (paranoid != -9)
                snprintf(why, sizeof why, "%s, perf_event_paranoid=%d", strerror(saved), paranoid);
            else
                snprintf(why, sizeof why, "%s", strerror(saved));
            if (mode == NATIVE_PERF) {
                error_set(err, PYSCOPE_ERR_PERMISSION, "perf_event_open refused (%s)", why);
                native_sampler_close(ns);
                return NULL;
            }
            snprintf(note, note_size,
                     "perf_event_open refused (%s): C stacks by ptrace interrupts, which stop "
                     "the process briefly at each pass (at most %.0f Hz)", why,
                     NATIVE_PTRACE_MAX_HZ);
            ns->mode = NATIVE_PTRACE;
        }
    }
    if (mode == NATIVE_PTRACE)
        snprintf(note, note_size,
                 "C stacks by ptrace interrupts (--native-mode=ptrace), which stop the process "
                 "briefly at each pass (at most %.0f Hz)", NATIVE_PTRACE_MAX_HZ);
    return ns;
}

void native_sampler_close(struct native_sampler *ns)
{
    if (!ns)
        return;
    native_sampler_end_pass(ns);
    /* A thread still in flight stops once it gets a CPU: waited for a
     * while, so as not to leave it stopped under a tracer that stays (the
     * agent's, a watch's); when pyscope exits the kernel lets it go. */
    for (size_t i = 0; i < ns->n_threads; i++)
        if (ns->threads[i].poke_inflight)
            release_poke(ns, &ns->threads[i], POKE_CLOSE_WAIT_US);
    for (size_t i = 0; i < ns->n_threads; i++)
        close_thread(ns, &ns->threads[i]);
    free(ns->threads);
    native_close(ns->u);
    free(ns->pcs);
    free(ns->scratch);
    free(ns);
}

/* Stops every thread for the pass through the one tracer (which also lets
 * them go if pyscope dies meanwhile); let go at the end of the pass. */
void native_sampler_begin_pass(struct native_sampler *ns, uint64_t now_ns)
{
    ns->pass_ns = now_ns;
    for (size_t i = 0; ns->pokes_open && i < ns->n_threads; i++)
        if (ns->threads[i].poke_inflight)
            release_poke(ns, &ns->threads[i], 0);
    if (ns->mode != NATIVE_PTRACE || ns->paused)
        return;
    struct pyscope_error err = {0};
    ns->paused = tracer_pause(&ns->tr, ns->pid, &err) == 0 && ns->tr.n > 0;
    if (!ns->paused)
        tracer_release(&ns->tr);
}

void native_sampler_end_pass(struct native_sampler *ns)
{
    if (ns->paused)
        tracer_release(&ns->tr);
    ns->paused = false;
}

static const struct pc_slot *describe(struct native_sampler *ns, uint64_t pc)
{
    uint64_t h = pc * 0x9E3779B97F4A7C15ull;
    size_t slot = (size_t)(h >> 48) & (PC_SLOTS - 1);
    for (size_t probe = 0; probe < 64; probe++, slot = (slot + 1) & (PC_SLOTS - 1)) {
        struct pc_slot *s = &ns->pcs[slot];
        if (s->pc == pc && s->pc)
            return s;
        if (s->pc)
            continue;
        struct report_native_frame f;
        if (native_describe_pc(ns->u, pc, &f) != 0)
            return NULL;
        /* In no file we know of: a library loaded since. Not cached, so
         * that it is named once the files are looked for again. */
        if (!f.module) {
            ns->saw_unknown = true;
            s = &ns->transient;
        }
        struct profile_mapping map = {0}, *mapping = NULL;
        const struct target_map *m = target_find_map(ns->t, pc);
        if (m && m->path) {
            map = (struct profile_mapping){(char *)m->path, m->start, m->end, m->offset};
            mapping = &map;
        }
        uint32_t id = profile_native_frame_id(ns->profile, f.symbol ? f.symbol : "",
                                              f.module ? f.module : "", f.file ? f.file : "",
                                              f.line, pc, mapping);
        s->pc = pc;
        s->frame = id;
        s->internal = f.internal;
        s->is_eval = f.is_eval;
        free(f.symbol);
        free(f.module);
        free(f.file);
        return id == UINT32_MAX ? NULL : s;
    }
    return NULL; /* the table is crowded here: the frame goes without */
}

static size_t python_only(const struct native_py_stack *py, uint32_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = py->n; i-- > 0 && n < max;)
        out[n++] = py->ids[i];
    if (py->leaf != UINT32_MAX && py->n > 0 && n < max)
        out[n++] = py->leaf;
    return n;
}

static bool same_as_last(const struct ns_thread *th, const struct native_py_stack *py,
                         uint64_t sample_time)
{
    return th->last.valid && sample_time && th->last.pcs_time == sample_time &&
           th->last.leaf == py->leaf && th->last.n_py == py->n &&
           memcmp(th->last.py_ids, py->ids, py->n * sizeof *py->ids) == 0 &&
           memcmp(th->last.py_entry, py->is_entry, py->n * sizeof *py->is_entry) == 0;
}

static void remember_last(struct ns_thread *th, const struct native_py_stack *py,
                          uint64_t sample_time, const uint32_t *out, size_t n, bool merged,
                          bool truncated)
{
    th->last.valid = false;
    if (!sample_time)
        return;
    /* Grown to the largest stack seen (+1: never a zero size). */
    if (py->n + 1 > th->last.cap_py) {
        uint32_t *ids = realloc(th->last.py_ids, (py->n + 1) * sizeof *ids);
        if (ids)
            th->last.py_ids = ids;
        bool *entry = ids ? realloc(th->last.py_entry, (py->n + 1) * sizeof *entry) : NULL;
        if (entry)
            th->last.py_entry = entry;
        if (!ids || !entry)
            return;
        th->last.cap_py = py->n + 1;
    }
    if (n + 1 > th->last.cap) {
        uint32_t *grown = realloc(th->last.ids, (n + 1) * sizeof *grown);
        if (!grown)
            return;
        th->last.ids = grown;
        th->last.cap = n + 1;
    }
    memcpy(th->last.py_ids, py->ids, py->n * sizeof *py->ids);
    memcpy(th->last.py_entry, py->is_entry, py->n * sizeof *py->is_entry);
    memcpy(th->last.ids, out, n * sizeof *out);
    th->last.n_py = py->n;
    th->last.n = n;
    th->last.leaf = py->leaf;
    th->last.pcs_time = sample_time;
    th->last.merged = merged;
    th->last.truncated = truncated;
    th->last.valid = true;
}

static void set_clock(struct ns_thread *th, bool on)
{
    if (th->fd_clock < 0 || th->clock_on == on)
        return;
    if (ioctl(th->fd_clock, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0) == 0)
        th->clock_on = on;
}

size_t native_sampler_stack(struct native_sampler *ns, pid_t tid, bool blocked,
                            const struct native_py_stack *py, uint32_t *out, size_t max)
{
    struct profile_meta *meta = &ns->profile->meta;
    struct ns_thread *th = thread_of(ns, tid);
    if (!th) {
        meta->native_missing++;
        return python_only(py, out, max);
    }
    uint64_t pcs[MAX_NATIVE];
    int n_pcs = 0, from_copy = -1;   /* -1: no frame read past a copy (ptrace: none made) */
    uint64_t sample_time = 0;    /* pcs are th->pcs, of the sample taken then */
    if (ns->mode == NATIVE_PTRACE) {
        if (ns->paused)
            n_pcs = native_unwind_pcs(ns->u, tid, pcs, MAX_NATIVE);
    } else {
        drain(ns, th);
        uint64_t hash = 1469598103934665603ull;
        for (size_t i = 0; i < py->n; i++)
            hash = (hash ^ py->ids[i]) * 1099511628211ull;
        if (!th->prev_known || th->prev_top != py->top_frame || th->prev_instr != py->top_instr ||
            th->prev_hash != hash)
            th->stable_since_ns = ns->pass_ns;
        th->prev_known = true;
        th->prev_top = py->top_frame;
        th->prev_instr = py->top_instr;
        th->prev_hash = hash;
        /* Until the next pass, a clock sample can be used only if the
         * Python stack stays as it is; likely for a thread in a C call or
         * one whose stack stood still since the last pass, not for one
         * running Python code. */
        set_clock(th, py->leaf != UINT32_MAX || th->stable_since_ns < ns->pass_ns);
        /* A switch-out sample is the stack of a thread still off CPU. For
         * one on CPU, a sample (a clock tick, or being preempted) counts
         * when taken while the Python stack stood as it is now (seen the
         * same at every pass since), and not long ago. */
        bool same_instant = false;
        if (th->have && blocked)
            same_instant = th->from_switch;
        else if (th->have)
            same_instant = th->time >= th->stable_since_ns &&
                           th->time + MAX_SAMPLE_AGE_NS >= ns->pass_ns;
        if (th->time < py->not_before || th->time > py->not_after)
            same_instant = false;
        if (same_instant && th->pcs && th->pcs_time == th->time) {
            n_pcs = th->n_pcs;
            from_copy = th->pcs_from_copy;
            sample_time = th->time;
            if (same_as_last(th, py, sample_time)) {
                size_t n = th->last.n < max ? th->last.n : max;
                memcpy(out, th->last.ids, n * sizeof *out);
                if (th->last.merged)
                    meta->native_merged++;
                else
                    meta->native_unmerged++;
                if (th->last.truncated)
                    meta->native_truncated++;
                return n;
            }
            memcpy(pcs, th->pcs, (size_t)n_pcs * sizeof *pcs);
        } else if (same_instant) {
            struct native_regs_copy copy = {.sp = th->regs[7], .stack = th->stack,
                                            .stack_len = th->stack_len};
            memcpy(copy.dwarf_regs, th->regs, sizeof copy.dwarf_regs);
            n_pcs = native_unwind_copy(ns->u, tid, &copy, pcs, MAX_NATIVE, &from_copy);
            if (!th->pcs)
                th->pcs = malloc(MAX_NATIVE * sizeof *th->pcs);
            if (th->pcs && n_pcs > 0) {
                memcpy(th->pcs, pcs, (size_t)n_pcs * sizeof *pcs);
                th->n_pcs = n_pcs;
                th->pcs_from_copy = from_copy;
                th->pcs_time = th->time;
                sample_time = th->time;
            }
        } else if (blocked && !th->poked && ns->switch_events && th->ring) {
            poke(ns, th);
        }
    }
    if (n_pcs <= 0) {
        meta->native_missing++;
        return python_only(py, out, max);
    }
    /* The walk ends at code in a file loaded after we looked (it has no
     * unwind info for us): look again, at most once a second. */
    if (ns->saw_unknown && ns->pass_ns - ns->refreshed_ns > 1000000000ull) {
        ns->saw_unknown = false;
        ns->refreshed_ns = ns->pass_ns;
        if (native_refresh_modules(ns->u) == 0)
            n_pcs = ns->mode == NATIVE_PTRACE ? native_unwind_pcs(ns->u, tid, pcs, MAX_NATIVE)
                                              : n_pcs;
    }
    /* Frames past the copied stack were read from the thread as it is now:
     * of the sampled instant too only where the Python stack stood still,
     * i.e. from the innermost interpreter frame out. When the copy ends
     * before that frame, what was read past it may belong to later calls:
     * the sample is shown unmerged with the frames of the copy alone. */
    bool truncated = false, seen_eval = false;
    uint32_t ids[MAX_NATIVE];
    bool is_eval[MAX_NATIVE], shown[MAX_NATIVE];
    for (int i = 0; i < n_pcs; i++) {
        if (i == from_copy && !seen_eval) {
            truncated = true;
            n_pcs = from_copy;
            break;
        }
        const struct pc_slot *s = describe(ns, pcs[i]);
        /* A frame named only for now makes a stack not to be used again. */
        if (!s || s == &ns->transient)
            sample_time = 0;
        ids[i] = s ? s->frame : UINT32_MAX;
        is_eval[i] = s && s->is_eval;
        shown[i] = s && (ns->all || !s->internal);
        seen_eval = seen_eval || is_eval[i];
    }
    /* ... and one that stopped on what it read past the copy. */
    truncated = truncated || (from_copy == n_pcs && !seen_eval);
    struct report_stack_entry entries[MAX_NATIVE + 4096];
    size_t n_entries = 0;
    bool merged = !truncated && py->n + (size_t)n_pcs <= sizeof entries / sizeof entries[0] &&
                  native_merge_order(is_eval, (size_t)n_pcs, py->is_entry, py->n, entries,
                                     &n_entries, NULL, 0) == 0;
    size_t n = 0;
    if (merged) {
        meta->native_merged++;
        for (size_t k = n_entries; k-- > 0 && n < max;) {
            const struct report_stack_entry *e = &entries[k];
            /* The "[C] callable" leaf is left out: the C frames say more. */
            if (e->python)
                out[n++] = py->ids[e->index];
            else if (shown[e->index]) {
                out[n++] = ids[e->index];
            }
        }
        remember_last(th, py, n < max ? sample_time : 0, out, n, true, false);
        return n;
    }
    /* Not matched: the Python stack, then the C stack, never interleaved
     * (truncated: only the frames of the copy). */
    meta->native_unmerged++;
    if (truncated)
        meta->native_truncated++;
    n = python_only(py, out, max);
    if (n < max)
        out[n++] = ns->marker;
    for (int i = n_pcs; i-- > 0 && n < max;)
        if (shown[i])
            out[n++] = ids[i];
    remember_last(th, py, n < max ? sample_time : 0, out, n, false, truncated);
    return n;
}
