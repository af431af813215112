/* The pyscope command line: global options and dispatch to one subcommand
 * per file under src/cmd/. */
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "util/error.h"
#include "util/outfile.h"
#include "util/version.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"dump", cmd_dump, "print every thread's Python stack, GIL and GC state"},
    {"record", cmd_record, "sample a process and write a profile with per-thread GIL states"},
    {"top", cmd_top, "live view of where a process spends its time, with GIL columns"},
    {"run", cmd_run, "run a program and dump every thread's stacks if it crashes"},
    {"why", cmd_why, "explain why a process hangs: what each thread waits for, and a verdict"},
    {"watch", cmd_watch, "report a function entered again while it is still running (re-entry)"},
    {"agent", cmd_agent, "serve metrics and profiles of every Python process of the host"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: pyscope COMMAND [options]\n\n"
                 "Looks inside running CPython 3.8-3.15 processes from the outside.\n\n"
                 "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun 'pyscope COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return PYSCOPE_ERR_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("pyscope %s\n", PYSCOPE_VERSION);
        return outfile_close_stdout() == 0 ? 0 : PYSCOPE_ERR_OTHER;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            int status = commands[i].run(argc - 1, argv + 1);
            /* A report that did not reach its reader is a failure. */
            if (outfile_close_stdout() != 0 && status == 0)
                status = PYSCOPE_ERR_OTHER;
            return status;
        }
    fprintf(stderr, "pyscope: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return PYSCOPE_ERR_USAGE;
}
