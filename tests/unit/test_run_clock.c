/* target/run_clock against a real child process and the kernel's
 * accounting: still only while none of its threads runs, whether it wakes
 * from a sleep, starts a thread that runs and exits, stays on a CPU all
 * along, or starts a thread that does. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "target/run_clock.h"
#include "target/run_counter.h"
#include "unit.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void spin_ms(unsigned ms)
{
    uint64_t end = now_ns() + ms * 1000000ull;
    while (now_ns() < end)
        ;
}

static void *spinner(void *arg)
{
    (void)arg;
    spin_ms(20);
    return NULL;
}

static void *spinner_for_ever(void *arg)
{
    (void)arg;
    for (;;)
        spin_ms(1000);
    return NULL;
}

/* The child: waits on the pipe; 'r' runs 20 ms, 't' starts a thread that
 * runs 20 ms and exits, 's' runs for ever, 'T' starts a thread that runs for
 * ever (and goes back to waiting); it says when done on ack. */
static void child(int fd, int ack)
{
    char c;
    while (read(fd, &c, 1) == 1) {
        if (c == 'r') {
            spin_ms(20);
        } else if (c == 't') {
            pthread_t t;
            if (pthread_create(&t, NULL, spinner, NULL) == 0)
                pthread_join(t, NULL);
        } else if (c == 'T') {
            pthread_t t;
            if (pthread_create(&t, NULL, spinner_for_ever, NULL) != 0)
                _exit(1);
        } else if (c == 's') {
            if (write(ack, &c, 1) != 1)
                _exit(1);
            for (;;)
                spin_ms(1000);
        }
        if (write(ack, &c, 1) != 1)
            _exit(1);
    }
    _exit(0);
}

static void pause_ms(unsigned ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Calls still() until it says still (at most n times), pausing between. */
static bool settles(struct run_clock *c, int n)
{
    for (int i = 0; i < n; i++) {
        if (run_clock_still(c))
            return true;
        pause_ms(10);
    }
    return false;
}

/* The time the scheduler has charged pid's live threads, from each one's
 * /proc schedstat. */
static uint64_t ran_ns(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    uint64_t sum = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char file[320];
        snprintf(file, sizeof file, "/proc/%d/task/%.255s/schedstat", (int)pid, e->d_name);
        FILE *f = fopen(file, "r");
        unsigned long long ns = 0;
        if (f && fscanf(f, "%llu", &ns) == 1)
            sum += ns;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return sum;
}

/* Has the child do c, and waits until it says it has. */
static void tell(const int fds[2], char c)
{
    char done = 0;
    CHECK(write(fds[0], &c, 1) == 1);
    CHECK(read(fds[1], &done, 1) == 1 && done == c);
    pause_ms(5); /* back in its read */
}

/* busy: the last thing the child is told, after which it is on a CPU for
 * ever ('s': the thread that was looked at all along; 'T': a thread it
 * starts, which has no counter yet). */
static void test_child(char busy)
{
    int p[2], a[2];
    CHECK(pipe(p) == 0 && pipe(a) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[1]);
        close(a[0]);
        child(p[0], a[1]);
    }
    close(p[0]);
    close(a[1]);
    int fds[2] = {p[1], a[0]};
    pause_ms(30);
    struct run_clock c;
    int rc = run_clock_open(&c, pid);
    CHECK_EQ_INT(rc, 0);
    if (rc != 0) {
        fprintf(stderr, "    run_clock_open: %s\n", c.why_not);
    } else {
        /* Nothing known yet at the first look. */
        CHECK(!run_clock_still(&c));
        CHECK(settles(&c, 50));
        CHECK(run_clock_still(&c));

        tell(fds, 'r');
        CHECK(!run_clock_still(&c)); /* woke and ran */
        CHECK(settles(&c, 50));

        tell(fds, 't');
        CHECK(!run_clock_still(&c)); /* a thread it started ran, and is gone */
        CHECK(settles(&c, 50));

        /* On a CPU from now on, its page still once it is never switched
         * out: a look says still only when none of the child's threads was
         * charged time between this look and the one before. The truth is
         * the scheduler's own figure per thread in /proc (schedstat, which
         * also counts what a thread on a CPU has run since its last tick),
         * not the clock run_clock reads (a machine short of CPUs can leave
         * it runnable and unrun for a while). */
        tell(fds, busy);
        int wrong = 0, moving = 0;
        run_clock_still(&c);
        uint64_t before = ran_ns(pid);
        /* 20 looks, or up to 150 (3 s) until one saw it run: a machine
         * short of CPUs may not run it at all for a while. */
        for (int i = 0; i < 150 && (i < 20 || moving == 0); i++) {
            pause_ms(20); /* five ticks of this kernel's clock (HZ 250) */
            bool still = run_clock_still(&c);
            uint64_t after = ran_ns(pid);
            if (still && after - before > 5000000ull)
                wrong++;
            moving += !still;
            before = after;
        }
        CHECK_EQ_INT(wrong, 0);
        CHECK(moving > 0);
        run_clock_close(&c);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(p[1]);
    close(a[0]);
}

struct kid {
    pid_t pid;
    int fds[2];
};

static void start_kid(struct kid *k)
{
    int p[2], a[2];
    CHECK(pipe(p) == 0 && pipe(a) == 0);
    k->pid = fork();
    if (k->pid == 0) {
        close(p[1]);
        close(a[0]);
        child(p[0], a[1]);
    }
    close(p[0]);
    close(a[1]);
    k->fds[0] = p[1];
    k->fds[1] = a[0];
}

static void stop_kid(struct kid *k)
{
    kill(k->pid, SIGKILL);
    waitpid(k->pid, NULL, 0);
    close(k->fds[0]);
    close(k->fds[1]);
}

/* Both still after a few batched looks (sleeping children). */
static bool both_settle(struct run_clock *const *cs)
{
    for (int i = 0; i < 50; i++) {
        run_clock_look_all(cs, 2);
        bool a = run_clock_still(cs[0]), b = run_clock_still(cs[1]);
        if (a && b)
            return true;
        pause_ms(10);
    }
    return false;
}

/* Looks made for several processes at once: each answer is its own, and a
 * look made ahead but never taken cannot make the next say still. */
static void test_look_all(void)
{
    struct kid kids[2];
    start_kid(&kids[0]);
    start_kid(&kids[1]);
    pause_ms(30);
    struct run_clock c0, c1;
    CHECK_EQ_INT(run_clock_open(&c0, kids[0].pid), 0);
    CHECK_EQ_INT(run_clock_open(&c1, kids[1].pid), 0);
    struct run_clock *cs[2] = {&c0, &c1};
    CHECK(both_settle(cs));

    tell(kids[0].fds, 'r');
    run_clock_look_all(cs, 2);
    CHECK(!run_clock_still(&c0)); /* it ran */
    CHECK(run_clock_still(&c1));  /* the other did not */
    CHECK(both_settle(cs));

    /* A look made ahead that no pass took: the child ran before it, and the
     * next look, compared with it, would see nothing new; but the last pass
     * read the child before it ran. */
    tell(kids[0].fds, 'r');
    run_clock_look_all(cs, 2);
    CHECK(run_clock_still(&c1)); /* c0's answer (it ran) is never taken */
    run_clock_look_all(cs, 2);
    CHECK(!run_clock_still(&c0));
    CHECK(run_clock_still(&c1));

    run_clock_close(&c0);
    run_clock_close(&c1);
    stop_kid(&kids[0]);
    stop_kid(&kids[1]);
}

static void test_refused(void)
{
    struct run_clock c;
    /* No such process: refused, never still, and said why. */
    CHECK_EQ_INT(run_clock_open(&c, 0x3ffffff0), -1);
    CHECK(!run_clock_still(&c));
    CHECK(!run_clock_still(&c));
    CHECK(c.why_not[0] != '\0');
    run_clock_close(&c);
}

/* A process that exits: its threads ran to their end, so the next look
 * is not still (then the pass it leads to finds it gone); once reaped, its
 * clock cannot be read. A zombie is refused: its clock, or its count, would
 * stand still for ever. */
static void test_exits(void)
{
    struct kid k;
    start_kid(&k);
    pause_ms(30);
    struct run_clock c;
    CHECK_EQ_INT(run_clock_open(&c, k.pid), 0);
    CHECK(settles(&c, 50));
    kill(k.pid, SIGKILL);
    pause_ms(50); /* a zombie now: not reaped */
    CHECK(!run_clock_still(&c));
    struct run_clock z;
    CHECK_EQ_INT(run_clock_open(&z, k.pid), -1);
    CHECK(!z.counted && !run_clock_still(&z) && z.why_not[0] != '\0');
    run_clock_close(&z);
    waitpid(k.pid, NULL, 0);
    if (!c.counted) {
        int still = 0;
        for (int i = 0; i < 20; i++)
            still += run_clock_still(&c);
        CHECK_EQ_INT(still, 0);
    }
    run_clock_close(&c);
    close(k.fds[0]);
    close(k.fds[1]);
}

static void all(void)
{
    test_child('s');
    test_child('T');
    test_look_all();
    test_refused();
    test_exits();
}

int main(void)
{
    all();
    /* Again with the counts of run_counter's BPF program (root here). */
    char why[160] = "";
    int rc = run_counter_start(why, sizeof why);
    CHECK_EQ_INT(rc, 0);
    if (rc != 0) {
        fprintf(stderr, "    run_counter_start: %s\n", why);
    } else {
        struct kid k;
        start_kid(&k);
        struct run_clock c, again;
        CHECK_EQ_INT(run_clock_open(&c, k.pid), 0);
        CHECK(c.counted);
        /* A second clock of the same process cannot share the count (the
         * map leads to one slot): it reads the CPU clock, and closing it leaves
         * the first one's count alone. */
        CHECK_EQ_INT(run_clock_open(&again, k.pid), 0);
        CHECK(!again.counted);
        run_clock_close(&again);
        CHECK(settles(&c, 50));
        tell(k.fds, 'r');
        CHECK(!run_clock_still(&c));
        run_clock_close(&c);
        stop_kid(&k);
        all();
        run_counter_stop();
    }
    return unit_report("run_clock");
}
