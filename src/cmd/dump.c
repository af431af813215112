/* pyscope dump: every thread's Python stack, GIL and GC state from a live
 * process, by default without stopping it (--pause and --native stop it
 * briefly), or from a core file (--core). */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/collect.h"
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "cmd/tree.h"
#include "output/stack_report.h"
#include "python/locals_report.h"
#include "python/runtime.h"
#include "target/core.h"
#include "target/pause.h"
#include "target/process.h"
#include "target/signals.h"
#include "util/clock.h"

#define MAX_LIB_PATHS 32

static void dump_usage(FILE *out)
{
    fprintf(out,
            "usage: pyscope dump [options] PID\n"
            "       pyscope dump [options] --core FILE [--exe PATH] [--lib-path DIR]...\n"
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
            "      --core FILE  read a core file (kernel core or gdb gcore) instead of a PID\n"
            "      --exe PATH   with --core: the executable, when it is not at the path the\n"
            "                   core records (e.g. the core comes from another machine)\n"
            "      --lib-path DIR  with --core: a directory holding the shared libraries\n"
            "                   (searched by file name before the recorded path; repeatable)\n"
            "      --color=WHEN always, never or auto (default: auto, on a terminal)\n"
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

/* A core whose Python binary is missing gives "not Python": say which
 * files were missing and how to supply them instead. */
static void explain_missing_files(struct target *t, struct pyscope_error *err)
{
    const char *missing[8];
    size_t n = core_missing_files(t, missing, 8);
    if (n == 0)
        return;
    char list[sizeof err->hint / 2] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && i < 8; i++)
        used += (size_t)snprintf(list + used, used < sizeof list ? sizeof list - used : 0,
                                 "  %s\n", missing[i]);
    const struct core_info *info = core_get_info(t);
    error_set(err, PYSCOPE_ERR_NOT_PYTHON,
              "cannot find CPython in core of process %d: %zu file%s it had mapped %s missing",
              (int)info->pid, n, n == 1 ? "" : "s", n == 1 ? "is" : "are");
    error_hint(err,
               "missing:\n%s"
               "Pass the executable with --exe PATH (the core records %s) and a directory\n"
               "holding the libraries with --lib-path DIR (e.g. a copy of the other machine's\n"
               "/usr/lib/x86_64-linux-gnu).",
               list, info->exe[0] ? info->exe : "no executable path");
}

static int dump_core(const char *core_path, const struct core_options *copts,
                     const struct collect_request *req, bool json, int color)
{
    struct pyscope_error err = {0};
    struct target *t = core_open(core_path, copts, &err);
    if (!t)
        return error_report(&err);
    target_cache_enable(t);
    const struct core_info *info = core_get_info(t);
    struct stack_report report = {0};
    struct py_runtime rt;
    int status = 0;
    if (py_runtime_find(t, &rt, &err) != 0) {
        if (err.status == PYSCOPE_ERR_NOT_PYTHON)
            explain_missing_files(t, &err);
        if (err.status == PYSCOPE_ERR_NOT_PYTHON && !core_missing_files(t, NULL, 0))
            error_set(&err, PYSCOPE_ERR_NOT_PYTHON, "core of process %d (%s) is not of a Python "
                      "process", (int)info->pid, info->fname);
        goto fail;
    }
    report.pid = info->pid;
    report.paused = true;
    snprintf(report.core_path, sizeof report.core_path, "%s", core_path);
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
    if (pause && process_pause(pid, &err) != 0)
        goto fail;

    report.pid = pid;
    report.paused = pause;
    process_cmdline(pid, report.command, sizeof report.command);
    process_exe(pid, report.executable, sizeof report.executable);
    snprintf(report.python_version, sizeof report.python_version, "%s", rt.version);
    int rc = collect_report(t, &rt, req, &report, &err);
    if (pause)
        process_resume();
    if (rc != 0)
        goto fail;
    /* A target that died while we read leaves partial, meaningless stacks. */
    if (process_gone(pid)) {
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
        process_gone(pid))
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
    enum { OPT_COLOR = 256, OPT_PRINT, OPT_NATIVE_ALL, OPT_CORE, OPT_EXE, OPT_LIB_PATH };
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
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, pause = false, verbose = false;
    struct collect_request req = {0};
    const char *core_path = NULL;
    const char *lib_paths[MAX_LIB_PATHS];
    struct core_options copts = {.lib_paths = lib_paths, .warnings = stderr};
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
        case OPT_CORE: core_path = optarg; break;
        case OPT_EXE: copts.exe = optarg; break;
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
        req.paused = true;
        return dump_core(core_path, &copts, &req, json, color);
    }
    if (copts.exe || copts.n_lib_paths) {
        fprintf(stderr, "pyscope: --exe and --lib-path go with --core FILE\n");
        return PYSCOPE_ERR_USAGE;
    }
    pid_t pid;
    if (optind != argc - 1 || !cli_parse_pid(argv[optind], &pid)) {
        if (optind < argc)
            fprintf(stderr, "pyscope: invalid process id '%s'\n", argv[optind]);
        dump_usage(stderr);
        return PYSCOPE_ERR_USAGE;
    }
    /* Unwinding reads registers, which only a stopped thread has. */
    if (req.native)
        pause = true;
    req.paused = pause;
    req.waits = true;
    return dump_live(pid, pause, &req, json, color, verbose);
}
