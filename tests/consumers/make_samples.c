/* Builds a made-up but realistic recording (a main thread joining, a worker
 * computing, one waiting for the GIL, one in native code, a GC) through the
 * profile API and writes it in every format, for the consumer checks in
 * this directory. Usage: make_samples OUTDIR */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "output/profile_writers.h"
#include "profile/profile.h"

#define PASSES 600
#define PERIOD_NS 10000000ull   /* 100 Hz */
#define SYS_FUTEX 202
#define SYS_CLOCK_NANOSLEEP 230

struct live {
    bool open;
    uint32_t stack;
    enum profile_state state;
    bool gc;
    uint16_t syscall;
    uint64_t start_ns;
};

static uint32_t stack_of(struct profile *p, const char *const *spec, int n)
{
    uint32_t ids[16];
    for (int i = 0; i < n; i++) {
        /* "function file line" */
        char function[64], file[64];
        int line;
        if (sscanf(spec[i], "%63s %63s %d", function, file, &line) != 3)
            return UINT32_MAX;
        ids[i] = profile_frame_id(p, function, file, line, function[0] == '<' && line < 0);
    }
    return profile_stack_id(p, ids, (uint32_t)n);
}

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
    }
    *l = (struct live){true, stack, state, gc, syscall, now};
}

static int write_file(const char *dir, const char *name,
                      int (*writer)(FILE *, const struct profile *, const struct profile_write_options *),
                      const struct profile *p, const struct profile_write_options *o)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "make_samples: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = writer(f, p, o);
    if (fclose(f) != 0)
        rc = -1;
    if (rc != 0)
        fprintf(stderr, "make_samples: writing %s failed\n", path);
    return rc;
}

static int summary_writer(FILE *f, const struct profile *p, const struct profile_write_options *o)
{
    (void)o;
    return profile_write_summary(f, p);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_samples OUTDIR\n");
        return 2;
    }
    mkdir(argv[1], 0755);
    struct profile p;
    if (profile_init(&p) != 0)
        return 1;

    static const char *const main_spec[] = {"<module> app.py 40", "main app.py 35",
                                            "join threading.py 1119",
                                            "_wait_for_tstate_lock threading.py 1139"};
    static const char *const compute_spec[] = {"_bootstrap threading.py 1002", "run threading.py 982",
                                               "worker app.py 18", "compute app.py 12"};
    static const char *const compute2_spec[] = {"_bootstrap threading.py 1002", "run threading.py 982",
                                                "worker app.py 18", "compute app.py 13"};
    static const char *const dumps_spec[] = {"_bootstrap threading.py 1002", "run threading.py 982",
                                             "worker app.py 19", "dumps json/__init__.py 231"};
    static const char *const sleep_spec[] = {"_bootstrap threading.py 1002", "run threading.py 982",
                                             "worker app.py 21"};
    static const char *const parse_spec[] = {"_bootstrap threading.py 1002", "run threading.py 982",
                                             "parser app.py 27", "parse app.py 20"};
    static const char *const gc_spec[] = {"_bootstrap threading.py 1002", "run threading.py 982",
                                          "parser app.py 27", "parse app.py 20", "<GC> <GC> -1"};
    static const char *const native_spec[] = {"_bootstrap threading.py 1002", "run threading.py 982",
                                              "crunch app.py 50", "numpy_op app.py 51"};
    uint32_t s_main = stack_of(&p, main_spec, 4);
    uint32_t s_compute = stack_of(&p, compute_spec, 4);
    uint32_t s_compute2 = stack_of(&p, compute2_spec, 4);
    uint32_t s_dumps = stack_of(&p, dumps_spec, 4);
    uint32_t s_sleep = stack_of(&p, sleep_spec, 3);
    uint32_t s_parse = stack_of(&p, parse_spec, 4);
    uint32_t s_gc = stack_of(&p, gc_spec, 5);
    uint32_t s_native = stack_of(&p, native_spec, 4);

    const pid_t pid = 4242;
    uint32_t t_main = profile_thread_id(&p, pid, 4242);
    uint32_t t_worker = profile_thread_id(&p, pid, 4250);
    uint32_t t_parser = profile_thread_id(&p, pid, 4251);
    uint32_t t_native = profile_thread_id(&p, pid, 4252);
    snprintf(p.threads[t_main].name, sizeof p.threads[t_main].name, "MainThread");
    snprintf(p.threads[t_worker].name, sizeof p.threads[t_worker].name, "worker-1");
    snprintf(p.threads[t_parser].name, sizeof p.threads[t_parser].name, "parser");
    snprintf(p.threads[t_native].name, sizeof p.threads[t_native].name, "np-worker");

    struct live live[4] = {0};
    uint64_t busy = 0, gc_passes = 0, collections = 0;
    for (uint64_t pass = 0; pass < PASSES; pass++) {
        uint64_t now = pass * PERIOD_NS;
        unsigned phase = pass % 50;
        /* The worker computes for 30 passes (moving between two lines), calls
         * json.dumps for 10 without letting go of the GIL, then sleeps. */
        uint32_t w_stack = phase < 30 ? (phase % 10 < 6 ? s_compute : s_compute2)
                           : phase < 40 ? s_dumps
                                        : s_sleep;
        bool worker_holds = phase < 40;
        bool gc = pass % 100 >= 45 && pass % 100 < 48;
        observe(&p, t_main, &live[0], s_main, PROFILE_IDLE, false, SYS_FUTEX, now);
        observe(&p, t_worker, &live[1], w_stack, worker_holds ? PROFILE_HOLDING_GIL : PROFILE_IDLE,
                false, worker_holds ? 0xffff : SYS_CLOCK_NANOSLEEP, now);
        observe(&p, t_parser, &live[2], gc ? s_gc : s_parse,
                worker_holds ? PROFILE_WAITING_GIL : PROFILE_HOLDING_GIL, gc && !worker_holds,
                worker_holds ? SYS_FUTEX : 0xffff, now);
        observe(&p, t_native, &live[3], s_native, PROFILE_RUNNING, false, 0xffff, now);
        if (worker_holds)
            profile_add_hog(&p, w_stack, w_stack == s_dumps);
        busy++;
        if (gc && !worker_holds) {
            gc_passes++;
            if (pass % 100 == 45)
                collections++;
        }
    }
    for (uint32_t t = 0; t < 4; t++) {
        struct profile_segment seg = {t, live[t].stack, (uint8_t)live[t].state, live[t].gc,
                                      live[t].syscall, live[t].start_ns, PASSES * PERIOD_NS};
        profile_add_segment(&p, &seg);
    }

    p.meta.pid = pid;
    snprintf(p.meta.command, sizeof p.meta.command, "python3 app.py --jobs 2");
    snprintf(p.meta.python_version, sizeof p.meta.python_version, "3.12.1");
    p.meta.start_unix_ns = 1767225600000000000ull;
    p.meta.duration_ns = PASSES * PERIOD_NS;
    p.meta.rate_hz = 100;
    p.meta.passes = PASSES;
    p.meta.passes_failed = 2;
    p.meta.stacks_sampled = 4 * PASSES;
    p.meta.stacks_torn = 3;
    p.meta.gil_busy_passes = busy;
    p.meta.gc_passes = gc_passes;
    p.meta.gc_collections = collections;

    const struct profile_write_options plain = {0};
    const struct profile_write_options all = {.include_idle = true, .thread_roots = true};
    const struct profile_write_options gil = {.gil_only = true};
    int rc = 0;
    rc |= write_file(argv[1], "profile.collapsed", profile_write_collapsed, &p, &plain);
    rc |= write_file(argv[1], "profile-threads-idle.collapsed", profile_write_collapsed, &p, &all);
    rc |= write_file(argv[1], "profile.speedscope.json", profile_write_speedscope, &p, &plain);
    rc |= write_file(argv[1], "profile-idle.speedscope.json", profile_write_speedscope, &p, &all);
    rc |= write_file(argv[1], "profile.chrome.json", profile_write_chrome, &p, &plain);
    rc |= write_file(argv[1], "profile-idle.chrome.json", profile_write_chrome, &p, &all);
    rc |= write_file(argv[1], "profile.pb.gz", profile_write_pprof, &p, &plain);
    rc |= write_file(argv[1], "profile-threads-idle.pb.gz", profile_write_pprof, &p, &all);
    rc |= write_file(argv[1], "profile-gil.pb.gz", profile_write_pprof, &p, &gil);
    rc |= write_file(argv[1], "profile.json", profile_write_json, &p, &plain);
    rc |= write_file(argv[1], "summary.txt", summary_writer, &p, NULL);
    profile_free(&p);
    return rc ? 1 : 0;
}
