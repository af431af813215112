/* asyncio_caught_mid_step and asyncio_settle_delay_ms: when why takes a
 * look again because it caught an asyncio loop whose tasks wait on a
 * primitive anywhere but asleep in its selector (a heartbeat's step, or
 * running while the look was read), and how long it waits first. */
#include <stdio.h>
#include <string.h>

#include "diagnosis/asyncio_why.h"
#include "unit.h"

struct scene {
    struct report_thread thread;
    struct report_task tasks[2];
    struct report_loop loop;
    struct report_tasks all;
    struct stack_report report;
};

/* A loop of thread 7 asleep in its selector: request-2 waits in
 * Semaphore.acquire, the heartbeat in asyncio.sleep. */
static void scene_init(struct scene *s)
{
    memset(s, 0, sizeof *s);
    s->thread.tid = 7;
    s->thread.state = THREAD_IDLE;
    s->thread.syscall = "epoll_wait";
    struct report_task *waiter = &s->tasks[0], *beat = &s->tasks[1];
    waiter->addr = 0x1000;
    snprintf(waiter->name, sizeof waiter->name, "request-2");
    waiter->state = "pending";
    snprintf(waiter->awaits, sizeof waiter->awaits, "Semaphore.acquire (held (0 permits))");
    waiter->awaits_addr = 0x2000;
    waiter->wait_obj = 0x3000;
    snprintf(waiter->wait_obj_type, sizeof waiter->wait_obj_type, "Semaphore");
    beat->addr = 0x1100;
    snprintf(beat->name, sizeof beat->name, "heartbeat");
    beat->state = "pending";
    snprintf(beat->awaits, sizeof beat->awaits, "asyncio.sleep (due in 0.1 s)");
    beat->awaits_addr = 0x2100;
    s->loop.addr = 0x4000;
    s->loop.tid = 7;
    s->loop.step = LOOP_STEP_SELECTOR;
    s->loop.sleep_timers = 1;
    s->loop.tasks = s->tasks;
    s->loop.n_tasks = 2;
    s->all.loops = &s->loop;
    s->all.n_loops = 1;
    s->report.threads = &s->thread;
    s->report.n_threads = 1;
    s->report.tasks = &s->all;
}

int main(void)
{
    struct scene s;
    bool ran = false, did_run = true;

    scene_init(&s);
    CHECK(!asyncio_caught_mid_step(&s.report, &ran));
    CHECK(!asyncio_caught_mid_step(&s.report, NULL));
    /* It used CPU while the look was read: the stack and tasks may be of
     * different instants. */
    CHECK_EQ_INT(asyncio_caught_mid_step(&s.report, &did_run), 7);

    /* Inside the heartbeat's step. */
    scene_init(&s);
    s.loop.step = LOOP_STEP_CALLBACK;
    s.tasks[1].running = true;
    s.thread.state = THREAD_HOLDING_GIL;
    CHECK_EQ_INT(asyncio_caught_mid_step(&s.report, &ran), 7);

    /* Between the selector and the callbacks (timers being moved). */
    scene_init(&s);
    s.loop.step = LOOP_STEP_OTHER;
    CHECK(asyncio_caught_mid_step(&s.report, &ran));

    /* Woken from epoll_wait, not yet back in Python: not asleep. */
    scene_init(&s);
    s.thread.state = THREAD_RUNNING;
    CHECK(asyncio_caught_mid_step(&s.report, &ran));

    /* No task waits on a primitive: nothing for the second look to judge,
     * a busy loop is not looked at again. */
    scene_init(&s);
    s.loop.step = LOOP_STEP_CALLBACK;
    s.tasks[0].state = "finished";
    CHECK(!asyncio_caught_mid_step(&s.report, &did_run));

    /* A wait with a deadline ends by itself: not a waiter. */
    scene_init(&s);
    s.loop.step = LOOP_STEP_CALLBACK;
    s.tasks[0].timed = true;
    CHECK(!asyncio_caught_mid_step(&s.report, &ran));

    /* The loop's thread is not in the report (no tid): nothing to tell. */
    scene_init(&s);
    s.loop.tid = 0;
    s.loop.step = LOOP_STEP_CALLBACK;
    CHECK(!asyncio_caught_mid_step(&s.report, &ran));

    /* Tasks past the cap: the waits are not all known. */
    scene_init(&s);
    s.loop.step = LOOP_STEP_CALLBACK;
    s.loop.n_hidden = 5;
    CHECK(!asyncio_caught_mid_step(&s.report, &ran));

    /* No tasks read at all. */
    scene_init(&s);
    s.report.tasks = NULL;
    CHECK(!asyncio_caught_mid_step(&s.report, &did_run));

    /* The waits double from 10 ms, the last ones at most 320 ms, under a
     * second in all, and end. */
    int total = 0, k = 0;
    for (int ms; (ms = asyncio_settle_delay_ms(k)) >= 0; k++)
        total += ms;
    CHECK_EQ_INT(asyncio_settle_delay_ms(0), 10);
    CHECK_EQ_INT(asyncio_settle_delay_ms(1), 20);
    CHECK_EQ_INT(asyncio_settle_delay_ms(6), 320);
    CHECK_EQ_INT(k, 7);
    CHECK_EQ_INT(total, 950);
    CHECK_EQ_INT(asyncio_settle_delay_ms(-1), -1);
    return unit_report("test_asyncio_settle");
}
