/* The hang diagnosis. A thread is live when it runs, waits for the GIL, has
 * a timeout, waits for something outside the process, or moved between the
 * snapshots; a thread blocked without timeout on an in-process object
 * (lock, condition, queue, event, join) is live only if one of its possible
 * releasers is: the lock's owner, the joined thread, or any other thread
 * that can reach the object from its frames. What is not live after the
 * fixpoint is stuck for good; cycles among stuck threads are deadlocks, and
 * stuck threads without releasers are locks nobody will release, starved
 * queues or events nobody can set. */
#include "diagnosis/hang.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "diagnosis/asyncio_why.h"
#include "util/text.h"

#define MAX_RELEASERS 64

struct node {
    bool live;                   /* some releaser is live, or it is live on its own */
    bool strong;                 /* ... through a releaser that does more than sleep or poll */
    bool blocked;                /* a node of the graph: blocked without timeout in the process */
    enum why_live reason;        /* why it is live on its own (BLOCKED for graph nodes) */
    int releasers[MAX_RELEASERS];
    int n_releasers;
    bool owner_edges;            /* releasers are known owners or a joined thread */
    uint64_t reach_obj;          /* releasers are the threads that can reach this object */
    bool reach_same_lock;        /* ... and do not wait to acquire the same lock */
    bool held;                   /* in a finding though live by the rules (network, GIL) */
    bool consumer;               /* in get() on a queue: a worker waiting for work */
    /* An asyncio loop's thread asleep in its selector with no timeout and no
     * fd but the loop's own wake-up socket: only another thread
     * (call_soon_threadsafe) can wake it, so it is live only when one is. */
    bool wake_only;
    /* Tarjan's strongly connected components */
    int index, lowlink, component;
    bool on_stack;
};

struct analysis {
    const struct diagnosis_queries *q;
    const struct hang_snapshot *first;
    struct why_report *why;
    struct node *nodes;
    int n;
    /* Tarjan state */
    int *stack;
    int stack_size, next_index, n_components;
};

/* ------------------------------------------------------------------------ */
/* Progress between the snapshots */

static bool same_frames(const struct report_thread *a, const struct report_thread *b)
{
    if (a->n_frames != b->n_frames || a->complete != b->complete)
        return false;
    for (size_t k = 0; k < a->n_frames; k++) {
        const struct report_frame *x = &a->frames[k], *y = &b->frames[k];
        if (x->line != y->line || strcmp(x->function, y->function) != 0 || strcmp(x->file, y->file) != 0)
            return false;
    }
    return true;
}

/* Waiting for the GIL and being on CPU without it are one state for this
 * purpose: a GIL waiter wakes every few milliseconds to ask again, which
 * is not progress. A thread idle in a syscall must stay in the same one. */
static bool same_activity(const struct report_thread *a, const struct thread_activity *x,
                          const struct report_thread *b, const struct thread_activity *y)
{
    bool a_wants = a->state == THREAD_WAITING_GIL || a->state == THREAD_RUNNING;
    bool b_wants = b->state == THREAD_WAITING_GIL || b->state == THREAD_RUNNING;
    if (a->holds_gil != b->holds_gil || a_wants != b_wants)
        return false;
    if (a_wants)
        return true;
    return x->syscall_nr == y->syscall_nr && x->syscall_args[0] == y->syscall_args[0];
}

static int find_thread(const struct stack_report *report, const struct report_thread *th)
{
    for (size_t j = 0; j < report->n_threads; j++)
        if (report->threads[j].thread_id == th->thread_id && report->threads[j].tid == th->tid)
            return (int)j;
    return -1;
}

static void compare_snapshots(const struct hang_snapshot *first, const struct hang_snapshot *second,
                              int interval_ms, struct why_report *why)
{
    struct why_progress *p = &why->progress;
    const struct stack_report *a = first->report, *b = second->report;
    p->checked = true;
    p->interval_ms = interval_ms;
    p->gil_switches = second->raw->gil_switches - first->raw->gil_switches;
    p->cpu_ns = 0;
    bool cpu_known = false;
    for (size_t i = 0; i < a->n_threads; i++) {
        struct why_thread *t = &why->threads[i];
        int j = find_thread(b, &a->threads[i]);
        if (j < 0) {
            t->gone = t->changed = true;
            p->threads_gone++;
            continue;
        }
        t->later_state = b->threads[j].state;
        t->changed = !same_frames(&a->threads[i], &b->threads[j]) ||
                     !same_activity(&a->threads[i], &first->raw->threads[i].activity, &b->threads[j],
                                    &second->raw->threads[j].activity);
        if (t->changed)
            p->threads_changed++;
        if (first->cpu_ns[i] >= 0 && second->cpu_ns[j] >= first->cpu_ns[i]) {
            t->cpu_ns = second->cpu_ns[j] - first->cpu_ns[i];
            p->cpu_ns += t->cpu_ns;
            cpu_known = true;
        }
    }
    for (size_t j = 0; j < b->n_threads; j++) {
        const struct report_thread *th = &b->threads[j];
        if (find_thread(a, th) < 0)
            p->threads_started++;
        /* Only a thread running Python (holding the GIL outside any
         * syscall) counts: one seen on CPU without the GIL may be a GIL
         * waiter between two timed waits. */
        if (th->state == THREAD_HOLDING_GIL && !th->syscall && !th->stopped)
            p->threads_running++;
    }
    if (!cpu_known)
        p->cpu_ns = -1;
    /* An asyncio service served in between, its loop's thread back in
     * the same select: its tasks tell. */
    p->tasks_moved = asyncio_tasks_moved(a, b);
    /* Where the scheduler does not say how long a thread has waited, a
     * thread that did not move waited at least the interval. */
    for (size_t i = 0; i < a->n_threads; i++) {
        struct report_wait *w = a->threads[i].wait;
        if (w && w->waited_ms < 0 && w->kind != WAIT_NONE && w->kind != WAIT_GIL &&
            !why->threads[i].changed) {
            w->waited_ms = interval_ms;
            w->waited_at_least = true;
        }
    }
    /* Busy means more than a twentieth of one CPU over the interval: a
     * blocked process spends microseconds on its timed wake-ups. */
    int64_t busy_ns = (int64_t)interval_ms * 1000000 / 20;
    if (busy_ns < 2000000)
        busy_ns = 2000000;
    /* A thread that runs (or is runnable) is busy even if a loaded machine
     * gave it no CPU during the interval: a stuck process runs nothing. */
    p->progressing = p->gil_switches > 0 || p->threads_changed > 0 || p->threads_started > 0 ||
                     p->threads_gone > 0 || p->threads_running > 0 || p->tasks_moved > 0 ||
                     (p->cpu_ns >= 0 && p->cpu_ns >= busy_ns);
}

/* ------------------------------------------------------------------------ */
/* Who can release what */

static const struct report_wait *wait_of(const struct analysis *an, int i)
{
    return an->first->report->threads[i].wait;
}

static bool in_process_wait(const struct report_wait *w)
{
    return w && (w->kind == WAIT_LOCK || w->kind == WAIT_NOTIFY || w->kind == WAIT_JOIN);
}

static void add_releaser(struct node *node, int j)
{
    for (int k = 0; k < node->n_releasers; k++)
        if (node->releasers[k] == j)
            return;
    if (node->n_releasers < MAX_RELEASERS)
        node->releasers[node->n_releasers++] = j;
    else
        node->live = node->strong = true; /* too many candidates to call it stuck */
}

/* Does thread j wait on the same thing the same way as thread i? Then it is
 * no releaser of i, whatever it can reach. */
static bool same_wait(const struct analysis *an, int i, int j)
{
    const struct report_wait *w = wait_of(an, i), *o = wait_of(an, j);
    if (!o || o->kind != w->kind)
        return false;
    if (an->nodes[i].reach_same_lock)
        return o->lock && o->lock == w->lock;
    /* A thread blocked on the same queue or condition (in get() while i is in
     * join(), say) does nothing with it before someone else wakes it. */
    return o->object == w->object;
}

/* Is thread j, through a chain of joins, waiting for i to finish, or for a
 * thread that waits the same way as i? Then j can act on i's object only
 * after i itself was released. */
static bool joins_into(const struct analysis *an, int j, int i)
{
    int at = j;
    for (int step = 0; step < an->n; step++) {
        const struct report_wait *w = wait_of(an, at);
        if (!an->nodes[at].blocked || !w || w->kind != WAIT_JOIN || w->join_target < 0)
            return false;
        at = w->join_target;
        if (at == i || (an->nodes[at].blocked && same_wait(an, i, at)))
            return true;
    }
    return false;
}

/* Reach-based releasers. One thread that does more than sleep and can
 * reach the object is enough to make i live for good, so those are tried
 * first; otherwise every sleeping or polling thread that can reach it (they
 * make i only probably stuck) and every blocked one (for the cycle search)
 * is listed. */
static void resolve_reach(struct analysis *an)
{
    for (int i = 0; i < an->n; i++) {
        struct node *node = &an->nodes[i];
        if (!node->blocked || !node->reach_obj)
            continue;
        for (int pass = 0; pass < 3; pass++) {
            for (int j = 0; j < an->n; j++) {
                const struct node *other = &an->nodes[j];
                bool in_pass = pass == 0   ? !other->blocked && other->strong
                               : pass == 1 ? !other->blocked && !other->strong
                                           : other->blocked;
                if (j == i || !in_pass || same_wait(an, i, j) || joins_into(an, j, i))
                    continue;
                if (an->q->reaches(an->q->ctx, (size_t)j, node->reach_obj)) {
                    add_releaser(node, j);
                    if (pass == 0)
                        break;
                }
            }
            if (pass == 0 && node->n_releasers)
                break;
        }
    }
}

/* Signals that can run Python code: a Python-level handler in the signal
 * module's table, for a signal the process catches. Without the table:
 * every caught signal but SIGINT (its default handler only raises), glibc's
 * own SIGCANCEL and SIGSETXID (32, 33) and the fatal ones faulthandler
 * catches. */
static uint64_t python_signals(const struct hang_snapshot *s)
{
    if (s->handlers.known)
        return s->caught_signals & s->handlers.python;
    const uint64_t ignored = (1ull << (2 - 1)) | (1ull << (4 - 1)) | (1ull << (6 - 1)) |
                             (1ull << (7 - 1)) | (1ull << (8 - 1)) | (1ull << (11 - 1)) |
                             (1ull << (32 - 1)) | (1ull << (33 - 1));
    return s->caught_signals & ~ignored;
}

/* Python runs signal handlers in the main thread, interrupting whatever it
 * waits for, so a handler may set the event it waits for. Not when it waits
 * for a lock it holds itself: a handler would block on it the same way. */
static bool main_thread_signalled(const struct analysis *an, int i)
{
    const struct report_thread *th = &an->first->report->threads[i];
    const struct report_wait *w = th->wait;
    if (!th->tid || th->tid != an->first->report->pid || python_signals(an->first) == 0)
        return false;
    return !(w && w->kind == WAIT_LOCK && w->owner_status == WAIT_OWNER_ALIVE && w->owner == i);
}

static bool outside_wait(const struct report_wait *w)
{
    return w && (w->kind == WAIT_SOCKET || w->kind == WAIT_SELECT || w->kind == WAIT_CHILD ||
                 w->kind == WAIT_IO || w->kind == WAIT_SYSCALL);
}

static bool queue_like(const struct report_wait *w)
{
    size_t len = strlen(w->object_type);
    return w->kind == WAIT_NOTIFY && strcmp(w->operation, "get") == 0 &&
           (w->queue_length >= 0 || (len >= 5 && strcmp(w->object_type + len - 5, "Queue") == 0));
}

/* Why thread i is live on its own; BLOCKED when only a releaser can make it. */
static enum why_live own_liveness(const struct analysis *an, int i)
{
    const struct report_thread *th = &an->first->report->threads[i];
    const struct report_wait *w = th->wait;
    if (th->stopped)
        return WHY_LIVE_STOPPED;
    if (an->why->threads[i].changed)
        return WHY_LIVE_CHANGED;
    if (!w || w->kind == WAIT_NONE || w->kind == WAIT_GIL || th->state == THREAD_RUNNING ||
        (th->state == THREAD_HOLDING_GIL && !th->syscall))
        return WHY_LIVE_RUNS;
    if (w->kind == WAIT_SLEEP)
        return WHY_LIVE_SLEEPS;
    if (outside_wait(w))
        return w->timeout == WAIT_TIMEOUT_SET && w->kind == WAIT_SELECT ? WHY_LIVE_TIMEOUT
                                                                       : WHY_LIVE_OUTSIDE;
    if (!in_process_wait(w))
        return WHY_LIVE_UNTIED;
    if (w->timeout == WAIT_TIMEOUT_SET)
        return WHY_LIVE_TIMEOUT;
    if (main_thread_signalled(an, i))
        return WHY_LIVE_SIGNAL;
    switch (w->kind) {
    case WAIT_LOCK:
        return w->owner_status == WAIT_OWNER_FREE ? WHY_LIVE_RUNS : WHY_LIVE_BLOCKED;
    case WAIT_NOTIFY:
        return w->object ? WHY_LIVE_BLOCKED : WHY_LIVE_UNTIED;
    case WAIT_JOIN:
        return w->join_target >= 0 ? WHY_LIVE_BLOCKED : WHY_LIVE_UNTIED;
    default:
        return WHY_LIVE_UNTIED;
    }
}

static bool loop_asleep(const struct analysis *an, int i)
{
    const struct report_thread *th = &an->first->report->threads[i];
    const struct report_wait *w = th->wait;
    const struct report_tasks *tasks = an->first->report->tasks;
    if (!tasks || !w || w->kind != WAIT_SELECT || w->timeout != WAIT_TIMEOUT_NONE ||
        w->total_fds != 1 || w->n_fds != 1 ||
        strcmp(w->fds[0].what, "socket unix (unnamed) CONNECTED") != 0)
        return false;
    /* A Python handler of a signal (but SIGINT's, which ends asyncio.run
     * rather than waking a task) runs on the main thread and may wake it. */
    if (th->tid == an->first->report->pid &&
        (python_signals(an->first) & ~(UINT64_C(1) << (SIGINT - 1))) != 0)
        return false;
    for (size_t l = 0; l < tasks->n_loops; l++)
        if (tasks->loops[l].tid == th->tid && tasks->loops[l].step == LOOP_STEP_SELECTOR)
            return true;
    return false;
}

static void build_node(struct analysis *an, int i)
{
    const struct report_wait *w = wait_of(an, i);
    struct node *node = &an->nodes[i];
    node->reason = own_liveness(an, i);
    node->blocked = node->reason == WHY_LIVE_BLOCKED;
    node->live = !node->blocked;
    node->strong = node->live && node->reason != WHY_LIVE_SLEEPS && node->reason != WHY_LIVE_TIMEOUT;
    if (node->reason == WHY_LIVE_OUTSIDE && loop_asleep(an, i)) {
        node->wake_only = true;
        node->live = node->strong = false;
    }
    if (!node->blocked)
        return;
    switch (w->kind) {
    case WAIT_LOCK:
        if (w->owner_status == WAIT_OWNER_ALIVE && w->owner >= 0) {
            add_releaser(node, w->owner);
            node->owner_edges = true;
        } else if (w->owner_status == WAIT_OWNER_UNKNOWN) {
            node->reach_obj = w->lock ? w->lock : w->object;
            node->reach_same_lock = w->lock != 0;
        }
        break;
    case WAIT_NOTIFY:
        node->reach_obj = w->object;
        node->consumer = queue_like(w);
        break;
    case WAIT_JOIN:
        add_releaser(node, w->join_target);
        node->owner_edges = true;
        break;
    default:
        break;
    }
}

/* To a fixpoint: a blocked thread is live when a releaser is; it is
 * strongly live when its owner or joined thread runs, sleeps or polls (or is
 * itself strongly live), or when a thread that can reach its object is
 * strongly live. */
static void propagate_liveness(struct analysis *an)
{
    for (int round = 0; round <= an->n; round++) {
        bool changed = false;
        for (int i = 0; i < an->n; i++) {
            struct node *node = &an->nodes[i];
            if (node->wake_only && !node->strong) {
                /* Any other thread could wake it, as it is. */
                for (int k = 0; k < an->n; k++) {
                    const struct node *r = &an->nodes[k];
                    if (k == i || r->wake_only)
                        continue;
                    if (r->live && !node->live)
                        node->live = changed = true;
                    if (r->strong && !node->strong)
                        node->strong = changed = true;
                }
                continue;
            }
            if (!node->blocked || node->strong)
                continue;
            for (int k = 0; k < node->n_releasers; k++) {
                const struct node *r = &an->nodes[node->releasers[k]];
                if (r->live && !node->live)
                    node->live = changed = true;
                /* An owner or joined thread that sleeps or polls will act
                 * when it wakes; one blocked itself passes on what it is. */
                /* A worker waiting in get() for work that a sleeping or
                 * polling thread can still put is how pools idle. */
                bool strong = (node->owner_edges || node->consumer) && !r->blocked ? r->live : r->strong;
                if (strong && !node->strong) {
                    node->strong = changed = true;
                    break;
                }
            }
        }
        if (!changed)
            return;
    }
}

/* A thread the explanation is about: blocked, and no releaser that does
 * more than sleep or poll is live. */
static bool stuck(const struct analysis *an, int i)
{
    return an->nodes[i].blocked && !an->nodes[i].strong;
}

/* ------------------------------------------------------------------------ */
/* Explaining the stuck threads */

static void strongconnect(struct analysis *an, int v)
{
    struct node *node = &an->nodes[v];
    node->index = node->lowlink = an->next_index++;
    an->stack[an->stack_size++] = v;
    node->on_stack = true;
    for (int k = 0; k < node->n_releasers; k++) {
        int w = node->releasers[k];
        struct node *next = &an->nodes[w];
        if (!stuck(an, w))
            continue;
        if (next->index < 0) {
            strongconnect(an, w);
            if (next->lowlink < node->lowlink)
                node->lowlink = next->lowlink;
        } else if (next->on_stack && next->index < node->lowlink) {
            node->lowlink = next->index;
        }
    }
    if (node->lowlink == node->index) {
        int id = an->n_components++;
        int member;
        do {
            member = an->stack[--an->stack_size];
            an->nodes[member].on_stack = false;
            an->nodes[member].component = id;
        } while (member != v);
    }
}

static void append_object(char *out, size_t size, const struct report_wait *w)
{
    text_append(out, size, "%s", w->object_type);
    if (w->reference[0])
        text_append(out, size, " %s", w->reference);
    text_append(out, size, " (0x%llx)", (unsigned long long)w->object);
}

static struct why_finding *new_finding(struct analysis *an, enum why_verdict kind)
{
    struct why_report *why = an->why;
    struct why_finding *findings = realloc(why->findings, sizeof *findings * (size_t)(why->n_findings + 1));
    if (!findings)
        return NULL;
    why->findings = findings;
    struct why_finding *f = &findings[why->n_findings++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    return f;
}

static void add_thread(int *list, int *count, int i)
{
    for (int k = 0; k < *count; k++)
        if (list[k] == i)
            return;
    if (*count < WHY_MAX_FINDING_THREADS)
        list[(*count)++] = i;
}

static void describe_edge(struct analysis *an, int i, char *out, size_t size)
{
    const struct stack_report *report = an->first->report;
    const struct report_wait *w = wait_of(an, i);
    const struct node *node = &an->nodes[i];
    stack_report_append_thread(out, size, &report->threads[i]);
    if (w->kind == WAIT_JOIN) {
        text_append(out, size, " joins ");
        if (w->join_target >= 0)
            stack_report_append_thread(out, size, &report->threads[w->join_target]);
        return;
    }
    if (w->kind == WAIT_LOCK) {
        text_append(out, size, " waits to acquire ");
        append_object(out, size, w);
    } else {
        text_append(out, size, " waits in %s.%s on ", w->object_type, w->operation);
        if (w->reference[0])
            text_append(out, size, "%s (0x%llx)", w->reference, (unsigned long long)w->object);
        else
            text_append(out, size, "0x%llx", (unsigned long long)w->object);
    }
    if (node->owner_edges && w->owner >= 0) {
        text_append(out, size, " held by ");
        stack_report_append_thread(out, size, &report->threads[w->owner]);
    } else if (node->n_releasers) {
        text_append(out, size, ", which only ");
        for (int k = 0; k < node->n_releasers && k < 4; k++) {
            if (k)
                text_append(out, size, k + 1 == node->n_releasers ? " or " : ", ");
            stack_report_append_thread(out, size, &report->threads[node->releasers[k]]);
        }
        text_append(out, size, w->kind == WAIT_NOTIFY ? " could signal" : " could release");
    }
}

static void deadlock_findings(struct analysis *an)
{
    for (int c = 0; c < an->n_components; c++) {
        int members[WHY_MAX_FINDING_THREADS], n = 0;
        bool self_loop = false, all_dead = true;
        for (int i = 0; i < an->n; i++) {
            if (!stuck(an, i) || an->nodes[i].component != c)
                continue;
            if (n < WHY_MAX_FINDING_THREADS)
                members[n++] = i;
            for (int k = 0; k < an->nodes[i].n_releasers; k++)
                self_loop |= an->nodes[i].releasers[k] == i;
            all_dead &= !an->nodes[i].live;
        }
        if (n == 0 || (n == 1 && !self_loop))
            continue;
        struct why_finding *f = new_finding(an, WHY_DEADLOCK);
        if (!f)
            return;
        f->certain = true;
        f->summary[0] = '\0';
        bool inferred_lock = false, inferred_signal = false;
        for (int m = 0; m < n; m++) {
            add_thread(f->threads, &f->n_threads, members[m]);
            bool owned = an->nodes[members[m]].owner_edges;
            const struct report_wait *w = wait_of(an, members[m]);
            f->certain &= owned;
            inferred_lock |= !owned && w->kind == WAIT_LOCK;
            inferred_signal |= !owned && w->kind != WAIT_LOCK;
            if (m)
                text_append(f->summary, sizeof f->summary, "; ");
            describe_edge(an, members[m], f->summary + strlen(f->summary),
                          sizeof f->summary - strlen(f->summary));
        }
        if (inferred_lock)
            text_append(f->summary, sizeof f->summary,
                        " (a plain Lock records no owner: its holder is inferred)");
        if (inferred_signal)
            text_append(f->summary, sizeof f->summary,
                        " (nothing records who will set a Future or an Event, or notify a "
                        "Condition: that is inferred from what each thread can reach, an "
                        "event loop's thread reaching what its queued callbacks act on)");
        f->certain &= all_dead;
        f->grade = f->certain ? WHY_GRADE_CERTAIN : WHY_GRADE_PROBABLE;
    }
}

/* The findings root_findings makes: one object nobody can release. */
static bool root_kind(enum why_verdict kind)
{
    return kind == WHY_LOCK_NEVER_RELEASED || kind == WHY_QUEUE_STARVED || kind == WHY_NEVER_NOTIFIED;
}

static int stuck_releaser(const struct analysis *an, int i)
{
    for (int k = 0; k < an->nodes[i].n_releasers; k++)
        if (stuck(an, an->nodes[i].releasers[k]))
            return an->nodes[i].releasers[k];
    return -1;
}

/* The live releasers of a probable finding: who could still release it,
 * and (in the summary) why each was judged live. */
static void note_releasers(struct analysis *an, struct why_finding *f, int i)
{
    for (int k = 0; k < an->nodes[i].n_releasers; k++) {
        int r = an->nodes[i].releasers[k];
        if (!stuck(an, r) && an->nodes[r].live)
            add_thread(f->releasers, &f->n_releasers, r);
    }
}

static void append_releasers(struct analysis *an, const struct why_finding *f, char *s, size_t size)
{
    const struct stack_report *report = an->first->report;
    text_append(s, size, "; the only thread%s that could still do it: ", f->n_releasers == 1 ? "" : "s");
    for (int m = 0; m < f->n_releasers && m < 4; m++) {
        int r = f->releasers[m];
        if (m)
            text_append(s, size, ", ");
        stack_report_append_thread(s, size, &report->threads[r]);
        text_append(s, size, " (%s", why_live_text(an->nodes[r].reason));
        const struct report_thread *th = &report->threads[r];
        if (th->n_frames)
            text_append(s, size, ", in %s", th->frames[0].function);
        text_append(s, size, ")");
    }
    if (f->n_releasers > 4)
        text_append(s, size, " and %d more", f->n_releasers - 4);
}

static void root_findings(struct analysis *an)
{
    const struct stack_report *report = an->first->report;
    for (int i = 0; i < an->n; i++) {
        if (!stuck(an, i) || stuck_releaser(an, i) >= 0)
            continue;
        const struct report_wait *w = wait_of(an, i);
        /* One finding per object: join it if it exists. */
        struct why_finding *f = NULL;
        for (int k = 0; k < an->why->n_findings && !f; k++)
            if (root_kind(an->why->findings[k].kind) && an->why->findings[k].object == w->object)
                f = &an->why->findings[k];
        if (!f) {
            enum why_verdict kind = w->kind == WAIT_LOCK ? WHY_LOCK_NEVER_RELEASED
                                    : queue_like(w)       ? WHY_QUEUE_STARVED
                                                          : WHY_NEVER_NOTIFIED;
            f = new_finding(an, kind);
            if (!f)
                return;
            f->object = w->object;
            f->grade = WHY_GRADE_CERTAIN;
            f->certain = true;
        }
        add_thread(f->threads, &f->n_threads, i);
        if (an->nodes[i].live) {
            f->grade = WHY_GRADE_PROBABLE;
            f->certain = false;
        }
        note_releasers(an, f, i);
    }
    /* Summaries once every waiter is counted. */
    for (int k = 0; k < an->why->n_findings; k++) {
        struct why_finding *f = &an->why->findings[k];
        if (!root_kind(f->kind))
            continue;
        const struct report_wait *w = wait_of(an, f->threads[0]);
        char *s = f->summary;
        size_t size = sizeof f->summary;
        bool probable = f->grade == WHY_GRADE_PROBABLE;
        const char *who = probable ? "no thread that does more than sleep or poll" : "no live thread";
        s[0] = '\0';
        switch (f->kind) {
        case WHY_LOCK_NEVER_RELEASED:
            append_object(s, size, w);
            if (w->owner_status == WAIT_OWNER_GONE)
                text_append(s, size, " is held by thread ident 0x%llx, which has exited",
                            (unsigned long long)w->owner_ident);
            else
                text_append(s, size, " is locked, but %s holds it in a with block or "
                                     "can reach it to release it (it was probably acquired on a "
                                     "path that raised or returned before release())", who);
            break;
        case WHY_QUEUE_STARVED:
            append_object(s, size, w);
            if (w->queue_length >= 0)
                text_append(s, size, " has %lld item%s and", (long long)w->queue_length,
                            w->queue_length == 1 ? "" : "s");
            text_append(s, size, " %s can put into it", who);
            break;
        default:
            append_object(s, size, w);
            text_append(s, size, " (%s) cannot be signalled: %s can reach it", w->operation, who);
            break;
        }
        if (probable && f->n_releasers)
            append_releasers(an, f, s, size);
        text_append(s, size, "; waiting with no timeout: ");
        for (int m = 0; m < f->n_threads; m++) {
            if (m)
                text_append(s, size, ", ");
            stack_report_append_thread(s, size, &report->threads[f->threads[m]]);
        }
    }
}

/* Stuck threads that are neither in a cycle nor at a root wait behind one. */
static void attach_blocked(struct analysis *an)
{
    for (int i = 0; i < an->n; i++) {
        if (!stuck(an, i))
            continue;
        bool listed = false;
        for (int k = 0; k < an->why->n_findings && !listed; k++)
            for (int m = 0; m < an->why->findings[k].n_threads && !listed; m++)
                listed = an->why->findings[k].threads[m] == i;
        if (listed)
            continue;
        int at = i;
        for (int step = 0; step < an->n && (at = stuck_releaser(an, at)) >= 0; step++) {
            for (int k = 0; k < an->why->n_findings; k++) {
                struct why_finding *f = &an->why->findings[k];
                for (int m = 0; m < f->n_threads; m++) {
                    if (f->threads[m] == at) {
                        add_thread(f->blocked, &f->n_blocked, i);
                        goto next;
                    }
                }
            }
        }
    next:;
    }
}

/* Threads blocked only on the threads of finding f (joining them, or
 * waiting for a lock they hold, directly or through each other) are stuck
 * behind it, though the finding's threads are live by the liveness rules
 * (they wait for the network, or hold the GIL). */
static void attach_joiners(struct analysis *an, struct why_finding *f)
{
    for (int round = 0; round < an->n; round++) {
        bool added = false;
        for (int i = 0; i < an->n; i++) {
            const struct node *node = &an->nodes[i];
            bool in = false;
            for (int m = 0; m < f->n_threads && !in; m++)
                in = f->threads[m] == i;
            for (int m = 0; m < f->n_blocked && !in; m++)
                in = f->blocked[m] == i;
            if (in || !node->blocked || !node->owner_edges || !node->n_releasers)
                continue;
            bool behind = true;
            for (int k = 0; k < node->n_releasers && behind; k++) {
                int r = node->releasers[k];
                bool listed = false;
                for (int m = 0; m < f->n_threads && !listed; m++)
                    listed = f->threads[m] == r;
                for (int m = 0; m < f->n_blocked && !listed; m++)
                    listed = f->blocked[m] == r;
                behind = listed;
            }
            if (behind) {
                add_thread(f->blocked, &f->n_blocked, i);
                added = true;
            }
        }
        if (!added)
            return;
    }
}

/* The pipe deadlock subprocess's documentation warns about: a thread reads
 * one pipe of a child (its stdout), while the child is blocked writing to
 * another pipe (its stderr) that is full, whose read end this process holds
 * and no thread of it reads. */
static bool reads_pipe(const struct report_wait *w, uint64_t pipe, int fd)
{
    if (!w)
        return false;
    if (w->kind == WAIT_IO)
        return pipe_inode(w->io_target) == pipe;
    if (w->kind == WAIT_SELECT)
        for (int k = 0; k < w->n_fds; k++)
            if (w->fds[k].fd == fd)
                return true;
    return false;
}

/* The thread's side of a deadlock through a child's full pipe: reading
 * another pipe the child writes (*read_pipe set), or waiting for the child
 * to exit (the warning in Popen.wait's documentation). */
static bool waits_on_child_pipe(const struct report_wait *w, uint64_t *read_pipe)
{
    *read_pipe = 0;
    if (!w)
        return false;
    if (w->kind == WAIT_CHILD)
        return true;
    if (w->kind != WAIT_IO || !w->syscall ||
        (strcmp(w->syscall, "read") != 0 && strcmp(w->syscall, "readv") != 0))
        return false;
    *read_pipe = pipe_inode(w->io_target);
    return *read_pipe != 0;
}

/* multiprocessing's Process.join: the child's queue feeder is what cannot
 * finish (the pitfall its documentation's "Joining processes that use
 * queues" describes), and the cure is a get() before the join. */
static bool in_process_join(const struct report_thread *th)
{
    for (size_t k = 0; k < th->n_frames && k < 64; k++) {
        const struct report_frame *f = &th->frames[k];
        if (f->file && strstr(f->file, "multiprocessing/process.py") && f->function &&
            strstr(f->function, "join"))
            return true;
    }
    return false;
}

static void pipe_finding(struct analysis *an)
{
    const struct stack_report *report = an->first->report;
    if (report->core_path[0] || (an->why->progress.checked && an->why->progress.progressing))
        return;
    for (int i = 0; i < an->n; i++) {
        const struct report_wait *w = wait_of(an, i);
        uint64_t pipe;
        struct pipe_blocked_writer bw;
        if (!waits_on_child_pipe(w, &pipe) || an->why->threads[i].changed)
            continue;
        bool for_exit = w->kind == WAIT_CHILD;
        /* Reading one pipe: only a child that also writes it is waited on. */
        if (an->q->blocked_pipe_writer(an->q->ctx, pipe, for_exit ? w->child : 0, &bw) != 0 ||
            (!for_exit && !bw.writes_read_pipe))
            continue;
        bool drained = false;
        for (int j = 0; j < an->n && !drained; j++)
            drained = reads_pipe(wait_of(an, j), bw.pipe, bw.parent_fd);
        if (drained)
            continue;
        struct why_finding *f = new_finding(an, WHY_DEADLOCK);
        if (!f)
            return;
        f->certain = true;
        f->with_child = true;
        f->grade = WHY_GRADE_CERTAIN;
        add_thread(f->threads, &f->n_threads, i);
        attach_joiners(an, f);
        f->summary[0] = '\0';
        stack_report_append_thread(f->summary, sizeof f->summary, &report->threads[i]);
        if (for_exit)
            text_append(f->summary, sizeof f->summary, " waits for child process %d (%s) to exit",
                        (int)bw.pid, bw.comm);
        else
            text_append(f->summary, sizeof f->summary,
                        " reads fd %d (pipe:[%llu]) from child process %d (%s)", w->io_fd,
                        (unsigned long long)pipe, (int)bw.pid, bw.comm);
        text_append(f->summary, sizeof f->summary,
                    ", which is blocked writing to its fd %d (pipe:[%llu]): that pipe is full, this "
                    "process holds its read end (fd %d) and no thread reads it (%s)",
                    bw.child_fd, (unsigned long long)bw.pipe, bw.parent_fd,
                    !for_exit ? "read both pipes, e.g. with Popen.communicate()"
                    : in_process_join(&report->threads[i])
                        ? "take the items of the child's multiprocessing Queue before join()"
                        : "read the pipe while waiting, e.g. with Popen.communicate()");
    }
}

static bool in_a_finding(const struct analysis *an, int i)
{
    for (int k = 0; k < an->why->n_findings; k++)
        for (int m = 0; m < an->why->findings[k].n_threads; m++)
            if (an->why->findings[k].threads[m] == i)
                return true;
    return false;
}

/* A thread waiting for a child to exit, which is stuck itself (a deadlock,
 * a lock nobody will release...): the child never exits, so neither does
 * the wait. A child that merely sleeps, computes or waits for the outside
 * is left alone: the wait is then the parent's idle. */
static void child_finding(struct analysis *an)
{
    const struct stack_report *report = an->first->report;
    if (!an->q->child_verdict || report->core_path[0] ||
        (an->why->progress.checked && an->why->progress.progressing))
        return;
    for (int i = 0; i < an->n; i++) {
        const struct report_wait *w = wait_of(an, i);
        if (!w || w->kind != WAIT_CHILD || w->child <= 0 || an->why->threads[i].changed ||
            in_a_finding(an, i))
            continue;
        struct diagnosis_child c;
        memset(&c, 0, sizeof c);
        if (an->q->child_verdict(an->q->child_ctx, w->child, &c) != 0)
            continue;
        bool stuck = c.verdict != WHY_NOT_HUNG && c.verdict != WHY_IDLE &&
                     c.verdict != WHY_UNCHECKED && c.verdict != WHY_GIL_HOG &&
                     c.grade != WHY_GRADE_NONE;
        if (!stuck)
            continue;
        struct why_finding *f = new_finding(an, c.verdict);
        if (!f)
            return;
        f->grade = c.grade;
        f->certain = c.grade == WHY_GRADE_CERTAIN;
        f->with_child = true;
        f->child_pid = w->child;
        add_thread(f->threads, &f->n_threads, i);
        attach_joiners(an, f);
        f->summary[0] = '\0';
        stack_report_append_thread(f->summary, sizeof f->summary, &report->threads[i]);
        text_append(f->summary, sizeof f->summary,
                    " waits for child process %d (%s) to exit, which is stuck itself (%s%s): %s",
                    (int)w->child, c.comm, why_verdict_name(c.verdict),
                    c.grade == WHY_GRADE_PROBABLE ? ", probable" : "", c.summary);
    }
}

/* A client waiting for a reply that may never come: a read without
 * timeout on a TCP connection this process opened. A server thread reading
 * an accepted connection is waiting for its client's next request, which is
 * idle, not hung. */
static bool network_read(const struct report_wait *w)
{
    static const char *const reads[] = {"read", "readv", "recvfrom", "recvmsg", "recvmmsg", "poll", "ppoll"};
    if (!w || w->kind != WAIT_SOCKET || w->timeout != WAIT_TIMEOUT_NONE || !w->syscall ||
        !w->socket.found || strncmp(w->socket.protocol, "tcp", 3) != 0 || !w->socket.remote[0] ||
        strcmp(w->socket.state, "ESTABLISHED") != 0 || w->socket.accepted)
        return false;
    for (size_t k = 0; k < sizeof reads / sizeof reads[0]; k++)
        if (strcmp(w->syscall, reads[k]) == 0)
            return true;
    return false;
}

static void network_finding(struct analysis *an)
{
    const struct stack_report *report = an->first->report;
    if (an->why->progress.checked && an->why->progress.progressing)
        return;
    int threads[WHY_MAX_FINDING_THREADS], n = 0, total = 0;
    for (int i = 0; i < an->n; i++) {
        if (network_read(wait_of(an, i)) && !an->why->threads[i].changed) {
            if (n < WHY_MAX_FINDING_THREADS)
                threads[n++] = i;
            total++;
        }
    }
    if (!n)
        return;
    struct why_finding *f = new_finding(an, WHY_NETWORK_WAIT);
    if (!f)
        return;
    /* The peer may still answer: only probable. */
    f->grade = WHY_GRADE_PROBABLE;
    for (int m = 0; m < n; m++)
        add_thread(f->threads, &f->n_threads, threads[m]);
    attach_joiners(an, f);
    text_format(f->summary, sizeof f->summary,
                "%d of %d threads wait for replies on TCP connections they opened, with no "
                "timeout, and nothing else progresses: ",
                total, an->n);
    for (int m = 0; m < n && m < 8; m++) {
        const struct report_wait *w = wait_of(an, threads[m]);
        if (m)
            text_append(f->summary, sizeof f->summary, "; ");
        stack_report_append_thread(f->summary, sizeof f->summary, &report->threads[threads[m]]);
        text_append(f->summary, sizeof f->summary, " on %s %s", w->socket.protocol, w->socket.local);
        if (w->socket.remote[0])
            text_append(f->summary, sizeof f->summary, " -> %s", w->socket.remote);
    }
    if (n > 8)
        text_append(f->summary, sizeof f->summary, "; ...");
}

static void gil_finding(struct analysis *an, const struct hang_snapshot *second)
{
    const struct stack_report *report = an->first->report;
    const struct why_progress *p = &an->why->progress;
    if (!second || p->gil_switches > 0)
        return;
    for (int h = 0; h < an->n; h++) {
        const struct report_thread *th = &report->threads[h];
        /* Blocked in a syscall with the GIL, or running a C call that never
         * lets it go (a backtracking regex, a PyDLL function): in both
         * snapshots, with no hand-off in between. */
        bool hog = !th->syscall && an->why->threads[h].later_state == THREAD_HOLDING_GIL;
        if (!th->holds_gil || (!th->syscall && !hog) || an->why->threads[h].changed || th->stopped)
            continue;
        /* The threads that cannot run Python: seen waiting for the GIL in
         * either snapshot (between two timed waits a waiter is briefly on
         * CPU, or runnable for long on a loaded machine), or without the
         * GIL in both and not an instruction further. */
        int waiters[WHY_MAX_FINDING_THREADS], n = 0;
        for (int i = 0; i < an->n; i++) {
            enum thread_run_state now = report->threads[i].state, later = an->why->threads[i].later_state;
            bool waiting = now == THREAD_WAITING_GIL || later == THREAD_WAITING_GIL ||
                           (now == THREAD_RUNNING && later == THREAD_RUNNING && !an->why->threads[i].changed);
            if (waiting && n < WHY_MAX_FINDING_THREADS)
                waiters[n++] = i;
        }
        if (!n)
            return;
        struct why_finding *f = new_finding(an, hog ? WHY_GIL_HOG : WHY_GIL_BLOCKED);
        if (!f)
            return;
        f->certain = true;
        f->grade = WHY_GRADE_CERTAIN;
        add_thread(f->threads, &f->n_threads, h);
        for (int m = 0; m < n; m++)
            add_thread(f->blocked, &f->n_blocked, waiters[m]);
        char *s = f->summary;
        size_t size = sizeof f->summary;
        s[0] = '\0';
        stack_report_append_thread(s, size, th);
        if (hog)
            text_append(s, size, " has held the GIL without a hand-off for at least %d ms, running "
                                 "a call that does not release it",
                        p->interval_ms);
        else
            text_append(s, size, " holds the GIL while blocked in %s", th->syscall);
        text_append(s, size, ", so %d thread%s waiting for the GIL cannot run", n, n == 1 ? "" : "s");
        if (th->n_frames)
            text_append(s, size, " (it is in %s, %s:%d", th->frames[0].function,
                        stack_report_short_path(th->frames[0].file), th->frames[0].line);
        for (size_t k = 1; k < th->n_frames && k < 3; k++)
            text_append(s, size, ", called from %s", th->frames[k].function);
        if (th->n_frames)
            text_append(s, size, ")");
        if (an->why->threads[h].cpu_ns >= 0)
            text_append(s, size, "; it used %.0f ms of CPU in the %d ms watched",
                        (double)an->why->threads[h].cpu_ns / 1e6, p->interval_ms);
        text_append(s, size, "; starving: ");
        for (int m = 0; m < n && m < 6; m++) {
            if (m)
                text_append(s, size, ", ");
            stack_report_append_thread(s, size, &report->threads[waiters[m]]);
        }
        if (n > 6)
            text_append(s, size, " and %d more", n - 6);
        return;
    }
}

/* A stopped process runs nothing until it is continued: that comes before
 * anything its threads wait for. */
static void stopped_finding(struct analysis *an)
{
    const struct stack_report *report = an->first->report;
    if (!report->n_stopped)
        return;
    struct why_finding *f = new_finding(an, WHY_STOPPED);
    if (!f)
        return;
    f->certain = true;
    f->grade = WHY_GRADE_CERTAIN;
    for (int i = 0; i < an->n; i++)
        if (report->threads[i].stopped)
            add_thread(f->threads, &f->n_threads, i);
    char *s = f->summary;
    size_t size = sizeof f->summary;
    if (report->n_stopped >= an->n)
        text_format(s, size, "the process is stopped");
    else
        text_format(s, size, "%d of %d threads are stopped", report->n_stopped, an->n);
    if (report->tracer) {
        text_append(s, size, " by its tracer, process %d", (int)report->tracer);
        if (report->tracer_comm[0])
            text_append(s, size, " (%s)", report->tracer_comm);
        text_append(s, size, ", and runs nothing until the debugger continues or detaches it");
    } else {
        text_append(s, size, " by a signal (SIGSTOP, SIGTSTP: kill -STOP, Ctrl-Z) and runs nothing "
                             "until continued; resume it with: kill -CONT %d", (int)report->pid);
    }
}

static int verdict_rank(enum why_verdict v)
{
    switch (v) {
    case WHY_STOPPED: return -1;
    case WHY_DEADLOCK: return 0;
    case WHY_GIL_BLOCKED: return 1;
    case WHY_GIL_HOG: return 1;
    case WHY_LOCK_NEVER_RELEASED: return 2;
    case WHY_QUEUE_STARVED: return 3;
    case WHY_NEVER_NOTIFIED: return 4;
    case WHY_NETWORK_WAIT: return 5;
    default: return 6;
    }
}

static int compare_findings(const void *x, const void *y)
{
    const struct why_finding *a = x, *b = y;
    if (a->grade != b->grade)
        return a->grade == WHY_GRADE_CERTAIN ? -1 : 1;
    if (a->kind != b->kind)
        return verdict_rank(a->kind) - verdict_rank(b->kind);
    if (a->certain != b->certain)
        return a->certain ? -1 : 1;
    return a->threads[0] - b->threads[0];
}

/* One sentence for the verdict line; the findings carry the details. */
static void headline(struct analysis *an)
{
    struct why_report *why = an->why;
    const struct stack_report *report = an->first->report;
    const struct why_finding *f = &why->findings[0];
    char *s = why->summary;
    size_t size = sizeof why->summary;
    const struct report_wait *w = wait_of(an, f->threads[0]);
    s[0] = '\0';
    bool probable = f->grade == WHY_GRADE_PROBABLE;
    if (probable && f->kind != WHY_DEADLOCK)
        text_append(s, size, "probably hung: ");
    if (f->child_pid)
        text_append(s, size, "%s", f->summary);
    else switch (f->kind) {
    case WHY_STOPPED:
        text_append(s, size, "%s", f->summary);
        break;
    case WHY_DEADLOCK:
        if (f->with_child) {
            text_append(s, size, "deadlock with a child process: %s", f->summary);
            break;
        }
        text_append(s, size, "%s between ", f->certain ? "deadlock" : "probable deadlock");
        for (int m = 0; m < f->n_threads && m < 4; m++) {
            if (m)
                text_append(s, size, m + 1 == f->n_threads ? " and " : ", ");
            stack_report_append_thread(s, size, &report->threads[f->threads[m]]);
        }
        if (f->n_threads > 4)
            text_append(s, size, " and %d more", f->n_threads - 4);
        break;
    case WHY_GIL_BLOCKED:
    case WHY_GIL_HOG:
        text_append(s, size, "%s", f->summary);
        break;
    case WHY_LOCK_NEVER_RELEASED:
        text_append(s, size, "%d thread%s wait%s for ", f->n_threads, f->n_threads == 1 ? "" : "s",
                    f->n_threads == 1 ? "s" : "");
        append_object(s, size, w);
        text_append(s, size, w->owner_status == WAIT_OWNER_GONE ? ", held by a thread that has exited"
                             : probable ? ", which only threads that merely sleep or poll could release"
                                        : ", which nobody will release");
        break;
    case WHY_QUEUE_STARVED:
        text_append(s, size, "%d thread%s wait%s forever in %s.get on ", f->n_threads,
                    f->n_threads == 1 ? "" : "s", f->n_threads == 1 ? "s" : "", w->object_type);
        append_object(s, size, w);
        text_append(s, size, probable ? ", which is empty and which only threads that merely sleep "
                                        "or poll could feed"
                                      : ", which is empty and which no live thread can feed");
        break;
    case WHY_NEVER_NOTIFIED:
        text_append(s, size, "%d thread%s wait%s forever in %s.%s on ", f->n_threads,
                    f->n_threads == 1 ? "" : "s", f->n_threads == 1 ? "s" : "", w->object_type,
                    w->operation);
        append_object(s, size, w);
        text_append(s, size, probable ? ", which only threads that merely sleep or poll could signal"
                                      : ", which no live thread can signal");
        break;
    case WHY_NETWORK_WAIT:
        text_append(s, size, "%d thread%s wait%s with no timeout for replies from the network, "
                             "and nothing else progresses",
                    f->n_threads, f->n_threads == 1 ? "" : "s", f->n_threads == 1 ? "s" : "");
        break;
    default:
        break;
    }
    if (f->n_blocked)
        text_append(s, size, "; %d more thread%s stuck behind it", f->n_blocked,
                    f->n_blocked == 1 ? " is" : "s are");
    if (why->n_findings > 1)
        text_append(s, size, " (%d finding%s in all)", why->n_findings, why->n_findings == 1 ? "" : "s");
}

static void conclude(struct analysis *an)
{
    struct why_report *why = an->why;
    const struct why_progress *p = &why->progress;
    if (why->n_findings) {
        qsort(why->findings, (size_t)why->n_findings, sizeof *why->findings, compare_findings);
        why->verdict = why->findings[0].kind;
        why->grade = why->findings[0].grade;
        headline(an);
        return;
    }
    if (!p->checked) {
        why->verdict = WHY_UNCHECKED;
        text_format(why->summary, sizeof why->summary,
                    "no thread is stuck for good (no deadlock, abandoned lock, starved queue or "
                    "network wait); progress was not checked");
        return;
    }
    if (p->progressing) {
        why->verdict = WHY_NOT_HUNG;
        text_format(why->summary, sizeof why->summary,
                    "not hung: in %d ms the process made progress (%llu GIL hand-offs, %d thread%s "
                    "changed stack or wait, %d running",
                    p->interval_ms, (unsigned long long)p->gil_switches, p->threads_changed,
                    p->threads_changed == 1 ? "" : "s", p->threads_running);
        if (p->tasks_moved > 0)
            text_append(why->summary, sizeof why->summary, ", %d asyncio task%s moved on",
                        p->tasks_moved, p->tasks_moved == 1 ? "" : "s");
        if (p->cpu_ns >= 0)
            text_append(why->summary, sizeof why->summary, ", %.1f ms of CPU", (double)p->cpu_ns / 1e6);
        text_append(why->summary, sizeof why->summary, ")");
        return;
    }
    why->verdict = WHY_IDLE;
    text_format(why->summary, sizeof why->summary,
                "idle: nothing changed in %d ms, but no thread is stuck for good: every thread "
                "waits for a timer, a timeout or an event from outside the process",
                p->interval_ms);
}

int hang_analyze(const struct diagnosis_queries *q, const struct hang_snapshot *first,
                 const struct hang_snapshot *second, int interval_ms, struct why_report *why)
{
    memset(why, 0, sizeof *why);
    why->stacks = first->report;
    int n = (int)first->report->n_threads;
    if ((size_t)n > first->raw->n_threads)
        n = (int)first->raw->n_threads;
    why->threads = calloc((size_t)(n ? n : 1), sizeof *why->threads);
    struct analysis an = {.q = q, .first = first, .why = why, .n = n};
    an.nodes = calloc((size_t)(n ? n : 1), sizeof *an.nodes);
    an.stack = calloc((size_t)(n ? n : 1), sizeof *an.stack);
    int rc = -1;
    if (!why->threads || !an.nodes || !an.stack)
        goto out;
    for (int i = 0; i < n; i++)
        why->threads[i].cpu_ns = -1;
    if (second)
        compare_snapshots(first, second, interval_ms, why);
    for (int i = 0; i < n; i++) {
        build_node(&an, i);
        an.nodes[i].index = -1;
    }
    resolve_reach(&an);
    propagate_liveness(&an);
    for (int i = 0; i < n; i++)
        if (stuck(&an, i) && an.nodes[i].index < 0)
            strongconnect(&an, i);
    stopped_finding(&an);
    deadlock_findings(&an);
    gil_finding(&an, second);
    root_findings(&an);
    attach_blocked(&an);
    network_finding(&an);
    pipe_finding(&an);
    child_finding(&an);
    for (int k = 0; k < why->n_findings; k++) {
        struct why_finding *f = &why->findings[k];
        bool live_threads = f->kind == WHY_NETWORK_WAIT || f->kind == WHY_GIL_BLOCKED ||
                            f->kind == WHY_GIL_HOG || f->with_child;
        if (live_threads)
            for (int m = 0; m < f->n_threads; m++)
                an.nodes[f->threads[m]].held = true;
        for (int m = 0; m < f->n_blocked && f->kind != WHY_DEADLOCK; m++)
            an.nodes[f->blocked[m]].held = true;
    }
    for (int i = 0; i < n; i++) {
        struct why_thread *t = &why->threads[i];
        const struct node *node = &an.nodes[i];
        t->stuck = stuck(&an, i) || node->held;
        t->live_reason = node->reason;
        t->live = node->live;
        t->strong = node->strong;
        t->owner_edges = node->owner_edges;
        t->n_releasers = node->n_releasers < WHY_MAX_FINDING_THREADS ? node->n_releasers
                                                                      : WHY_MAX_FINDING_THREADS;
        memcpy(t->releasers, node->releasers, sizeof t->releasers[0] * (size_t)t->n_releasers);
    }
    why->caught_signals = first->caught_signals;
    why->python_signals = python_signals(first);
    why->signals_known = first->handlers.known;
    text_format(why->signals_source, sizeof why->signals_source, "%s", first->handlers.source);
    conclude(&an);
    rc = 0;
out:
    free(an.nodes);
    free(an.stack);
    return rc;
}
