/* Parsing of the option values several subcommands take (process ids,
 * sampling rates, durations, the program to run, input files), so they
 * accept and refuse the same things, with the same messages. */
#include "cmd/cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
