/* pyscope run [options] -- PROGRAM: the command line; the engine is src/run/. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/commands.h"
#include "output/profile_formats.h"
#include "run/run.h"
#include "target/signals.h"
#include "util/error.h"
#include "util/outfile.h"

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

static int take_window(const char *arg, void *value)
{
    if (!(*(uint64_t *)value = parse_duration(arg))) {
        fprintf(stderr, "pyscope: --record-last takes a duration such as 30s, 500ms or 2m\n");
        return PYSCOPE_ERR_USAGE;
    }
    return 0;
}

static int take_dump_signal(const char *arg, void *value)
{
    int sig = signal_from_name(arg);
    if (!sig || sig == SIGKILL || sig == SIGSTOP || sig == SIGTRAP || sig == SIGCHLD ||
        signal_is_crash(sig)) {
        fprintf(stderr, "pyscope: --dump-on takes a signal the program can be sent without "
                        "harm, e.g. SIGUSR2\n");
        return PYSCOPE_ERR_USAGE;
    }
    *(int *)value = sig;
    return 0;
}

int cmd_run(int argc, char **argv)
{
    const char *core_dir = NULL, *output = NULL, *report_path = NULL, *format_name = "chrome";
    bool json = false, native = true;
    uint64_t window_ns = 0;
    double rate_hz = 100;
    int dump_signal = 0;
    bool format_given = false, rate_given = false;
    const struct cli_option options[] = {
        CLI_OPT(0, "core-dir", "DIR", "also write a core file DIR/core.PID at the crash\n"
                "(read it with: pyscope dump --core DIR/core.PID)", CLI_STRING, &core_dir),
        CLI_OPT('o', "output", "FILE", "write the crash report to FILE instead of stderr\n"
                "(with --record-last: where the recording goes)", CLI_STRING, &output),
        CLI_OPT(0, "report", "FILE", "write the crash report to FILE", CLI_STRING, &report_path),
        CLI_OPT('j', "json", NULL, "write the crash report as JSON (docs/json.md)", CLI_FLAG,
                &json),
        CLI_OPT(0, "no-native", NULL, "leave out the C frames", CLI_CLEAR, &native),
        CLI_LINE("\nFlight recorder (docs/flight.md):"),
        CLI_OPT(0, "record-last", "DURATION",
                "keep sampling every thread's stack and GIL state, keep\n"
                "the last DURATION (e.g. 30s, 500ms, 2m), and write it\n"
                "when the program crashes, raises an uncaught exception\n"
                "(whose traceback is printed with each frame's locals),\n"
                "exits with a non-zero status or is killed by a signal", CLI_CALL, &window_ns,
                .call = take_window),
        CLI_OPT('f', "format", "FORMAT",
                "chrome (default), %s;\nwithout -f, the extension of -o chooses (x.svg, x.pb.gz)",
                CLI_CALL, &format_name,
                .call = cli_take_format, .given = &format_given,
                .help_value = profile_format_names),
        CLI_OPT('r', "rate", "HZ", "samples per second (default 100)", CLI_RATE, &rate_hz,
                .given = &rate_given),
        CLI_OPT(0, "dump-on", "SIGNAL",
                "also write it whenever the program receives SIGNAL (e.g.\n"
                "SIGUSR2, sent to the program or to pyscope); the program\n"
                "does not see that signal", CLI_CALL, &dump_signal, .call = take_dump_signal),
        CLI_HELP_OPTION,
        {0},
    };
    const struct cli_command cmd = {
        .usage = "usage: pyscope run [options] -- PROGRAM [ARGS...]\n"
                 "\n"
                 "Runs PROGRAM (e.g. python app.py) and watches it with ptrace. It runs at full\n"
                 "speed and is stopped only when a signal arrives for it. If it receives\n"
                 "SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT, pyscope prints the stacks of\n"
                 "every thread (C and Python frames, and the crashing thread's locals) before\n"
                 "the signal takes effect. pyscope exits with the program's status (128+N when\n"
                 "a signal N killed it). Ctrl-C and other signals reach the program as usual.\n"
                 "\n",
        .options = options,
        .help_column = 22,
        .stop_at_program = true,
    };
    int parsed = cli_parse(&cmd, argc, argv);
    if (parsed != CLI_CONTINUE)
        return parsed;
    const struct profile_format *format =
        !format_given && output && profile_format_for_path(output) ? profile_format_for_path(output)
                                                                   : profile_format_find(format_name);
    if (optind >= argc) {
        cli_usage(&cmd, stderr);
        return PYSCOPE_ERR_USAGE;
    }
    if (core_dir && access(core_dir, W_OK) != 0) {
        fprintf(stderr, "pyscope: --core-dir %s: %s\n", core_dir, strerror(errno));
        return PYSCOPE_ERR_USAGE;
    }
    bool recording = window_ns != 0;
    if (!recording && (dump_signal || format_given || rate_given)) {
        fprintf(stderr, "pyscope: --format, --rate and --dump-on go with --record-last\n");
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

    struct run_options o = {
        .program = argv + optind, .core_dir = core_dir, .report_path = report_path,
        .json = json, .native = native, .window_ns = window_ns, .rate_hz = rate_hz,
        .format = format, .recording_path = recording ? output : NULL,
        .dump_signal = dump_signal,
    };
    return run_program(&o);
}
