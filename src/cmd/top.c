/* pyscope top: a live, refreshing view of where a process spends its time,
 * like top or py-spy top: functions by own and total share, and each
 * thread's GIL columns, over the last refresh interval. 'q' quits. */
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
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

/* What one refresh shows, kept as text so that a resize can lay the same
 * figures out again at once. */
struct lines {
    char **items;
    size_t n, cap;
};

struct top_view {
    bool include_idle, gil_only, tty;
    int rows, cols;          /* the terminal's size; 0 when not a terminal */
    uint64_t *prev_counts;   /* each count's samples at the last refresh */
    size_t n_prev;
    uint64_t (*prev_threads)[PROFILE_STATE_COUNT + 1];
    size_t n_prev_threads;
    uint64_t (*prev_procs)[3];   /* passes, failed, GIL busy of each process */
    size_t n_prev_procs;
    uint64_t prev_passes, prev_failed, prev_busy;
    uint64_t last_ns;
    struct termios saved;
    bool raw;
    /* the last refresh */
    struct lines header, threads, functions;
    char thread_title[160], fold[512];
    size_t n_active;         /* threads[] before this are busy, after it idle */
};

static struct top_view *active_view;
static volatile sig_atomic_t resized;

static void on_winch(int sig)
{
    (void)sig;
    resized = 1;
}

static void lines_clear(struct lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    l->n = 0;
}

static void lines_free(struct lines *l)
{
    lines_clear(l);
    free(l->items);
    l->items = NULL;
    l->cap = 0;
}

__attribute__((format(printf, 2, 3)))
static void lines_add(struct lines *l, const char *fmt, ...)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        char **grown = realloc(l->items, cap * sizeof *grown);
        if (!grown)
            return;
        l->items = grown;
        l->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&l->items[l->n], fmt, ap) >= 0)
        l->n++;
    va_end(ap);
}

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

static void read_size(struct top_view *v)
{
    struct winsize ws;
    if (v->tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
        v->rows = ws.ws_row;
        v->cols = ws.ws_col;
    }
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
    const struct profile_frame *x = &p->frames[a], *y = &p->frames[b];
    /* An unnamed C frame is only itself: two of them may be anything. */
    if (x->native && !x->function[0])
        return a == b;
    return strcmp(x->function, y->function) == 0 && strcmp(x->file, y->file) == 0 &&
           x->native == y->native && (!x->native || strcmp(x->module, y->module) == 0);
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

/* One thread over the window: samples by state, and the stack it was seen
 * in most, which names it when it is folded into the idle line. */
struct thread_window {
    uint32_t thread;
    uint64_t d[PROFILE_STATE_COUNT + 1];
    uint64_t total, busy;
    bool idle;               /* blocked for at least IDLE_PERCENT of the window */
    uint32_t stack;
    uint64_t stack_samples;
};

/* A thread that woke briefly (a timed wait, a GIL hand-off) is still idle. */
#define IDLE_PERCENT 95

static int by_activity(const void *a, const void *b)
{
    const struct thread_window *x = a, *y = b;
    if (x->idle != y->idle)
        return x->idle ? 1 : -1;
    if (x->busy != y->busy)
        return x->busy < y->busy ? 1 : -1;
    return x->thread < y->thread ? -1 : x->thread > y->thread;
}

static bool stdlib_file(const char *file)
{
    return strncmp(file, "<frozen ", 8) == 0 ||
           (strstr(file, "/lib/python3") && !strstr(file, "-packages/"));
}

/* threading's own frames under every thread's target. */
static bool thread_entry_frame(const struct profile_frame *f)
{
    static const char *const names[] = {"Thread.run", "Thread._bootstrap_inner",
                                        "Thread._bootstrap", "run", "_bootstrap_inner",
                                        "_bootstrap"};
    size_t len = strlen(f->file);
    if (len < 13 || strcmp(f->file + len - 13, "/threading.py") != 0)
        return false;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(f->function, names[i]) == 0)
            return true;
    return false;
}

/* What an idle thread waits in: from its innermost frame outwards through
 * the standard library, the outermost of those below the thread's own entry
 * frames (Event.wait, not the Condition.wait it calls; Queue.get), else its
 * innermost function (the caller of time.sleep, say). */
static const char *wait_label(const struct profile *p, uint32_t stack)
{
    if (stack >= p->n_stacks || p->stacks[stack].depth == 0)
        return "?";
    const struct profile_stack *st = &p->stacks[stack];
    uint32_t k = st->depth - 1;
    /* The "[C] time.sleep" leaf says what, not where: start at its caller. */
    if (k > 0 && p->frames[st->frames[k]].synthetic)
        k--;
    while (k > 0 && stdlib_file(p->frames[st->frames[k]].file) &&
           stdlib_file(p->frames[st->frames[k - 1]].file) &&
           !thread_entry_frame(&p->frames[st->frames[k - 1]]))
        k--;
    return p->frames[st->frames[k]].function;
}

struct label_count {
    const char *label;
    int count;
};

static int by_count(const void *a, const void *b)
{
    const struct label_count *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->label, y->label);
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void build_threads(const struct profile *p, struct top_view *v, bool many_processes)
{
    struct thread_window *tw = calloc(p->n_threads + 1, sizeof *tw);
    if (!tw)
        return;
    size_t n = 0;
    for (size_t i = 0; i < p->n_threads; i++) {
        const struct profile_thread *t = &p->threads[i];
        struct thread_window *w = &tw[n];
        memset(w, 0, sizeof *w);
        w->thread = (uint32_t)i;
        w->stack = UINT32_MAX;
        for (int k = 0; k <= PROFILE_STATE_COUNT; k++) {
            uint64_t now_v = k < PROFILE_STATE_COUNT ? t->state_samples[k] : t->gc_samples;
            uint64_t prev = i < v->n_prev_threads ? v->prev_threads[i][k] : 0;
            w->d[k] = now_v - prev;
            if (k < PROFILE_STATE_COUNT)
                w->total += w->d[k];
        }
        w->busy = w->total - w->d[PROFILE_IDLE];
        w->idle = w->total && w->d[PROFILE_IDLE] * 100 >= w->total * IDLE_PERCENT;
        if (w->total)
            n++;
    }
    for (size_t i = 0; i < p->n_counts; i++) {
        const struct profile_count *c = &p->counts[i];
        uint64_t delta = c->samples - (i < v->n_prev ? v->prev_counts[i] : 0);
        for (size_t k = 0; k < n && delta; k++) {
            if (tw[k].thread == c->thread && delta > tw[k].stack_samples) {
                tw[k].stack = c->stack;
                tw[k].stack_samples = delta;
            }
        }
    }
    qsort(tw, n, sizeof *tw, by_activity);
    snprintf(v->thread_title, sizeof v->thread_title, "%s%8s  %-20s %7s %7s %7s %7s %7s",
             many_processes ? "     PID" : "", "TID", "THREAD", "%GIL", "%WAIT", "%NOGIL",
             "%IDLE", "%GC");
    v->n_active = 0;
    struct label_count *labels = calloc(n + 1, sizeof *labels);
    size_t n_labels = 0;
    int n_idle = 0;
    for (size_t i = 0; i < n; i++) {
        const struct thread_window *w = &tw[i];
        const struct profile_thread *t = &p->threads[w->thread];
        char pid[16] = "";
        if (many_processes)
            snprintf(pid, sizeof pid, "%8d", (int)t->pid);
        lines_add(&v->threads, "%s%8d  %-20.20s %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%%", pid,
                  (int)t->tid, t->name, pct(w->d[PROFILE_HOLDING_GIL], w->total),
                  pct(w->d[PROFILE_WAITING_GIL], w->total), pct(w->d[PROFILE_RUNNING], w->total),
                  pct(w->d[PROFILE_IDLE], w->total), pct(w->d[PROFILE_STATE_COUNT], w->total));
        if (!w->idle) {
            v->n_active++;
            continue;
        }
        n_idle++;
        const char *label = wait_label(p, w->stack);
        size_t k = 0;
        while (labels && k < n_labels && strcmp(labels[k].label, label) != 0)
            k++;
        if (labels && k == n_labels)
            labels[n_labels++] = (struct label_count){label, 0};
        if (labels)
            labels[k].count++;
    }
    v->fold[0] = '\0';
    if (n_idle) {
        if (labels)
            qsort(labels, n_labels, sizeof *labels, by_count);
        size_t len = (size_t)snprintf(v->fold, sizeof v->fold, "%10d idle thread%s:", n_idle,
                                      n_idle == 1 ? "" : "s");
        for (size_t k = 0; k < n_labels && len < sizeof v->fold; k++)
            len += (size_t)snprintf(v->fold + len, sizeof v->fold - len, "%s %d %s",
                                    k ? "," : "", labels[k].count, labels[k].label);
    }
    free(labels);
    free(tw);
}

static void build_processes(const struct profile *p, struct top_view *v, double seconds)
{
    lines_add(&v->header, "%8s  %-16s %9s %7s %9s  %s", "PID", "ROLE", "SAMPLES/S", "ERRORS",
              "GIL BUSY", "COMMAND");
    for (size_t i = 0; i < p->n_processes; i++) {
        const struct profile_process *pr = &p->processes[i];
        uint64_t passes = pr->passes - (i < v->n_prev_procs ? v->prev_procs[i][0] : 0);
        uint64_t failed = pr->passes_failed - (i < v->n_prev_procs ? v->prev_procs[i][1] : 0);
        uint64_t busy = pr->gil_busy_passes - (i < v->n_prev_procs ? v->prev_procs[i][2] : 0);
        if (!passes)
            continue;
        lines_add(&v->header, "%8d  %-16.16s %9.0f %6.1f%% %8.0f%%  %s", (int)pr->pid, pr->role,
                  seconds > 0 ? (double)passes / seconds : 0.0, pct(failed, passes),
                  pct(busy, passes), pr->command);
    }
    lines_add(&v->header, "%s", "");
}

static void build(struct session *s, struct top_view *v)
{
    const struct profile *p = s->profile;
    uint64_t now = monotonic_ns();
    double seconds = (double)(now - v->last_ns) / 1e9;
    v->last_ns = now;
    lines_clear(&v->header);
    lines_clear(&v->threads);
    lines_clear(&v->functions);

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

    bool many = p->n_processes > 1;
    if (many) {
        lines_add(&v->header, "pyscope top  %zu processes under %d  %s", p->n_processes,
                  (int)p->meta.pid, p->meta.command);
        lines_add(&v->header, "each process has its own GIL   [q quits]");
        lines_add(&v->header, "%s", "");
        build_processes(p, v, seconds);
    } else {
        uint64_t passes = p->meta.passes - v->prev_passes;
        uint64_t failed = p->meta.passes_failed - v->prev_failed;
        uint64_t busy = p->meta.gil_busy_passes - v->prev_busy;
        lines_add(&v->header, "pyscope top  process %d  %s  (CPython %s)", (int)p->meta.pid,
                  p->meta.command, p->meta.python_version);
        char stop_state;
        pid_t tracer;
        /* A stopped process gives samples that look like a frozen one. */
        struct target *t = session_target(s, p->meta.pid);
        if (t && target_thread_stopped(t, p->meta.pid, &stop_state, &tracer) == 0 && stop_state) {
            if (tracer)
                lines_add(&v->header, "STOPPED by its tracer, process %d: it runs nothing until "
                          "the debugger detaches", (int)tracer);
            else
                lines_add(&v->header, "STOPPED by a signal: it runs nothing; resume it with "
                          "kill -CONT %d", (int)p->meta.pid);
        }
        lines_add(&v->header, "%.0f samples/s, %.1f%% errors, GIL busy %.0f%%   [q quits]",
                  seconds > 0 ? (double)passes / seconds : 0.0, pct(failed, passes),
                  pct(busy, passes));
        /* The fallback stops the process at each pass: a full-screen top
         * would hide stderr's note of it. */
        if (strcmp(p->meta.native_mode, "ptrace") == 0 && p->meta.native_note[0])
            lines_add(&v->header, "%s", p->meta.native_note);
        lines_add(&v->header, "%s", "");
    }
    build_threads(p, v, many);
    lines_add(&v->functions, "%7s %7s  %s", "%OWN", "%TOTAL", "FUNCTION");
    for (size_t i = 0; i < n_rows; i++) {
        const struct profile_frame *f = &p->frames[rows[i].frame];
        if (f->native)
            lines_add(&v->functions, "%6.1f%% %6.1f%%  [C] %s (%s)%s%s",
                      pct(rows[i].own, window_samples), pct(rows[i].total, window_samples),
                      f->function[0] ? f->function : "unnamed", f->module, f->file[0] ? " " : "",
                      f->file);
        else if (f->synthetic || !f->file[0]) /* "[C] re.Pattern.match", "<GC>": no source */
            lines_add(&v->functions, "%6.1f%% %6.1f%%  %s", pct(rows[i].own, window_samples),
                      pct(rows[i].total, window_samples), f->function);
        else
            lines_add(&v->functions, "%6.1f%% %6.1f%%  %s (%s)", pct(rows[i].own, window_samples),
                      pct(rows[i].total, window_samples), f->function, f->file);
    }
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
    uint64_t (*pp)[3] = realloc(v->prev_procs, (p->n_processes + 1) * sizeof *pp);
    if (pp) {
        v->prev_procs = pp;
        for (size_t i = 0; i < p->n_processes; i++) {
            pp[i][0] = p->processes[i].passes;
            pp[i][1] = p->processes[i].passes_failed;
            pp[i][2] = p->processes[i].gil_busy_passes;
        }
        v->n_prev_procs = p->n_processes;
    }
    v->prev_passes = p->meta.passes;
    v->prev_failed = p->meta.passes_failed;
    v->prev_busy = p->meta.gil_busy_passes;
}

/* Prints one line cut to the terminal's width (UTF-8 aware, with an
 * ellipsis), clearing what an earlier, longer frame left on the row. */
static void put_line(const struct top_view *v, const char *text)
{
    size_t len = strlen(text);
    if (v->cols > 0) {
        size_t chars = 0, cut = len;
        for (size_t i = 0; i < len; i++) {
            if (((unsigned char)text[i] & 0xc0) == 0x80)
                continue;
            if (chars == (size_t)v->cols - 1 && cut == len) {
                size_t rest = 0;
                for (size_t k = i; k < len; k++)
                    rest += ((unsigned char)text[k] & 0xc0) != 0x80;
                if (rest > 1)
                    cut = i;
            }
            chars++;
        }
        fwrite(text, 1, cut, stdout);
        if (cut < len)
            fputs("\xe2\x80\xa6", stdout);
    } else {
        fputs(text, stdout);
    }
    fputs(v->tty ? "\033[K\n" : "\n", stdout);
}

/* Lays the last refresh out on the screen: the header always; then the
 * busy threads, most active first, and one line for the idle ones (each on
 * a line of its own when there is room); then as many functions as fit.
 * The bottom row stays empty so that the terminal never scrolls. */
static void show(struct top_view *v)
{
    int height = v->rows > 0 ? v->rows - 1 : 40;
    size_t n_threads = v->threads.n, n_idle = n_threads - v->n_active;
    int fixed = (int)v->header.n + 1 /* thread title */ + 1 /* blank */;
    int min_functions = v->functions.n < 4 ? (int)v->functions.n : 4;
    int room = height - fixed - min_functions;
    if (room < 1)
        room = 1;
    bool all = (int)n_threads <= room && (v->rows > 0 || n_idle <= 20);
    size_t busy_shown = v->n_active;
    bool fold = !all && n_idle > 0;
    if (!all && (int)busy_shown > room - (fold ? 1 : 0) - 1) {
        int keep_busy = room - (fold ? 1 : 0) - 1;
        busy_shown = keep_busy > 0 ? (size_t)keep_busy : 0;
    }
    if (v->tty)
        fputs("\033[H", stdout);
    int used = 0;
    for (size_t i = 0; i < v->header.n && used < height; i++, used++)
        put_line(v, v->header.items[i]);
    if (used < height) {
        put_line(v, v->thread_title);
        used++;
    }
    size_t listed = all ? n_threads : busy_shown;
    for (size_t i = 0; i < listed && used < height; i++, used++)
        put_line(v, v->threads.items[i]);
    if (!all && busy_shown < v->n_active && used < height) {
        char more[64];
        snprintf(more, sizeof more, "%10zu more busy thread%s", v->n_active - busy_shown,
                 v->n_active - busy_shown == 1 ? "" : "s");
        put_line(v, more);
        used++;
    }
    if (fold && used < height) {
        put_line(v, v->fold);
        used++;
    }
    if (used < height) {
        put_line(v, "");
        used++;
    }
    for (size_t i = 0; i < v->functions.n && used < height; i++, used++)
        put_line(v, v->functions.items[i]);
    if (v->tty)
        fputs("\033[J", stdout);
    else
        fputs("\n", stdout);
    fflush(stdout);
}

static void on_tick(struct session *s, void *ctx)
{
    struct top_view *v = ctx;
    read_size(v);
    resized = 0;
    /* After a resize, the same figures laid out for the new size. */
    if (!s->redraw_only || v->header.n == 0)
        build(s, v);
    show(v);
    if (v->raw && quit_pressed())
        stop_requested = 1;
}

int cmd_top(int argc, char **argv)
{
    pid_t pid = 0;
    struct session_options opts = {.rate_hz = 100, .record_timeline = false};
    struct top_view view = {0};
    bool native = false, native_all = false;
    const char *native_mode = NULL;
    const struct cli_option options[] = {
        CLI_OPT('p', "pid", "PID", "watch this running process", CLI_PID, &pid),
        CLI_OPT('r', "rate", "HZ", "samples per second (default 100)", CLI_RATE, &opts.rate_hz),
        CLI_OPT('i', "idle", NULL, "count idle threads too", CLI_FLAG, &view.include_idle),
        CLI_OPT('g', "gil", NULL, "count only the thread holding the GIL", CLI_FLAG,
                &view.gil_only),
        CLI_OPT('s', "subprocesses", NULL, "also watch Python child processes", CLI_FLAG,
                &opts.subprocesses),
        CLI_OPT('a', "async", NULL,
                "an event loop's thread counts as the asyncio task it\n"
                "runs, under the tasks awaiting it", CLI_FLAG, &opts.async_tasks),
        CLI_OPT('n', "native", NULL,
                "count C functions too: each sample's C stack merged with\n"
                "its Python stack (perf_event, else ptrace; as record)", CLI_FLAG, &native),
        CLI_OPT(0, "native-all", NULL, "with --native, keep the interpreter's own C frames too",
                CLI_FLAG, &native_all),
        CLI_OPT(0, "native-mode", "MODE",
                "auto (default), perf, or ptrace (stops the process at\n"
                "each pass, at most 100 Hz)", CLI_STRING, &native_mode),
        CLI_HELP_OPTION,
        {0},
    };
    const struct cli_command cmd = {
        .usage = "usage: pyscope top [options] -p PID\n"
                 "       pyscope top [options] -- COMMAND [ARGS...]\n"
                 "\n"
                 "A live view of a running process, refreshed every second: functions by\n"
                 "own and total share of samples, and each thread's GIL columns. q quits.\n"
                 "\n",
        .options = options,
        .help_column = 25,
        .stop_at_program = true,
    };
    int parsed = cli_parse(&cmd, argc, argv);
    if (parsed != CLI_CONTINUE)
        return parsed;
    opts.async_waiting = opts.async_tasks && view.include_idle;
    if (!cli_parse_native(native, native_all, native_mode, &opts.native_mode, &opts.native_all))
        return 2;
    if (!cli_check_program(argc, argv, optind))
        return 2;
    if (optind < argc)
        opts.command = &argv[optind];
    if ((pid == 0) == (opts.command == NULL)) {
        fprintf(stderr, "pyscope: give either -p PID or -- COMMAND\n");
        cli_usage(&cmd, stderr);
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
    read_size(&view);
    view.last_ns = session.start_ns;
    if (view.tty) {
        sa.sa_handler = on_winch;
        sigaction(SIGWINCH, &sa, NULL);
        session.redraw_request = &resized;
    }
    enter_raw_mode(&view);
    session_run(&session, &stop_requested, on_tick, &view);
    restore_terminal();
    /* Quitting top ends a program it started, as leaving py-spy top does;
     * one that exited by itself is only waited for. */
    session_finish(&session, stop_requested != 0);
    free(view.prev_counts);
    free(view.prev_threads);
    free(view.prev_procs);
    lines_free(&view.header);
    lines_free(&view.threads);
    lines_free(&view.functions);
    profile_free(&profile);
    return session_exit_status(&session);
}
