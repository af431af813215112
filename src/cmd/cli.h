/* Small pieces of command-line handling that several subcommands share. */
#ifndef PYSCOPE_CMD_CLI_H
#define PYSCOPE_CMD_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/error.h"

/* A positive process id that fits pid_t, the whole text and nothing else;
 * false with a message on stderr (a usage error) for anything else. */
bool cli_parse_pid(const char *text, pid_t *pid);
/* A finite positive number of seconds (no nan, no inf). */
bool cli_parse_seconds(const char *text, double *seconds);
/* A program to run must follow "--": a stray word after the options is a
 * usage error (said on stderr), not a program. */
bool cli_check_program(int argc, char **argv, int optind);
/* An input file (a core) exists as a regular file, or does not exist; false
 * with a message on stderr for a FIFO, a directory, a device. */
bool cli_check_input_file(const char *path);
/* A sampling rate in Hz (0 < rate <= max_hz); "max" gives 0 when allowed. */
bool cli_parse_rate(const char *text, double max_hz, bool allow_max, double *rate);

/* --native (option NULL), --native-all ("all") and --native-mode MODE, as
 * record, top and run take them: *mode an enum native_mode. Says what is
 * wrong on stderr and returns false for a bad mode. */
bool cli_parse_native(const char *option, const char *value, int *mode, bool *all);

/* A duration: a number with a unit, "150ms", "2s", "0.5s", "1m", or a bare
 * number of milliseconds; 0 <= result <= max_ms, rounded to the millisecond. */
bool cli_parse_duration_ms(const char *text, long max_ms, long *ms);

/* --color: "always" 1, "never" 0, "auto" -1 (decided later by isatty);
 * false, with a message on stderr, for anything else. */
bool cli_parse_color(const char *text, int *color);

/* The core file --core ARG means: ARG itself, or for "latest" and a
 * process id the file chosen in systemd-coredump's store, which is then
 * named on stderr. Returns 0, or -1 with err set. */
int cli_core_path(const char *arg, char *out, size_t outsize, struct pyscope_error *err);

struct target;
/* A core whose Python binary is missing gives "not Python" or, with only
 * its name to go by, "unsupported version": says instead which mapped files
 * were missing and the options that supply them (when some were). */
void cli_explain_core_failure(struct target *t, struct pyscope_error *err);

#endif
