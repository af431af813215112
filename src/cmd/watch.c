/* pyscope watch --reentry FUNC (-p PID | -- PROGRAM): the command line; the
 * engine is src/watch/. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd/cli.h"
#include "cmd/commands.h"
#include "util/error.h"
#include "util/outfile.h"
#include "watch/watch.h"

static void watch_usage(FILE *out)
{
    fprintf(out,
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
            "\n"
            "  -r, --reentry FUNC   the function to watch (repeatable)\n"
            "  -p, --pid PID        watch a running process\n"
            "      --all            report every re-entry, not only the first\n"
            "      --max-hits N     stop after N reports (implies --all)\n"
            "      --stop           leave the process stopped (all threads) at the reported\n"
            "                       re-entry, for gdb or pyscope dump; resume: kill -CONT PID\n"
            "      --core FILE      write a core file at each reported re-entry (FILE, then\n"
            "                       FILE.2, ...); read it with pyscope dump --core FILE\n"
            "      --exact          3.11+: also catch re-entry by plain Python-to-Python\n"
            "                       recursion (traps every call of FUNC; slower)\n"
            "  -l, --locals         show the locals of the re-entering thread\n"
            "      --native-all     keep the interpreter's own C frames everywhere\n"
            "  -o, --output FILE    write the reports to FILE instead of stdout\n"
            "  -j, --json           one JSON object per report and line (docs/watch.md)\n"
            "  -v, --verbose        count the traps pyscope handled, at the end\n"
            "  -h, --help           this help\n"
            "\n"
            "Ctrl-C stops watching; the process keeps running without any breakpoint.\n");
}

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

int cmd_watch(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"reentry", required_argument, NULL, 'r'},
        {"pid", required_argument, NULL, 'p'},
        {"all", no_argument, NULL, 'A'},
        {"max-hits", required_argument, NULL, 'm'},
        {"stop", no_argument, NULL, 'S'},
        {"core", required_argument, NULL, 'c'},
        {"exact", no_argument, NULL, 'E'},
        {"locals", no_argument, NULL, 'l'},
        {"native-all", no_argument, NULL, 'N'},
        {"output", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'j'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct watch_options o = {.max_hits = 1, .out = stdout};
    struct outfile out_file = {.fd = -1};
    struct pyscope_error out_err = {0};
    const char *output = NULL;
    bool max_given = false;
    int c, status = 0;
    unsigned long v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+r:p:lo:jvh", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (o.n_funcs >= WATCH_MAX_FUNCS || !watch_func_valid(optarg)) {
                fprintf(stderr, "pyscope: --reentry %s: expected [FILE:]QUALNAME or a C symbol "
                                "(at most %d)\n", optarg, WATCH_MAX_FUNCS);
                return PYSCOPE_ERR_USAGE;
            }
            o.funcs[o.n_funcs++] = optarg;
            break;
        case 'p':
            if (!cli_parse_pid(optarg, &o.pid))
                return PYSCOPE_ERR_USAGE;
            break;
        case 'A': o.all = true; break;
        case 'm':
            if (!parse_uint(optarg, 1000000000, &v)) {
                fprintf(stderr, "pyscope: --max-hits %s: expected a positive number\n", optarg);
                return PYSCOPE_ERR_USAGE;
            }
            o.max_hits = (unsigned)v;
            max_given = true;
            break;
        case 'S': o.stop = true; break;
        case 'c': o.core_path = optarg; break;
        case 'E': o.exact = true; break;
        case 'l': o.locals = true; break;
        case 'N': o.native_all = true; break;
        case 'o': output = optarg; break;
        case 'j': o.json = true; break;
        case 'v': o.verbose = true; break;
        case 'h': watch_usage(stdout); return 0;
        default: watch_usage(stderr); return PYSCOPE_ERR_USAGE;
        }
    }
    if (o.all && !max_given)
        o.max_hits = UINT32_MAX;
    if (!cli_check_program(argc, argv, optind))
        return PYSCOPE_ERR_USAGE;
    o.program = optind < argc ? argv + optind : NULL;
    if (o.n_funcs == 0 || (o.pid == 0) == (o.program == NULL)) {
        fprintf(stderr, "pyscope: watch needs --reentry FUNC and either -p PID or -- PROGRAM\n\n");
        watch_usage(stderr);
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
