/* The agent's loop: scans /proc every second, samples every process at the
 * rate in force on an absolute clock (a late round is skipped, not made up),
 * advances the why evaluations, pushes, keeps within the CPU budget by
 * lowering the rate, and serves HTTP in the time between. */
#include "agent/agent.h"

#include <malloc.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "target/run_counter.h"

#define SCAN_EVERY_NS 1000000000ull
#define BUDGET_EVERY_NS 5000000000ull
#define MIN_RATE_HZ 0.2
#define MAX_WHY_SCALE 16
#define MERGE_WAKE_NS 100000000ull

uint64_t agent_unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double agent_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

void agent_log(struct agent *a, const char *fmt, ...)
{
    FILE *out = a->log ? a->log : stderr;
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(out, "%s pyscope agent: ", stamp);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
    fflush(out);
}

static void set_rate(struct agent *a, double hz)
{
    a->rate_hz = hz;
    a->interval_ns = (uint64_t)(1e9 / hz);
}

int agent_init(struct agent *a, const struct agent_options *opts)
{
    memset(a, 0, sizeof *a);
    a->opts = *opts;
    /* Each sampler has buffers of a megabyte or more that live as long as
     * its process. A fixed mmap threshold keeps them out of the heap (glibc
     * raises it after the first such free), so that processes coming and
     * going do not leave the heap fragmented and large. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    if (opts->log_path) {
        a->log = fopen(opts->log_path, "ae");
        if (!a->log) {
            fprintf(stderr, "pyscope: cannot open the log %s: %m\n", opts->log_path);
            return -1;
        }
    }
    if (opts->match) {
        int rc = regcomp(&a->match, opts->match, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char msg[128];
            regerror(rc, &a->match, msg, sizeof msg);
            agent_log(a, "--match: %s", msg);
            agent_free(a);
            return -1;
        }
        a->has_match = true;
    }
    /* Whether a process ran since the last pass, read from its CPU clock
     * 950 times a second for 50 processes at 19 Hz, is a third of an idle
     * fleet's cost; a BPF counter read is a load from memory. But the
     * program runs at every charge of CPU time on the host: a program
     * switching 85,000 times a second ran 5% slower. So only when asked. */
    if (opts->bpf)
        a->counting = run_counter_start(a->counting_why_not, sizeof a->counting_why_not) == 0;
    a->start_ns = monotonic_ns();
    a->start_unix_ns = agent_unix_ns();
    /* Which tick of a quiet process's stretch is sampled: not the same
     * sequence in every agent, nor ever the zero state. */
    a->stride_random = (a->start_ns ^ a->start_unix_ns ^ ((uint64_t)getpid() << 32)) | 1;
    set_rate(a, opts->rate_hz);
    a->why_scale = 1;
    /* The pass array is sized for 64 processes at the rate asked for; with
     * more, the window gets shorter (the metrics show its memory). */
    a->hot = calloc(opts->max_processes ? opts->max_processes : 1, sizeof *a->hot);
    if (!a->hot || profile_init(&a->profile) != 0 ||
        sample_ring_init(&a->ring, (uint64_t)(opts->window_s * 1e9), opts->rate_hz * 64,
                         opts->max_bytes) != 0) {
        agent_log(a, "out of memory");
        agent_free(a);
        return -1;
    }
    a->profile.meta.start_unix_ns = a->start_unix_ns;
    a->profile.meta.rate_hz = opts->rate_hz;
    if (agent_http_start(a) != 0) {
        agent_free(a);
        return -1;
    }
    return 0;
}

void agent_free(struct agent *a)
{
    agent_http_stop(a);
    agent_procs_free(a);
    target_cache_release(a->page_cache);
    a->page_cache = NULL;
    profile_free(&a->profile);
    sample_ring_free(&a->ring);
    free(a->pass_scratch);
    a->pass_scratch = NULL;
    free(a->hot);
    a->hot = NULL;
    a->n_hot = 0;
    if (a->has_match)
        regfree(&a->match);
    a->has_match = false;
    if (a->counting)
        run_counter_stop();
    a->counting = false;
    if (a->log)
        fclose(a->log);
    a->log = NULL;
}

/* Over the budget: the rate is cut in proportion (with a margin); at the
 * lowest rate, why runs less often too (it is the rest of the cost). Well
 * under the budget again, why's pace comes back first, then the rate, step
 * by step towards what was asked for. */
static void check_budget(struct agent *a, uint64_t now_ns)
{
    double cpu = agent_cpu_seconds();
    double used = (cpu - a->budget_cpu_s) / ((double)(now_ns - a->budget_at_ns) / 1e9);
    a->budget_cpu_s = cpu;
    a->budget_at_ns = now_ns;
    if (a->opts.cpu_budget <= 0)
        return;
    if (used > a->opts.cpu_budget) {
        double hz = a->rate_hz * a->opts.cpu_budget / used * 0.9;
        if (hz < MIN_RATE_HZ)
            hz = MIN_RATE_HZ;
        if (hz < a->rate_hz) {
            agent_log(a, "used %.2f%% of a core, over the budget of %.2f%%: sampling at %.2f Hz "
                         "instead of %g", used * 100, a->opts.cpu_budget * 100, hz, a->opts.rate_hz);
            set_rate(a, hz);
            a->budget_limited = true;
        } else if (a->why_scale < MAX_WHY_SCALE) {
            a->why_scale *= 2;
            a->budget_limited = true;
            agent_log(a, "used %.2f%% of a core at the lowest rate: why every %g s instead of %g",
                      used * 100, a->opts.why_every_s * a->why_scale, a->opts.why_every_s);
        }
    } else if (a->budget_limited && used < a->opts.cpu_budget * 0.6) {
        if (a->why_scale > 1) {
            a->why_scale /= 2;
        } else {
            double hz = a->rate_hz * 1.25;
            if (hz >= a->opts.rate_hz) {
                hz = a->opts.rate_hz;
                a->budget_limited = false;
            }
            set_rate(a, hz);
        }
    }
}

static uint64_t min_u64(uint64_t x, uint64_t y)
{
    return x < y ? x : y;
}

void agent_run(struct agent *a, volatile int *stop, volatile int *reopen_log)
{
    uint64_t now = monotonic_ns();
    a->next_tick_ns = a->next_scan_ns = now;
    a->next_budget_ns = now + BUDGET_EVERY_NS;
    a->budget_at_ns = now;
    a->budget_cpu_s = agent_cpu_seconds();
    uint64_t push_every = (uint64_t)(a->opts.push_every_s * 1e9);
    a->next_push_ns = now + push_every;
    a->push_from_ns = now;
    while (!*stop) {
        now = monotonic_ns();
        if (*reopen_log) {
            *reopen_log = 0;
            if (a->opts.log_path) {
                FILE *f = fopen(a->opts.log_path, "ae");
                if (f) {
                    fclose(a->log);
                    a->log = f;
                    agent_log(a, "log reopened");
                }
            }
        }
        if (now >= a->next_scan_ns) {
            agent_scan(a, now);
            a->next_scan_ns = now + SCAN_EVERY_NS;
        }
        if (now >= a->next_tick_ns) {
            a->lag_seconds += (double)(now - a->next_tick_ns) / 1e9;
            a->ticks++;
            agent_sample_all(a, now);
            a->next_tick_ns += a->interval_ns;
            uint64_t after = monotonic_ns();
            if (a->next_tick_ns < after) {
                a->ticks_late += (after - a->next_tick_ns) / a->interval_ns + 1;
                a->next_tick_ns = after; /* behind: skip rather than burst */
            }
        }
        agent_why_step(a, monotonic_ns());
        if (a->opts.push_url && now >= a->next_push_ns) {
            if (agent_push(a, now) == 0) {
                a->push_ok++;
            } else {
                if (a->push_failed++ % 30 == 0)
                    agent_log(a, "push to %s failed: %s", a->opts.push_url, a->push_error);
            }
            a->next_push_ns = now + push_every;
        }
        if (now >= a->next_budget_ns) {
            check_budget(a, now);
            a->next_budget_ns = now + BUDGET_EVERY_NS;
        }
        /* Whatever else falls due shortly before the next tick waits for
         * it: one wake-up instead of two (each costs this VM's agent about
         * as much as an idle process's pass). None of it is made earlier. */
        uint64_t other = min_u64(a->next_scan_ns, a->next_budget_ns);
        other = min_u64(other, agent_why_deadline(a));
        if (a->opts.push_url)
            other = min_u64(other, a->next_push_ns);
        uint64_t deadline = a->next_tick_ns;
        if (other < deadline && deadline - other > MERGE_WAKE_NS)
            deadline = other;
        agent_http_poll(a, deadline);
    }
}
