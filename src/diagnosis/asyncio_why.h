/* why: event loops blocked inside one task step, tasks waiting on what
 * nothing can reach, and tasks waiting for each other in a cycle
 * (diagnosis/asyncio_why.c; no target reads). */
#ifndef PYSCOPE_DIAGNOSIS_ASYNCIO_WHY_H
#define PYSCOPE_DIAGNOSIS_ASYNCIO_WHY_H

#include "report/why_report.h"

/* How long a step must last to count as blocking its loop, as asyncio's
 * debug mode's slow_callback_duration (100 ms). */
#define ASYNCIO_BLOCKED_MS 100

/* Adds a loop_blocked finding for each loop of first->tasks whose thread ran
 * the same task (or plain callback), with the same stack, in second, for
 * threshold_ms or longer: the interval between the snapshots, or the time
 * the callback has run, when both saw the same loop iteration and asyncio
 * timed it exactly; when the analysis found no hang, it becomes the
 * verdict. 0, or -1 out of memory. */
int asyncio_blocked_findings(const struct stack_report *first, const struct stack_report *second,
                             int interval_ms, int threshold_ms, struct why_report *why);

/* Adds a never_notified finding for each task of first->tasks waiting on
 * what nothing but its waiters refers to (report_task.orphan: a plain
 * Future, or the Event, Queue, Lock... whose method it waits in; live,
 * still so in second); when the analysis found no hang, it becomes the
 * verdict. second is NULL for a core. 0, or -1 out of memory. */
int asyncio_orphan_findings(const struct stack_report *first, const struct stack_report *second,
                            struct why_report *why);

/* Adds a never_notified finding for each loop whose tasks are all suspended
 * with nothing left that could resume one (the thread asleep in its
 * selector, no timeout, no fd but the loop's wake-up socket, every other
 * thread stuck, no Python handler for a signal but SIGINT), in both
 * snapshots. A live process only (second not NULL).
 * 0, or -1 out of memory. */
int asyncio_asleep_findings(const struct stack_report *first, const struct stack_report *second,
                            struct why_report *why);

/* Adds a never_notified finding (probable) for each object that tasks of
 * a loop wait on (an Event, Queue, Lock, Semaphore... with no deadline, no
 * holder task and no single other task referring to it) while every other
 * task merely sleeps in asyncio.sleep or awaits those tasks: the loop's
 * thread in its selector with no fd but its wake-up socket, nothing ready
 * and no timer but the sleepers', every other thread stuck, no Python
 * handler for a signal but SIGINT, in both snapshots. A heartbeat keeps
 * such a loop from looking asleep; only it could still act. A live process
 * only (second not NULL). 0, or -1 out of memory. */
int asyncio_sleeper_findings(const struct stack_report *first, const struct stack_report *second,
                             struct why_report *why);

/* Whether a look caught the thread of a loop whose tasks wait on a
 * primitive inside a step (a task's or a callback's) instead of asleep in
 * its selector, or running at all while the look was read (ran: per thread
 * of r, whether it used CPU meanwhile; NULL unknown): the tid of that
 * thread, 0 when there is none. Such a look cannot tell a sleeper that
 * woke and will leave the waits as they were (a heartbeat, a stats task)
 * from one about to release them, so why takes it again: after
 * asyncio_settle_delay_ms(k) for the k-th time, and then once the thread
 * is asleep (polled every ASYNCIO_SETTLE_POLL_MS), so that the look starts
 * as the loop rests, for ASYNCIO_SETTLE_MAX_MS in all. A loop that is
 * never back in its selector (blocked, or busy) is judged on the last. */
pid_t asyncio_caught_mid_step(const struct stack_report *r, const bool *ran);

#define ASYNCIO_SETTLE_POLL_MS 2
#define ASYNCIO_SETTLE_MAX_MS 1500

/* The least wait before the k-th look again (k from 0), in ms; -1 past the
 * last. Doubling from 10 ms, 950 ms in all: a loaded machine can keep a
 * step of 50 ms on the CPU for several times that, while a quiet one is
 * back in its selector within the first tries. */
int asyncio_settle_delay_ms(int k);

/* When the last sleeper of a loop that asyncio_sleeper_findings could
 * report on wakes, on the loops' clock (CLOCK_MONOTONIC, as time.monotonic);
 * NAN when there is no such loop. A second snapshot after it shows whether
 * the sleepers, having run, left the waits as they were. */
double asyncio_sleepers_wake_by(const struct stack_report *first);

/* Tasks that moved on between the snapshots: ended, started, or awaiting
 * another Future than before, except a task that only sleeps again
 * (asyncio.sleep) or waits again with a deadline (a poll): those re-arm a
 * timer without anything having happened. -1 when no loop was read. */
int asyncio_tasks_moved(const struct stack_report *first, const struct stack_report *second);

/* The interval to the second snapshot: interval_ms, or longer so that it
 * comes just after those sleepers have woken (asyncio_sleepers_wake_by),
 * when that is at most a second from now_s (CLOCK_MONOTONIC seconds). */
double asyncio_second_look_ms(const struct stack_report *first, double interval_ms, double now_s);

/* Adds a deadlock finding (with a child, certain) for each task awaiting a
 * child's exit (asyncio's Process.wait) while the child is blocked writing
 * to a full pipe whose read end this process holds and the loop, asleep in
 * its selector, does not watch: asyncio's documented Process.wait deadlock
 * with stdout=PIPE. The same wait in both snapshots; a live process only
 * (second not NULL: q answers for the live process). 0, or -1 out of
 * memory. */
struct diagnosis_queries;
int asyncio_child_pipe_findings(const struct stack_report *first,
                                const struct stack_report *second,
                                const struct diagnosis_queries *q, struct why_report *why);

/* Adds a network_wait finding (probable: the peer may still answer) for
 * each task awaiting a stream read that no timeout bounds, on a connection
 * the program opened (a client's; a server's handler waiting for its client
 * is idle, not hung), on the same read in both snapshots while nothing
 * progressed; when the analysis found no hang, it becomes the verdict. A
 * live process only (second not NULL). 0, or -1 out of memory. */
int asyncio_stream_findings(const struct stack_report *first, const struct stack_report *second,
                            struct why_report *why);

/* Adds a deadlock finding for each cycle of asyncio tasks waiting for each
 * other, each through a wait only the next can end: the lock it waits for
 * is held by the next (inside its async with), what it waits on (a Future,
 * an Event, a Queue...) is referred to by the next task alone, or it awaits
 * the next task (directly, gathered, in a TaskGroup); none with a deadline;
 * live, the same in second. When the analysis found no hang, it becomes
 * the verdict. second is NULL for a core. 0, or -1 out of memory. */
int asyncio_cycle_findings(const struct stack_report *first, const struct stack_report *second,
                           struct why_report *why);

/* Every asyncio finding above, in the order why makes them (a later one
 * looks at what the earlier found); what `why` and the agent run after the
 * threads' analysis. 0, or -1 out of memory. */
int asyncio_findings(const struct stack_report *first, const struct stack_report *second,
                     int interval_ms, int threshold_ms, const struct diagnosis_queries *q,
                     struct why_report *why);

#endif
