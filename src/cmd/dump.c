/* pyscope dump: every thread's Python stack, GIL and GC state from a live
 * process, by default without stopping it (--pause and --native stop it
 * briefly), or from a core file (--core). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "python/collect.h"
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "cmd/tree.h"
#include "output/dump_writers.h"
#include "python/variables_report.h"
#include "python/runtime.h"
#include "target/core.h"
#include "target/process.h"
#include "target/signals.h"
#include "target/tracer.h"
#include "util/clock.h"

#define MAX_LIB_PATHS 32
#define PAUSED_RETRIES 30       /* of 10 ms, as an unpaused read waits */

static void write_report(const struct stack_report *report, bool json, int color)
{
    /* A dump of many deep stacks is hundreds of kilobytes: written in a few
     * large pieces instead of one system call per 4 KiB (a terminal still
     * sees every line, as it is flushed at the end). */
    static char buffer[1 << 16];
    setvbuf(stdout, buffer, _IOFBF, sizeof buffer);
    if (json)
        stack_report_write_json(stdout, report);
    else
        stack_report_write_text(stdout, report, color);
    fflush(stdout);
}

static int dump_core(const char *core_path, const struct core_options *copts,
                     const struct collect_request *req, bool json, int color, bool verbose)
{
    double started = monotonic_ms();
    struct pyscope_error err = {0};
    struct target *t = core_open(core_path, copts, &err);
    if (!t)
        return error_report(&err);
    target_cache_enable(t);
    const struct core_info *info = core_get_info(t);
    if (verbose && info->compression && info->expanded.cached)
        fprintf(stderr, "pyscope: %s: %s, the expansion an earlier look kept (%s, %llu bytes), "
                "opened in %.0f ms\n", core_path, compression_name(info->compression),
                info->expanded.where, (unsigned long long)info->expanded.out_bytes,
                info->expanded.ms);
    else if (verbose && info->compression && info->expanded.on_demand)
        fprintf(stderr, "pyscope: %s: %s, %llu bytes decoded once, nothing stored: %llu bytes of "
                "core in %zu blocks read on demand, indexed in %.0f ms (decoding %.0f, reading "
                "%.0f, storing 0)\n", core_path, compression_name(info->compression),
                (unsigned long long)info->expanded.in_bytes,
                (unsigned long long)info->expanded.out_bytes, info->expanded.blocks,
                info->expanded.ms, info->expanded.ms - info->expanded.read_ms,
                info->expanded.read_ms);
    else if (verbose && info->compression)
        fprintf(stderr, "pyscope: %s: %s, %llu bytes expanded to %llu bytes (in %s) in %.0f ms "
                "(decoding %.0f, reading %.0f, storing %.0f; CPU: %.0f decoding, %.0f storing alongside)%s\n",
                core_path, compression_name(info->compression),
                (unsigned long long)info->expanded.in_bytes,
                (unsigned long long)info->expanded.out_bytes, info->expanded.where,
                info->expanded.ms,
                info->expanded.ms - info->expanded.read_ms - info->expanded.store_ms,
                info->expanded.read_ms, info->expanded.store_ms,
                info->expanded.cpu_ms, info->expanded.store_thread_cpu_ms, info->expanded.kept ? ", kept for the next look" : "");
    else if (info->compression && info->expanded.kept)
        /* Gigabytes left in the user's cache must not be a surprise. */
        fprintf(stderr, "pyscope: %s: kept its expansion (%llu bytes) in %s for the next look; "
                "PYSCOPE_CORE_CACHE=off keeps nothing\n", core_path,
                (unsigned long long)info->expanded.out_bytes, info->expanded.where);
    struct stack_report report = {0};
    struct py_runtime rt;
    int status = 0;
    if (py_runtime_find(t, &rt, &err) != 0) {
        cli_explain_core_failure(t, &err);
        if (err.status == PYSCOPE_ERR_NOT_PYTHON && !core_missing_files(t, NULL, 0))
            error_set(&err, PYSCOPE_ERR_NOT_PYTHON, "core of process %d (%s) is not of a Python "
                      "process", (int)info->pid, info->fname);
        /* What a wrong file gives (no runtime, another version) is not the
         * process's fault. */
        if (core_mismatch(t)) {
            error_set(&err, PYSCOPE_ERR_USAGE, "%s", core_mismatch(t));
            error_hint(&err, "give the files the process ran (--exe, --lib-path)");
        }
        goto fail;
    }
    report.pid = info->pid;
    report.paused = true;
    snprintf(report.core_path, sizeof report.core_path, "%s", core_path);
    if (info->compression)
        snprintf(report.core_compression, sizeof report.core_compression, "%s",
                 compression_name(info->compression));
    snprintf(report.command, sizeof report.command, "%s", info->psargs);
    const char *exe = core_resolved_path(t, info->exe);
    snprintf(report.executable, sizeof report.executable, "%s", exe ? exe : info->exe);
    snprintf(report.python_version, sizeof report.python_version, "%s", rt.version);
    if (collect_report(t, &rt, req, &report, &err) != 0)
        goto fail;
    if (signal_is_fatal_by_default(info->signal.signo))
        collect_set_signal(&report, info->signal.signo, info->signal.code, info->signal.addr,
                           info->signal.sender_pid, info->signal_tid);
    if (info->bytes_missing)
        fprintf(stderr, "pyscope: warning: %s is truncated: %llu bytes of memory are missing; "
                "what lies there shows as unreadable\n", core_path,
                (unsigned long long)info->bytes_missing);
    write_report(&report, json, color);
    if (verbose)
        fprintf(stderr, "pyscope: %zu threads in %.2f ms (%llu reads, %llu bytes, %llu failed)\n",
                report.n_threads, monotonic_ms() - started, (unsigned long long)t->stats.reads,
                (unsigned long long)t->stats.bytes, (unsigned long long)t->stats.failures);
    stack_report_free(&report);
    target_close(t);
    return 0;
fail:
    status = error_report(&err);
    stack_report_free(&report);
    target_close(t);
    return status;
}

static int dump_live(pid_t pid, bool pause, const struct collect_request *req, bool json,
                     int color, bool verbose)
{
    double started = monotonic_ms();
    struct pyscope_error err = {0};
    struct target *t = process_open(pid, &err);
    if (!t)
        return error_report(&err);
    target_cache_enable(t);

    struct stack_report report = {0};
    struct py_runtime rt;
    struct tracer tr = {0};
    int status = 0;
    if (py_runtime_find(t, &rt, &err) != 0)
        goto fail;
    double found = monotonic_ms();
    if (verbose)
        fprintf(stderr, "pyscope: CPython %s, _PyRuntime at 0x%llx in %s; layout from %s\n",
                rt.version, (unsigned long long)rt.runtime_addr, rt.binary, rt.layout.source);
    int rc;
    /* A process stopped between two interpreters (starting up, or
     * finalizing) stays that way while it is stopped: let it run for a
     * moment and look again, as an unpaused read does by itself. */
    for (int attempt = 0;; attempt++) {
        if (pause && tracer_pause(&tr, pid, &err) != 0) {
            if (err.status == PYSCOPE_ERR_NO_PROCESS)
                error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the dump", (int)pid);
            goto fail;
        }
        report.pid = pid;
        report.paused = pause;
        target_cmdline(t, report.command, sizeof report.command);
        target_exe(t, report.executable, sizeof report.executable);
        snprintf(report.python_version, sizeof report.python_version, "%s", rt.version);
        rc = collect_report(t, &rt, req, &report, &err);
        if (pause)
            tracer_release(&tr);
        if (rc == 0 || !pause || !report.no_interpreter || attempt == PAUSED_RETRIES ||
            target_gone(t))
            break;
        stack_report_free(&report);
        memset(&report, 0, sizeof report);
        usleep(10000);
        target_cache_invalidate(t);
    }
    if (rc != 0)
        goto fail;
    /* A target that died while we read leaves partial, meaningless stacks. */
    if (target_gone(t)) {
        error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the dump", (int)pid);
        goto fail;
    }
    double collected = monotonic_ms();
    write_report(&report, json, color);
    if (verbose)
        fprintf(stderr,
                "pyscope: %zu threads; %.2f ms to find the interpreter, %.2f ms to read the "
                "stacks (%llu reads, %llu bytes, %llu failed), %.2f ms to print\n",
                report.n_threads, found - started, collected - found,
                (unsigned long long)t->stats.reads, (unsigned long long)t->stats.bytes,
                (unsigned long long)t->stats.failures, monotonic_ms() - collected);
    stack_report_free(&report);
    target_close(t);
    return 0;
fail:
    if (pause)
        tracer_release(&tr);
    if (err.status != PYSCOPE_ERR_EXITED && err.status != PYSCOPE_ERR_NO_PROCESS &&
        target_gone_soon(t))
        error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the dump", (int)pid);
    status = error_report(&err);
    stack_report_free(&report);
    target_close(t);
    return status;
}

static int take_print(const char *arg, void *value)
{
    char why[256];
    if (frame_locals_parse_check(arg, why, sizeof why) != 0) {
        fprintf(stderr, "pyscope: --print '%s': %s\n", arg, why);
        return PYSCOPE_ERR_USAGE;
    }
    *(const char **)value = arg;
    return 0;
}

static int take_tasks(const char *arg, void *value)
{
    static const struct {
        const char *name;
        enum tasks_mode which;
    } names[] = {{"none", TASKS_NONE}, {"pending", TASKS_PENDING}, {"all", TASKS_ALL}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(arg, names[i].name) == 0) {
            *(enum tasks_mode *)value = names[i].which;
            return 0;
        }
    }
    fprintf(stderr, "pyscope: --tasks takes none, pending or all (got '%s')\n", arg);
    return PYSCOPE_ERR_USAGE;
}

static int take_max_tasks(const char *arg, void *value)
{
    char *end;
    errno = 0;
    long n = strtol(arg, &end, 10);
    if (errno || end == arg || *end || n < 0 || n > 1000000) {
        fprintf(stderr, "pyscope: --max-tasks takes a count from 0 to 1000000 (got '%s')\n", arg);
        return PYSCOPE_ERR_USAGE;
    }
    *(size_t *)value = (size_t)n;
    return 0;
}

struct lib_paths {
    const char *paths[MAX_LIB_PATHS];
    int n;
};

static int take_lib_path(const char *arg, void *value)
{
    struct lib_paths *libs = value;
    if (libs->n == MAX_LIB_PATHS) {
        fprintf(stderr, "pyscope: at most %d --lib-path options\n", MAX_LIB_PATHS);
        return PYSCOPE_ERR_USAGE;
    }
    libs->paths[libs->n++] = arg;
    return 0;
}

int cmd_dump(int argc, char **argv)
{
    if (tree_requested(argc, argv))
        return tree_run(argc, argv, cmd_dump);
    bool json = false, pause = false, verbose = false;
    struct collect_request req = {.tasks = TASKS_PENDING, .max_tasks = 1000};
    const char *core_path = NULL;
    struct lib_paths libs = {.n = 0};
    struct core_options copts = {.lib_paths = libs.paths, .warnings = stderr, .cache = true};
    int color = -1;
    const struct cli_option options[] = {
        CLI_OPT('j', "json", NULL, "machine-readable output (schema: docs/json.md)", CLI_FLAG,
                &json),
        CLI_OPT('p', "pause", NULL, "stop all threads while reading, for an exact snapshot",
                CLI_FLAG, &pause),
        CLI_OPT('v', "verbose", NULL, "say how the interpreter was found, and what the dump cost",
                CLI_FLAG, &verbose),
        CLI_OPT('l', "locals", NULL, "show the arguments and local variables of every Python "
                "frame\n(bounded reprs; add --pause for values from one instant)", CLI_FLAG,
                &req.locals),
        CLI_OPT(0, "print", "EXPR", "print a value in every frame where EXPR's first name is a\n"
                "local, following .attr, [index] and ['key'] steps,\n"
                "e.g. --print self.pool.free_lists or --print 'args[0]'", CLI_CALL,
                &req.print_expr, .call = take_print),
        CLI_OPT('n', "native", NULL, "also unwind each thread's C stack and show C frames "
                "between\nthe Python frames; this PAUSES the process briefly (ptrace)\n"
                "while the stacks are read", CLI_FLAG, &req.native),
        CLI_OPT(0, "native-all", NULL, "with --native, keep the interpreter's own C frames too",
                CLI_FLAG, &req.native_all),
        CLI_OPT(0, "core", "FILE", "read a core file (kernel core or gdb gcore) instead of a PID;"
                "\nzstd, lz4, xz or gzip-compressed cores are expanded first", CLI_STRING,
                &core_path),
        CLI_LINE("      --core PID, --core latest\n"
                 "                   the newest core of that process, or the newest of all, in\n"
                 "                   systemd-coredump's store (/var/lib/systemd/coredump, or\n"
                 "                   $PYSCOPE_COREDUMP_DIR), else what coredumpctl extracts; the\n"
                 "                   file chosen is named on stderr"),
        CLI_OPT(0, "exe", "PATH", "with --core: the executable, when it is not at the path the\n"
                "core records (e.g. the core comes from another machine)", CLI_STRING,
                &copts.exe),
        CLI_OPT(0, "lib-path", "DIR", "with --core: a directory holding the shared libraries\n"
                "(searched by file name before the recorded path; repeatable)", CLI_CALL, &libs,
                .call = take_lib_path),
        CLI_OPT(0, "sysroot", "DIR", "with --core: look up the paths the core records below DIR\n"
                "(a copy of the container's or other machine's root), as gdb does", CLI_STRING,
                &copts.sysroot),
        CLI_OPT(0, "debug-dir", "DIR", "with --core: binaries and debug files by build-id, as\n"
                "DIR/.build-id/xx/yyyy and DIR/.build-id/xx/yyyy.debug", CLI_STRING,
                &copts.debug_dir),
        CLI_OPT(0, "color", "=WHEN", "always, never or auto (default: auto, on a terminal)",
                CLI_CALL, &color, .call = cli_take_color),
        CLI_OPT(0, "tasks", "=WHICH", "asyncio tasks shown after each loop's thread: pending\n"
                "(the default), all (with done ones) or none", CLI_CALL, &req.tasks,
                .call = take_tasks),
        CLI_OPT(0, "max-tasks", "N", "at most N tasks per loop in detail, the rest counted\n"
                "(default 1000)", CLI_CALL, &req.max_tasks, .call = take_max_tasks),
        CLI_OPT('s', "subprocesses", NULL, "every Python process of the tree under PID, each with"
                "\nits role (parent, fork child, exec child, grandchild)", CLI_FLAG, NULL,
                .usage_only = true),
        CLI_HELP_OPTION,
        {0},
    };
    const struct cli_command cmd = {
        .usage = "usage: pyscope dump [options] PID\n"
                 "       pyscope dump [options] --core FILE|PID|latest [--sysroot DIR]\n"
                 "                    [--debug-dir DIR] [--exe PATH] [--lib-path DIR]...\n"
                 "\n"
                 "Prints every thread's Python stack, who holds the GIL, who waits for it,\n"
                 "and whether the garbage collector is running. The process is not stopped\n"
                 "unless --pause or --native is given.\n"
                 "\n",
        .options = options,
        .help_column = 19,
    };
    int parsed = cli_parse(&cmd, argc, argv);
    if (parsed != CLI_CONTINUE)
        return parsed;
    if (req.native_all)
        req.native = true;
    copts.n_lib_paths = libs.n;
    if (color < 0)
        color = !json && isatty(STDOUT_FILENO) && getenv("NO_COLOR") == NULL;
    if (core_path) {
        if (optind != argc) {
            fprintf(stderr, "pyscope: --core takes no PID (got '%s')\n", argv[optind]);
            return PYSCOPE_ERR_USAGE;
        }
        if (!cli_check_input_file(core_path))
            return PYSCOPE_ERR_USAGE;
        req.paused = true;
        char chosen[PATH_MAX];
        struct pyscope_error err = {0};
        if (cli_core_path(core_path, chosen, sizeof chosen, &err) != 0)
            return error_report(&err);
        return dump_core(chosen, &copts, &req, json, color, verbose);
    }
    if (copts.exe || copts.n_lib_paths || copts.sysroot || copts.debug_dir) {
        fprintf(stderr, "pyscope: --exe, --lib-path, --sysroot and --debug-dir go with --core\n");
        return PYSCOPE_ERR_USAGE;
    }
    pid_t pid;
    if (optind != argc - 1) {
        if (optind < argc - 1)
            fprintf(stderr, "pyscope: unexpected argument '%s'\n", argv[optind + 1]);
        cli_usage(&cmd, stderr);
        return PYSCOPE_ERR_USAGE;
    }
    if (!cli_parse_pid(argv[optind], &pid))
        return PYSCOPE_ERR_USAGE;
    /* Unwinding reads registers, which only a stopped thread has. */
    if (req.native)
        pause = true;
    req.paused = pause;
    req.waits = true;
    return dump_live(pid, pause, &req, json, color, verbose);
}
