/* why's asyncio finding: an event loop whose thread has stayed inside one
 * step of one task across both snapshots, instead of returning to its
 * selector, so no other task or callback of that loop can run: asyncio's
 * debug-mode "Executing <Task ...> took 1.2 seconds", seen from outside. */
#include "python/asyncio_why.h"

#include <stdlib.h>
#include <string.h>
#include "util/text.h"

static const struct report_task *running_task(const struct report_loop *loop)
{
    for (size_t i = 0; i < loop->n_tasks; i++)
        if (loop->tasks[i].running)
            return &loop->tasks[i];
    return NULL;
}

static const struct report_loop *same_loop(const struct report_tasks *tasks, uint64_t addr)
{
    for (size_t l = 0; tasks && l < tasks->n_loops; l++)
        if (tasks->loops[l].addr == addr)
            return &tasks->loops[l];
    return NULL;
}

int asyncio_blocked_findings(const struct stack_report *first, const struct stack_report *second,
                             int interval_ms, struct why_report *why)
{
    if (!first->tasks || !second || !second->tasks || interval_ms < ASYNCIO_BLOCKED_MS)
        return 0;
    for (size_t l = 0; l < first->tasks->n_loops; l++) {
        const struct report_loop *loop = &first->tasks->loops[l];
        const struct report_task *task = running_task(loop);
        const struct report_loop *later = same_loop(second->tasks, loop->addr);
        const struct report_task *later_task = later ? running_task(later) : NULL;
        if (!task || !later_task || later_task->addr != task->addr || !loop->tid)
            continue;
        int th = -1;
        for (size_t i = 0; i < first->n_threads; i++)
            if (first->threads[i].tid == loop->tid)
                th = (int)i;
        /* The same stack in both snapshots: one step, not a busy loop of
         * short steps of the same task. */
        if (th < 0 || why->threads[th].changed)
            continue;
        struct why_finding *grown = realloc(why->findings,
                                            (size_t)(why->n_findings + 1) * sizeof *grown);
        if (!grown)
            return -1;
        why->findings = grown;
        struct why_finding *f = &why->findings[why->n_findings++];
        memset(f, 0, sizeof *f);
        f->kind = WHY_LOOP_BLOCKED;
        f->certain = true;
        f->grade = WHY_GRADE_CERTAIN;
        f->threads[f->n_threads++] = th;
        f->object = task->addr;
        const struct report_thread *t = &first->threads[th];
        size_t others = loop->n_tasks + loop->n_hidden - 1;
        char *s = f->summary;
        size_t size = sizeof f->summary;
        text_format(s, size, "the asyncio loop of thread %d", (int)t->tid);
        if (t->name[0])
            text_append(s, size, " \"%s\"", t->name);
        text_append(s, size, " has been inside one step of task \"%s\" for at least %d ms, not "
                             "in its selector, so its %zu other task%s cannot run",
                    task->name, interval_ms, others, others == 1 ? "" : "s");
        if (t->n_frames)
            text_append(s, size, " (it is in %s, %s:%d", t->frames[0].function,
                        stack_report_short_path(t->frames[0].file), t->frames[0].line);
        for (size_t k = 1; k < t->n_frames && k < 4; k++)
            text_append(s, size, ", called from %s", t->frames[k].function);
        if (t->n_frames)
            text_append(s, size, ")");
        if (t->syscall)
            text_append(s, size, "; blocked in %s", t->syscall);
        /* A finding of its own outranks "idle" and "not hung": the loop's
         * thread waits for a timer, but inside a task. */
        if (why->verdict == WHY_NOT_HUNG || why->verdict == WHY_IDLE ||
            why->verdict == WHY_UNCHECKED) {
            why->verdict = WHY_LOOP_BLOCKED;
            why->grade = WHY_GRADE_CERTAIN;
            text_format(why->summary, sizeof why->summary, "%s", f->summary);
        }
    }
    return 0;
}
