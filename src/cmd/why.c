/* pyscope why: hang and deadlock diagnosis of a live process. Two snapshots
 * a moment apart (--interval) tell a stuck process from a busy one; the
 * first snapshot's waits explain what each thread is stuck on. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/commands.h"
#include "cmd/tree.h"
#include "output/why_report.h"
#include "python/hang.h"
#include "python/runtime.h"
#include "python/stacks.h"
#include "python/waits.h"
#include "target/process.h"

#define DEFAULT_INTERVAL_MS 150
#define MAX_INTERVAL_MS 60000

static void why_usage(FILE *out)
{
    fprintf(out,
            "usage: pyscope why [options] PID\n"
            "\n"
            "Tells why a Python process is stuck: for every thread, what it waits for\n"
            "(the GIL, a lock, a queue, a socket, ...) and who could release it, then a\n"
            "verdict: deadlock, a lock nobody will release, a starved queue, a network\n"
            "read without timeout, ... or not hung. The process is not stopped.\n"
            "\n"
            "  -j, --json          machine-readable output (schema: docs/why.md)\n"
            "  -i, --interval=MS   time between the two snapshots of the progress check\n"
            "                      (default %d; 0 skips the check)\n"
            "      --color=WHEN    always, never or auto (default: auto, on a terminal)\n"
            "  -s, --subprocesses  every Python process of the tree under PID, each with\n"
            "                      its role (parent, fork child, exec child, grandchild)\n"
            "  -h, --help          this help\n",
            DEFAULT_INTERVAL_MS);
}

static bool parse_number(const char *text, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || end == text || v < min || v > max)
        return false;
    *out = v;
    return true;
}

struct snapshot {
    struct stack_report report;
    struct stacks_raw raw;
    int64_t *cpu_ns;
};

static void snapshot_free(struct snapshot *s)
{
    stack_report_free(&s->report);
    stacks_raw_free(&s->raw);
    free(s->cpu_ns);
    s->cpu_ns = NULL;
}

static int take_snapshot(struct py_runtime *rt, pid_t pid, struct snapshot *s, struct pyscope_error *err)
{
    memset(s, 0, sizeof *s);
    s->report.pid = pid;
    struct stacks_options opts = {.paused = false, .max_retries = 3, .raw = &s->raw};
    target_cache_invalidate(rt->target);
    if (stacks_collect(rt, &opts, &s->report, err) != 0)
        return -1;
    s->cpu_ns = calloc(s->report.n_threads ? s->report.n_threads : 1, sizeof *s->cpu_ns);
    if (!s->cpu_ns) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < s->report.n_threads; i++) {
        uint64_t ns;
        s->cpu_ns[i] = s->report.threads[i].tid &&
                               process_thread_cpu_ns(pid, s->report.threads[i].tid, &ns) == 0
                           ? (int64_t)ns
                           : -1;
    }
    return 0;
}

int cmd_why(int argc, char **argv)
{
    if (tree_requested(argc, argv))
        return tree_run(argc, argv, cmd_why);
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"interval", required_argument, NULL, 'i'},
        {"color", required_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false;
    int color = -1;
    long interval = DEFAULT_INTERVAL_MS;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ji:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'i':
            if (!parse_number(optarg, 0, MAX_INTERVAL_MS, &interval)) {
                fprintf(stderr, "pyscope: --interval takes milliseconds, 0 to %d\n", MAX_INTERVAL_MS);
                return PYSCOPE_ERR_USAGE;
            }
            break;
        case 'C':
            if (!cli_parse_color(optarg, &color))
                return PYSCOPE_ERR_USAGE;
            break;
        case 'h': why_usage(stdout); return 0;
        default: why_usage(stderr); return PYSCOPE_ERR_USAGE;
        }
    }
    long pid_value;
    if (optind != argc - 1 || !parse_number(argv[optind], 1, 0x3fffffff, &pid_value)) {
        if (optind < argc)
            fprintf(stderr, "pyscope: invalid process id '%s'\n", argv[optind]);
        why_usage(stderr);
        return PYSCOPE_ERR_USAGE;
    }
    pid_t pid = (pid_t)pid_value;
    if (color < 0)
        color = !json && isatty(STDOUT_FILENO) && getenv("NO_COLOR") == NULL;

    struct pyscope_error err = {0};
    struct target *t = process_open(pid, &err);
    if (!t)
        return error_report(&err);
    target_cache_enable(t);

    struct py_runtime rt;
    struct snapshot first = {0}, second = {0};
    struct waits_ctx *waits = NULL;
    struct why_report why = {0};
    int status = 0;
    if (py_runtime_find(t, &rt, &err) != 0 || take_snapshot(&rt, pid, &first, &err) != 0)
        goto fail;
    first.report.pid = pid;
    process_cmdline(pid, first.report.command, sizeof first.report.command);
    process_exe(pid, first.report.executable, sizeof first.report.executable);
    snprintf(first.report.python_version, sizeof first.report.python_version, "%s", rt.version);

    waits = waits_new(&rt);
    if (!waits || waits_analyze(waits, &first.report, &first.raw) != 0) {
        error_set(&err, PYSCOPE_ERR_OTHER, "out of memory");
        goto fail;
    }
    if (interval > 0) {
        struct timespec delay = {interval / 1000, (interval % 1000) * 1000000L};
        while (nanosleep(&delay, &delay) != 0 && errno == EINTR)
            ;
        if (take_snapshot(&rt, pid, &second, &err) != 0)
            goto fail;
    }
    uint64_t caught = 0;
    process_caught_signals(pid, &caught);
    struct hang_snapshot a = {&first.report, &first.raw, first.cpu_ns, caught};
    struct hang_snapshot b = {&second.report, &second.raw, second.cpu_ns, caught};
    if (hang_analyze(waits, &a, interval > 0 ? &b : NULL, (int)interval, &why) != 0) {
        error_set(&err, PYSCOPE_ERR_OTHER, "out of memory");
        goto fail;
    }
    if (process_gone(pid)) {
        error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the diagnosis", (int)pid);
        goto fail;
    }
    if (json)
        why_report_write_json(stdout, &why);
    else
        why_report_write_text(stdout, &why, color);
    fflush(stdout);
    goto out;
fail:
    if (err.status != PYSCOPE_ERR_EXITED && err.status != PYSCOPE_ERR_NO_PROCESS && process_gone(pid))
        error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the diagnosis", (int)pid);
    status = error_report(&err);
out:
    why_report_free(&why);
    waits_free(waits);
    snapshot_free(&first);
    snapshot_free(&second);
    target_close(t);
    return status;
}
