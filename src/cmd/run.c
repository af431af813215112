/* pyscope run: a program under ptrace, stopped only for signals; on a crash,
 * every thread's stacks (and optionally a core); with --record-last, a flight
 * recording of the last seconds, written when it fails. Its status passes through. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd/collect.h"
#include "cmd/commands.h"
#include "elf/elf_image.h"
#include "output/profile_formats.h"
#include "output/stack_report.h"
#include "python/runtime.h"
#include "python/uncaught.h"
#include "sampling/flight.h"
#include "target/cleanup.h"
#include "target/core_write.h"
#include "target/hwbreak.h"
#include "target/process.h"
#include "target/signals.h"
#include "util/outfile.h"

#define MAX_TRACED 8192

static pid_t child_pid;
static volatile sig_atomic_t forwarded_signal;

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: pyscope run [options] -- PROGRAM [ARGS...]\n"
            "\n"
            "Runs PROGRAM (e.g. python app.py) and watches it with ptrace. It runs at full\n"
            "speed and is stopped only when a signal arrives for it. If it receives\n"
            "SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT, pyscope prints the stacks of\n"
            "every thread (C and Python frames, and the crashing thread's locals) before\n"
            "the signal takes effect. pyscope exits with the program's status (128+N when\n"
            "a signal N killed it). Ctrl-C and other signals reach the program as usual.\n"
            "\n"
            "      --core-dir DIR  also write a core file DIR/core.PID at the crash\n"
            "                      (read it with: pyscope dump --core DIR/core.PID)\n"
            "  -o, --output FILE   write the crash report to FILE instead of stderr\n"
            "                      (with --record-last: where the recording goes)\n"
            "      --report FILE   write the crash report to FILE\n"
            "  -j, --json          write the crash report as JSON (docs/json.md)\n"
            "      --no-native     leave out the C frames\n"
            "\n"
            "Flight recorder (docs/flight.md):\n"
            "      --record-last DURATION\n"
            "                      keep sampling every thread's stack and GIL state, keep\n"
            "                      the last DURATION (e.g. 30s, 500ms, 2m), and write it\n"
            "                      when the program crashes, raises an uncaught exception\n"
            "                      (whose traceback is printed with each frame's locals),\n"
            "                      exits with a non-zero status or is killed by a signal\n"
            "  -f, --format FORMAT chrome (default), %s\n"
            "  -r, --rate HZ       samples per second (default 100)\n"
            "      --native        each sample also carries its C stack, merged with its\n"
            "                      Python stack (perf_event samples; --native-all keeps the\n"
            "                      interpreter's own C frames too)\n"
            "      --dump-on SIGNAL\n"
            "                      also write it whenever the program receives SIGNAL (e.g.\n"
            "                      SIGUSR2, sent to the program or to pyscope); the program\n"
            "                      does not see that signal\n"
            "  -h, --help          this help\n",
            profile_format_names());
}

/* Signals sent to pyscope alone (kill PID) are passed on to the program;
 * those from the terminal already reach it, as it shares our process group.
 * A SIGPIPE of our own write (the kernel sends it as if from ourselves) is
 * not the program's business: the write fails with EPIPE. */
static void forward_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    if (child_pid > 0 && (info->si_code == SI_USER || info->si_code == SI_QUEUE) &&
        info->si_pid != getpid()) {
        kill(child_pid, sig);
        forwarded_signal = sig;
    }
}

struct traced {
    pid_t tids[MAX_TRACED];
    bool armed[MAX_TRACED];   /* it has the exception breakpoints (or could not get them) */
    int events[MAX_TRACED][HWBREAK_MAX];   /* ... as perf events: their descriptors */
    int n_events[MAX_TRACED];
    int n;
};

static int traced_find(const struct traced *tr, pid_t tid)
{
    for (int i = 0; i < tr->n; i++)
        if (tr->tids[i] == tid)
            return i;
    return -1;
}

static void traced_add(struct traced *tr, pid_t tid)
{
    if (traced_find(tr, tid) >= 0 || tr->n >= MAX_TRACED)
        return;
    tr->armed[tr->n] = false;
    tr->n_events[tr->n] = 0;
    tr->tids[tr->n++] = tid;
}

static void traced_close_events(struct traced *tr, int i)
{
    while (tr->n_events[i] > 0)
        close(tr->events[i][--tr->n_events[i]]);
}

static void traced_remove(struct traced *tr, pid_t tid)
{
    int i = traced_find(tr, tid);
    if (i < 0)
        return;
    traced_close_events(tr, i);
    tr->n--;
    tr->tids[i] = tr->tids[tr->n];
    tr->armed[i] = tr->armed[tr->n];
    tr->n_events[i] = tr->n_events[tr->n];
    memcpy(tr->events[i], tr->events[tr->n], sizeof tr->events[i]);
}

/* Stops every traced thread except the crashing one (already stopped),
 * waiting for each stop; events of other kinds seen meanwhile are noted. */
static void stop_others(struct traced *tr, pid_t crashing)
{
    for (int i = 0; i < tr->n; i++)
        if (tr->tids[i] != crashing)
            ptrace(PTRACE_INTERRUPT, tr->tids[i], NULL, NULL);
    for (int i = 0; i < tr->n; i++) {
        pid_t tid = tr->tids[i];
        if (tid == crashing)
            continue;
        for (int tries = 0; tries < 2000; tries++) {
            int status;
            pid_t got = waitpid(tid, &status, __WALL | WNOHANG);
            if (got == tid) {
                if (WIFEXITED(status) || WIFSIGNALED(status)) {
                    traced_remove(tr, tid);
                    i--;
                }
                break;
            }
            if (got < 0 && errno != EINTR) {
                traced_remove(tr, tid);
                i--;
                break;
            }
            struct timespec ts = {0, 500000};
            nanosleep(&ts, NULL);
        }
    }
}

static void report_crash(struct traced *tr, pid_t crashing, int sig, const char *core_dir,
                         const char *output, bool json, bool native)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (ptrace(PTRACE_GETSIGINFO, crashing, NULL, &info) != 0)
        info.si_signo = sig;
    stop_others(tr, crashing);

    FILE *out = stderr;
    struct outfile file;
    bool to_file = false;
    struct pyscope_error err = {0};
    if (output && outfile_open(&file, output, OUTFILE_REPLACE, 0666, &err) != 0)
        error_report(&err);
    else if (output)
        to_file = true, out = file.fp;
    struct target *t = process_open(child_pid, &err);
    if (!t) {
        error_report(&err);
        goto done;
    }
    target_cache_enable(t);
    struct py_runtime rt;
    struct py_runtime *rtp = &rt;
    if (py_runtime_find(t, &rt, &err) != 0) {
        fprintf(stderr, "pyscope: no Python stacks: %s\n", err.message);
        rtp = NULL;
    }
    struct stack_report report = {0};
    report.pid = child_pid;
    report.paused = true;
    process_cmdline(child_pid, report.command, sizeof report.command);
    process_exe(child_pid, report.executable, sizeof report.executable);
    snprintf(report.python_version, sizeof report.python_version, "%s", rtp ? rt.version : "?");
    struct collect_request req = {.paused = true, .locals_thread = crashing, .native = native};
    memset(&err, 0, sizeof err);
    if (collect_report(t, rtp, &req, &report, &err) != 0) {
        error_report(&err);
    } else {
        uint64_t addr = (uint64_t)(uintptr_t)info.si_addr;
        collect_set_signal(&report, sig, info.si_code, addr, info.si_pid, crashing);
        if (json)
            stack_report_write_json(out, &report);
        else {
            fprintf(out, "\npyscope: the program received a crash signal; every thread, at that "
                         "moment:\n\n");
            stack_report_write_text(out, &report, false);
        }
        fflush(out);
    }
    stack_report_free(&report);
    if (core_dir) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/core.%d", core_dir, (int)child_pid);
        /* The crashing thread first, as the kernel does. */
        pid_t *order = malloc(sizeof *order * (size_t)(tr->n ? tr->n : 1));
        if (order) {
            int n = 0;
            order[n++] = crashing;
            for (int i = 0; i < tr->n; i++)
                if (tr->tids[i] != crashing)
                    order[n++] = tr->tids[i];
            memset(&err, 0, sizeof err);
            if (core_write(t, order, n, &info, path, &err) == 0)
                fprintf(stderr, "pyscope: core written to %s\n", path);
            else
                error_report(&err);
            free(order);
        }
    }
    target_close(t);
done:
    memset(&err, 0, sizeof err);
    if (to_file && outfile_close(&file, &err) != 0)
        error_report(&err);
    /* Let the others go; the signal then ends the process as it would have. */
    for (int i = 0; i < tr->n; i++)
        if (tr->tids[i] != crashing)
            ptrace(PTRACE_CONT, tr->tids[i], NULL, NULL);
}

static int start_child(char **argv, const sigset_t *child_mask)
{
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "pyscope: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, child_mask, NULL);
        /* Wait for the tracer to attach before running anything. */
        raise(SIGSTOP);
        execvp(argv[0], argv);
        fprintf(stderr, "pyscope: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, WUNTRACED) != pid || !WIFSTOPPED(status)) {
        fprintf(stderr, "pyscope: the program did not start\n");
        return -1;
    }
    long options = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC;
    if (ptrace(PTRACE_SEIZE, pid, NULL, (void *)options) != 0) {
        fprintf(stderr, "pyscope: cannot trace the program: %s\n", strerror(errno));
        kill(pid, SIGKILL);
        return -1;
    }
    child_pid = pid;
    kill(pid, SIGCONT);
    return 0;
}

/* ---- the flight recorder (--record-last) ---- */

struct recorder {
    struct flight flight;
    const struct profile_format *format;
    char path[PATH_MAX];
    int dump_signal;             /* --dump-on, 0 when not given */
    bool failure_recorded;       /* written for a crash, exception or exit: final */
    bool written;                /* written at all (a --dump-on counts) */
    uint64_t breakpoints[HWBREAK_MAX];
    int n_breakpoints;
    bool arming;                 /* addresses known: arm each thread at its next stop */
    bool arm_failed_said;
    bool ptrace_said;            /* said that perf events were refused */
};

/* The entries of the interpreter's uncaught-exception printer, outermost
 * first. Which one a build reaches depends on inlining: pyenv's builds call
 * PyErr_Print, Debian's 3.11 PyErr_PrintEx (PyErr_Print inlined into its
 * caller), Debian's 3.13-3.15 PyErr_Print; all are exported. They are not
 * reached for SystemExit on 3.12+, and on 3.8-3.11 only to exit. */
static int printer_entries(struct py_runtime *rt, uint64_t *addrs)
{
    static const char *const names[] = {"PyErr_Print", "PyErr_PrintEx", "_PyErr_Print"};
    struct elf_image *img = elf_image_open_fd(target_open_file(rt->target, rt->binary));
    if (!img)
        return 0;
    int n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && n < HWBREAK_MAX; i++) {
        uint64_t value;
        if (elf_image_dynamic_symbol(img, names[i], &value, NULL) == 0 && value)
            addrs[n++] = value + rt->binary_bias;
    }
    elf_image_close(img);
    return n;
}

/* The runtime was just found: from now on every thread gets the
 * breakpoints at its next ptrace stop; those running are asked to stop. */
static void recorder_attached(struct recorder *rec, struct traced *tr)
{
    struct py_runtime *rt = flight_runtime(&rec->flight);
    rec->n_breakpoints = rt ? printer_entries(rt, rec->breakpoints) : 0;
    if (rec->n_breakpoints == 0) {
        fprintf(stderr, "pyscope: warning: PyErr_Print not found in %s: uncaught exceptions will "
                        "be recorded at the exit, without their traceback\n",
                rt ? rt->binary : "the program");
        return;
    }
    rec->arming = true;
    for (int i = 0; i < tr->n; i++)
        if (!tr->armed[i])
            ptrace(PTRACE_INTERRUPT, tr->tids[i], NULL, NULL);
}

/* Perf events when the kernel allows them: they go when pyscope goes,
 * even by SIGKILL. The debug registers otherwise, which would stay armed
 * in the program after a SIGKILL of pyscope. */
static bool arm_with_events(struct recorder *rec, struct traced *tr, int i)
{
    for (int b = 0; b < rec->n_breakpoints; b++) {
        int fd = hwbreak_open(tr->tids[i], rec->breakpoints[b]);
        if (fd < 0) {
            int why = errno;
            traced_close_events(tr, i);
            if (!rec->ptrace_said) {
                rec->ptrace_said = true;
                fprintf(stderr, "pyscope: note: perf_event_open refused a breakpoint (%s): using "
                                "ptrace's debug registers, which stay armed if pyscope is killed "
                                "with SIGKILL\n", strerror(why));
            }
            return false;
        }
        tr->events[i][tr->n_events[i]++] = fd;
    }
    return true;
}

static void arm_thread(struct recorder *rec, struct traced *tr, pid_t tid)
{
    int i = traced_find(tr, tid);
    if (!rec->arming || i < 0 || tr->armed[i])
        return;
    tr->armed[i] = true;
    if (arm_with_events(rec, tr, i))
        return;
    if (hwbreak_arm(tid, rec->breakpoints, rec->n_breakpoints) != 0 && !rec->arm_failed_said) {
        rec->arm_failed_said = true;
        fprintf(stderr, "pyscope: warning: cannot set breakpoints in thread %d (%s): uncaught "
                        "exceptions will be recorded at the exit, without their traceback\n",
                (int)tid, strerror(errno));
    }
}

static void recorder_exec(struct recorder *rec, struct traced *tr)
{
    /* A new program image: new addresses, and exec cleared the registers. */
    rec->arming = false;
    rec->n_breakpoints = 0;
    for (int i = 0; i < tr->n; i++) {
        tr->armed[i] = false;
        traced_close_events(tr, i);
    }
    flight_watch(&rec->flight, child_pid);
}

static void recorder_write(struct recorder *rec, uint64_t end_ns, const char *before_what,
                           bool failure)
{
    if (flight_write(&rec->flight, end_ns, rec->path, rec->format, before_what) == 0)
        rec->written = true;
    if (failure)
        rec->failure_recorded = true;
}

/* The traceback as the failing thread's last stack, the exception on top
 * as a pseudo-frame, so that the recording ends where it was raised. */
static void record_traceback(struct recorder *rec, const struct py_uncaught *u)
{
    struct profile_frame *frames = calloc(u->n_frames + 1, sizeof *frames);
    if (!frames)
        return;
    for (size_t i = 0; i < u->n_frames; i++)
        frames[i] = (struct profile_frame){.function = (char *)u->frames[i].function,
                                           .file = (char *)u->frames[i].file,
                                           .line = u->frames[i].line};
    char top[160];
    snprintf(top, sizeof top, "<uncaught %s>", u->type_name);
    frames[u->n_frames] = (struct profile_frame){.function = top, .file = "<exception>",
                                                 .line = -1, .synthetic = true};
    flight_set_last_stack(&rec->flight, u->tid, frames, u->n_frames + 1, PROFILE_HOLDING_GIL);
    free(frames);
}

/* tid stopped at the entry of the exception printer. */
static void on_breakpoint(struct recorder *rec, struct traced *tr, pid_t tid)
{
    /* One stop per thread is enough; the resume flag covers a failed disarm. */
    int i = traced_find(tr, tid);
    if (i >= 0 && tr->n_events[i] > 0) {
        traced_close_events(tr, i);
    } else {
        hwbreak_which(tid);
        hwbreak_disarm(tid);
        hwbreak_step_over(tid);
    }
    struct py_runtime *rt = flight_runtime(&rec->flight);
    if (rec->failure_recorded || !rt)
        return;
    flight_pass_now(&rec->flight);
    uint64_t end = flight_now(&rec->flight);
    struct py_uncaught u;
    char why[256];
    if (py_uncaught_read(rt, child_pid, tid, &u, why, sizeof why) != 0) {
        fprintf(stderr, "pyscope: thread %d is printing an uncaught exception, but %s\n",
                (int)tid, why);
        return;
    }
    if (!u.system_exit) {
        struct repr_limits limits = REPR_DEFAULT_LIMITS;
        py_uncaught_print(stderr, rt, &u, &limits);
        record_traceback(rec, &u);
        char what[256];
        snprintf(what, sizeof what, "the uncaught %s in thread %d", u.type_name, (int)tid);
        recorder_write(rec, end, what, true);
    }
    py_uncaught_free(&u);
}

static bool is_breakpoint_stop(pid_t tid)
{
    siginfo_t info;
    return ptrace(PTRACE_GETSIGINFO, tid, NULL, &info) == 0 && info.si_signo == SIGTRAP &&
           (info.si_code == HWBREAK_SI_CODE || info.si_code == HWBREAK_PERF_SI_CODE);
}

static void on_exit_status(struct recorder *rec, int status)
{
    if (rec->failure_recorded)
        return;
    char what[128], name[32];
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if (!rec->written)
            fprintf(stderr, "pyscope: the program exited with status 0; no flight recording "
                            "written\n");
        return;
    }
    if (WIFEXITED(status))
        snprintf(what, sizeof what, "the exit with status %d", WEXITSTATUS(status));
    else
        snprintf(what, sizeof what, "the %s that ended the program",
                 signal_name(WTERMSIG(status), name, sizeof name));
    recorder_write(rec, flight_now(&rec->flight), what, true);
}

/* waitpid for any traced thread, taking the recorder's passes while there
 * is no event: SIGCHLD (blocked, so it stays pending) ends each wait. */
static pid_t wait_sampling(struct recorder *rec, struct traced *tr, int *status)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (;;) {
        uint64_t now = monotonic_ns(), deadline = flight_deadline(&rec->flight);
        if (now >= deadline) {
            if (flight_tick(&rec->flight, now))
                recorder_attached(rec, tr);
            continue;
        }
        pid_t got = waitpid(-1, status, __WALL | WNOHANG);
        if (got != 0)
            return got;
        uint64_t wait_ns = deadline - now;
        if (wait_ns > 1000000000ull)
            wait_ns = 1000000000ull;
        struct timespec ts = {(time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull)};
        sigtimedwait(&chld, NULL, &ts);
    }
}

/* "30s", "500ms", "2m", "1.5" (seconds); 0 when not a positive duration. */
static uint64_t parse_duration(const char *text)
{
    char *end;
    double value = strtod(text, &end);
    double scale = 1e9;
    if (strcmp(end, "ms") == 0)
        scale = 1e6;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        scale = 60e9;
    else if (strcmp(end, "h") == 0)
        scale = 3600e9;
    else if (*end && strcmp(end, "s") != 0)
        return 0;
    double ns = value * scale;
    if (end == text || !(ns >= 1e6) || ns > 7 * 24 * 3600e9)
        return 0;
    return (uint64_t)ns;
}

int cmd_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"core-dir", required_argument, NULL, 'c'},
        {"output", required_argument, NULL, 'o'},
        {"report", required_argument, NULL, 'R'},
        {"json", no_argument, NULL, 'j'},
        {"no-native", no_argument, NULL, 'N'},
        {"record-last", required_argument, NULL, 'L'},
        {"format", required_argument, NULL, 'f'},
        {"rate", required_argument, NULL, 'r'},
        {"dump-on", required_argument, NULL, 'D'},
        {"native", no_argument, NULL, 'n'},
        {"native-all", no_argument, NULL, 'A'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *core_dir = NULL, *output = NULL, *report_path = NULL;
    bool json = false, native = true;
    uint64_t window_ns = 0;
    double rate_hz = 100;
    const struct profile_format *format = profile_format_find("chrome");
    int dump_signal = 0;
    bool format_given = false, rate_given = false, record_native = false, record_native_all = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+o:jf:r:h", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'c': core_dir = optarg; break;
        case 'o': output = optarg; break;
        case 'R': report_path = optarg; break;
        case 'j': json = true; break;
        case 'N': native = false; break;
        case 'L':
            window_ns = parse_duration(optarg);
            if (!window_ns) {
                fprintf(stderr, "pyscope: --record-last takes a duration such as 30s, 500ms or "
                                "2m\n");
                return PYSCOPE_ERR_USAGE;
            }
            break;
        case 'f':
            format = profile_format_find(optarg);
            if (!format) {
                fprintf(stderr, "pyscope: unknown format '%s' (%s)\n", optarg,
                        profile_format_names());
                return PYSCOPE_ERR_USAGE;
            }
            format_given = true;
            break;
        case 'r':
            rate_hz = strtod(optarg, &end);
            if (*end || !(rate_hz >= 1 && rate_hz <= 10000)) {
                fprintf(stderr, "pyscope: --rate takes a number of samples per second, 1 to "
                                "10000\n");
                return PYSCOPE_ERR_USAGE;
            }
            rate_given = true;
            break;
        case 'D':
            dump_signal = signal_from_name(optarg);
            if (!dump_signal || dump_signal == SIGKILL || dump_signal == SIGSTOP ||
                dump_signal == SIGTRAP || dump_signal == SIGCHLD || signal_is_crash(dump_signal)) {
                fprintf(stderr, "pyscope: --dump-on takes a signal the program can be sent "
                                "without harm, e.g. SIGUSR2\n");
                return PYSCOPE_ERR_USAGE;
            }
            break;
        case 'A': record_native_all = true; /* fall through */
        case 'n': record_native = true; break;
        case 'h': run_usage(stdout); return 0;
        default: run_usage(stderr); return PYSCOPE_ERR_USAGE;
        }
    }
    if (optind >= argc) {
        run_usage(stderr);
        return PYSCOPE_ERR_USAGE;
    }
    if (core_dir && access(core_dir, W_OK) != 0) {
        fprintf(stderr, "pyscope: --core-dir %s: %s\n", core_dir, strerror(errno));
        return PYSCOPE_ERR_USAGE;
    }
    bool recording = window_ns != 0;
    if (!recording && (dump_signal || format_given || rate_given || record_native)) {
        fprintf(stderr, "pyscope: --format, --rate, --native and --dump-on go with --record-last\n");
        return PYSCOPE_ERR_USAGE;
    }
    if (!recording && output)
        report_path = report_path ? report_path : output;
    if (recording && output && strcmp(output, "-") == 0) {
        fprintf(stderr, "pyscope: the recording cannot go to stdout, which the program uses\n");
        return PYSCOPE_ERR_USAGE;
    }
    /* Whatever is written at the end must be writable before the program
     * starts. The recording's default name holds the child's pid, not known
     * yet: its directory is what counts. */
    char default_name[64];
    snprintf(default_name, sizeof default_name, "pyscope-0.%s", format->extension);
    const char *to_check[] = {recording ? (output ? output : default_name) : NULL, report_path};
    for (size_t i = 0; i < sizeof to_check / sizeof to_check[0]; i++) {
        struct pyscope_error out_err = {0};
        if (to_check[i] && outfile_check(to_check[i], OUTFILE_REPLACE, &out_err) != 0)
            return error_report(&out_err);
    }

    /* Every signal that would end pyscope goes to the program instead, so
     * pyscope stays until the program ends; its own crashes undo what it
     * armed (target/cleanup.h). */
    cleanup_install();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigset_t forwarded;
    cleanup_terminating_signals(&forwarded);
    if (dump_signal)
        sigaddset(&forwarded, dump_signal);
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&forwarded, sig) == 1)
            sigaction(sig, &sa, NULL);

    struct recorder *rec = NULL;
    if (recording) {
        rec = calloc(1, sizeof *rec);
        struct flight_options fo = {.window_ns = window_ns, .rate_hz = rate_hz,
                                    .native = record_native, .native_all = record_native_all};
        if (!rec || flight_init(&rec->flight, &fo) != 0) {
            fprintf(stderr, "pyscope: out of memory\n");
            free(rec);
            return PYSCOPE_ERR_OTHER;
        }
        rec->format = format;
        rec->dump_signal = dump_signal;
    }
    /* The recorder's waits end on SIGCHLD, which must stay pending to be
     * seen: blocked here, unblocked again in the program. */
    sigset_t old_mask, chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(recording ? SIG_BLOCK : SIG_SETMASK, recording ? &chld : NULL, &old_mask);
    /* The terminal's Ctrl-C is for the program: it decides what to do. */
    if (start_child(argv + optind, &old_mask) != 0) {
        if (rec) {
            flight_free(&rec->flight);
            free(rec);
        }
        return PYSCOPE_ERR_OTHER;
    }
    if (rec) {
        if (output)
            snprintf(rec->path, sizeof rec->path, "%s", output);
        else
            snprintf(rec->path, sizeof rec->path, "pyscope-%d.%s", (int)child_pid,
                     format->extension);
        flight_watch(&rec->flight, child_pid);
    }

    struct traced *tr = calloc(1, sizeof *tr);
    if (!tr) {
        kill(child_pid, SIGKILL);
        return PYSCOPE_ERR_OTHER;
    }
    traced_add(tr, child_pid);
    bool reported = false;
    int exit_status = PYSCOPE_ERR_OTHER;
    for (;;) {
        int status;
        pid_t tid = rec ? wait_sampling(rec, tr, &status) : waitpid(-1, &status, __WALL);
        if (tid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            traced_remove(tr, tid);
            if (tid == child_pid) {
                exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                if (rec)
                    on_exit_status(rec, status);
                break;
            }
            continue;
        }
        if (!WIFSTOPPED(status))
            continue;
        traced_add(tr, tid);
        int sig = WSTOPSIG(status);
        int event = status >> 16;
        if (event == PTRACE_EVENT_CLONE) {
            unsigned long new_tid = 0;
            if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &new_tid) == 0)
                traced_add(tr, (pid_t)new_tid);
            ptrace(PTRACE_CONT, tid, NULL, NULL);
            continue;
        }
        if (event == PTRACE_EVENT_STOP) {
            /* New threads, and those interrupted to be armed, stop here. */
            if (rec)
                arm_thread(rec, tr, tid);
            /* A group stop (SIGSTOP, Ctrl-Z) must stay a stop: listen
             * instead of resuming. Other event stops just continue. */
            if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
                ptrace(PTRACE_LISTEN, tid, NULL, NULL);
            else
                ptrace(PTRACE_CONT, tid, NULL, NULL);
            continue;
        }
        if (event == PTRACE_EVENT_EXEC && rec)
            recorder_exec(rec, tr);
        if (event != 0) {
            ptrace(PTRACE_CONT, tid, NULL, NULL);
            continue;
        }
        /* A signal for the program. */
        if (rec && sig == SIGTRAP && is_breakpoint_stop(tid)) {
            on_breakpoint(rec, tr, tid);
            ptrace(PTRACE_CONT, tid, NULL, NULL);
            continue;
        }
        if (rec && sig == rec->dump_signal) {
            /* Meant for pyscope: written, and not delivered. */
            flight_pass_now(&rec->flight);
            char what[64], name[32];
            snprintf(what, sizeof what, "%s", signal_name(sig, name, sizeof name));
            recorder_write(rec, flight_now(&rec->flight), what, false);
            ptrace(PTRACE_CONT, tid, NULL, NULL);
            continue;
        }
        if (signal_is_crash(sig) && !reported) {
            reported = true;
            bool record = rec && !rec->failure_recorded;
            uint64_t end = 0;
            if (record) {
                flight_pass_now(&rec->flight);
                end = flight_now(&rec->flight);
            }
            report_crash(tr, tid, sig, core_dir, report_path, json, native);
            if (record) {
                char what[96], name[32];
                snprintf(what, sizeof what, "the %s in thread %d",
                         signal_name(sig, name, sizeof name), (int)tid);
                recorder_write(rec, end, what, true);
            }
        }
        ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig);
    }
    free(tr);
    if (rec) {
        flight_free(&rec->flight);
        free(rec);
    }
    return exit_status;
}
