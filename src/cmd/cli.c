/* Parsing of the option values several subcommands take (process ids,
 * sampling rates), so they accept and refuse the same things. */
#include "cmd/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

bool cli_parse_pid(const char *text, pid_t *pid)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v <= 0 || v > 0x3fffffff)
        return false;
    *pid = (pid_t)v;
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
