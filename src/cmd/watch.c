/* pyscope watch --reentry FUNC (-p PID | -- PROGRAM): the command line; the
 * engine is src/watch/. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/commands.h"
#include "util/error.h"
#include "util/outfile.h"
#include "watch/watch.h"

static bool parse_uint(const char *text, unsigned long max, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno || *end || !text[0] || text[0] == '-' || v == 0 || v > max)
        return false;
    *out = v;
    return true;
}

static int take_func(const char *arg, void *value)
{
    struct watch_options *o = value;
    if (o->n_funcs >= WATCH_MAX_FUNCS || !watch_func_valid(arg)) {
        fprintf(stderr, "pyscope: --reentry %s: expected [FILE:]QUALNAME or a C symbol "
                        "(at most %d)\n", arg, WATCH_MAX_FUNCS);
        return PYSCOPE_ERR_USAGE;
    }
    o->funcs[o->n_funcs++] = arg;
    return 0;
}

static int take_max_hits(const char *arg, void *value)
{
    unsigned long v;
    if (!parse_uint(arg, 1000000000, &v)) {
        fprintf(stderr, "pyscope: --max-hits %s: expected a positive number\n", arg);
        return PYSCOPE_ERR_USAGE;
    }
    *(unsigned *)value = (unsigned)v;
    return 0;
}

int cmd_watch(int argc, char **argv)
{
    struct watch_options o = {.max_hits = 1, .out = stdout};
    struct outfile out_file = {.fd = -1};
    struct pyscope_error out_err = {0};
    const char *output = NULL;
    bool max_given = false;
    int status = 0;
    const struct cli_option options[] = {
        CLI_OPT('r', "reentry", "FUNC", "the function to watch (repeatable)", CLI_CALL, &o,
                .call = take_func),
        CLI_OPT('p', "pid", "PID", "watch a running process", CLI_PID, &o.pid),
        CLI_OPT(0, "all", NULL, "report every re-entry, not only the first", CLI_FLAG, &o.all),
        CLI_OPT(0, "max-hits", "N", "stop after N reports (implies --all)", CLI_CALL, &o.max_hits,
                .call = take_max_hits, .given = &max_given),
        CLI_OPT(0, "stop", NULL, "leave the process stopped (all threads) at the reported\n"
                "re-entry, for gdb or pyscope dump; resume: kill -CONT PID", CLI_FLAG, &o.stop),
        CLI_OPT(0, "core", "FILE", "write a core file at each reported re-entry (FILE, then\n"
                "FILE.2, ...); read it with pyscope dump --core FILE", CLI_STRING, &o.core_path),
        CLI_OPT(0, "exact", NULL, "3.11+: also catch re-entry by plain Python-to-Python\n"
                "recursion (traps every call of FUNC; slower)", CLI_FLAG, &o.exact),
        CLI_OPT('l', "locals", NULL, "show the locals of the re-entering thread", CLI_FLAG,
                &o.locals),
        CLI_OPT(0, "native-all", NULL, "keep the interpreter's own C frames everywhere", CLI_FLAG,
                &o.native_all),
        CLI_OPT('o', "output", "FILE", "write the reports to FILE instead of stdout", CLI_STRING,
                &output),
        CLI_OPT('j', "json", NULL, "one JSON object per report and line (docs/watch.md)",
                CLI_FLAG, &o.json),
        CLI_OPT('v', "verbose", NULL, "count the traps pyscope handled, at the end", CLI_FLAG,
                &o.verbose),
        CLI_HELP_OPTION,
        {0},
    };
    const struct cli_command cmd = {
        .usage =
            "usage: pyscope watch --reentry FUNC [--reentry FUNC]... [options] -p PID\n"
            "       pyscope watch --reentry FUNC [--reentry FUNC]... [options] -- PROGRAM [ARGS...]\n"
            "\n"
            "Reports when a thread enters FUNC while an earlier activation of FUNC is\n"
            "still on that thread's stack (e.g. re-entered from a finalizer run by the\n"
            "garbage collector), with every thread's C and Python stack at that moment\n"
            "and the frames between the two activations marked.\n"
            "\n"
            "FUNC is a Python function, [FILE:]QUALNAME (pool.py:Pool.release, or\n"
            "Pool.release, or release, which matches every function whose qualified name\n"
            "is release or ends with .release, nested ones too), or a native function by\n"
            "symbol (pool_release). Prefix py: or native: to say which; a plain name is\n"
            "looked for as both (but never in the C library or the dynamic linker).\n"
            "With -- PROGRAM, FUNC is watched from the program's first instruction; a\n"
            "FUNC never found is said so at the end (exit status 1 if the program's was 0).\n"
            "\n",
        .options = options,
        .help_column = 23,
        .epilogue = "\nCtrl-C stops watching; the process keeps running without any breakpoint.\n",
        .stop_at_program = true,
    };
    int parsed = cli_parse(&cmd, argc, argv);
    if (parsed != CLI_CONTINUE)
        return parsed;
    if (o.all && !max_given)
        o.max_hits = UINT32_MAX;
    if (!cli_check_program(argc, argv, optind))
        return PYSCOPE_ERR_USAGE;
    o.program = optind < argc ? argv + optind : NULL;
    if (o.n_funcs == 0 || (o.pid == 0) == (o.program == NULL)) {
        fprintf(stderr, "pyscope: watch needs --reentry FUNC and either -p PID or -- PROGRAM\n\n");
        cli_usage(&cmd, stderr);
        return PYSCOPE_ERR_USAGE;
    }
    if (o.stop && o.max_hits > 1 && max_given)
        fprintf(stderr, "pyscope: note: --stop ends the watch at the first report\n");
    if (o.core_path && outfile_check(o.core_path, OUTFILE_REPLACE, &out_err) != 0)
        return error_report(&out_err);
    if (output && outfile_open(&out_file, output, OUTFILE_STREAM, 0666, &out_err) != 0) {
        out_err.status = PYSCOPE_ERR_USAGE;
        return error_report(&out_err);
    }
    if (output) {
        o.out = out_file.fp;
        o.out_is_file = true;
    }
    status = watch_run(&o);
    if (out_file.fp && outfile_close(&out_file, &out_err) != 0 && status == 0)
        status = error_report(&out_err);
    return status;
}
