/* pyscope top: a live, refreshing view of where a process spends its time,
 * like top or py-spy top: functions by own and total share, and each
 * thread's GIL columns, over the last refresh interval. 'q' quits. */
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/commands.h"
#include "target/process.h"
#include "profile/profile.h"
#include "sampling/session.h"

static volatile int stop_requested;

static void request_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

struct function_row {
    uint32_t frame;          /* a representative frame: function and file */
    uint64_t own, total;
};

struct top_view {
    bool include_idle, gil_only, tty;
    int rows;
    uint64_t *prev_counts;   /* each count's samples at the last refresh */
    size_t n_prev;
    uint64_t (*prev_threads)[PROFILE_STATE_COUNT + 1];
    size_t n_prev_threads;
    uint64_t prev_passes, prev_failed, prev_busy;
    uint64_t last_ns;
    struct termios saved;
    bool raw;
};

static struct top_view *active_view;

static void restore_terminal(void)
{
    if (active_view && active_view->raw) {
        tcsetattr(STDIN_FILENO, TCSANOW, &active_view->saved);
        active_view->raw = false;
        fputs("\033[?25h", stdout);
        fflush(stdout);
    }
}

static void enter_raw_mode(struct top_view *v)
{
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &v->saved) != 0)
        return;
    struct termios raw = v->saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0) {
        v->raw = true;
        active_view = v;
        atexit(restore_terminal);
        fputs("\033[?25l", stdout);
    }
}

static bool quit_pressed(void)
{
    struct pollfd pfd = {STDIN_FILENO, POLLIN, 0};
    char c;
    while (poll(&pfd, 1, 0) > 0 && read(STDIN_FILENO, &c, 1) == 1)
        if (c == 'q' || c == 'Q')
            return true;
    return false;
}

static bool keep(const struct top_view *v, enum profile_state state)
{
    if (v->gil_only)
        return state == PROFILE_HOLDING_GIL;
    return v->include_idle || state != PROFILE_IDLE;
}

static int by_own(const void *a, const void *b)
{
    const struct function_row *x = a, *y = b;
    if (x->own != y->own)
        return x->own < y->own ? 1 : -1;
    return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

static bool same_function(const struct profile *p, uint32_t a, uint32_t b)
{
    return strcmp(p->frames[a].function, p->frames[b].function) == 0 &&
           strcmp(p->frames[a].file, p->frames[b].file) == 0;
}

/* Rows are per function (name and file), so every line of it adds up. */
static struct function_row *row_for(struct function_row *rows, size_t *n, const struct profile *p,
                                    uint32_t frame)
{
    for (size_t i = 0; i < *n; i++)
        if (same_function(p, rows[i].frame, frame))
            return &rows[i];
    rows[*n] = (struct function_row){frame, 0, 0};
    return &rows[(*n)++];
}

static void render(struct session *s, struct top_view *v)
{
    const struct profile *p = s->profile;
    uint64_t now = monotonic_ns();
    double seconds = (double)(now - v->last_ns) / 1e9;
    v->last_ns = now;

    struct function_row *rows = calloc(p->n_frames + 1, sizeof *rows);
    uint64_t window_samples = 0;
    size_t n_rows = 0;
    for (size_t i = 0; rows && i < p->n_counts; i++) {
        const struct profile_count *c = &p->counts[i];
        uint64_t delta = c->samples - (i < v->n_prev ? v->prev_counts[i] : 0);
        if (!delta || !keep(v, (enum profile_state)c->state))
            continue;
        window_samples += delta;
        const struct profile_stack *st = &p->stacks[c->stack];
        if (st->depth == 0)
            continue;
        row_for(rows, &n_rows, p, st->frames[st->depth - 1])->own += delta;
        /* Count each function once per stack, however deep it recurses. */
        for (uint32_t k = 0; k < st->depth; k++) {
            bool seen = false;
            for (uint32_t j = 0; j < k && !seen; j++)
                seen = same_function(p, st->frames[j], st->frames[k]);
            if (!seen)
                row_for(rows, &n_rows, p, st->frames[k])->total += delta;
        }
    }
    if (rows)
        qsort(rows, n_rows, sizeof *rows, by_own);

    uint64_t passes = p->meta.passes - v->prev_passes;
    uint64_t failed = p->meta.passes_failed - v->prev_failed;
    uint64_t busy = p->meta.gil_busy_passes - v->prev_busy;
    if (v->tty)
        fputs("\033[H\033[2J", stdout);
    printf("pyscope top  process %d  %s  (CPython %s)\n", (int)p->meta.pid, p->meta.command,
           p->meta.python_version);
    char stop_state;
    pid_t tracer;
    /* A stopped process gives samples that look like a frozen one. */
    if (process_thread_stopped(p->meta.pid, p->meta.pid, &stop_state, &tracer) == 0 && stop_state) {
        if (tracer)
            printf("STOPPED by its tracer, process %d: it runs nothing until the debugger detaches\n",
                   (int)tracer);
        else
            printf("STOPPED by a signal: it runs nothing; resume it with kill -CONT %d\n",
                   (int)p->meta.pid);
    }
    printf("%.0f samples/s, %.1f%% errors, GIL busy %.0f%%   [q quits]\n\n",
           seconds > 0 ? (double)passes / seconds : 0.0,
           passes ? 100.0 * (double)failed / (double)passes : 0.0,
           passes ? 100.0 * (double)busy / (double)passes : 0.0);
    printf("%8s  %-20s %7s %7s %7s %7s %7s\n", "TID", "THREAD", "%GIL", "%WAIT", "%NOGIL", "%IDLE",
           "%GC");
    for (size_t i = 0; i < p->n_threads; i++) {
        const struct profile_thread *t = &p->threads[i];
        uint64_t d[PROFILE_STATE_COUNT + 1], total = 0;
        for (int k = 0; k <= PROFILE_STATE_COUNT; k++) {
            uint64_t now_v = k < PROFILE_STATE_COUNT ? t->state_samples[k] : t->gc_samples;
            uint64_t prev = i < v->n_prev_threads ? v->prev_threads[i][k] : 0;
            d[k] = now_v - prev;
            if (k < PROFILE_STATE_COUNT)
                total += d[k];
        }
        if (!total)
            continue;
        printf("%8d  %-20.20s %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%%\n", (int)t->tid, t->name,
               100.0 * (double)d[PROFILE_HOLDING_GIL] / (double)total,
               100.0 * (double)d[PROFILE_WAITING_GIL] / (double)total,
               100.0 * (double)d[PROFILE_RUNNING] / (double)total,
               100.0 * (double)d[PROFILE_IDLE] / (double)total,
               100.0 * (double)d[PROFILE_STATE_COUNT] / (double)total);
    }
    printf("\n%7s %7s  %s\n", "%OWN", "%TOTAL", "FUNCTION");
    int budget = v->rows > 0 ? v->rows - (int)p->n_threads - 8 : 25;
    for (size_t i = 0; i < n_rows && (int)i < (budget > 5 ? budget : 5); i++) {
        const struct profile_frame *f = &p->frames[rows[i].frame];
        printf("%6.1f%% %6.1f%%  %s (%s)\n",
               window_samples ? 100.0 * (double)rows[i].own / (double)window_samples : 0.0,
               window_samples ? 100.0 * (double)rows[i].total / (double)window_samples : 0.0,
               f->function, f->file);
    }
    fflush(stdout);
    free(rows);

    /* Remember where every counter stood, for the next window. */
    uint64_t *prev = realloc(v->prev_counts, (p->n_counts + 1) * sizeof *prev);
    if (prev) {
        v->prev_counts = prev;
        for (size_t i = 0; i < p->n_counts; i++)
            prev[i] = p->counts[i].samples;
        v->n_prev = p->n_counts;
    }
    uint64_t (*pt)[PROFILE_STATE_COUNT + 1] = realloc(v->prev_threads, (p->n_threads + 1) * sizeof *pt);
    if (pt) {
        v->prev_threads = pt;
        for (size_t i = 0; i < p->n_threads; i++) {
            for (int k = 0; k < PROFILE_STATE_COUNT; k++)
                pt[i][k] = p->threads[i].state_samples[k];
            pt[i][PROFILE_STATE_COUNT] = p->threads[i].gc_samples;
        }
        v->n_prev_threads = p->n_threads;
    }
    v->prev_passes = p->meta.passes;
    v->prev_failed = p->meta.passes_failed;
    v->prev_busy = p->meta.gil_busy_passes;
}

static void on_tick(struct session *s, void *ctx)
{
    struct top_view *v = ctx;
    render(s, v);
    if (v->raw && quit_pressed())
        stop_requested = 1;
}

static void top_usage(FILE *out)
{
    fprintf(out,
            "usage: pyscope top [options] -p PID\n"
            "       pyscope top [options] -- COMMAND [ARGS...]\n"
            "\n"
            "A live view of a running process, refreshed every second: functions by\n"
            "own and total share of samples, and each thread's GIL columns. q quits.\n"
            "\n"
            "  -p, --pid PID          watch this running process\n"
            "  -r, --rate HZ          samples per second (default 100)\n"
            "  -i, --idle             count idle threads too\n"
            "  -g, --gil              count only the thread holding the GIL\n"
            "  -s, --subprocesses     also watch Python child processes\n"
            "  -h, --help             this help\n");
}

int cmd_top(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"pid", required_argument, NULL, 'p'},       {"rate", required_argument, NULL, 'r'},
        {"idle", no_argument, NULL, 'i'},            {"gil", no_argument, NULL, 'g'},
        {"subprocesses", no_argument, NULL, 's'},    {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    pid_t pid = 0;
    struct session_options opts = {.rate_hz = 100, .record_timeline = false};
    struct top_view view = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+p:r:igsh", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (!cli_parse_pid(optarg, &pid))
                return 2;
            break;
        case 'r':
            if (!cli_parse_rate(optarg, 1e5, false, &opts.rate_hz)) {
                fprintf(stderr, "pyscope: --rate takes a number of samples per second\n");
                return 2;
            }
            break;
        case 'i': view.include_idle = true; break;
        case 'g': view.gil_only = true; break;
        case 's': opts.subprocesses = true; break;
        case 'h': top_usage(stdout); return 0;
        default: top_usage(stderr); return 2;
        }
    }
    if (!cli_check_program(argc, argv, optind))
        return 2;
    if (optind < argc)
        opts.command = &argv[optind];
    if ((pid == 0) == (opts.command == NULL)) {
        fprintf(stderr, "pyscope: give either -p PID or -- COMMAND\n");
        top_usage(stderr);
        return 2;
    }
    struct profile profile;
    if (profile_init(&profile) != 0)
        return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = request_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct session session;
    struct pyscope_error err = {0};
    if (session_start(&session, pid, &opts, &profile, &err) != 0) {
        profile_free(&profile);
        return error_report(&err);
    }
    view.tty = isatty(STDOUT_FILENO);
    struct winsize ws;
    if (view.tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
        view.rows = ws.ws_row;
    view.last_ns = session.start_ns;
    enter_raw_mode(&view);
    session_run(&session, &stop_requested, on_tick, &view);
    restore_terminal();
    /* Quitting top ends a program it started, as leaving py-spy top does;
     * one that exited by itself is only waited for. */
    session_finish(&session, stop_requested != 0);
    free(view.prev_counts);
    free(view.prev_threads);
    profile_free(&profile);
    return session_exit_status(&session);
}
