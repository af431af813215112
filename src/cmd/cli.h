/* Command-line handling the subcommands share: each command describes its
 * options once, in a table (struct cli_command), from which come the
 * parser, the checks of each value and the usage text; and the parsers of
 * the values several commands take. */
#ifndef PYSCOPE_CMD_CLI_H
#define PYSCOPE_CMD_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
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
/* The one rule for --rate of record, top and run. */
#define CLI_MAX_RATE_HZ 100000

/* --native, --native-all and --native-mode MODE (NULL when not given), as
 * record and top take them, into *mode (an enum native_mode; NATIVE_OFF
 * without any) and *all_out. Says what is wrong on stderr and returns false
 * for a bad mode. */
bool cli_parse_native(bool native, bool all, const char *mode_text, int *mode, bool *all_out);

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

/* ---- option tables ---- */

enum cli_kind {
    CLI_FLAG,        /* bool *value = true */
    CLI_CLEAR,       /* bool *value = false */
    CLI_STRING,      /* const char **value = the argument */
    CLI_PID,         /* pid_t *value (cli_parse_pid) */
    CLI_RATE,        /* double *value: 0 < HZ <= CLI_MAX_RATE_HZ */
    CLI_RATE_OR_MAX, /* ... or "max" (0: as fast as it can) */
    CLI_SECONDS,     /* double *value: a positive number of seconds */
    CLI_CALL,        /* call(argument, value) checks and stores it */
    CLI_HELP,        /* prints the usage to stdout and ends the command */
    CLI_TEXT,        /* no option: a line of the usage text (help, verbatim) */
};

struct cli_option {
    char short_name;           /* 0: none */
    const char *long_name;
    /* The argument's name in the usage ("PID"; "=WHEN" is shown glued to
     * the option); NULL: the option takes none. */
    const char *arg;
    /* The usage text: lines separated by '\n', laid out in the command's
     * help column. With help_value, a format whose one %s it fills. */
    const char *help;
    enum cli_kind kind;
    void *value;
    /* CLI_CALL: 0, or the exit status after saying what is wrong. */
    int (*call)(const char *arg, void *value);
    /* What is said when a value is refused (CLI_SECONDS, CLI_RATE*). */
    const char *error;
    bool *given;               /* set when the option is given */
    const char *(*help_value)(void);
    /* In the usage only: taken before the table is parsed (tree.c's -s). */
    bool usage_only;
};

/* One table row: CLI_OPT('p', "pid", "PID", "help", CLI_PID, &pid) and,
 * after the value, the optional fields (.call = ..., .error = ...). */
#define CLI_OPT(short_, long_, arg_, help_, kind_, value_, ...)                               \
    {.short_name = (short_), .long_name = (long_), .arg = (arg_), .help = (help_),              \
     .kind = (kind_), .value = (value_), __VA_ARGS__}
/* -h, --help, as every command has it. */
#define CLI_HELP_OPTION CLI_OPT('h', "help", NULL, "this help", CLI_HELP, NULL)
/* A line of text among the options. */
#define CLI_LINE(text_) {.help = (text_), .kind = CLI_TEXT}

struct cli_command {
    const char *usage;         /* the synopsis and description, printed first */
    const struct cli_option *options;   /* ends with an entry without long_name or help */
    int help_column;
    const char *epilogue;      /* printed after the options, or NULL */
    /* Options end at the first word that is not one ("-- PROGRAM"). */
    bool stop_at_program;
};

/* CLI_CALL takers shared by several commands: a profile format's name
 * (const char *), --color (int, as cli_parse_color). */
int cli_take_format(const char *arg, void *value);
int cli_take_color(const char *arg, void *value);
/* --loop-threshold: how long a loop thread must stay in one callback or task
 * step, outside its selector, to count as blocking its loop (why's
 * loop_blocked, record's episodes): a duration (long milliseconds, 1 ms to
 * 60 s). */
int cli_take_loop_threshold(const char *arg, void *value);

/* The status cli_parse returns when the command goes on. */
#define CLI_CONTINUE (-1)

/* Parses argv[1..] with the table; optind is then the first word after
 * the options. CLI_CONTINUE, or the exit status when the command is done
 * (--help: 0; a refused option: the usage error, said on stderr). */
int cli_parse(const struct cli_command *cmd, int argc, char **argv);
void cli_usage(const struct cli_command *cmd, FILE *out);

struct target;
/* A core whose Python binary is missing gives "not Python" or, with only
 * its name to go by, "unsupported version": says instead which mapped files
 * were missing and the options that supply them (when some were). */
void cli_explain_core_failure(struct target *t, struct pyscope_error *err);

#endif
