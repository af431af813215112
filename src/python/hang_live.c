/* One snapshot for why's progress check, of a live process or a core: the
 * stacks, what the walk saw, the asyncio tasks of the same instant, and each
 * thread's CPU time. */
#include "python/hang_live.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "python/asyncio_tasks.h"
#include "target/process.h"
#include "util/clock.h"

void hang_live_free(struct hang_live *s)
{
    stack_report_free(&s->report);
    stacks_raw_free(&s->raw);
    free(s->cpu_ns);
    s->cpu_ns = NULL;
    free(s->ran);
    s->ran = NULL;
}

bool hang_live_thread_asleep(pid_t pid, pid_t tid)
{
    struct thread_activity a = {.syscall_nr = -1};
    return process_thread_activity(pid, tid, &a) == 0 && a.run_state == 'S';
}

/* The threads of a live process past this many are not timed before the
 * snapshot (they count as having run). */
#define HANG_LIVE_MAX_TIMED 4096

struct cpu_before {
    pid_t tid;
    uint64_t ns;
};

static int compare_tid(const void *a, const void *b)
{
    pid_t x = ((const struct cpu_before *)a)->tid, y = ((const struct cpu_before *)b)->tid;
    return (x > y) - (x < y);
}

/* Each thread's CPU time before the snapshot, sorted by tid; how many. */
static size_t cpu_before_read(pid_t pid, struct cpu_before **out)
{
    *out = NULL;
    pid_t *tids = malloc(HANG_LIVE_MAX_TIMED * sizeof *tids);
    int n = tids ? process_list_tids(pid, tids, HANG_LIVE_MAX_TIMED) : -1;
    struct cpu_before *before = n > 0 ? malloc((size_t)n * sizeof *before) : NULL;
    size_t kept = 0;
    for (int i = 0; before && i < n; i++)
        if (process_thread_cpu_ns(pid, tids[i], &before[kept].ns) == 0)
            before[kept++].tid = tids[i];
    free(tids);
    if (before)
        qsort(before, kept, sizeof *before, compare_tid);
    *out = before;
    return kept;
}

int hang_live_take(struct py_runtime *rt, pid_t pid, struct hang_live *s,
                   struct pyscope_error *err)
{
    return hang_live_take_named(rt, pid, NULL, true, s, err);
}

int hang_live_take_named(struct py_runtime *rt, pid_t pid, const struct stacks_names *names,
                         bool time_before, struct hang_live *s, struct pyscope_error *err)
{
    memset(s, 0, sizeof *s);
    s->report.pid = pid;
    /* A core does not move: read as a paused process is. */
    bool frozen = !target_can(rt->target, TARGET_CAN_CHANGE);
    struct stacks_options opts = {.paused = frozen, .max_retries = STACKS_LIVE_RETRIES,
                                  .raw = &s->raw, .names = names};
    target_cache_invalidate(rt->target);
    struct cpu_before *before = NULL;
    size_t n_before = frozen || !time_before ? 0 : cpu_before_read(pid, &before);
    double stacks_at = target_can(rt->target, TARGET_CAN_CLOCK) ? monotonic_ms() / 1e3 : NAN;
    if (stacks_collect(rt, &opts, &s->report, err) != 0) {
        free(before);
        return -1;
    }
    /* The tasks of the same instant: which one each loop is running. */
    s->report.tasks = asyncio_tasks_read(rt, TASKS_PENDING, 1000);
    asyncio_loop_steps_read(rt, s->report.tasks, &s->report, stacks_at);
    asyncio_wait_providers(rt, s->report.tasks);
    size_t n = s->report.n_threads ? s->report.n_threads : 1;
    s->cpu_ns = calloc(n, sizeof *s->cpu_ns);
    s->ran = frozen ? NULL : calloc(n, sizeof *s->ran);
    if (!s->cpu_ns || (!frozen && !s->ran)) {
        free(before);
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < s->report.n_threads; i++) {
        uint64_t ns;
        pid_t tid = s->report.threads[i].tid;
        s->cpu_ns[i] = tid && target_thread_cpu_ns(rt->target, tid, &ns) == 0 ? (int64_t)ns : -1;
        if (!s->ran)
            continue;
        struct cpu_before key = {.tid = tid};
        const struct cpu_before *b = before ? bsearch(&key, before, n_before, sizeof *before,
                                                      compare_tid)
                                            : NULL;
        s->ran[i] = !b || s->cpu_ns[i] < 0 || (uint64_t)s->cpu_ns[i] != b->ns;
    }
    free(before);
    return 0;
}
