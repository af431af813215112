/* why's asyncio findings: an event loop whose thread has stayed inside one
 * step of one task across both snapshots, instead of returning to its
 * selector (asyncio's debug-mode "Executing <Task ...> took 1.2 seconds",
 * seen from outside); a task waiting on what nothing else refers to; a loop
 * whose every task sleeps with nothing left that could wake one (Go's "all
 * goroutines are asleep"); a stream read with no timeout; and cycles of
 * tasks each waiting for what only the next can do. */
#include "diagnosis/asyncio_why.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "diagnosis/queries.h"
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

static void append_thread(char *s, size_t size, const struct report_thread *t)
{
    text_append(s, size, "thread %d", (int)t->tid);
    if (t->name[0])
        text_append(s, size, " \"%s\"", t->name);
}

/* The index of the thread running loop in r, -1 when none does. */
static int loop_thread(const struct stack_report *r, const struct report_loop *loop)
{
    for (size_t i = 0; loop->tid && i < r->n_threads; i++)
        if (r->threads[i].tid == loop->tid)
            return (int)i;
    return -1;
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

/* ... and a probable one, its summary after prefix. */
static void outrank_no_hang_probably(struct why_report *why, const struct why_finding *f,
                                     const char *prefix)
{
    if (why->verdict == WHY_NOT_HUNG || why->verdict == WHY_IDLE ||
        why->verdict == WHY_UNCHECKED) {
        why->verdict = f->kind;
        why->grade = WHY_GRADE_PROBABLE;
        text_format(why->summary, sizeof why->summary, "%s%s", prefix, f->summary);
    }
}

/* The frame of the plain callback (loop.call_soon, call_later...) the loop
 * thread is inside: the one asyncio's Handle._run called. -1 when none (a
 * task step's callback is the task's, and uvloop keeps its handles in C). */
static int callback_frame(const struct report_thread *t)
{
    for (size_t k = 1; k < t->n_frames; k++) {
        const struct report_frame *f = &t->frames[k];
        if (!f->function || !f->file || !strstr(f->file, "asyncio/events.py"))
            continue;
        if (!strcmp(f->function, "Handle._run") || !strcmp(f->function, "_run"))
            return (int)k - 1;
    }
    return -1;
}

static void append_where(char *s, size_t size, const struct report_thread *t, size_t from)
{
    if (from < t->n_frames)
        text_append(s, size, " (it is in %s, %s:%d", t->frames[from].function,
                    stack_report_short_path(t->frames[from].file), t->frames[from].line);
    for (size_t k = from + 1; k < t->n_frames && k < from + 4; k++)
        text_append(s, size, ", called from %s", t->frames[k].function);
    if (from < t->n_frames)
        text_append(s, size, ")");
    if (t->syscall)
        text_append(s, size, "; blocked in %s", t->syscall);
}

/* A loop_blocked finding about the loop of thread th (task: the task whose
 * step it is, 0 for a callback), its summary begun. */
static struct why_finding *blocked_finding(struct why_report *why, const struct stack_report *first,
                                           int th, uint64_t task)
{
    struct why_finding *f = add_finding(why, WHY_LOOP_BLOCKED, task, task);
    if (!f)
        return NULL;
    f->threads[f->n_threads++] = th;
    text_format(f->summary, sizeof f->summary, "the asyncio loop of ");
    append_thread(f->summary, sizeof f->summary, &first->threads[th]);
    return f;
}

/* Both snapshots inside the same callback of the same loop iteration, by
 * asyncio's own clock (the time the iteration left its selector): the loop
 * never went back to its selector in between, whatever the thread did
 * inside the callback (computed, or woke from one time.sleep into the
 * next). Without that clock (uvloop), an unchanged stack has to tell. */
static bool same_iteration(const struct report_loop *loop, const struct report_loop *later)
{
    return loop->step == LOOP_STEP_CALLBACK && later && later->step == LOOP_STEP_CALLBACK &&
           !isnan(loop->left_selector) && loop->left_selector == later->left_selector &&
           loop->callback_index == later->callback_index;
}

/* How long the callback has run, when both snapshots saw the loop inside
 * a callback of the same iteration (the same end_time of _run_once: it never
 * went back to its selector in between), from the second. */
static void append_running(char *s, size_t size, const struct report_loop *loop,
                           const struct report_loop *later)
{
    if (!same_iteration(loop, later) || later->callback_s < 0)
        return;
    text_append(s, size, "; it has run for %s%.3f s", later->callback_exact ? "" : "at most ",
                later->callback_s);
    if (later->callback_index)
        text_append(s, size, " (callback %ld of %ld of its loop iteration)",
                    later->callback_index, later->callback_count);
}

/* How long, at least, the loop has been in the callback both snapshots
 * saw: the interval between them, or longer when both saw the same loop
 * iteration and asyncio's clock times the callback exactly. */
static int lasted_ms(const struct report_loop *loop, const struct report_loop *later,
                     int interval_ms)
{
    if (same_iteration(loop, later) && later->callback_s >= 0 && later->callback_exact &&
        later->callback_s * 1000 > interval_ms && later->callback_s < 1e6)
        return (int)(later->callback_s * 1000);
    return interval_ms;
}

/* No task step in either snapshot, one callback in both (the same stack, or
 * the same loop iteration), and inside a callback that Handle._run called:
 * the loop is blocked by that callback. */
static int callback_blocked(const struct stack_report *first, const struct report_loop *loop,
                            const struct report_loop *later, int interval_ms,
                            struct why_report *why)
{
    int th = -1;
    for (size_t i = 0; i < first->n_threads; i++)
        if (first->threads[i].tid == loop->tid)
            th = (int)i;
    if (th < 0 || (why->threads[th].changed && !same_iteration(loop, later)))
        return 0;
    const struct report_thread *t = &first->threads[th];
    int cb = callback_frame(t);
    if (cb < 0 && loop->step == LOOP_STEP_CALLBACK && later->step == LOOP_STEP_CALLBACK &&
        loop->callback_frame >= 0 && (size_t)loop->callback_frame < t->n_frames)
        cb = loop->callback_frame;          /* uvloop's, above the frame running it */
    if (cb < 0)
        return 0;
    struct why_finding *f = blocked_finding(why, first, th, 0);
    if (!f)
        return -1;
    size_t tasks = loop->n_tasks + loop->n_hidden;
    text_append(f->summary, sizeof f->summary, " has been inside one callback, %s, for at least "
                "%d ms, not in its selector, so its %zu task%s cannot run",
                t->frames[cb].function, interval_ms, tasks, tasks == 1 ? "" : "s");
    append_running(f->summary, sizeof f->summary, loop, later);
    append_where(f->summary, sizeof f->summary, t, 0);
    outrank_no_hang(why, f);
    return 0;
}

int asyncio_blocked_findings(const struct stack_report *first, const struct stack_report *second,
                             int interval_ms, int threshold_ms, struct why_report *why)
{
    if (!first->tasks || !second || !second->tasks)
        return 0;
    for (size_t l = 0; l < first->tasks->n_loops; l++) {
        const struct report_loop *loop = &first->tasks->loops[l];
        const struct report_task *task = running_task(loop);
        const struct report_loop *later = same_loop(second->tasks, loop->addr);
        const struct report_task *later_task = later ? running_task(later) : NULL;
        /* The snapshots' interval says "at least"; asyncio's clock may say
         * longer. */
        if (lasted_ms(loop, later, interval_ms) < threshold_ms)
            continue;
        if (!task && !later_task && later && loop->tid) {
            if (callback_blocked(first, loop, later, interval_ms, why) != 0)
                return -1;
            continue;
        }
        if (!task || !later_task || later_task->addr != task->addr || !loop->tid)
            continue;
        int th = -1;
        for (size_t i = 0; i < first->n_threads; i++)
            if (first->threads[i].tid == loop->tid)
                th = (int)i;
        /* One step, not a busy loop of short steps of the same task: the
         * same loop iteration in both snapshots, or the same stack. */
        if (th < 0 || (why->threads[th].changed && !same_iteration(loop, later)))
            continue;
        struct why_finding *f = blocked_finding(why, first, th, task->addr);
        if (!f)
            return -1;
        size_t others = loop->n_tasks + loop->n_hidden - 1;
        text_append(f->summary, sizeof f->summary, " has been inside one step of task \"%s\" for "
                    "at least %d ms, not in its selector, so its %zu other task%s cannot run",
                    task->name, interval_ms, others, others == 1 ? "" : "s");
        append_running(f->summary, sizeof f->summary, loop, later);
        append_where(f->summary, sizeof f->summary, &first->threads[th], 0);
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

static bool task_pending(const struct report_task *t)
{
    return !t->state || strcmp(t->state, "pending") == 0;
}

static bool in_sleep(const struct report_task *t)
{
    return strncmp(t->awaits, "asyncio.sleep", 13) == 0;
}

/* "an Event", "a Queue": the class of what a task waits in a method of. */
static const char *object_words(const struct report_task *t, char *words, size_t size)
{
    snprintf(words, size, "%s %s", strchr("AEIOU", t->wait_obj_type[0]) ? "an" : "a",
             t->wait_obj_type);
    return words;
}

/* What would end a wait in a method of a primitive: "set it"... */
static const char *wait_ender(const struct report_task *t)
{
    static const struct { const char *method, *ender; } enders[] = {
        {"Event.", "set it"},
        {"Condition.", "notify it"},
        {"Barrier.", "bring the other parties to it"},
        {"Lock.", "release it"},
        {"Semaphore.", "release it"},
        {"Queue.get", "put an item into it"},
        {"Queue.put", "take an item from it"},
        {"Queue.join", "mark its items done"},
    };
    for (size_t i = 0; i < sizeof enders / sizeof enders[0]; i++) {
        const char *at = strstr(t->awaits, enders[i].method);
        if (at && at < t->awaits + strcspn(t->awaits, " "))
            return enders[i].ender;
    }
    return "end the wait";
}

/* Where a task waits in the program: the innermost frame of its own code
 * ("in f, file:line", between before and after); nothing when the chain
 * has none. */
static void append_task_where(char *s, size_t size, const struct report_task *t,
                              const char *before, const char *after)
{
    const struct task_link *at = t->n_chain ? &t->chain[0] : NULL;
    for (size_t k = 0; k < t->n_chain; k++)
        if (t->chain[k].file && !strstr(t->chain[k].file, "/asyncio/")) {
            at = &t->chain[k];
            break;
        }
    if (at && at->function)
        text_append(s, size, "%sin %s, %s:%d%s", before, at->function,
                    at->file ? stack_report_short_path(at->file) : "?", at->line, after);
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
            bool future = task->wait_obj == task->awaits_addr;
            struct why_finding *f = add_finding(why, WHY_NEVER_NOTIFIED, task->wait_obj,
                                                task->addr);
            if (!f)
                return -1;
            for (size_t k = 0; k < first->n_threads && loop->tid; k++)
                if (first->threads[k].tid == loop->tid)
                    f->threads[f->n_threads++] = (int)k;
            char *s = f->summary, words[64];
            size_t size = sizeof f->summary;
            if (future)
                text_format(s, size, "task \"%s\" awaits a Future (0x%llx) that nothing else "
                            "refers to, so nothing can ever complete it", task->name,
                            (unsigned long long)task->wait_obj);
            else
                text_format(s, size, "task \"%s\" waits in %.*s on %s (0x%llx) that nothing "
                            "else refers to, so nothing can ever %s", task->name,
                            (int)strcspn(task->awaits, " "), task->awaits,
                            object_words(task, words, sizeof words),
                            (unsigned long long)task->wait_obj, wait_ender(task));
            append_task_where(s, size, task, " (it is ", ")");
            if (loop->tid)
                text_append(s, size, "; on the loop of thread %d", (int)loop->tid);
            outrank_no_hang(why, f);
        }
    }
    return 0;
}

/* The index of the loop's thread when every other thread is stuck or gone
 * (another could wake the loop, by call_soon_threadsafe, unless it is
 * stuck itself); -1 otherwise. */
static int loop_thread_alone(const struct stack_report *first, const struct report_loop *loop,
                             const struct why_report *why)
{
    int th = -1;
    for (size_t i = 0; i < first->n_threads; i++) {
        if (first->threads[i].tid == loop->tid)
            th = (int)i;
        else if (!why->threads[i].stuck && !why->threads[i].gone)
            return -1;
    }
    return th;
}

/* The loop's thread sleeps in its selector for good: no timeout (so no
 * timer is scheduled and no callback is ready: asyncio passes a timeout
 * whenever one is), unchanged in the second snapshot, and the selector
 * watches one fd, an unnamed unix socket: the loop's own wake-up socket,
 * which asyncio registers first, so any socket, pipe or subprocess of the
 * program's would be a second. */
static bool selector_asleep(const struct report_thread *t, const struct why_thread *wt)
{
    const struct report_wait *w = t->wait;
    return w && !wt->changed && !wt->gone && w->kind == WAIT_SELECT &&
           w->timeout == WAIT_TIMEOUT_NONE && w->total_fds == 1 && w->n_fds == 1 &&
           strcmp(w->fds[0].what, "socket unix (unnamed) CONNECTED") == 0;
}

int asyncio_asleep_findings(const struct stack_report *first, const struct stack_report *second,
                            struct why_report *why)
{
    if (!first->tasks || !second || !second->tasks)
        return 0;
    for (size_t l = 0; l < first->tasks->n_loops; l++) {
        const struct report_loop *loop = &first->tasks->loops[l];
        const struct report_loop *later = same_loop(second->tasks, loop->addr);
        if (!loop->tid || !later || loop->n_tasks == 0 || loop->n_hidden || running_task(loop) ||
            running_task(later) || later->n_tasks != loop->n_tasks)
            continue;
        int th = loop_thread_alone(first, loop, why);
        if (th < 0 || !selector_asleep(&first->threads[th], &why->threads[th]))
            continue;
        /* Finished tasks (listed when their exception was never retrieved)
         * run no more; every other one must be suspended, in both snapshots. */
        bool all_suspended = true;
        size_t pending = 0, first_pending = 0;
        for (size_t i = 0; i < loop->n_tasks && all_suspended; i++) {
            const struct report_task *task = &loop->tasks[i];
            if (!task_pending(task))
                continue;
            if (!pending++)
                first_pending = i;
            all_suspended = task->state && task->awaits[0] && same_task(later, task->addr) != NULL;
        }
        if (!all_suspended || pending == 0)
            continue;
        /* Only a signal handler can still run code on the loop. asyncio's
         * own for SIGINT cancels the main task, which ends the program rather
         * than waking a task; a Python handler for any other signal may wake
         * one (a daemon's `await stop.wait()` until SIGTERM is idle, as a
         * thread is that a signal handler can reach). */
        uint64_t others = why->python_signals & ~(UINT64_C(1) << (SIGINT - 1));
        if (others) /* without the handler table: every caught signal but SIGINT */
            continue;
        struct why_finding *f =
            add_finding(why, WHY_NEVER_NOTIFIED, 0, loop->tasks[first_pending].addr);
        if (!f)
            return -1;
        f->threads[f->n_threads++] = th;
        why->threads[th].stuck = true;
        const struct report_thread *t = &first->threads[th];
        char *s = f->summary;
        size_t size = sizeof f->summary;
        text_format(s, size, "every task of the asyncio loop of ");
        append_thread(s, size, t);
        if (loop->ready_count > 0 && later->ready_count > 0) {
            /* asyncio selects with timeout 0 when it has ready callbacks:
             * asleep with some queued, they came after it went to sleep, from
             * another thread, by a call_soon that does not wake it. */
            text_append(s, size, " is suspended and nothing will resume one: the loop sleeps in "
                                 "its selector with no timeout although %ld callback%s wait%s in "
                                 "its ready queue (the first calls %s), in both snapshots: "
                                 "scheduled from another thread with call_soon, which does not "
                                 "wake the loop (call_soon_threadsafe does), and no timer, I/O or "
                                 "other thread will:",
                        loop->ready_count, loop->ready_count == 1 ? "" : "s",
                        loop->ready_count == 1 ? "s" : "",
                        loop->ready_callback[0] ? loop->ready_callback : "?");
        } else {
            text_append(s, size, " is suspended and nothing can resume one: the loop waits in "
                                 "its selector with no timer, no callback ready, no I/O but its "
                                 "own wake-up socket and no other thread that could call it:");
        }
        size_t shown = 0;
        for (size_t i = 0; i < loop->n_tasks && shown < 4; i++) {
            const struct report_task *task = &loop->tasks[i];
            if (!task_pending(task))
                continue;
            text_append(s, size, "%s task \"%s\" awaits %s", shown++ ? ";" : "", task->name,
                        task->awaits);
        }
        if (pending > shown)
            text_append(s, size, "; and %zu more", pending - shown);
        /* Often the reason: the task that would have fed the others died. */
        for (size_t i = 0; i < loop->n_tasks; i++)
            if (loop->tasks[i].unretrieved[0])
                text_append(s, size, "; task \"%s\" finished with %s, never retrieved",
                            loop->tasks[i].name, loop->tasks[i].unretrieved);
        outrank_no_hang(why, f);
    }
    return 0;
}

/* What a pending task does, for sleeper_findings: waits on a primitive
 * (no deadline; a holder task or a single provider only when that one is
 * stuck the same way: a consumer whose only provider waits in join()),
 * sleeps in asyncio.sleep, awaits other tasks, or anything else (I/O, an
 * executor's Future...), which could end from outside. */
enum task_role { ROLE_OTHER, ROLE_WAITER, ROLE_SLEEPER, ROLE_BEHIND };

static enum task_role role_at(const struct report_loop *loop, const struct report_task *t,
                              int depth)
{
    if (t->timed || !task_pending(t))
        return ROLE_OTHER;
    if (in_sleep(t))
        return ROLE_SLEEPER;
    if (t->wait_obj && t->wait_obj != t->awaits_addr && t->wait_obj_type[0]) {
        if (!strcmp(wait_ender(t), "end the wait"))
            return ROLE_OTHER;
        /* One who could act, itself held up: waits on as the waiter does. */
        for (int k = 0; k < 2; k++) {
            uint64_t who = k ? t->provider : t->lock_holder;
            const struct report_task *o = who ? same_task(loop, who) : NULL;
            enum task_role r = o && o != t && depth < 8 ? role_at(loop, o, depth + 1) : ROLE_OTHER;
            if (who && r != ROLE_WAITER && r != ROLE_BEHIND)
                return ROLE_OTHER;
        }
        return ROLE_WAITER;
    }
    return t->n_children && !t->wait_obj ? ROLE_BEHIND : ROLE_OTHER;
}

static enum task_role task_role(const struct report_loop *loop, const struct report_task *t)
{
    return role_at(loop, t, 0);
}

/* The loop's thread in its selector with no I/O but its wake-up socket and
 * nothing ready; the timers, if any, only wake sleepers. The second
 * snapshot reads no waits: there the loop's own step and queues tell. */
static bool loop_only_sleeps(const struct stack_report *first, const struct stack_report *r,
                             const struct report_loop *loop)
{
    if (loop->step != LOOP_STEP_SELECTOR || loop->ready_count != 0 || loop->other_timers != 0 ||
        loop->sleep_timers < 1 || running_task(loop))
        return false;
    for (size_t i = 0; i < r->n_threads; i++) {
        const struct report_wait *w = r->threads[i].wait;
        if (r->threads[i].tid == loop->tid)
            return w ? w->kind == WAIT_SELECT && w->total_fds == 1 && w->n_fds == 1 &&
                           strcmp(w->fds[0].what, "socket unix (unnamed) CONNECTED") == 0
                     : r != first;
    }
    return false;
}

/* A pending task in this role (a waiter: on obj). */
static bool in_role(const struct report_loop *loop, const struct report_task *t,
                    enum task_role role, uint64_t obj)
{
    return task_pending(t) && task_role(loop, t) == role &&
           (role != ROLE_WAITER || t->wait_obj == obj);
}

/* The tasks in role from index from on, four of them by name and where
 * they are, then how many more of the total. */
static void append_tasks(char *s, size_t size, const struct report_loop *loop, size_t from,
                         enum task_role role, uint64_t obj, size_t total)
{
    size_t shown = 0;
    for (size_t k = from; k < loop->n_tasks; k++) {
        const struct report_task *o = &loop->tasks[k];
        if (!in_role(loop, o, role, obj))
            continue;
        if (shown++ == 4) {
            text_append(s, size, " and %zu more", total - 4);
            break;
        }
        text_append(s, size, "%s task \"%s\"", shown > 1 ? "," : "", o->name);
        append_task_where(s, size, o, role == ROLE_SLEEPER ? " (asyncio.sleep " : " (", ")");
    }
}

/* Tasks waiting on a primitive nobody releases while the loop still runs a
 * heartbeat: the threads' "only threads that merely sleep could release
 * it", for tasks. */
static int sleeper_findings(const struct stack_report *first, const struct stack_report *second,
                            const struct report_loop *loop, int th, struct why_report *why)
{
    const struct report_loop *later = same_loop(second->tasks, loop->addr);
    if (!later || later->n_tasks != loop->n_tasks || !loop_only_sleeps(first, first, loop) ||
        !loop_only_sleeps(first, second, later))
        return 0;
    size_t waiters = 0, sleepers = 0, woke = 0;
    for (size_t i = 0; i < loop->n_tasks; i++) {
        const struct report_task *t = &loop->tasks[i], *t2 = same_task(later, t->addr);
        if (!task_pending(t))
            continue;
        enum task_role role = task_role(loop, t);
        /* Waits still on the same Future: nothing ended them in between. */
        if (role == ROLE_OTHER || !t2 || task_role(later, t2) != role ||
            (role != ROLE_SLEEPER && t2->awaits_addr != t->awaits_addr))
            return 0;
        waiters += role == ROLE_WAITER;
        sleepers += role == ROLE_SLEEPER;
        /* A sleeper that slept through both snapshots has not had its say. */
        woke += role == ROLE_SLEEPER && t2->awaits_addr != t->awaits_addr;
    }
    if (!waiters || !sleepers)
        return 0;
    /* One finding per object waited on. */
    for (size_t i = 0; i < loop->n_tasks; i++) {
        const struct report_task *t = &loop->tasks[i];
        if (!in_role(loop, t, ROLE_WAITER, t->wait_obj))
            continue;
        bool done = false;
        for (size_t k = 0; k < i && !done; k++)
            done = in_role(loop, &loop->tasks[k], ROLE_WAITER, t->wait_obj);
        if (done)
            continue;
        struct why_finding *f = add_finding(why, WHY_NEVER_NOTIFIED, t->wait_obj, t->addr);
        if (!f)
            return -1;
        f->grade = WHY_GRADE_PROBABLE;
        f->certain = false;
        f->threads[f->n_threads++] = th;
        char *s = f->summary, words[64];
        size_t size = sizeof f->summary, n = 0;
        for (size_t k = i; k < loop->n_tasks; k++)
            n += in_role(loop, &loop->tasks[k], ROLE_WAITER, t->wait_obj);
        text_format(s, size, "%zu task%s of the asyncio loop of ", n, n == 1 ? "" : "s");
        append_thread(s, size, &first->threads[th]);
        text_append(s, size, " wait%s in %.*s on %s (0x%llx) with no timeout",
                    n == 1 ? "s" : "", (int)strcspn(t->awaits, " "), t->awaits,
                    object_words(t, words, sizeof words), (unsigned long long)t->wait_obj);
        if (strstr(t->awaits, ", held ("))
            text_append(s, size, ": %s, and asyncio records no holder (probably acquired on a "
                                 "path that raised or returned before release())",
                        strstr(t->awaits, "Semaphore") ? "its permits are all taken"
                                                       : "it is locked, no task inside an async "
                                                         "with of it");
        text_append(s, size, ". Only %s that merely sleep%s could still %s:",
                    sleepers == 1 ? "a task" : "tasks", sleepers == 1 ? "s" : "", wait_ender(t));
        append_tasks(s, size, loop, 0, ROLE_SLEEPER, 0, sleepers);
        if (woke == sleepers)
            text_append(s, size, ", which woke between the snapshots and went back to sleep "
                                 "with the waits as they were");
        else
            text_append(s, size, ", %s did not wake between the snapshots (a longer --interval "
                                 "lets %s)", woke ? "some of which" : "which",
                        sleepers == 1 ? "it" : "them");
        text_append(s, size, "; in both snapshots the loop had no I/O but its wake-up socket, no "
                             "callback ready and no timer but asyncio.sleep's. Waiting:");
        append_tasks(s, size, loop, i, ROLE_WAITER, t->wait_obj, n);
        outrank_no_hang_probably(why, f, "probably hung: ");
    }
    return 0;
}

pid_t asyncio_caught_mid_step(const struct stack_report *r, const bool *ran)
{
    for (size_t l = 0; r->tasks && l < r->tasks->n_loops; l++) {
        const struct report_loop *loop = &r->tasks->loops[l];
        int th = loop_thread(r, loop);
        if (!loop->tid || loop->n_hidden || th < 0)
            continue;
        /* Asleep in the kernel from before the look to after it: the
         * stack and the tasks were read at rest. */
        bool at_rest = r->threads[th].state == THREAD_IDLE && !(ran && ran[th]) &&
                       loop->step != LOOP_STEP_CALLBACK && loop->step != LOOP_STEP_OTHER &&
                       !running_task(loop);
        if (at_rest)
            continue;
        for (size_t i = 0; i < loop->n_tasks; i++)
            if (task_pending(&loop->tasks[i]) && task_role(loop, &loop->tasks[i]) == ROLE_WAITER)
                return loop->tid;
    }
    return 0;
}

#define SETTLE_TRIES 7
#define SETTLE_FIRST_MS 10
#define SETTLE_LONGEST_MS 320

int asyncio_settle_delay_ms(int k)
{
    if (k < 0 || k >= SETTLE_TRIES)
        return -1;
    int ms = SETTLE_FIRST_MS << k;
    return ms < SETTLE_LONGEST_MS ? ms : SETTLE_LONGEST_MS;
}

double asyncio_sleepers_wake_by(const struct stack_report *first)
{
    double latest = NAN;
    for (size_t l = 0; first->tasks && l < first->tasks->n_loops; l++) {
        const struct report_loop *loop = &first->tasks->loops[l];
        if (!loop->tid || loop->n_hidden || !loop_only_sleeps(first, first, loop))
            continue;
        bool waiter = false, other = false;
        double due = NAN;
        for (size_t i = 0; i < loop->n_tasks; i++) {
            const struct report_task *t = &loop->tasks[i];
            if (!task_pending(t))
                continue;
            enum task_role role = task_role(loop, t);
            waiter = waiter || role == ROLE_WAITER;
            other = other || role == ROLE_OTHER || (role == ROLE_SLEEPER && isnan(t->sleep_due));
            if (role == ROLE_SLEEPER && (isnan(due) || t->sleep_due > due))
                due = t->sleep_due;
        }
        if (waiter && !other && !isnan(due) && (isnan(latest) || due > latest))
            latest = due;
    }
    return latest;
}

static bool rearms_timer(const struct report_task *t)
{
    return t->timed || in_sleep(t);
}

int asyncio_tasks_moved(const struct stack_report *first, const struct stack_report *second)
{
    if (!first->tasks || !second || !second->tasks)
        return -1;
    int moved = 0, loops = 0;
    for (size_t l = 0; l < first->tasks->n_loops; l++) {
        const struct report_loop *loop = &first->tasks->loops[l];
        const struct report_loop *later = same_loop(second->tasks, loop->addr);
        /* Past the cap, a task missing from one list may only be unshown. */
        if (!later || loop->n_hidden || later->n_hidden)
            continue;
        loops++;
        for (size_t i = 0; i < loop->n_tasks; i++) {
            const struct report_task *t = &loop->tasks[i];
            if (!task_pending(t))
                continue;
            const struct report_task *t2 = same_task(later, t->addr);
            if (!t2 || !task_pending(t2))
                moved++;
            else if (t2->awaits_addr != t->awaits_addr && !(rearms_timer(t) && rearms_timer(t2)))
                moved++;
        }
        for (size_t j = 0; j < later->n_tasks; j++)
            if (task_pending(&later->tasks[j]) && !same_task(loop, later->tasks[j].addr))
                moved++;
    }
    return loops ? moved : -1;
}

/* Past the sleepers' wake-up by a margin for their step to run; a look
 * put off further than a second would make why slow for little. */
#define SLEEPER_MARGIN_MS 30.0
#define SLEEPER_WAIT_MAX_MS 1000.0

double asyncio_second_look_ms(const struct stack_report *first, double interval_ms, double now_s)
{
    double wake_by = asyncio_sleepers_wake_by(first);
    if (isnan(wake_by))
        return interval_ms;
    double wait_ms = (wake_by - now_s) * 1e3 + SLEEPER_MARGIN_MS;
    return wait_ms > interval_ms && wait_ms <= SLEEPER_WAIT_MAX_MS ? wait_ms : interval_ms;
}

int asyncio_child_pipe_findings(const struct stack_report *first,
                                const struct stack_report *second,
                                const struct diagnosis_queries *q, struct why_report *why)
{
    if (!first->tasks || !second || !second->tasks || !q->blocked_pipe_writer)
        return 0;
    for (size_t l = 0; l < first->tasks->n_loops; l++) {
        const struct report_loop *loop = &first->tasks->loops[l];
        const struct report_loop *later = same_loop(second->tasks, loop->addr);
        int th = loop_thread(first, loop);
        /* The loop asleep in its selector: it runs nothing that would read. */
        if (th < 0 || !later || loop->step != LOOP_STEP_SELECTOR ||
            later->step != LOOP_STEP_SELECTOR)
            continue;
        const struct report_wait *w = first->threads[th].wait;
        for (size_t i = 0; i < loop->n_tasks; i++) {
            const struct report_task *task = &loop->tasks[i];
            const struct report_task *t2 = same_task(later, task->addr);
            struct pipe_blocked_writer bw;
            if (!task->subprocess_pid || task->timed || !t2 || t2->awaits_addr != task->awaits_addr ||
                q->blocked_pipe_writer(q->ctx, 0, task->subprocess_pid, &bw) != 0)
                continue;
            /* A read end the selector watches would have woken the loop. */
            bool watched = false;
            for (int k = 0; w && w->kind == WAIT_SELECT && k < w->n_fds && !watched; k++)
                watched = w->fds[k].fd == bw.parent_fd;
            if (watched)
                continue;
            struct why_finding *f = add_finding(why, WHY_DEADLOCK, 0, task->addr);
            if (!f)
                return -1;
            f->with_child = true;
            f->threads[f->n_threads++] = th;
            char *s = f->summary;
            size_t size = sizeof f->summary;
            text_format(s, size, "task \"%s\" of the asyncio loop of ", task->name);
            append_thread(s, size, &first->threads[th]);
            text_append(s, size, " awaits child process %d (%s) to exit", (int)bw.pid, bw.comm);
            append_task_where(s, size, task, " (", ")");
            text_append(s, size, ", which is blocked writing to its fd %d (pipe:[%llu]): that pipe "
                                 "is full, this process holds its read end (fd %d) and the loop "
                                 "does not read it (asyncio stops reading a subprocess pipe "
                                 "once its StreamReader holds twice its limit, 128 KiB by "
                                 "default, that nobody reads): read while waiting, e.g. with "
                                 "Process.communicate()",
                        bw.child_fd, (unsigned long long)bw.pipe, bw.parent_fd);
            if (why->verdict == WHY_NOT_HUNG || why->verdict == WHY_IDLE ||
                why->verdict == WHY_UNCHECKED) {
                why->verdict = WHY_DEADLOCK;
                why->grade = WHY_GRADE_CERTAIN;
                text_format(why->summary, sizeof why->summary, "deadlock with a child process: %s",
                            f->summary);
            }
        }
    }
    return 0;
}

int asyncio_sleeper_findings(const struct stack_report *first, const struct stack_report *second,
                             struct why_report *why)
{
    if (!first->tasks || !second || !second->tasks)
        return 0;
    /* As for a loop asleep: only a signal handler could still run code. */
    if (why->python_signals & ~(UINT64_C(1) << (SIGINT - 1)))
        return 0;
    for (size_t l = 0; l < first->tasks->n_loops; l++) {
        const struct report_loop *loop = &first->tasks->loops[l];
        if (!loop->tid || loop->n_hidden)
            continue;
        int th = loop_thread_alone(first, loop, why);
        /* A finding on this loop already says more (a cycle, an orphan). */
        bool found = false;
        for (int k = 0; k < why->n_findings && !found; k++)
            for (size_t i = 0; i < loop->n_tasks && !found; i++)
                found = why->findings[k].task == loop->tasks[i].addr;
        if (th >= 0 && !found && sleeper_findings(first, second, loop, th, why) != 0)
            return -1;
    }
    return 0;
}

int asyncio_stream_findings(const struct stack_report *first, const struct stack_report *second,
                            struct why_report *why)
{
    if (!first->tasks || !second || !second->tasks ||
        (why->progress.checked && why->progress.progressing))
        return 0;
    for (size_t l = 0; l < first->tasks->n_loops; l++) {
        const struct report_loop *loop = &first->tasks->loops[l];
        const struct report_loop *later_loop = same_loop(second->tasks, loop->addr);
        int th = loop_thread(first, loop);
        for (size_t i = 0; th >= 0 && i < loop->n_tasks; i++) {
            const struct report_task *task = &loop->tasks[i];
            if (!task->stream_peer[0] || !task->stream_no_timeout || !task->stream_opened)
                continue;
            /* Still on the same read in the second snapshot: the peer sent
             * nothing in between (the loop would have woken the task). */
            const struct report_task *later = same_task(later_loop, task->addr);
            if (!later || later->awaits_addr != task->awaits_addr || !later->stream_peer[0])
                continue;
            struct why_finding *f = add_finding(why, WHY_NETWORK_WAIT, task->awaits_addr,
                                                task->addr);
            if (!f)
                return -1;
            /* The peer may still answer: only probable. */
            f->grade = WHY_GRADE_PROBABLE;
            f->certain = false;
            f->threads[f->n_threads++] = th;
            text_format(f->summary, sizeof f->summary,
                        "task \"%s\" of the asyncio loop of ", task->name);
            append_thread(f->summary, sizeof f->summary, &first->threads[th]);
            text_append(f->summary, sizeof f->summary,
                        " waits for a reply from %s on a connection it opened, with no timeout, "
                        "and nothing came in either snapshot: it waits for ever if the peer "
                        "never answers", task->stream_peer);
            outrank_no_hang_probably(why, f, "");
        }
    }
    return 0;
}

static size_t task_index(const struct report_loop *loop, uint64_t addr)
{
    for (size_t i = 0; loop && i < loop->n_tasks; i++)
        if (loop->tasks[i].addr == addr)
            return i;
    return (size_t)-1;
}

/* The task a waits for through one edge that is certain: the holder of
 * the lock it waits for, the one task that alone refers to what it waits
 * on, or a task it awaits (directly, gathered, in a TaskGroup; not when any
 * one of several ends the wait). A wait with a deadline ends by itself:
 * none. Fills next (at most max); returns how many. */
static size_t wait_edges(const struct report_loop *loop, const struct report_task *t,
                         size_t *next, size_t max)
{
    size_t n = 0;
    if (t->timed || !task_pending(t))
        return 0;
    if (t->lock_holder && n < max)
        next[n++] = task_index(loop, t->lock_holder);
    if (t->provider && n < max)
        next[n++] = task_index(loop, t->provider);
    for (size_t k = 0; !t->awaits_any && k < t->n_children && n < max; k++)
        next[n++] = t->children[k];
    return n;
}

/* The cycle of waits from task start back to it, following wait_edges
 * (the first that leads back), into path; its length, 0 when none.
 * Depth-first, each task visited once (seen). */
static size_t wait_cycle(const struct report_loop *loop, size_t start, size_t at, size_t *path,
                         size_t depth, size_t max, unsigned char *seen)
{
    if (depth == max)
        return 0;
    path[depth] = at;
    seen[at] = 1;
    size_t next[66];
    size_t n = wait_edges(loop, &loop->tasks[at], next, sizeof next / sizeof next[0]);
    for (size_t k = 0; k < n; k++) {
        if (next[k] == start)
            return depth + 1;
        if (next[k] < loop->n_tasks && !seen[next[k]]) {
            size_t len = wait_cycle(loop, start, next[k], path, depth + 1, max, seen);
            if (len)
                return len;
        }
    }
    return 0;
}

/* One edge of a cycle, from a to b, in words. */
static void append_edge(char *s, size_t size, const struct report_task *a,
                        const struct report_task *b, bool first)
{
    char words[64];
    text_append(s, size, "%s task \"%s\" ", first ? "" : ";", a->name);
    if (a->lock_holder == a->addr && a == b)
        text_append(s, size, "waits for %s 0x%llx, which it holds itself, in an `async with` "
                             "further up its stack (asyncio.Lock is not reentrant)",
                    a->wait_obj_type[0] ? a->wait_obj_type : "Lock",
                    (unsigned long long)a->lock_waited);
    else if (a->lock_holder == b->addr)
        text_append(s, size, "waits for %s 0x%llx, held by task \"%s\"",
                    a->wait_obj_type[0] ? a->wait_obj_type : "Lock",
                    (unsigned long long)a->lock_waited, b->name);
    else if (a->provider == b->addr)
        text_append(s, size, "waits in %.*s on %s (0x%llx) that only task \"%s\" refers to",
                    (int)strcspn(a->awaits, " "), a->awaits,
                    a->wait_obj == a->awaits_addr ? "a Future" : object_words(a, words, sizeof words),
                    (unsigned long long)a->wait_obj, b->name);
    else
        text_append(s, size, "awaits task \"%s\"", b->name);
}

int asyncio_cycle_findings(const struct stack_report *first, const struct stack_report *second,
                           struct why_report *why)
{
    if (!first->tasks)
        return 0;
    enum { MAX_CYCLE = 16 };
    for (size_t l = 0; l < first->tasks->n_loops; l++) {
        const struct report_loop *loop = &first->tasks->loops[l];
        const struct report_loop *later_loop = second && second->tasks
                                                   ? same_loop(second->tasks, loop->addr) : NULL;
        if (second && !later_loop)
            continue;
        int th = loop_thread(first, loop);
        unsigned char *seen = calloc(loop->n_tasks ? loop->n_tasks : 1, 1);
        unsigned char *reported = calloc(loop->n_tasks ? loop->n_tasks : 1, 1);
        if (!seen || !reported) {
            free(seen);
            free(reported);
            return -1;
        }
        for (size_t i = 0; i < loop->n_tasks; i++) {
            const struct report_task *t = &loop->tasks[i];
            size_t next[1];
            if (reported[i] || !wait_edges(loop, t, next, 1))
                continue;
            size_t path[MAX_CYCLE];
            memset(seen, 0, loop->n_tasks);
            size_t len = wait_cycle(loop, i, i, path, 0, MAX_CYCLE, seen);
            bool known = len > 0;
            for (size_t k = 0; k < len; k++)
                known = known && !reported[path[k]];
            if (!known)
                continue;
            /* Live: every wait of the cycle still the same later. */
            bool same = true;
            for (size_t k = 0; k < len && second; k++) {
                const struct report_task *a = &loop->tasks[path[k]];
                const struct report_task *b = same_task(later_loop, a->addr);
                same = same && b && b->lock_holder == a->lock_holder &&
                       b->lock_waited == a->lock_waited && b->awaits_addr == a->awaits_addr &&
                       b->provider == a->provider;
            }
            if (!same)
                continue;
            const struct report_task *a0 = &loop->tasks[path[0]];
            struct why_finding *f = add_finding(why, WHY_DEADLOCK,
                                                a0->wait_obj ? a0->wait_obj : a0->awaits_addr,
                                                a0->addr);
            if (!f) {
                free(seen);
                free(reported);
                return -1;
            }
            if (th >= 0)
                f->threads[f->n_threads++] = th;
            if (len == 1)
                text_format(f->summary, sizeof f->summary, "an asyncio task waits for itself for ever");
            else
                text_format(f->summary, sizeof f->summary, "%zu asyncio tasks wait for each other "
                            "for ever", len);
            if (th >= 0) {
                text_append(f->summary, sizeof f->summary, " on the loop of ");
                append_thread(f->summary, sizeof f->summary, &first->threads[th]);
            }
            text_append(f->summary, sizeof f->summary, ":");
            for (size_t k = 0; k < len; k++) {
                reported[path[k]] = 1;
                append_edge(f->summary, sizeof f->summary, &loop->tasks[path[k]],
                            &loop->tasks[path[(k + 1) % len]], k == 0);
            }
            outrank_no_hang(why, f);
        }
        free(seen);
        free(reported);
    }
    return 0;
}

int asyncio_findings(const struct stack_report *first, const struct stack_report *second,
                     int interval_ms, int threshold_ms, const struct diagnosis_queries *q,
                     struct why_report *why)
{
    return asyncio_blocked_findings(first, second, interval_ms, threshold_ms, why) != 0 ||
                   asyncio_orphan_findings(first, second, why) != 0 ||
                   asyncio_asleep_findings(first, second, why) != 0 ||
                   asyncio_stream_findings(first, second, why) != 0 ||
                   asyncio_cycle_findings(first, second, why) != 0 ||
                   asyncio_sleeper_findings(first, second, why) != 0 ||
                   asyncio_child_pipe_findings(first, second, q, why) != 0
               ? -1
               : 0;
}
