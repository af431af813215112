/* pyscope run [options] -- PROGRAM: the command line; the engine is src/run/. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "output/profile_formats.h"
#include "run/run.h"
#include "target/signals.h"
#include "util/error.h"
#include "util/outfile.h"

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
            "      --dump-on SIGNAL\n"
            "                      also write it whenever the program receives SIGNAL (e.g.\n"
            "                      SIGUSR2, sent to the program or to pyscope); the program\n"
            "                      does not see that signal\n"
            "  -h, --help          this help\n",
            profile_format_names());
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
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *core_dir = NULL, *output = NULL, *report_path = NULL;
    bool json = false, native = true;
    uint64_t window_ns = 0;
    double rate_hz = 100;
    const struct profile_format *format = profile_format_find("chrome");
    int dump_signal = 0;
    bool format_given = false, rate_given = false;
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
