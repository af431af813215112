/* pyscope record: a sampling profiler for a running process (-p PID) or a
 * program it starts (-- python app.py). Writes the profile in the chosen
 * format and prints the per-thread GIL summary at the end. */
#include <errno.h>
#include <getopt.h>
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

static void record_usage(FILE *out)
{
    fprintf(out,
            "usage: pyscope record [options] -p PID\n"
            "       pyscope record [options] -- COMMAND [ARGS...]\n"
            "\n"
            "Samples every thread's Python stack and GIL state without stopping the\n"
            "process, until Ctrl-C, the end of --duration, or the process exits. The\n"
            "profile is written then; with -- COMMAND, pyscope goes on to wait for the\n"
            "command (passing on signals sent to pyscope) and exits with its status.\n"
            "\n"
            "  -p, --pid PID          sample this running process\n"
            "  -o, --output FILE      where to write the profile (default: pyscope-PID.EXT; - for stdout)\n"
            "  -f, --format FORMAT    flamegraph (collapsed stacks, default), speedscope, chrome,\n"
            "                         pprof (gzipped profile.proto), json, or html (a report\n"
            "                         with a GIL timeline and a flame graph, one file)\n"
            "  -r, --rate HZ          samples per second (default 100), or 'max'\n"
            "  -d, --duration SECS    stop after this many seconds\n"
            "  -i, --idle             keep samples of idle threads (blocked in a syscall)\n"
            "  -g, --gil              keep only samples of the thread holding the GIL\n"
            "  -t, --threads          root each stack at its thread\n"
            "  -s, --subprocesses     also sample Python child processes\n"
            "  -n, --native           also each sample's C stack, merged with its Python stack\n"
            "                         (perf_event samples of registers and stack, without stopping\n"
            "                         the process; ptrace interrupts where perf_event is refused)\n"
            "      --native-all       with --native, keep the interpreter's own C frames too\n"
            "      --native-mode MODE auto (default), perf (fail if refused), ptrace (force the\n"
            "                         fallback: stops the process at each pass, at most 100 Hz)\n"
            "  -q, --quiet            no progress line on stderr\n"
            "  -h, --help             this help\n");
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

enum { OPT_NATIVE_ALL = 1000, OPT_NATIVE_MODE };

int cmd_record(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"pid", required_argument, NULL, 'p'},
        {"output", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, 'f'},
        {"rate", required_argument, NULL, 'r'},
        {"duration", required_argument, NULL, 'd'},
        {"idle", no_argument, NULL, 'i'},
        {"gil", no_argument, NULL, 'g'},
        {"threads", no_argument, NULL, 't'},
        {"subprocesses", no_argument, NULL, 's'},
        {"quiet", no_argument, NULL, 'q'},
        {"native", no_argument, NULL, 'n'},
        {"native-all", no_argument, NULL, OPT_NATIVE_ALL},
        {"native-mode", required_argument, NULL, OPT_NATIVE_MODE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    pid_t pid = 0;
    const char *output = NULL;
    const struct profile_format *format = profile_format_find("flamegraph");
    struct session_options opts = {.rate_hz = 100, .record_timeline = true};
    struct profile_write_options wopts = {0};
    bool quiet = false;
    int c;
    optind = 1;
    /* '+' stops at the first non-option, so the command's own flags are its own. */
    while ((c = getopt_long(argc, argv, "+p:o:f:r:d:igtsqnh", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (!cli_parse_pid(optarg, &pid))
                return 2;
            break;
        case 'o': output = optarg; break;
        case 'f':
            format = profile_format_find(optarg);
            if (!format) {
                fprintf(stderr, "pyscope: unknown format '%s' (%s)\n", optarg,
                        profile_format_names());
                return 2;
            }
            break;
        case 'r':
            if (!cli_parse_rate(optarg, 1e6, true, &opts.rate_hz)) {
                fprintf(stderr, "pyscope: --rate takes a number of samples per second or 'max'\n");
                return 2;
            }
            break;
        case 'd':
            if (!cli_parse_seconds(optarg, &opts.duration_s)) {
                fprintf(stderr, "pyscope: --duration takes a positive number of seconds\n");
                return 2;
            }
            break;
        case 'i': wopts.include_idle = true; break;
        case 'g': wopts.gil_only = true; break;
        case 't': wopts.thread_roots = true; break;
        case 's': opts.subprocesses = true; break;
        case 'q': quiet = true; break;
        case 'n':
        case OPT_NATIVE_ALL:
        case OPT_NATIVE_MODE:
            if (!cli_parse_native(c == 'n' ? NULL : c == OPT_NATIVE_ALL ? "native-all" : "native-mode",
                                  optarg, &opts.native_mode, &opts.native_all))
                return 2;
            break;
        case 'h': record_usage(stdout); return 0;
        default: record_usage(stderr); return 2;
        }
    }
    if (!cli_check_program(argc, argv, optind))
        return 2;
    if (optind < argc)
        opts.command = &argv[optind];
    if ((pid == 0) == (opts.command == NULL)) {
        fprintf(stderr, "pyscope: give either -p PID or -- COMMAND\n");
        record_usage(stderr);
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
