/* pyscope record: a sampling profiler for a running process (-p PID) or a
 * program it starts (-- python app.py). Writes the profile in the chosen
 * format and prints the per-thread GIL summary at the end. */
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/commands.h"
#include "output/profile_formats.h"
#include "output/profile_writers.h"
#include "profile/profile.h"
#include "sampling/session.h"
#include "util/outfile.h"

static volatile int stop_requested;
/* Once the profile is written, pyscope only waits for the command it started.
 * A signal sent to pyscope alone meanwhile (by kill, not by the terminal,
 * which signals the whole foreground group) is passed on to the command. */
static volatile sig_atomic_t waiting_for_command, forward_signal;

static void request_stop(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    stop_requested = 1;
    if (waiting_for_command && info && info->si_code <= 0)
        forward_signal = sig;
}

static void show_progress(struct session *s, void *ctx)
{
    (void)ctx;
    const struct profile_meta *m = &s->profile->meta;
    double elapsed = (double)(monotonic_ns() - s->start_ns) / 1e9;
    fprintf(stderr, "\rpyscope: %.0f s, %llu samples (%.0f/s), %llu threads, %llu errors   ",
            elapsed, (unsigned long long)m->passes, elapsed > 0 ? (double)m->passes / elapsed : 0.0,
            (unsigned long long)s->profile->n_threads, (unsigned long long)m->passes_failed);
    fflush(stderr);
}

int cmd_record(int argc, char **argv)
{
    pid_t pid = 0;
    const char *output = NULL, *format_name = NULL;
    struct session_options opts = {.rate_hz = 100, .record_timeline = true};
    struct profile_write_options wopts = {0};
    bool quiet = false, native = false, native_all = false;
    long loop_threshold_ms = 0;
    const char *native_mode = NULL;
    const struct cli_option options[] = {
        CLI_OPT('p', "pid", "PID", "sample this running process", CLI_PID, &pid),
        CLI_OPT('o', "output", "FILE",
                "where to write the profile (default: pyscope-PID.EXT; - for stdout)",
                CLI_STRING, &output),
        CLI_OPT('f', "format", "FORMAT",
                "flamegraph (collapsed stacks, default), svg (a flame graph,\n"
                "py-spy's), speedscope, chrome, pprof (gzipped\n"
                "profile.proto), json, or html (a report with a GIL\n"
                "timeline and a flame graph, one file); without -f, the\n"
                "extension of -o chooses: profile.svg, x.pb.gz, x.html", CLI_CALL, &format_name,
                .call = cli_take_format),
        CLI_OPT('r', "rate", "HZ", "samples per second (default 100), or 'max'", CLI_RATE_OR_MAX,
                &opts.rate_hz),
        CLI_OPT('d', "duration", "SECS", "stop after this many seconds", CLI_SECONDS,
                &opts.duration_s, .error = "--duration takes a positive number of seconds"),
        CLI_OPT('i', "idle", NULL, "keep samples of idle threads (blocked in a syscall)", CLI_FLAG,
                &wopts.include_idle),
        CLI_OPT('g', "gil", NULL, "keep only samples of the thread holding the GIL", CLI_FLAG,
                &wopts.gil_only),
        CLI_OPT('t', "threads", NULL, "root each stack at its thread", CLI_FLAG,
                &wopts.thread_roots),
        CLI_OPT('s', "subprocesses", NULL, "also sample Python child processes", CLI_FLAG,
                &opts.subprocesses),
        CLI_OPT('a', "async", NULL,
                "a sample of an event loop's thread is the stack of the\n"
                "asyncio task it runs, under the tasks awaiting it;\n"
                "with --idle, suspended tasks are kept as idle samples", CLI_FLAG,
                &opts.async_tasks),
        CLI_OPT(0, "loop-threshold", "TIME",
                "how long an event loop's thread must stay in one callback\n"
                "or task step, outside its selector, for the summary to\n"
                "count a loop-blocking episode (default 100ms)", CLI_CALL,
                &loop_threshold_ms, .call = cli_take_loop_threshold),
        CLI_OPT('q', "quiet", NULL, "no progress line on stderr", CLI_FLAG, &quiet),
        CLI_OPT('n', "native", NULL,
                "also each sample's C stack, merged with its Python stack\n"
                "(perf_event samples of registers and stack, without stopping\n"
                "the process; ptrace interrupts where perf_event is refused)", CLI_FLAG,
                &native),
        CLI_OPT(0, "native-all", NULL, "with --native, keep the interpreter's own C frames too",
                CLI_FLAG, &native_all),
        CLI_OPT(0, "native-mode", "MODE",
                "auto (default), perf (fail if refused), ptrace (force the\n"
                "fallback: stops the process at each pass, at most 100 Hz)", CLI_STRING,
                &native_mode),
        CLI_HELP_OPTION,
        {0},
    };
    const struct cli_command cmd = {
        .usage = "usage: pyscope record [options] -p PID\n"
                 "       pyscope record [options] -- COMMAND [ARGS...]\n"
                 "\n"
                 "Samples every thread's Python stack and GIL state without stopping the\n"
                 "process, until Ctrl-C, the end of --duration, or the process exits. The\n"
                 "profile is written then; with -- COMMAND, pyscope goes on to wait for the\n"
                 "command (passing on signals sent to pyscope) and exits with its status.\n"
                 "\n",
        .options = options,
        .help_column = 25,
        /* The command's own flags are its own. */
        .stop_at_program = true,
    };
    int parsed = cli_parse(&cmd, argc, argv);
    if (parsed != CLI_CONTINUE)
        return parsed;
    const struct profile_format *format =
        format_name ? profile_format_find(format_name)
        : output && profile_format_for_path(output) ? profile_format_for_path(output)
                                                    : profile_format_find("flamegraph");
    opts.async_waiting = opts.async_tasks && wopts.include_idle;
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
    if (profile_init(&profile) != 0) {
        fprintf(stderr, "pyscope: out of memory\n");
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = request_stop;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    struct session session;
    struct pyscope_error err = {0};
    /* A recording that cannot be saved is not started. The default name
     * holds a process id not known yet: its directory is what counts. */
    char default_name[64];
    snprintf(default_name, sizeof default_name, "pyscope-%d.%s", (int)pid, format->extension);
    if (outfile_check(output ? output : default_name, OUTFILE_REPLACE, &err) != 0) {
        profile_free(&profile);
        return error_report(&err);
    }
    if (session_start(&session, pid, &opts, &profile, &err) != 0) {
        profile_free(&profile);
        return error_report(&err);
    }
    bool progress = !quiet && isatty(STDERR_FILENO);
    if (!quiet)
        fprintf(stderr, "pyscope: sampling process %d (CPython %s) at %s; Ctrl-C to stop\n",
                (int)session.root, profile.meta.python_version,
                opts.rate_hz > 0 ? "the requested rate" : "the highest rate it can");
    session_run(&session, &stop_requested, progress ? show_progress : NULL, NULL);
    /* The profile is written before a started command is waited for: it may
     * run for long after the recording stopped. */
    session_stop(&session);
    profile.meta.loop_blocked_ms = loop_threshold_ms;
    if (progress)
        fputc('\n', stderr);
    if (session.fds_exhausted && !quiet) {
        struct rlimit rl = {0};
        getrlimit(RLIMIT_NOFILE, &rl);
        fprintf(stderr, "pyscope: more threads than open files allowed (%llu): the states of the "
                "others were read by opening their /proc files on every pass\n",
                (unsigned long long)rl.rlim_cur);
    }

    if (!output) {
        snprintf(default_name, sizeof default_name, "pyscope-%d.%s", (int)session.root,
                 format->extension);
        output = default_name;
    }
    struct outfile out;
    int status = 0;
    if (outfile_open(&out, output, OUTFILE_REPLACE, 0666, &err) != 0) {
        status = error_report(&err);
    } else if (format->write(out.fp, &profile, &wopts) != 0) {
        outfile_discard(&out);
        fprintf(stderr, "pyscope: writing %s failed\n", output);
        status = 1;
    } else if (outfile_close(&out, &err) != 0) {
        status = error_report(&err);
    }
    profile_write_summary(stderr, &profile);
    if (status == 0 && strcmp(output, "-") != 0)
        fprintf(stderr, "pyscope: wrote %s (%s)\n", output, format->name);
    profile_free(&profile);
    fflush(stderr);
    waiting_for_command = 1;
    session_wait_command(&session, &forward_signal);
    if (status == 0)
        status = session_exit_status(&session);
    return status;
}
