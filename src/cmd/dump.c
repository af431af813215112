/* pyscope dump: every thread's Python stack, GIL and GC state from a live
 * process, by default without stopping it (--pause and --native stop it
 * briefly), or from a core file (--core). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/collect.h"
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "cmd/tree.h"
#include "output/dump_writers.h"
#include "python/variables_report.h"
#include "python/runtime.h"
#include "target/core.h"
#include "target/pause.h"
#include "target/process.h"
#include "target/signals.h"
#include "util/clock.h"

#define MAX_LIB_PATHS 32
#define PAUSED_RETRIES 30       /* of 10 ms, as an unpaused read waits */

static void dump_usage(FILE *out)
{
    fprintf(out,
            "usage: pyscope dump [options] PID\n"
            "       pyscope dump [options] --core FILE|PID|latest [--sysroot DIR]\n"
            "                    [--debug-dir DIR] [--exe PATH] [--lib-path DIR]...\n"
            "\n"
            "Prints every thread's Python stack, who holds the GIL, who waits for it,\n"
            "and whether the garbage collector is running. The process is not stopped\n"
            "unless --pause or --native is given.\n"
            "\n"
            "  -j, --json       machine-readable output (schema: docs/json.md)\n"
            "  -p, --pause      stop all threads while reading, for an exact snapshot\n"
            "  -v, --verbose    say how the interpreter was found, and what the dump cost\n"
            "  -l, --locals     show the arguments and local variables of every Python frame\n"
            "                   (bounded reprs; add --pause for values from one instant)\n"
            "      --print EXPR print a value in every frame where EXPR's first name is a\n"
            "                   local, following .attr, [index] and ['key'] steps,\n"
            "                   e.g. --print self.pool.free_lists or --print 'args[0]'\n"
            "  -n, --native     also unwind each thread's C stack and show C frames between\n"
            "                   the Python frames; this PAUSES the process briefly (ptrace)\n"
            "                   while the stacks are read\n"
            "      --native-all with --native, keep the interpreter's own C frames too\n"
            "      --core FILE  read a core file (kernel core or gdb gcore) instead of a PID;\n"
            "                   zstd, lz4, xz or gzip-compressed cores are expanded first\n"
            "      --core PID, --core latest\n"
            "                   the newest core of that process, or the newest of all, in\n"
            "                   systemd-coredump's store (/var/lib/systemd/coredump, or\n"
            "                   $PYSCOPE_COREDUMP_DIR), else what coredumpctl extracts; the\n"
            "                   file chosen is named on stderr\n"
            "      --exe PATH   with --core: the executable, when it is not at the path the\n"
            "                   core records (e.g. the core comes from another machine)\n"
            "      --lib-path DIR  with --core: a directory holding the shared libraries\n"
            "                   (searched by file name before the recorded path; repeatable)\n"
            "      --sysroot DIR   with --core: look up the paths the core records below DIR\n"
            "                   (a copy of the container's or other machine's root), as gdb does\n"
            "      --debug-dir DIR with --core: binaries and debug files by build-id, as\n"
            "                   DIR/.build-id/xx/yyyy and DIR/.build-id/xx/yyyy.debug\n"
            "      --color=WHEN always, never or auto (default: auto, on a terminal)\n"
            "      --tasks=WHICH  asyncio tasks shown after each loop's thread: pending\n"
            "                   (the default), all (with done ones) or none\n"
            "      --max-tasks N  at most N tasks per loop in detail, the rest counted\n"
            "                   (default 1000)\n"
            "  -s, --subprocesses  every Python process of the tree under PID, each with\n"
            "                   its role (parent, fork child, exec child, grandchild)\n"
            "  -h, --help       this help\n");
}

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
    else if (verbose && info->compression)
        fprintf(stderr, "pyscope: %s: %s, %llu bytes expanded to %llu bytes (in %s) in %.0f ms "
                "(decoding %.0f, reading %.0f, storing %.0f)%s\n",
                core_path, compression_name(info->compression),
                (unsigned long long)info->expanded.in_bytes,
                (unsigned long long)info->expanded.out_bytes, info->expanded.where,
                info->expanded.ms,
                info->expanded.ms - info->expanded.read_ms - info->expanded.store_ms,
                info->expanded.read_ms, info->expanded.store_ms,
                info->expanded.kept ? ", kept for the next look" : "");
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
        if (pause && process_pause(pid, &err) != 0)
            goto fail;
        report.pid = pid;
        report.paused = pause;
        target_cmdline(t, report.command, sizeof report.command);
        target_exe(t, report.executable, sizeof report.executable);
        snprintf(report.python_version, sizeof report.python_version, "%s", rt.version);
        rc = collect_report(t, &rt, req, &report, &err);
        if (pause)
            process_resume();
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
        process_resume();
    if (err.status != PYSCOPE_ERR_EXITED && err.status != PYSCOPE_ERR_NO_PROCESS &&
        target_gone_soon(t))
        error_set(&err, PYSCOPE_ERR_EXITED, "process %d exited during the dump", (int)pid);
    status = error_report(&err);
    stack_report_free(&report);
    target_close(t);
    return status;
}

int cmd_dump(int argc, char **argv)
{
    if (tree_requested(argc, argv))
        return tree_run(argc, argv, cmd_dump);
    enum { OPT_COLOR = 256, OPT_PRINT, OPT_NATIVE_ALL, OPT_CORE, OPT_EXE, OPT_LIB_PATH,
           OPT_SYSROOT, OPT_DEBUG_DIR, OPT_TASKS, OPT_MAX_TASKS };
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"pause", no_argument, NULL, 'p'},
        {"verbose", no_argument, NULL, 'v'},
        {"color", required_argument, NULL, OPT_COLOR},
        {"locals", no_argument, NULL, 'l'},
        {"print", required_argument, NULL, OPT_PRINT},
        {"native", no_argument, NULL, 'n'},
        {"native-all", no_argument, NULL, OPT_NATIVE_ALL},
        {"core", required_argument, NULL, OPT_CORE},
        {"exe", required_argument, NULL, OPT_EXE},
        {"lib-path", required_argument, NULL, OPT_LIB_PATH},
        {"sysroot", required_argument, NULL, OPT_SYSROOT},
        {"debug-dir", required_argument, NULL, OPT_DEBUG_DIR},
        {"tasks", required_argument, NULL, OPT_TASKS},
        {"max-tasks", required_argument, NULL, OPT_MAX_TASKS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, pause = false, verbose = false;
    struct collect_request req = {.tasks = TASKS_PENDING, .max_tasks = 1000};
    const char *core_path = NULL;
    const char *lib_paths[MAX_LIB_PATHS];
    struct core_options copts = {.lib_paths = lib_paths, .warnings = stderr, .cache = true};
    int color = -1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jpvlnh", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'p': pause = true; break;
        case 'v': verbose = true; break;
        case 'l': req.locals = true; break;
        case 'n': req.native = true; break;
        case OPT_NATIVE_ALL: req.native = req.native_all = true; break;
        case OPT_PRINT: {
            char why[256];
            if (frame_locals_parse_check(optarg, why, sizeof why) != 0) {
                fprintf(stderr, "pyscope: --print '%s': %s\n", optarg, why);
                return PYSCOPE_ERR_USAGE;
            }
            req.print_expr = optarg;
            break;
        }
        case OPT_TASKS:
            if (!strcmp(optarg, "none"))
                req.tasks = TASKS_NONE;
            else if (!strcmp(optarg, "pending"))
                req.tasks = TASKS_PENDING;
            else if (!strcmp(optarg, "all"))
                req.tasks = TASKS_ALL;
            else {
                fprintf(stderr, "pyscope: --tasks takes none, pending or all (got '%s')\n", optarg);
                return PYSCOPE_ERR_USAGE;
            }
            break;
        case OPT_MAX_TASKS: {
            char *end;
            errno = 0;
            long n = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || n < 0 || n > 1000000) {
                fprintf(stderr, "pyscope: --max-tasks takes a count from 0 to 1000000 (got '%s')\n",
                        optarg);
                return PYSCOPE_ERR_USAGE;
            }
            req.max_tasks = (size_t)n;
            break;
        }
        case OPT_CORE: core_path = optarg; break;
        case OPT_EXE: copts.exe = optarg; break;
        case OPT_SYSROOT: copts.sysroot = optarg; break;
        case OPT_DEBUG_DIR: copts.debug_dir = optarg; break;
        case OPT_LIB_PATH:
            if (copts.n_lib_paths == MAX_LIB_PATHS) {
                fprintf(stderr, "pyscope: at most %d --lib-path options\n", MAX_LIB_PATHS);
                return PYSCOPE_ERR_USAGE;
            }
            lib_paths[copts.n_lib_paths++] = optarg;
            break;
        case OPT_COLOR:
            if (!cli_parse_color(optarg, &color))
                return PYSCOPE_ERR_USAGE;
            break;
        case 'h': dump_usage(stdout); return 0;
        default: dump_usage(stderr); return PYSCOPE_ERR_USAGE;
        }
    }
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
        dump_usage(stderr);
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
