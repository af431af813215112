/* The option tables' parser and usage text, and the parsing of the option
 * values several subcommands take (process ids, sampling rates, durations,
 * the program to run, input files), so that they accept and refuse the
 * same things, with the same messages. */
#include "cmd/cli.h"

#include "native/native_sampler.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "output/profile_formats.h"
#include "target/core.h"
#include "target/coredump_store.h"

bool cli_parse_pid(const char *text, pid_t *pid)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || (v <= 0 && !errno)) {
        fprintf(stderr, "pyscope: invalid process id '%s'\n", text);
        return false;
    }
    /* Any pid_t may name a process (pid_max can be raised to 2^22, and a
     * number that names none is "no such process"); beyond it, none can. */
    if (errno || v > INT_MAX) {
        fprintf(stderr, "pyscope: process id %s is out of range (1 to %d)\n", text, INT_MAX);
        return false;
    }
    *pid = (pid_t)v;
    return true;
}

bool cli_parse_seconds(const char *text, double *seconds)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !isfinite(v) || !(v > 0))
        return false;
    *seconds = v;
    return true;
}

bool cli_check_program(int argc, char **argv, int optind)
{
    if (optind >= argc || strcmp(argv[optind - 1], "--") == 0)
        return true;
    fprintf(stderr, "pyscope: unexpected argument '%s' (a program to run goes after --)\n",
            argv[optind]);
    return false;
}

bool cli_check_input_file(const char *path)
{
    struct stat st;
    /* A FIFO would block the open; a directory or device is no core. What
     * does not exist is left to the reader, which says so. */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "pyscope: %s is not a regular file\n", path);
        return false;
    }
    return true;
}

bool cli_parse_native(bool native, bool all, const char *mode_text, int *mode, bool *all_out)
{
    *mode = NATIVE_OFF;
    *all_out = all;
    if (mode_text) {
        enum native_mode m;
        if (!native_mode_parse(mode_text, &m)) {
            fprintf(stderr, "pyscope: --native-mode takes auto, perf or ptrace\n");
            return false;
        }
        *mode = (int)m;
    } else if (native || all) {
        *mode = NATIVE_AUTO;
    }
    return true;
}

bool cli_parse_rate(const char *text, double max_hz, bool allow_max, double *rate)
{
    if (allow_max && strcmp(text, "max") == 0) {
        *rate = 0;
        return true;
    }
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v > 0) || v > max_hz)
        return false;
    *rate = v;
    return true;
}

bool cli_parse_color(const char *text, int *color)
{
    if (strcmp(text, "always") == 0)
        *color = 1;
    else if (strcmp(text, "never") == 0)
        *color = 0;
    else if (strcmp(text, "auto") == 0)
        *color = -1;
    else {
        fprintf(stderr, "pyscope: --color takes always, never or auto\n");
        return false;
    }
    return true;
}

bool cli_parse_duration_ms(const char *text, long max_ms, long *ms)
{
    static const struct {
        const char *unit;
        double ms;
    } units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}};
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || !(v >= 0) || text[0] == '-' || text[0] == '+')
        return false;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].unit) != 0)
            continue;
        double total = v * units[i].ms;
        if (total > (double)max_ms)
            return false;
        *ms = (long)(total + 0.5);
        return true;
    }
    return false;
}

int cli_core_path(const char *arg, char *out, size_t outsize, struct pyscope_error *err)
{
    if (!coredump_store_request(arg)) {
        snprintf(out, outsize, "%s", arg);
        return 0;
    }
    struct coredump_entry e;
    pid_t pid = strcmp(arg, "latest") == 0 ? 0 : (pid_t)atol(arg);
    if (coredump_store_find(pid, &e, err) != 0) {
        if (err->status != PYSCOPE_ERR_NO_PROCESS || coredump_store_extract(pid, out, outsize, err))
            return -1;
        fprintf(stderr, "pyscope: --core %s: the core coredumpctl extracted, in %s\n", arg, out);
        return 0;
    }
    char when[64] = "at an unknown time";
    time_t secs = (time_t)(e.usec / 1000000);
    struct tm tm;
    if (gmtime_r(&secs, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    char more[64] = "";
    if (e.matches > 1)
        snprintf(more, sizeof more, "; the newest of %u %s", e.matches,
                 strcmp(arg, "latest") == 0 ? "cores" : "cores of that PID");
    fprintf(stderr, "pyscope: --core %s: %s (%s, PID %d, UID %u, taken %s%s)\n", arg, e.path,
            e.comm, (int)e.pid, (unsigned)e.uid, when, more);
    snprintf(out, outsize, "%s", e.path);
    return 0;
}

void cli_explain_core_failure(struct target *t, struct pyscope_error *err)
{
    if (err->status != PYSCOPE_ERR_NOT_PYTHON && err->status != PYSCOPE_ERR_UNSUPPORTED)
        return;
    const char *missing[8];
    size_t n = core_missing_files(t, missing, 8);
    if (n == 0)
        return;
    char list[sizeof err->hint / 2] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && i < 8; i++) {
        char build_id[129];
        core_mapped_build_id(t, missing[i], build_id, sizeof build_id);
        used += (size_t)snprintf(list + used, used < sizeof list ? sizeof list - used : 0,
                                 "  %s%s%s%s\n", missing[i], build_id[0] ? " (build-id " : "",
                                 build_id, build_id[0] ? ")" : "");
    }
    const struct core_info *info = core_get_info(t);
    error_set(err, PYSCOPE_ERR_NOT_PYTHON,
              "cannot find CPython in core of process %d: %zu file%s it had mapped %s missing",
              (int)info->pid, n, n == 1 ? "" : "s", n == 1 ? "is" : "are");
    error_hint(err,
               "missing:\n%s"
               "Pass a copy of the root they were mapped from (the other machine's or the\n"
               "container's) with --sysroot DIR, files named by build-id with --debug-dir DIR\n"
               "(DIR/.build-id/xx/yyyy), the executable with --exe PATH (the core records %s)\n"
               "or a directory holding the libraries with --lib-path DIR.",
               list, info->exe[0] ? info->exe : "no executable path");
}

int cli_take_format(const char *arg, void *value)
{
    if (!profile_format_find(arg)) {
        fprintf(stderr, "pyscope: unknown format '%s' (%s)\n", arg, profile_format_names());
        return PYSCOPE_ERR_USAGE;
    }
    *(const char **)value = arg;
    return 0;
}

int cli_take_color(const char *arg, void *value)
{
    return cli_parse_color(arg, value) ? 0 : PYSCOPE_ERR_USAGE;
}

int cli_take_loop_threshold(const char *arg, void *value)
{
    if (!cli_parse_duration_ms(arg, 60000, value) || *(long *)value < 1) {
        fprintf(stderr, "pyscope: --loop-threshold takes a duration such as 100ms or 2s (a "
                        "bare number is milliseconds), from 1 ms to 60 s\n");
        return PYSCOPE_ERR_USAGE;
    }
    return 0;
}

/* ---- option tables ---- */

#define CLI_MAX_OPTIONS 64
#define CLI_LONG_ONLY 256          /* getopt's value for options[i] without a short name */

static bool is_end(const struct cli_option *o)
{
    return !o->long_name && !o->help;
}

static void pad(FILE *out, int n)
{
    for (int i = 0; i < n; i++)
        fputc(' ', out);
}

/* Prints text's lines, the first after `used` columns, each at column col. */
static void help_lines(FILE *out, const char *text, int used, int col)
{
    for (bool first = true;; first = false) {
        const char *nl = strchr(text, '\n');
        int len = nl ? (int)(nl - text) : (int)strlen(text);
        pad(out, first ? col - used : col);
        fprintf(out, "%.*s\n", len, text);
        if (!nl)
            return;
        text = nl + 1;
    }
}

void cli_usage(const struct cli_command *cmd, FILE *out)
{
    fputs(cmd->usage, out);
    for (const struct cli_option *o = cmd->options; !is_end(o); o++) {
        if (o->kind == CLI_TEXT) {
            fprintf(out, "%s\n", o->help);
            continue;
        }
        char left[128];
        int used = snprintf(left, sizeof left, "  %c%c%s--%s%s%s", o->short_name ? '-' : ' ',
                            o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ",
                            o->long_name, o->arg && o->arg[0] != '=' ? " " : "",
                            o->arg ? o->arg : "");
        fputs(left, out);
        char help[1024];
        const char *text = o->help;
        if (o->help_value) {
            snprintf(help, sizeof help, o->help, o->help_value());
            text = help;
        }
        /* A name too long for the column puts the help on the next line. */
        if (used >= cmd->help_column) {
            fputc('\n', out);
            used = 0;
        }
        help_lines(out, text, used, cmd->help_column);
    }
    if (cmd->epilogue)
        fputs(cmd->epilogue, out);
}

static int refuse(const struct cli_option *o, const char *fallback)
{
    fprintf(stderr, "pyscope: %s\n", o->error ? o->error : fallback);
    return PYSCOPE_ERR_USAGE;
}

/* Checks and stores one option's value: CLI_CONTINUE or an exit status. */
static int take(const struct cli_command *cmd, const struct cli_option *o, const char *arg)
{
    if (o->given)
        *o->given = true;
    switch (o->kind) {
    case CLI_FLAG: *(bool *)o->value = true; break;
    case CLI_CLEAR: *(bool *)o->value = false; break;
    case CLI_STRING: *(const char **)o->value = arg; break;
    case CLI_PID:
        if (!cli_parse_pid(arg, o->value))
            return PYSCOPE_ERR_USAGE;
        break;
    case CLI_RATE:
    case CLI_RATE_OR_MAX: {
        bool max = o->kind == CLI_RATE_OR_MAX;
        if (!cli_parse_rate(arg, CLI_MAX_RATE_HZ, max, o->value))
            return refuse(o, max ? "--rate takes a number of samples per second, up to 100000, "
                                   "or 'max'"
                                 : "--rate takes a number of samples per second, up to 100000");
        break;
    }
    case CLI_SECONDS:
        if (!cli_parse_seconds(arg, o->value))
            return refuse(o, "expected a positive number of seconds");
        break;
    case CLI_CALL: {
        int status = o->call(arg, o->value);
        if (status != 0)
            return status;
        break;
    }
    case CLI_HELP: cli_usage(cmd, stdout); return 0;
    case CLI_TEXT: break;
    }
    return CLI_CONTINUE;
}

int cli_parse(const struct cli_command *cmd, int argc, char **argv)
{
    struct option longopts[CLI_MAX_OPTIONS + 1];
    char shorts[2 * CLI_MAX_OPTIONS + 2];
    int n_long = 0;
    size_t n_short = 0;
    if (cmd->stop_at_program)
        shorts[n_short++] = '+';
    for (int i = 0; !is_end(&cmd->options[i]) && n_long < CLI_MAX_OPTIONS; i++) {
        const struct cli_option *o = &cmd->options[i];
        if (o->kind == CLI_TEXT || o->usage_only)
            continue;
        int val = o->short_name ? o->short_name : CLI_LONG_ONLY + i;
        longopts[n_long++] = (struct option){o->long_name, o->arg ? required_argument : no_argument,
                                             NULL, val};
        if (o->short_name) {
            shorts[n_short++] = o->short_name;
            if (o->arg)
                shorts[n_short++] = ':';
        }
    }
    longopts[n_long] = (struct option){NULL, 0, NULL, 0};
    shorts[n_short] = '\0';
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        const struct cli_option *o = NULL;
        if (c >= CLI_LONG_ONLY)
            o = &cmd->options[c - CLI_LONG_ONLY];
        for (int i = 0; !o && c != '?' && !is_end(&cmd->options[i]); i++)
            if (cmd->options[i].kind != CLI_TEXT && !cmd->options[i].usage_only &&
                cmd->options[i].short_name == c)
                o = &cmd->options[i];
        if (!o) {
            cli_usage(cmd, stderr);
            return PYSCOPE_ERR_USAGE;
        }
        int status = take(cmd, o, optarg);
        if (status != CLI_CONTINUE)
            return status;
    }
    return CLI_CONTINUE;
}
