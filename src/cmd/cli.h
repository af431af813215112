/* Small pieces of command-line handling that several subcommands share. */
#ifndef PYSCOPE_CMD_CLI_H
#define PYSCOPE_CMD_CLI_H

#include <stdbool.h>
#include <sys/types.h>

/* A positive process id, the whole text and nothing else. */
bool cli_parse_pid(const char *text, pid_t *pid);
/* A sampling rate in Hz (0 < rate <= max_hz); "max" gives 0 when allowed. */
bool cli_parse_rate(const char *text, double max_hz, bool allow_max, double *rate);

/* A duration: a number with a unit, "150ms", "2s", "0.5s", "1m", or a bare
 * number of milliseconds; 0 <= result <= max_ms, rounded to the millisecond. */
bool cli_parse_duration_ms(const char *text, long max_ms, long *ms);

/* --color: "always" 1, "never" 0, "auto" -1 (decided later by isatty);
 * false, with a message on stderr, for anything else. */
bool cli_parse_color(const char *text, int *color);

#endif
