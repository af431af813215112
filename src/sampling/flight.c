/* The flight recorder for run: attaching as CPython appears in the watched
 * process (again after an exec), pacing passes on an absolute clock into the
 * ring, and writing a window out with a one-line note of what it covers. */
#include "sampling/flight.h"

#include "native/native_sampler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "target/process.h"
#include "util/outfile.h"

/* A starting interpreter is looked for often at first, then rarely: a
 * program that never becomes Python costs almost nothing. */
#define ATTACH_FAST_NS 10000000ull
#define ATTACH_SLOW_NS 250000000ull
#define ATTACH_FAST_FOR_NS 3000000000ull
#define NO_DEADLINE UINT64_MAX

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int flight_init(struct flight *f, const struct flight_options *opts)
{
    memset(f, 0, sizeof *f);
    f->opts = *opts;
    if (f->opts.rate_hz <= 0)
        f->opts.rate_hz = 100;
    if (f->opts.max_bytes == 0)
        f->opts.max_bytes = RING_DEFAULT_MAX_BYTES;
    if (profile_init(&f->profile) != 0)
        return -1;
    if (sample_ring_init(&f->ring, f->opts.window_ns, f->opts.rate_hz, f->opts.max_bytes) != 0) {
        profile_free(&f->profile);
        return -1;
    }
    f->start_ns = monotonic_ns();
    f->profile.meta.start_unix_ns = wall_ns();
    f->profile.meta.rate_hz = f->opts.rate_hz;
    f->interval_ns = (uint64_t)(1e9 / f->opts.rate_hz);
    f->next_pass_ns = NO_DEADLINE;
    f->next_attach_ns = NO_DEADLINE;
    snprintf(f->why_not, sizeof f->why_not, "the program was never sampled");
    return 0;
}

static void detach(struct flight *f)
{
    if (f->attached)
        sampler_close(&f->sampler, monotonic_ns());
    f->attached = false;
    f->next_pass_ns = NO_DEADLINE;
}

void flight_free(struct flight *f)
{
    detach(f);
    sample_ring_free(&f->ring);
    profile_free(&f->profile);
}

void flight_watch(struct flight *f, pid_t pid)
{
    detach(f);
    f->pid = pid;
    f->watch_since_ns = monotonic_ns();
    f->next_attach_ns = f->watch_since_ns;
}

uint64_t flight_deadline(const struct flight *f)
{
    return f->attached ? f->next_pass_ns : f->next_attach_ns;
}

uint64_t flight_now(const struct flight *f)
{
    (void)f;
    return monotonic_ns();
}

static bool try_attach(struct flight *f, uint64_t now)
{
    struct pyscope_error err = {0};
    if (sampler_open(&f->sampler, f->pid, &f->profile, f->start_ns, &err) != 0) {
        snprintf(f->why_not, sizeof f->why_not, "%s", err.message);
        if (err.status == PYSCOPE_ERR_NO_PROCESS || err.status == PYSCOPE_ERR_PERMISSION) {
            f->next_attach_ns = NO_DEADLINE;
            return false;
        }
        bool early = now - f->watch_since_ns < ATTACH_FAST_FOR_NS;
        /* From the end of the attempt, which reads the program's files. */
        f->next_attach_ns = monotonic_ns() + (early ? ATTACH_FAST_NS : ATTACH_SLOW_NS);
        return false;
    }
    f->sampler.sink = &f->ring.sink;
    /* As record does at ordinary rates: look twice at a thread on CPU
     * without the GIL, so waiters between two futex waits are told apart. */
    f->sampler.recheck_running = f->opts.rate_hz <= 1000;
    /* Attached while the program starts, when module code objects are made
     * and freed by the hundred: a name shown must be the code's own. */
    f->sampler.verify_codes = true;
    /* Each attach (after an exec too) sets the sampler's C stacks up anew;
     * what came of it is said once. */
    if (f->opts.native) {
        char note[PROFILE_NATIVE_NOTE_MAX];
        struct pyscope_error nerr = {0};
        bool ok = sampler_enable_native(&f->sampler, NATIVE_PERF, f->opts.native_all,
                                        f->opts.rate_hz, note, sizeof note, &nerr) == 0;
        if (ok && !f->profile.meta.native_mode[0]) {
            snprintf(f->profile.meta.native_mode, sizeof f->profile.meta.native_mode,
                     "perf_event");
            snprintf(f->profile.meta.native_note, sizeof f->profile.meta.native_note, "%s", note);
        }
        if (!f->native_said && !ok)
            fprintf(stderr, "pyscope: --native: %s; recording without C stacks (the program is "
                    "traced by pyscope run already, so there is no ptrace fallback)\n",
                    nerr.message);
        else if (!f->native_said && note[0])
            fprintf(stderr, "pyscope: %s\n", note);
        f->native_said = true;
    }
    f->attached = true;
    f->ever_attached = true;
    f->next_attach_ns = NO_DEADLINE;
    f->next_pass_ns = now;
    f->profile.meta.pid = f->pid;
    target_cmdline(f->sampler.target, f->profile.meta.command, sizeof f->profile.meta.command);
    snprintf(f->profile.meta.python_version, sizeof f->profile.meta.python_version, "%s",
             f->sampler.rt.version);
    return true;
}

static void pass(struct flight *f, uint64_t now)
{
    if (sampler_pass(&f->sampler, now) != 0) {
        detach(f);
        snprintf(f->why_not, sizeof f->why_not, "the process exited");
    }
}

bool flight_tick(struct flight *f, uint64_t now_ns)
{
    bool attached_now = false;
    if (!f->attached) {
        if (f->next_attach_ns == NO_DEADLINE || now_ns < f->next_attach_ns)
            return false;
        attached_now = try_attach(f, now_ns);
        if (!attached_now)
            return false;
    }
    if (now_ns < f->next_pass_ns)
        return attached_now;
    pass(f, now_ns);
    /* On an absolute clock; a late pass is skipped, not made up in a burst. */
    f->next_pass_ns += f->interval_ns;
    uint64_t after = monotonic_ns();
    if (f->next_pass_ns + f->interval_ns < after)
        f->next_pass_ns = after;
    return attached_now;
}

void flight_pass_now(struct flight *f)
{
    if (!f->attached)
        return;
    /* Names are refreshed once a second; a thread started just before the
     * failure gets its own now. */
    f->sampler.last_names_ns = 0;
    pass(f, monotonic_ns());
}

struct py_runtime *flight_runtime(struct flight *f)
{
    return f->attached ? &f->sampler.rt : NULL;
}

int flight_set_last_stack(struct flight *f, pid_t tid, const struct profile_frame *frames,
                          size_t n_frames, enum profile_state state)
{
    uint32_t *ids = malloc((n_frames ? n_frames : 1) * sizeof *ids);
    if (!ids)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n_frames && rc == 0; i++) {
        ids[i] = profile_frame_id(&f->profile, frames[i].function, frames[i].file, frames[i].line,
                                  frames[i].synthetic);
        rc = ids[i] == UINT32_MAX ? -1 : 0;
    }
    uint32_t stack = rc == 0 ? profile_stack_id(&f->profile, ids, (uint32_t)n_frames) : UINT32_MAX;
    uint32_t thread = profile_thread_id(&f->profile, f->pid, tid);
    free(ids);
    if (stack == UINT32_MAX || thread == UINT32_MAX)
        return -1;
    return sample_ring_set_last(&f->ring, thread, stack, state);
}

static void clock_text(uint64_t unix_ns, char *out, size_t outsize)
{
    time_t secs = (time_t)(unix_ns / 1000000000ull);
    struct tm tm;
    if (!localtime_r(&secs, &tm) || strftime(out, outsize, "%H:%M:%S", &tm) == 0) {
        snprintf(out, outsize, "?");
        return;
    }
    size_t used = strlen(out);
    snprintf(out + used, outsize - used, ".%03u", (unsigned)(unix_ns / 1000000ull % 1000));
}

int flight_write(struct flight *f, uint64_t end_ns, const char *path,
                 const struct profile_format *format, const char *before_what)
{
    if (!f->ever_attached) {
        fprintf(stderr, "pyscope: no flight recording before %s: %s\n", before_what, f->why_not);
        return -1;
    }
    uint64_t end_rel = end_ns > f->start_ns ? end_ns - f->start_ns : 0;
    struct profile window;
    struct ring_window w;
    if (sample_ring_window(&f->ring, &f->profile, end_rel, &window, &w) != 0) {
        fprintf(stderr, "pyscope: no flight recording before %s: out of memory\n", before_what);
        return -1;
    }
    /* What every thread was doing matters here, blocked ones included. */
    struct profile_write_options options = {.include_idle = true};
    /* Written beside the destination, then renamed over it: a reader (or a
     * later failure) never sees half a file. */
    struct outfile out;
    struct pyscope_error err = {0};
    int rc = -1;
    if (outfile_open(&out, path, OUTFILE_REPLACE, 0666, &err) != 0) {
        fprintf(stderr, "pyscope: flight recording not written: %s\n", err.message);
    } else if (format->write(out.fp, &window, &options) != 0) {
        outfile_discard(&out);
        fprintf(stderr, "pyscope: writing the flight recording to %s failed\n", path);
    } else if (outfile_close(&out, &err) != 0) {
        fprintf(stderr, "pyscope: flight recording not written: %s\n", err.message);
    } else {
        rc = 0;
    }
    if (rc == 0) {
        char from[32], to[32];
        clock_text(window.meta.start_unix_ns, from, sizeof from);
        clock_text(window.meta.start_unix_ns + window.meta.duration_ns, to, sizeof to);
        fprintf(stderr,
                "pyscope: flight recording of the %.1f s before %s (%s to %s, %llu passes, %zu "
                "thread%s%s) written to %s (%s)\n",
                (double)window.meta.duration_ns / 1e9, before_what, from, to,
                (unsigned long long)w.passes, w.threads, w.threads == 1 ? "" : "s",
                w.shortened ? "; shortened: the memory cap was reached" : "", path, format->name);
    }
    profile_free(&window);
    return rc;
}
