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
}

int hang_live_take(struct py_runtime *rt, pid_t pid, struct hang_live *s,
                   struct pyscope_error *err)
{
    memset(s, 0, sizeof *s);
    s->report.pid = pid;
    /* A core does not move: read as a paused process is. */
    bool frozen = !target_can(rt->target, TARGET_CAN_CHANGE);
    struct stacks_options opts = {.paused = frozen, .max_retries = STACKS_LIVE_RETRIES, .raw = &s->raw};
    target_cache_invalidate(rt->target);
    double stacks_at = target_can(rt->target, TARGET_CAN_CLOCK) ? monotonic_ms() / 1e3 : NAN;
    if (stacks_collect(rt, &opts, &s->report, err) != 0)
        return -1;
    /* The tasks of the same instant: which one each loop is running. */
    s->report.tasks = asyncio_tasks_read(rt, TASKS_PENDING, 1000);
    asyncio_loop_steps_read(rt, s->report.tasks, &s->report, stacks_at);
    asyncio_wait_providers(rt, s->report.tasks);
    s->cpu_ns = calloc(s->report.n_threads ? s->report.n_threads : 1, sizeof *s->cpu_ns);
    if (!s->cpu_ns) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < s->report.n_threads; i++) {
        uint64_t ns;
        s->cpu_ns[i] = s->report.threads[i].tid &&
                               target_thread_cpu_ns(rt->target, s->report.threads[i].tid, &ns) == 0
                           ? (int64_t)ns
                           : -1;
    }
    return 0;
}
