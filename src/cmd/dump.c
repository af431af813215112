/* pyscope dump: every thread's Python stack, GIL and GC state from a live
 * process, by default without stopping it (--pause stops it briefly). */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "output/stack_report.h"
#include "python/runtime.h"
#include "python/stacks.h"
#include "python/waits.h"
#include "target/pause.h"
#include "target/process.h"

static void dump_usage(FILE *out)
{
    fprintf(out,
            "usage: pyscope dump [options] PID\n"
            "\n"
            "Prints every thread's Python stack, who holds the GIL, who waits for it,\n"
            "and whether the garbage collector is running. The process is not stopped.\n"
            "\n"
            "  -j, --json       machine-readable output (schema: docs/json.md)\n"
            "  -p, --pause      stop all threads while reading, for an exact snapshot\n"
            "      --color=WHEN always, never or auto (default: auto, on a terminal)\n"
            "  -h, --help       this help\n");
}

static bool parse_pid(const char *text, pid_t *pid)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || v <= 0 || v > 0x3fffffff)
        return false;
    *pid = (pid_t)v;
    return true;
}

int cmd_dump(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"pause", no_argument, NULL, 'p'},
        {"color", required_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, pause = false;
    int color = -1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jph", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'p': pause = true; break;
        case 'C':
            if (strcmp(optarg, "always") == 0)
                color = 1;
            else if (strcmp(optarg, "never") == 0)
                color = 0;
            else if (strcmp(optarg, "auto") == 0)
                color = -1;
            else {
                fprintf(stderr, "pyscope: --color takes always, never or auto\n");
                return PYSCOPE_ERR_USAGE;
            }
            break;
        case 'h': dump_usage(stdout); return 0;
        default: dump_usage(stderr); return PYSCOPE_ERR_USAGE;
        }
    }
    pid_t pid;
    if (optind != argc - 1 || !parse_pid(argv[optind], &pid)) {
        if (optind < argc)
            fprintf(stderr, "pyscope: invalid process id '%s'\n", argv[optind]);
        dump_usage(stderr);
        return PYSCOPE_ERR_USAGE;
    }
    if (color < 0)
        color = !json && isatty(STDOUT_FILENO) && getenv("NO_COLOR") == NULL;

    struct pyscope_error err = {0};
    struct target *t = process_open(pid, &err);
    if (!t)
        return error_report(&err);
    target_cache_enable(t);

    struct stack_report report = {0};
    struct py_runtime rt;
    int status = 0;
    if (py_runtime_find(t, &rt, &err) != 0)
        goto fail;
    if (pause && process_pause(pid, &err) != 0)
        goto fail;

    report.pid = pid;
    report.paused = pause;
    process_cmdline(pid, report.command, sizeof report.command);
    process_exe(pid, report.executable, sizeof report.executable);
    snprintf(report.python_version, sizeof report.python_version, "%s", rt.version);
    struct stacks_raw raw = {0};
    struct stacks_options opts = {.paused = pause, .max_retries = 3, .raw = &raw};
    int rc = stacks_collect(&rt, &opts, &report, &err);
    /* The waits are read while the threads are still stopped, so that they
     * describe the same instant as the stacks. */
    if (rc == 0) {
        struct waits_ctx *waits = waits_new(&rt);
        if (!waits || waits_analyze(waits, &report, &raw) != 0) {
            error_set(&err, PYSCOPE_ERR_OTHER, "out of memory");
            rc = -1;
        }
        waits_free(waits);
    }
    stacks_raw_free(&raw);
    if (pause)
        process_resume();
    if (rc != 0)
        goto fail;
    /* A target that died while we read leaves partial, meaningless stacks. */
    if (process_gone(pid)) {
        error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the dump", (int)pid);
        goto fail;
    }
    if (json)
        stack_report_write_json(stdout, &report);
    else
        stack_report_write_text(stdout, &report, color);
    fflush(stdout);
    stack_report_free(&report);
    target_close(t);
    return 0;
fail:
    if (pause)
        process_resume();
    if (err.status != PYSCOPE_ERR_EXITED && err.status != PYSCOPE_ERR_NO_PROCESS &&
        process_gone(pid))
        error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the dump", (int)pid);
    status = error_report(&err);
    stack_report_free(&report);
    target_close(t);
    return status;
}
