/* pyscope why: hang and deadlock diagnosis of a live process, or of the
 * moment a core file was taken (--core). Two snapshots a moment apart
 * (--interval) tell a stuck process from a busy one; the first snapshot's
 * waits explain what each thread is stuck on. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/commands.h"
#include "cmd/tree.h"
#include "output/why_writers.h"
#include "python/asyncio_tasks.h"
#include "diagnosis/asyncio_why.h"
#include "diagnosis/hang.h"
#include "python/hang_live.h"
#include "python/runtime.h"
#include "python/stacks.h"
#include "python/waits.h"
#include "target/core.h"
#include "target/process.h"
#include "util/clock.h"

#define DEFAULT_INTERVAL_MS 150
#define MAX_INTERVAL_MS 60000

static int take_interval(const char *arg, void *value)
{
    if (!cli_parse_duration_ms(arg, MAX_INTERVAL_MS, value)) {
        fprintf(stderr, "pyscope: --interval takes a duration such as 150ms, 2s or 1m (a bare "
                        "number is milliseconds), at most %d s\n", MAX_INTERVAL_MS / 1000);
        return PYSCOPE_ERR_USAGE;
    }
    return 0;
}

static const char *default_interval(void)
{
    static char text[16];
    snprintf(text, sizeof text, "%d", DEFAULT_INTERVAL_MS);
    return text;
}

int cmd_why(int argc, char **argv)
{
    if (tree_requested(argc, argv))
        return tree_run(argc, argv, cmd_why);
    bool json = false, verbose = false;
    int color = -1;
    long interval = DEFAULT_INTERVAL_MS, loop_threshold = ASYNCIO_BLOCKED_MS;
    const char *core_arg = NULL;
    struct core_options copts = {.warnings = stderr, .cache = true};
    const struct cli_option options[] = {
        CLI_OPT('j', "json", NULL, "machine-readable output (schema: docs/why.md)", CLI_FLAG,
                &json),
        CLI_OPT('i', "interval", "=TIME", "time between the two snapshots of the progress check:\n"
                "150ms, 2s, 1m, or milliseconds (default %s ms; 0 skips it)", CLI_CALL,
                &interval, .call = take_interval, .help_value = default_interval),
        CLI_OPT('v', "verbose", NULL, "also print the liveness computation behind the verdict",
                CLI_FLAG, &verbose),
        CLI_OPT(0, "loop-threshold", "=TIME", "how long an asyncio loop's thread must have been\n"
                "inside one callback or task step, not in its selector,\n"
                "to be loop_blocked (default 100ms)", CLI_CALL, &loop_threshold,
                .call = cli_take_loop_threshold),
        CLI_OPT(0, "core", "FILE", "the moment a core file was taken instead of a live process\n"
                "(no progress check; PID and latest as for dump --core)", CLI_STRING, &core_arg),
        CLI_OPT(0, "sysroot", "DIR", "with --core: as for dump --core", CLI_STRING,
                &copts.sysroot),
        CLI_OPT(0, "debug-dir", "DIR", "with --core: as for dump --core", CLI_STRING,
                &copts.debug_dir),
        CLI_OPT(0, "color", "=WHEN", "always, never or auto (default: auto, on a terminal)",
                CLI_CALL, &color, .call = cli_take_color),
        CLI_OPT('s', "subprocesses", NULL, "every Python process of the tree under PID, each with\n"
                "its role (parent, fork child, exec child, grandchild)", CLI_FLAG, NULL,
                .usage_only = true),
        CLI_HELP_OPTION,
        {0},
    };
    const struct cli_command cmd = {
        .usage = "usage: pyscope why [options] PID\n"
                 "       pyscope why [options] --core FILE|PID|latest [--sysroot DIR] "
                 "[--debug-dir DIR]\n"
                 "\n"
                 "Tells why a Python process is stuck: for every thread, what it waits for\n"
                 "(the GIL, a lock, a queue, a socket, ...) and who could release it, then a\n"
                 "verdict: deadlock, a lock nobody will release, a starved queue, a network\n"
                 "read without timeout, ... or not hung. The process is not stopped.\n"
                 "\n",
        .options = options,
        .help_column = 22,
    };
    int parsed = cli_parse(&cmd, argc, argv);
    if (parsed != CLI_CONTINUE)
        return parsed;
    /* A live process is named by one PID; a core needs none. */
    int wanted = core_arg ? 0 : 1;
    if (argc - optind != wanted) {
        if (argc - optind > wanted)
            fprintf(stderr, "pyscope: unexpected argument '%s'\n", argv[optind + wanted]);
        cli_usage(&cmd, stderr);
        return PYSCOPE_ERR_USAGE;
    }
    pid_t pid = 0;
    if (!core_arg && !cli_parse_pid(argv[optind], &pid))
        return PYSCOPE_ERR_USAGE;
    if (color < 0)
        color = !json && isatty(STDOUT_FILENO) && getenv("NO_COLOR") == NULL;

    struct pyscope_error err = {0};
    char core_path[PATH_MAX] = "";
    if (core_arg && cli_core_path(core_arg, core_path, sizeof core_path, &err) != 0)
        return error_report(&err);
    /* A core is one moment: there is no second snapshot to compare. */
    if (core_arg)
        interval = 0;
    struct target *t = core_arg ? core_open(core_path, &copts, &err) : process_open(pid, &err);
    if (!t)
        return error_report(&err);
    const struct core_info *info = core_get_info(t);
    if (info)
        pid = info->pid;
    target_cache_enable(t);

    struct py_runtime rt;
    struct hang_live first = {0}, second = {0};
    struct waits_ctx *waits = NULL;
    struct why_report why = {0};
    int status = 0;
    double first_at = monotonic_ms();
    if (py_runtime_find(t, &rt, &err) != 0) {
        if (info)
            cli_explain_core_failure(t, &err);
        goto fail;
    }
    if (hang_live_take(&rt, pid, &first, &err) != 0)
        goto fail;
    first.report.pid = pid;
    if (info) {
        snprintf(first.report.core_path, sizeof first.report.core_path, "%s", core_path);
        if (info->compression)
            snprintf(first.report.core_compression, sizeof first.report.core_compression, "%s",
                     compression_name(info->compression));
        snprintf(first.report.command, sizeof first.report.command, "%s", info->psargs);
        const char *exe = core_resolved_path(t, info->exe);
        snprintf(first.report.executable, sizeof first.report.executable, "%s",
                 exe ? exe : info->exe);
    } else {
        target_cmdline(t, first.report.command, sizeof first.report.command);
        target_exe(t, first.report.executable, sizeof first.report.executable);
    }
    snprintf(first.report.python_version, sizeof first.report.python_version, "%s", rt.version);

    waits = waits_new(&rt);
    if (!waits || waits_analyze(waits, &first.report, &first.raw) != 0) {
        error_set(&err, PYSCOPE_ERR_OTHER, "out of memory");
        goto fail;
    }
    double watched_ms = 0;
    if (interval > 0) {
        struct timespec delay = {interval / 1000, (interval % 1000) * 1000000L};
        while (nanosleep(&delay, &delay) != 0 && errno == EINTR)
            ;
        if (target_gone(t)) {
            error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the %ld ms interval",
                      (int)pid, interval);
            goto fail;
        }
        if (hang_live_take(&rt, pid, &second, &err) != 0)
            goto fail;
        watched_ms = monotonic_ms() - first_at;
    }
    uint64_t caught = 0;
    target_caught_signals(t, &caught);
    struct hang_snapshot a = {&first.report, &first.raw, first.cpu_ns, caught, {0}};
    py_signal_handlers_read(&rt, &a.handlers);
    struct hang_snapshot b = {&second.report, &second.raw, second.cpu_ns, caught, a.handlers};
    struct diagnosis_queries queries;
    waits_queries(waits, &queries);
    if (hang_analyze(&queries, &a, interval > 0 ? &b : NULL, (int)interval, &why) != 0) {
        error_set(&err, PYSCOPE_ERR_OTHER, "out of memory");
        goto fail;
    }
    if (asyncio_blocked_findings(&first.report, interval > 0 ? &second.report : NULL,
                                 (int)interval, (int)loop_threshold, &why) != 0 ||
        asyncio_orphan_findings(&first.report, interval > 0 ? &second.report : NULL, &why) != 0 ||
        asyncio_asleep_findings(&first.report, interval > 0 ? &second.report : NULL, &why) != 0 ||
        asyncio_stream_findings(&first.report, interval > 0 ? &second.report : NULL, &why) != 0 ||
        asyncio_cycle_findings(&first.report, interval > 0 ? &second.report : NULL, &why) != 0) {
        error_set(&err, PYSCOPE_ERR_OTHER, "out of memory");
        goto fail;
    }
    if (target_gone(t)) {
        error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the diagnosis", (int)pid);
        goto fail;
    }
    why.verbose = verbose;
    why.progress.watched_ms = watched_ms;
    if (json)
        why_report_write_json(stdout, &why);
    else
        why_report_write_text(stdout, &why, color);
    fflush(stdout);
    goto out;
fail:
    if (err.status != PYSCOPE_ERR_EXITED && err.status != PYSCOPE_ERR_NO_PROCESS &&
        target_gone_soon(t))
        error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the diagnosis", (int)pid);
    status = error_report(&err);
out:
    why_report_free(&why);
    waits_free(waits);
    hang_live_free(&first);
    hang_live_free(&second);
    target_close(t);
    return status;
}
