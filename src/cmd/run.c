/* pyscope run: start a program under ptrace, let it run (it is stopped only
 * when a signal arrives for it), and when it receives a crash signal print a
 * full dump of every thread (native and Python frames, the crashing
 * thread's locals) and optionally write a core, before letting the signal
 * kill it. The program's exit status is passed through. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd/collect.h"
#include "cmd/commands.h"
#include "output/stack_report.h"
#include "python/runtime.h"
#include "target/core_write.h"
#include "target/process.h"
#include "target/signals.h"
#include "target/tracer.h"

static pid_t child_pid;
static volatile sig_atomic_t forwarded_signal;

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: pyscope run [options] -- PROGRAM [ARGS...]\n"
            "\n"
            "Runs PROGRAM (e.g. python app.py) and watches it with ptrace. It runs at full\n"
            "speed and is stopped only when a signal arrives for it. If it receives\n"
            "SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT, pyscope prints the stacks of\n"
            "every thread (C and Python frames, and the crashing thread's locals) before\n"
            "the signal takes effect. pyscope exits with the program's status (128+N when\n"
            "a signal N killed it). Ctrl-C and other signals reach the program as usual.\n"
            "\n"
            "      --core-dir DIR  also write a core file DIR/core.PID at the crash\n"
            "                      (read it with: pyscope dump --core DIR/core.PID)\n"
            "  -o, --output FILE   write the crash report to FILE instead of stderr\n"
            "  -j, --json          write the crash report as JSON (docs/json.md)\n"
            "      --no-native     leave out the C frames\n"
            "  -h, --help          this help\n");
}

/* Signals sent to pyscope alone (kill PID) are passed on to the program;
 * those from the terminal already reach it, as it shares our process group. */
static void forward_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    if (child_pid > 0 && (info->si_code == SI_USER || info->si_code == SI_QUEUE)) {
        kill(child_pid, sig);
        forwarded_signal = sig;
    }
}

static void report_crash(struct tracer *tr, pid_t crashing, int sig, const char *core_dir,
                         const char *output, bool json, bool native)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (ptrace(PTRACE_GETSIGINFO, crashing, NULL, &info) != 0)
        info.si_signo = sig;
    tracer_stop_all(tr);

    FILE *out = stderr;
    if (output && !(out = fopen(output, "w"))) {
        fprintf(stderr, "pyscope: cannot write %s: %s\n", output, strerror(errno));
        out = stderr;
    }
    struct pyscope_error err = {0};
    struct target *t = process_open(child_pid, &err);
    if (!t) {
        error_report(&err);
        goto done;
    }
    target_cache_enable(t);
    struct py_runtime rt;
    struct py_runtime *rtp = &rt;
    if (py_runtime_find(t, &rt, &err) != 0) {
        fprintf(stderr, "pyscope: no Python stacks: %s\n", err.message);
        rtp = NULL;
    }
    struct stack_report report = {0};
    report.pid = child_pid;
    report.paused = true;
    process_cmdline(child_pid, report.command, sizeof report.command);
    process_exe(child_pid, report.executable, sizeof report.executable);
    snprintf(report.python_version, sizeof report.python_version, "%s", rtp ? rt.version : "?");
    struct collect_request req = {.paused = true, .locals_thread = crashing, .native = native};
    memset(&err, 0, sizeof err);
    if (collect_report(t, rtp, &req, &report, &err) != 0) {
        error_report(&err);
    } else {
        uint64_t addr = (uint64_t)(uintptr_t)info.si_addr;
        collect_set_signal(&report, sig, info.si_code, addr, info.si_pid, crashing);
        if (json)
            stack_report_write_json(out, &report);
        else {
            fprintf(out, "\npyscope: the program received a crash signal; every thread, at that "
                         "moment:\n\n");
            stack_report_write_text(out, &report, false);
        }
        fflush(out);
    }
    stack_report_free(&report);
    if (core_dir) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/core.%d", core_dir, (int)child_pid);
        /* The crashing thread first, as the kernel does. */
        pid_t *order = malloc(sizeof *order * (size_t)(tr->n ? tr->n : 1));
        if (order) {
            int n = 0;
            order[n++] = crashing;
            for (int i = 0; i < tr->n; i++)
                if (tr->threads[i].tid != crashing)
                    order[n++] = tr->threads[i].tid;
            memset(&err, 0, sizeof err);
            if (core_write(t, order, n, &info, path, &err) == 0)
                fprintf(stderr, "pyscope: core written to %s\n", path);
            else
                error_report(&err);
            free(order);
        }
    }
    target_close(t);
done:
    if (out != stderr)
        fclose(out);
    /* Let the others go; the signal then ends the process as it would have.
     * Threads that stopped with an event of their own keep it for the loop. */
    tracer_resume_all(tr, crashing);
}

int cmd_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"core-dir", required_argument, NULL, 'c'},
        {"output", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'j'},
        {"no-native", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *core_dir = NULL, *output = NULL;
    bool json = false, native = true;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+o:jh", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': core_dir = optarg; break;
        case 'o': output = optarg; break;
        case 'j': json = true; break;
        case 'N': native = false; break;
        case 'h': run_usage(stdout); return 0;
        default: run_usage(stderr); return PYSCOPE_ERR_USAGE;
        }
    }
    if (optind >= argc) {
        run_usage(stderr);
        return PYSCOPE_ERR_USAGE;
    }
    if (core_dir && access(core_dir, W_OK) != 0) {
        fprintf(stderr, "pyscope: --core-dir %s: %s\n", core_dir, strerror(errno));
        return PYSCOPE_ERR_USAGE;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaction(forwarded[i], &sa, NULL);
    /* The terminal's Ctrl-C is for the program: it decides what to do. */
    struct tracer tr;
    struct pyscope_error err = {0};
    if (tracer_spawn(&tr, argv + optind, PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC, &err) != 0) {
        error_report(&err);
        return PYSCOPE_ERR_OTHER;
    }
    child_pid = tr.pid;
    bool reported = false;
    int exit_status = PYSCOPE_ERR_OTHER;
    for (;;) {
        int status;
        pid_t tid = tracer_wait(&tr, &status);
        if (tid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            if (tid == child_pid) {
                exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                break;
            }
            continue;
        }
        if (!WIFSTOPPED(status))
            continue;
        int sig = WSTOPSIG(status);
        int event = status >> 16;
        if (event == PTRACE_EVENT_STOP) {
            /* A group stop (SIGSTOP, Ctrl-Z) must stay a stop: listen
             * instead of resuming. Other event stops just continue. */
            if (tracer_is_group_stop(status))
                tracer_listen(&tr, tid);
            else
                tracer_cont(&tr, tid, 0);
            continue;
        }
        if (event != 0) {
            tracer_cont(&tr, tid, 0);
            continue;
        }
        /* A signal for the program. */
        if (signal_is_crash(sig) && !reported) {
            reported = true;
            report_crash(&tr, tid, sig, core_dir, output, json, native);
        }
        tracer_cont(&tr, tid, sig);
    }
    tracer_free(&tr);
    return exit_status;
}
