/* why's asyncio findings: an event loop whose thread has stayed inside one
 * step of one task across both snapshots, instead of returning to its
 * selector, so no other task or callback of that loop can run (asyncio's
 * debug-mode "Executing <Task ...> took 1.2 seconds", seen from outside);
 * and a task suspended on a Future nothing else refers to. */
#include "diagnosis/asyncio_why.h"

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

/* A new certain finding of kind about task, or NULL out of memory. */
static struct why_finding *add_finding(struct why_report *why, enum why_verdict kind,
                                       uint64_t object, uint64_t task)
{
    struct why_finding *grown = realloc(why->findings,
                                        (size_t)(why->n_findings + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    why->findings = grown;
    struct why_finding *f = &why->findings[why->n_findings++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->certain = true;
    f->grade = WHY_GRADE_CERTAIN;
    f->object = object;
    f->task = task;
    return f;
}

/* A finding of its own outranks "idle" and "not hung": the loop's thread
 * waits in its selector (or for a timer), but a task is stuck. */
static void outrank_no_hang(struct why_report *why, const struct why_finding *f)
{
    if (why->verdict == WHY_NOT_HUNG || why->verdict == WHY_IDLE ||
        why->verdict == WHY_UNCHECKED) {
        why->verdict = f->kind;
        why->grade = WHY_GRADE_CERTAIN;
        text_format(why->summary, sizeof why->summary, "%s", f->summary);
    }
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
        struct why_finding *f = add_finding(why, WHY_LOOP_BLOCKED, task->addr, task->addr);
        if (!f)
            return -1;
        f->threads[f->n_threads++] = th;
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
        outrank_no_hang(why, f);
    }
    return 0;
}

static const struct report_task *same_task(const struct report_loop *loop, uint64_t addr)
{
    for (size_t i = 0; loop && i < loop->n_tasks; i++)
        if (loop->tasks[i].addr == addr)
            return &loop->tasks[i];
    return NULL;
}

int asyncio_orphan_findings(const struct stack_report *first, const struct stack_report *second,
                            struct why_report *why)
{
    if (!first->tasks)
        return 0;
    for (size_t l = 0; l < first->tasks->n_loops; l++) {
        const struct report_loop *loop = &first->tasks->loops[l];
        for (size_t i = 0; i < loop->n_tasks; i++) {
            const struct report_task *task = &loop->tasks[i];
            if (!task->orphan || !task->awaits_addr)
                continue;
            /* A live process: the second snapshot must still see it so, on
             * the same Future (a reference taken between the two reads of
             * the first would otherwise pass for none). */
            if (second) {
                const struct report_task *later =
                    same_task(second->tasks ? same_loop(second->tasks, loop->addr) : NULL,
                              task->addr);
                if (!later || !later->orphan || later->awaits_addr != task->awaits_addr)
                    continue;
            }
            struct why_finding *f = add_finding(why, WHY_NEVER_NOTIFIED, task->awaits_addr,
                                                task->addr);
            if (!f)
                return -1;
            for (size_t k = 0; k < first->n_threads && loop->tid; k++)
                if (first->threads[k].tid == loop->tid)
                    f->threads[f->n_threads++] = (int)k;
            char *s = f->summary;
            size_t size = sizeof f->summary;
            text_format(s, size, "task \"%s\" awaits a Future (0x%llx) that nothing else refers "
                                 "to, so nothing can ever complete it", task->name,
                        (unsigned long long)task->awaits_addr);
            if (task->n_chain && task->chain[0].function)
                text_append(s, size, " (it is in %s, %s:%d)", task->chain[0].function,
                            task->chain[0].file ? stack_report_short_path(task->chain[0].file)
                                                : "?",
                            task->chain[0].line);
            if (loop->tid)
                text_append(s, size, "; on the loop of thread %d", (int)loop->tid);
            outrank_no_hang(why, f);
        }
    }
    return 0;
}
