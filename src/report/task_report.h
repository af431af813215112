/* The asyncio part of a dump: each event loop's tasks, what each awaits and
 * who awaits whom. python/asyncio_tasks.c fills it; output/task_writers.h
 * prints it after the stack of the loop's thread (text) or as one "asyncio"
 * member (JSON). */
#ifndef PYSCOPE_REPORT_TASK_REPORT_H
#define PYSCOPE_REPORT_TASK_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

enum tasks_mode { TASKS_NONE = 0, TASKS_PENDING, TASKS_ALL };

struct task_link {               /* one coroutine of a task's await chain */
    char *function;
    char *file;
    int line;                    /* -1: unknown */
    const char *kind;            /* "coroutine", "generator", "async_generator" */
    uint64_t frame_addr, code_addr;   /* as struct py_frame holds them */
    long offset;                 /* bytes into the bytecode, as struct py_frame's instr_offset */
};

struct report_task {
    uint64_t addr;
    char name[128];
    const char *state;           /* "pending", "cancelled", "finished" */
    bool running;                /* the loop is inside one of its steps right now */
    struct task_link *chain;     /* innermost first */
    size_t n_chain;
    bool chain_complete;
    char awaits[256];            /* what it is suspended on, "" when not suspended */
    uint64_t awaits_addr;        /* the future (or task) it waits on, 0 if none */
    uint64_t wait_obj;           /* what must act for the wait to end: the plain Future it
                                    awaits, or the Event, Queue, Lock, Condition, Semaphore
                                    or Barrier whose method it waits in; 0 none */
    char wait_obj_type[48];      /* ... its class */
    int own_refs;                /* references to wait_obj the task itself accounts for (its
                                    chain's frames; a Future's waiter slot and iterator),
                                    -1 unknown */
    bool orphan;                 /* nothing but the tasks waiting on wait_obj refers to it:
                                    nothing can ever end the wait */
    uint64_t provider;           /* the one other task that refers to wait_obj, when nothing
                                    else does: only it can end the wait (why only); 0 none */
    char *held_by;               /* who else holds it (NULL: none found), and how
                                    many references are left unaccounted for */
    size_t *children;            /* indices (same loop) of the tasks it awaits */
    size_t n_children;
    bool in_cycle;               /* it awaits, through others, itself */
    uint64_t exception;          /* a finished task's exception, 0 none */
    char unretrieved[96];        /* finished with an exception nobody has retrieved
                                    (its type), "" otherwise */
    uint64_t lock_waited;        /* it waits in Lock.acquire of this held lock, 0 otherwise */
    uint64_t lock_holder;        /* ... held by this task (inside an async with of it), 0 unknown */
    char stream_peer[96];        /* it awaits a stream read from this "host:port"; "" none */
    bool stream_no_timeout;      /* ... which no wait_for bounds */
    bool timed;                  /* the wait ends by itself at a deadline (wait_for,
                                    asyncio.wait's timeout, asyncio.timeout()), its own or
                                    that of a task awaiting it (which cancels it then) */
    bool awaits_any;             /* it resumes once any of the tasks it awaits ends
                                    (asyncio.wait FIRST_COMPLETED/FIRST_EXCEPTION) */
    bool stream_opened;          /* ... on a connection the program opened (its
                                    transport belongs to no server) */
    pid_t subprocess_pid;        /* it awaits this child's exit (Process.wait), 0 none */
    double sleep_due;            /* in asyncio.sleep: when it wakes, on the loop's clock
                                    (time.monotonic); NAN unknown or not sleeping */
};

/* Where the loop's thread was in asyncio's _run_once at the instant of the
 * stacks (asyncio's own loops), or for uvloop's, whether Python frames ran
 * above the one that called its run_until_complete or run_forever. */
enum loop_step {
    LOOP_STEP_UNKNOWN = 0,
    LOOP_STEP_SELECTOR,          /* waiting in its selector */
    LOOP_STEP_CALLBACK,          /* running a callback (a task step, or a plain one) */
    LOOP_STEP_OTHER,             /* between the two: events, timers */
};

struct report_loop {
    uint64_t addr;
    pid_t tid;                   /* the thread running it, 0 when none runs it */
    enum loop_step step;
    double left_selector;        /* loop clock (time.monotonic) when select last returned
                                    (_run_once's end_time); NAN unknown */
    double callback_s;           /* a callback's time so far, measured from left_selector
                                    (or debug mode's t0); < 0 unknown (a core: no clock) */
    bool callback_exact;         /* callback_s is the callback's own: the first of its
                                    iteration, or timed by debug mode; else at most */
    long callback_index, callback_count;   /* callback index (1-based) of the count the
                                              iteration runs; 0 unknown */
    char callback[160];          /* the function the callback runs, "" unknown */
    /* While its thread sleeps in the selector: the callbacks waiting in its
     * ready queue (_ready), -1 unknown, and what the first one calls. A
     * loop puts no timeout of 0 on its select only when it saw them
     * before sleeping: one queued since came from another thread. */
    long ready_count;
    char ready_callback[160];
    /* ... and its timers (_scheduled) not cancelled: those that wake an
     * asyncio.sleep, and all the others (call_later, timeouts), -1 unknown.
     * A loop whose only timers wake sleepers has nothing else due. */
    long sleep_timers, other_timers;
    int callback_frame;          /* uvloop: the callback's frame in its thread's frames,
                                    -1 unknown (asyncio's: the one Handle._run calls) */
    struct report_task *tasks;
    size_t n_tasks, cap_tasks;
    size_t n_hidden;             /* tasks past the cap, counted, not shown */
};

/* Which finished tasks could be seen. */
enum tasks_done_seen {
    TASKS_DONE_ALL = 0,          /* the registries keep every task still referenced (<=3.13) */
    TASKS_DONE_REACHABLE,        /* none is kept (3.14+): only those a walk from the roots
                                    (__main__'s globals, the loops' handles, the frames of
                                    tasks and threads, 3 levels into containers) met */
};

struct report_tasks {
    enum tasks_mode mode;
    size_t max_shown;            /* tasks per loop shown in detail (--max-tasks) */
    enum tasks_done_seen done_seen;
    bool done_partial;           /* ... and a bound cut that walk short */
    struct report_loop *loops;
    size_t n_loops;
    size_t n_found;              /* tasks read, on all loops */
    bool truncated;              /* a registry held more than the walk's bound */
    size_t walk_max;             /* ... which is this many tasks */
    uint64_t main_dict;          /* __main__'s globals, where Future holders are looked for */
    uint64_t py_task_type, py_future_type;   /* the pure-Python classes, 0 when unknown */
    char offsets[320];           /* 3.14+: what the offsets were checked against, "" when
                                    only the tables (<=3.13, or _asyncio not found) */
    char error[400];             /* why the tasks could not be read, "" otherwise */
};

void task_report_free(struct report_tasks *tasks);

#endif
