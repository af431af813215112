/* pyscope why: hang and deadlock diagnosis of a live process, or of the
 * moment a core file was taken (--core). Two snapshots a moment apart
 * (--interval) tell a stuck process from a busy one; the first snapshot's
 * waits explain what each thread is stuck on. */
#include <errno.h>
#include <limits.h>
#include <math.h>
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

/* One diagnosis: the snapshots, their waits and the analysis, kept until
 * the report is written (the report points into them). */
struct diagnosis {
    struct py_runtime rt;
    struct hang_live first, second;
    struct waits_ctx *waits;
    struct why_report why;
    bool no_runtime;
};

/* How a child process waited for is diagnosed: as the parent, one level
 * down at most (a child's children are not looked at). */
struct child_ctx {
    long interval, loop_threshold;
    int depth;
};

static void diagnosis_free(struct diagnosis *d)
{
    why_report_free(&d->why);
    waits_free(d->waits);
    hang_live_free(&d->first);
    hang_live_free(&d->second);
    memset(d, 0, sizeof *d);
}

static int child_verdict(void *ctx, pid_t child, struct diagnosis_child *out);

static void sleep_ms(int ms)
{
    struct timespec delay = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&delay, &delay) != 0 && errno == EINTR)
        ;
}

/* Looks again while the look caught an asyncio loop inside a step
 * (asyncio_caught_mid_step), each time once the loop's thread is asleep.
 * A look that cannot be taken again keeps the one before. Returns how
 * long it took, in ms. */
static double settle_look(struct py_runtime *rt, pid_t pid, struct target *t,
                          struct hang_live *look)
{
    double since = monotonic_ms(), now = since;
    pid_t tid;
    int ms;
    for (int k = 0; (tid = asyncio_caught_mid_step(&look->report, look->ran)) != 0 &&
                    (ms = asyncio_settle_delay_ms(k)) >= 0 && now - since < ASYNCIO_SETTLE_MAX_MS;
         k++) {
        sleep_ms(ms);
        while (!hang_live_thread_asleep(pid, tid) && monotonic_ms() - since < ASYNCIO_SETTLE_MAX_MS)
            sleep_ms(ASYNCIO_SETTLE_POLL_MS);
        struct hang_live again;
        struct pyscope_error ignored = {0};
        if (target_gone(t) || hang_live_take(rt, pid, &again, &ignored) != 0) {
            hang_live_free(&again);
            break;
        }
        hang_live_free(look);
        *look = again;
        now = monotonic_ms();
    }
    return now - since;
}

/* Takes the snapshots of pid (a core's one) and analyses them into d->why;
 * children non-NULL lets a thread waiting for a child ask about it. 0, or
 * -1 with err set (d is then freed). */
static int diagnose(struct target *t, pid_t pid, long interval, long loop_threshold,
                    struct child_ctx *children, const struct core_info *info,
                    const char *core_path, struct diagnosis *d, struct pyscope_error *err)
{
    memset(d, 0, sizeof *d);
    double first_at = monotonic_ms();
    if (py_runtime_find(t, &d->rt, err) != 0) {
        d->no_runtime = true;
        return -1;
    }
    if (hang_live_take(&d->rt, pid, &d->first, err) != 0)
        goto fail;
    if (!info)
        settle_look(&d->rt, pid, t, &d->first);
    d->first.report.pid = pid;
    if (info) {
        snprintf(d->first.report.core_path, sizeof d->first.report.core_path, "%s", core_path);
        if (info->compression)
            snprintf(d->first.report.core_compression, sizeof d->first.report.core_compression,
                     "%s", compression_name(info->compression));
        snprintf(d->first.report.command, sizeof d->first.report.command, "%s", info->psargs);
        const char *exe = core_resolved_path(t, info->exe);
        snprintf(d->first.report.executable, sizeof d->first.report.executable, "%s",
                 exe ? exe : info->exe);
    } else {
        target_cmdline(t, d->first.report.command, sizeof d->first.report.command);
        target_exe(t, d->first.report.executable, sizeof d->first.report.executable);
    }
    snprintf(d->first.report.python_version, sizeof d->first.report.python_version, "%s",
             d->rt.version);

    d->waits = waits_new(&d->rt);
    if (!d->waits || waits_analyze(d->waits, &d->first.report, &d->first.raw) != 0) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        goto fail;
    }
    double watched_ms = 0;
    if (interval > 0) {
        /* Tasks waiting while others sleep: the second look comes after
         * the sleepers have woken, if that is within a second, so that it
         * shows what they did (a heartbeat, or what releases the waiters). */
        struct timespec now;
        if (clock_gettime(CLOCK_MONOTONIC, &now) == 0)
            interval = (long)asyncio_second_look_ms(
                &d->first.report, (double)interval,
                (double)now.tv_sec + (double)now.tv_nsec / 1e9);
        struct timespec delay = {interval / 1000, (interval % 1000) * 1000000L};
        while (nanosleep(&delay, &delay) != 0 && errno == EINTR)
            ;
        if (target_gone(t)) {
            error_set(err, PYSCOPE_ERR_EXITED, "process %d exited during the %ld ms interval",
                      (int)pid, interval);
            goto fail;
        }
        if (hang_live_take(&d->rt, pid, &d->second, err) != 0)
            goto fail;
        interval += (long)settle_look(&d->rt, pid, t, &d->second);
        watched_ms = monotonic_ms() - first_at;
    }
    uint64_t caught = 0;
    target_caught_signals(t, &caught);
    struct hang_snapshot a = {&d->first.report, &d->first.raw, d->first.cpu_ns, caught, {0}};
    py_signal_handlers_read(&d->rt, &a.handlers);
    struct hang_snapshot b = {&d->second.report, &d->second.raw, d->second.cpu_ns, caught,
                              a.handlers};
    struct diagnosis_queries queries;
    waits_queries(d->waits, &queries);
    if (children) {
        queries.child_verdict = child_verdict;
        queries.child_ctx = children;
    }
    const struct stack_report *later = interval > 0 ? &d->second.report : NULL;
    if (hang_analyze(&queries, &a, interval > 0 ? &b : NULL, (int)interval, &d->why) != 0 ||
        asyncio_findings(&d->first.report, later, (int)interval, (int)loop_threshold, &queries,
                         &d->why) != 0) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        goto fail;
    }
    d->why.progress.watched_ms = watched_ms;
    return 0;
fail:
    diagnosis_free(d);
    return -1;
}

static int child_verdict(void *ctx, pid_t child, struct diagnosis_child *out)
{
    const struct child_ctx *parent = ctx;
    if (!parent || parent->depth >= 1)
        return -1;
    struct pyscope_error err = {0};
    struct target *t = process_open(child, &err);
    if (!t)
        return -1;
    target_cache_enable(t);
    struct diagnosis d;
    int rc = -1;
    if (diagnose(t, child, parent->interval, parent->loop_threshold, NULL, NULL, NULL, &d,
                 &err) == 0) {
        if (!target_gone(t)) {
            out->verdict = d.why.verdict;
            out->grade = d.why.grade;
            snprintf(out->summary, sizeof out->summary, "%.*s", (int)sizeof out->summary - 1,
                     d.why.summary);
            if (process_thread_comm(child, child, out->comm, sizeof out->comm) != 0)
                snprintf(out->comm, sizeof out->comm, "?");
            rc = 0;
        }
        diagnosis_free(&d);
    }
    target_close(t);
    return rc;
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

    struct diagnosis d;
    int status = 0;
    struct child_ctx children = {interval, loop_threshold, 0};
    if (diagnose(t, pid, interval, loop_threshold, info ? NULL : &children, info, core_path, &d,
                 &err) != 0) {
        if (info && d.no_runtime)
            cli_explain_core_failure(t, &err);
        goto fail;
    }
    struct why_report why = d.why;
    if (target_gone(t)) {
        error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the diagnosis", (int)pid);
        goto fail;
    }
    why.verbose = verbose;
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
    diagnosis_free(&d);
    target_close(t);
    return status;
}
