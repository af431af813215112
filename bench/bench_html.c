/* Synthesizes a heavy recording through the profile API (by default 10 min
 * at 100 Hz of 50 busy, bursty and idle threads) and writes it as HTML, for
 * bench_html.py to open in Chromium. Usage: see main(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "output/profile_writers.h"
#include "profile/profile.h"

#define RATE_HZ 100
#define PERIOD_NS (1000000000ull / RATE_HZ)
#define N_FUNCS 400
#define N_FILES 40
#define POOL 3000
#define MAX_DEPTH 40
#define THREAD_STACKS 60
#define SYS_READ 0
#define SYS_FUTEX 202
#define SYS_EPOLL_WAIT 232
#define SYS_CLOCK_NANOSLEEP 230
#define NO_SYSCALL 0xffff

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static unsigned below(unsigned n)
{
    return (unsigned)(rnd() % n);
}

/* A random call path: the thread bootstrap, then a walk down a fixed random
 * call graph, so that paths share prefixes as real ones do. */
struct path {
    unsigned funcs[MAX_DEPTH];
    int lines[MAX_DEPTH];
    unsigned depth;
};

static unsigned callees[N_FUNCS][4];
static struct path pool[POOL];

static uint32_t frame_for(struct profile *p, unsigned func, int line)
{
    static const char *const verbs[] = {"handle", "parse", "load", "encode", "decode", "compute",
                                        "render", "fetch", "update", "validate"};
    static const char *const nouns[] = {"request", "row", "config", "frame", "chunk", "payload",
                                        "index", "batch", "record", "token"};
    char name[96], file[96];
    snprintf(name, sizeof name, "%s_%s_%u", verbs[func % 10], nouns[(func / 10) % 10], func);
    snprintf(file, sizeof file, "/srv/app/pkg%u/module_%u.py", func % N_FILES / 8, func % N_FILES);
    return profile_frame_id(p, name, file, line, false);
}

struct live {
    bool open;
    uint32_t stack;
    enum profile_state state;
    bool gc;
    uint16_t syscall;
    uint64_t start_ns;
};

static uint64_t n_segments;

static void observe(struct profile *p, uint32_t thread, struct live *l, uint32_t stack,
                    enum profile_state state, bool gc, uint16_t syscall, uint64_t now)
{
    profile_add_sample(p, thread, stack, state, gc, now);
    if (l->open && l->stack == stack && l->state == state && l->gc == gc && l->syscall == syscall)
        return;
    if (l->open) {
        struct profile_segment seg = {thread, l->stack, (uint8_t)l->state, l->gc, l->syscall,
                                      l->start_ns, now};
        profile_add_segment(p, &seg);
        n_segments++;
    }
    *l = (struct live){true, stack, state, gc, syscall, now};
}

enum kind { CPU, BURSTY, IDLE };

struct bench_thread {
    enum kind kind;
    uint32_t id;
    uint32_t prefix[4];          /* bootstrap frames and the thread's own target */
    unsigned stacks[THREAD_STACKS];
    unsigned current;            /* index into stacks */
    uint16_t idle_syscall;
    struct live live;
};

static uint32_t stack_for(struct profile *p, const struct bench_thread *t, unsigned path_index,
                          int leaf_line_variant, bool gc, uint32_t gc_frame)
{
    uint32_t frames[MAX_DEPTH + 8];
    uint32_t depth = 0;
    for (int i = 0; i < 4; i++)
        frames[depth++] = t->prefix[i];
    const struct path *path = &pool[path_index];
    for (unsigned i = 0; i < path->depth; i++) {
        int line = path->lines[i] + (i + 1 == path->depth ? leaf_line_variant : 0);
        frames[depth++] = frame_for(p, path->funcs[i], line);
    }
    if (gc)
        frames[depth++] = gc_frame;
    return profile_stack_id(p, frames, depth);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_html OUT.html [SECONDS [THREADS [wild]]]\n"
                        "  wild: every busy sample takes any of thousands of deep stacks\n");
        return 2;
    }
    unsigned seconds = argc > 2 ? (unsigned)atoi(argv[2]) : 600;
    unsigned n_threads = argc > 3 ? (unsigned)atoi(argv[3]) : 50;
    bool wild = argc > 4 && strcmp(argv[4], "wild") == 0;
    if (seconds == 0 || n_threads == 0 || n_threads > 10000) {
        fprintf(stderr, "bench_html: bad SECONDS or THREADS\n");
        return 2;
    }
    double t0 = now_s();
    struct profile p;
    if (profile_init(&p) != 0)
        return 1;

    for (unsigned f = 0; f < N_FUNCS; f++)
        for (int k = 0; k < 4; k++)
            callees[f][k] = below(N_FUNCS);
    for (unsigned i = 0; i < POOL; i++) {
        struct path *path = &pool[i];
        path->depth = 4 + below(MAX_DEPTH - 16);
        path->funcs[0] = below(12);   /* few entry points, so prefixes are shared */
        for (unsigned d = 1; d < path->depth; d++)
            path->funcs[d] = callees[path->funcs[d - 1]][below(4)];
        for (unsigned d = 0; d < path->depth; d++)
            path->lines[d] = 10 + (int)(path->funcs[d] * 7 % 300) + (int)below(2) * 3;
    }

    uint32_t boot = profile_frame_id(&p, "Thread._bootstrap", "/usr/lib/python3.12/threading.py", 1002, false);
    uint32_t inner = profile_frame_id(&p, "Thread._bootstrap_inner", "/usr/lib/python3.12/threading.py", 1045, false);
    uint32_t run = profile_frame_id(&p, "Thread.run", "/usr/lib/python3.12/threading.py", 982, false);
    uint32_t gc_frame = profile_frame_id(&p, "<GC>", "<gc>", -1, true);
    static const uint16_t idle_syscalls[] = {SYS_FUTEX, SYS_EPOLL_WAIT, SYS_READ, SYS_CLOCK_NANOSLEEP};

    struct bench_thread *threads = calloc(n_threads, sizeof *threads);
    if (!threads)
        return 1;
    unsigned n_cpu = n_threads * 8 / 25, n_bursty = n_threads / 5;
    for (unsigned i = 0; i < n_threads; i++) {
        struct bench_thread *t = &threads[i];
        t->kind = i < n_cpu ? CPU : i < n_cpu + n_bursty ? BURSTY : IDLE;
        t->id = profile_thread_id(&p, 4000, (pid_t)(4001 + i));
        snprintf(p.threads[t->id].name, sizeof p.threads[t->id].name, "%s-%u",
                 t->kind == CPU ? "cpu" : t->kind == BURSTY ? "bursty" : "idle", i);
        char target[32];
        snprintf(target, sizeof target, "%s_main", t->kind == CPU ? "crunch" : t->kind == BURSTY ? "serve" : "wait");
        t->prefix[0] = boot;
        t->prefix[1] = inner;
        t->prefix[2] = run;
        t->prefix[3] = profile_frame_id(&p, target, "/srv/app/main.py", 40 + (int)i, false);
        for (unsigned k = 0; k < THREAD_STACKS; k++)
            t->stacks[k] = below(POOL);
        t->idle_syscall = idle_syscalls[i % 4];
    }

    uint64_t passes = (uint64_t)seconds * RATE_HZ;
    uint64_t busy = 0, gc_passes = 0, collections = 0;
    uint32_t *stack_of = calloc(n_threads, sizeof *stack_of);
    enum profile_state *state_of = calloc(n_threads, sizeof *state_of);
    if (!stack_of || !state_of)
        return 1;
    for (uint64_t pass = 0; pass < passes; pass++) {
        uint64_t now = pass * PERIOD_NS;
        bool gc = pass % 300 < 3;          /* a 30 ms collection every 3 s */
        if (gc) {
            gc_passes++;
            collections += pass % 300 == 0;
        }
        /* Who may want the GIL this pass; one of them holds it. */
        unsigned wanting = 0, holder = n_threads;
        for (unsigned i = 0; i < n_threads; i++) {
            struct bench_thread *t = &threads[i];
            bool active = t->kind == CPU || (t->kind == BURSTY && (pass / 100 + i) % 3 == 0);
            if (active && below(++wanting) == 0)
                holder = i;
        }
        for (unsigned i = 0; i < n_threads; i++) {
            struct bench_thread *t = &threads[i];
            bool active = t->kind == CPU || (t->kind == BURSTY && (pass / 100 + i) % 3 == 0);
            bool woken = t->kind == IDLE && (pass + i * 37) % 500 == 0;
            enum profile_state state;
            uint16_t syscall = NO_SYSCALL;
            if (active || woken) {
                /* Mostly the same function as last pass; sometimes another. */
                if (below(10) < 3)
                    t->current = below(5) < 4 ? below(8) : below(THREAD_STACKS);
                state = i == holder || woken ? PROFILE_HOLDING_GIL
                        : below(10) == 0     ? PROFILE_RUNNING
                                             : PROFILE_WAITING_GIL;
                if (state == PROFILE_WAITING_GIL)
                    syscall = SYS_FUTEX;
            } else {
                state = PROFILE_IDLE;
                syscall = t->idle_syscall;
            }
            bool in_gc = gc && i == holder;
            unsigned path = t->stacks[t->kind == IDLE && !woken ? 0 : t->current];
            if (wild && (active || woken))
                path = below(POOL);
            uint32_t stack = stack_for(&p, t, path, (int)below(3), in_gc, gc_frame);
            observe(&p, t->id, &t->live, stack, state, in_gc,
                    state == PROFILE_IDLE ? syscall : NO_SYSCALL, now);
            stack_of[i] = stack;
            state_of[i] = state;
        }
        if (holder < n_threads) {
            busy++;
            if (wanting > 1)
                profile_add_hog(&p, stack_of[holder], below(20) == 0);
        }
    }
    for (unsigned i = 0; i < n_threads; i++) {
        struct live *l = &threads[i].live;
        struct profile_segment seg = {threads[i].id, l->stack, (uint8_t)l->state, l->gc, l->syscall,
                                      l->start_ns, passes * PERIOD_NS};
        profile_add_segment(&p, &seg);
        n_segments++;
    }
    p.meta.pid = 4000;
    snprintf(p.meta.command, sizeof p.meta.command, "python3 /srv/app/main.py --workers %u", n_threads);
    snprintf(p.meta.python_version, sizeof p.meta.python_version, "3.12.1");
    p.meta.start_unix_ns = 1767225600000000000ull;
    p.meta.duration_ns = passes * PERIOD_NS;
    p.meta.rate_hz = RATE_HZ;
    p.meta.passes = passes;
    p.meta.passes_failed = passes / 1000;
    p.meta.stacks_sampled = passes * n_threads;
    p.meta.stacks_torn = passes / 2000;
    p.meta.gil_busy_passes = busy;
    p.meta.gc_passes = gc_passes;
    p.meta.gc_collections = collections;
    double t1 = now_s();

    FILE *out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    int rc = profile_write_html(out, &p, NULL);
    if (fclose(out) != 0)
        rc = -1;
    double t2 = now_s();
    struct stat st;
    if (rc != 0 || stat(argv[1], &st) != 0) {
        fprintf(stderr, "bench_html: writing %s failed\n", argv[1]);
        return 1;
    }
    printf("recording: %u s at %d Hz, %u threads, %llu samples, %llu segments, %zu frames, "
           "%zu stacks, %zu counts (built in %.1f s)\n",
           seconds, RATE_HZ, n_threads, (unsigned long long)(passes * n_threads),
           (unsigned long long)n_segments, p.n_frames, p.n_stacks, p.n_counts, t1 - t0);
    printf("html: %s, %.2f MB, written in %.2f s\n", argv[1], (double)st.st_size / 1e6, t2 - t1);
    free(stack_of);
    free(state_of);
    free(threads);
    profile_free(&p);
    return 0;
}
