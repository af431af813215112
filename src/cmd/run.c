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

#define MAX_TRACED 8192

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

struct traced {
    pid_t tids[MAX_TRACED];
    int n;
};

static void traced_add(struct traced *tr, pid_t tid)
{
    for (int i = 0; i < tr->n; i++)
        if (tr->tids[i] == tid)
            return;
    if (tr->n < MAX_TRACED)
        tr->tids[tr->n++] = tid;
}

static void traced_remove(struct traced *tr, pid_t tid)
{
    for (int i = 0; i < tr->n; i++) {
        if (tr->tids[i] == tid) {
            tr->tids[i] = tr->tids[--tr->n];
            return;
        }
    }
}

/* Stops every traced thread except the crashing one (already stopped),
 * waiting for each stop; events of other kinds seen meanwhile are noted. */
static void stop_others(struct traced *tr, pid_t crashing)
{
    for (int i = 0; i < tr->n; i++)
        if (tr->tids[i] != crashing)
            ptrace(PTRACE_INTERRUPT, tr->tids[i], NULL, NULL);
    for (int i = 0; i < tr->n; i++) {
        pid_t tid = tr->tids[i];
        if (tid == crashing)
            continue;
        for (int tries = 0; tries < 2000; tries++) {
            int status;
            pid_t got = waitpid(tid, &status, __WALL | WNOHANG);
            if (got == tid) {
                if (WIFEXITED(status) || WIFSIGNALED(status)) {
                    traced_remove(tr, tid);
                    i--;
                }
                break;
            }
            if (got < 0 && errno != EINTR) {
                traced_remove(tr, tid);
                i--;
                break;
            }
            struct timespec ts = {0, 500000};
            nanosleep(&ts, NULL);
        }
    }
}

static void report_crash(struct traced *tr, pid_t crashing, int sig, const char *core_dir,
                         const char *output, bool json, bool native)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (ptrace(PTRACE_GETSIGINFO, crashing, NULL, &info) != 0)
        info.si_signo = sig;
    stop_others(tr, crashing);

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
                if (tr->tids[i] != crashing)
                    order[n++] = tr->tids[i];
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
    /* Let the others go; the signal then ends the process as it would have. */
    for (int i = 0; i < tr->n; i++)
        if (tr->tids[i] != crashing)
            ptrace(PTRACE_CONT, tr->tids[i], NULL, NULL);
}

static int start_child(char **argv)
{
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "pyscope: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        /* Wait for the tracer to attach before running anything. */
        raise(SIGSTOP);
        execvp(argv[0], argv);
        fprintf(stderr, "pyscope: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, WUNTRACED) != pid || !WIFSTOPPED(status)) {
        fprintf(stderr, "pyscope: the program did not start\n");
        return -1;
    }
    long options = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC;
    if (ptrace(PTRACE_SEIZE, pid, NULL, (void *)options) != 0) {
        fprintf(stderr, "pyscope: cannot trace the program: %s\n", strerror(errno));
        kill(pid, SIGKILL);
        return -1;
    }
    child_pid = pid;
    kill(pid, SIGCONT);
    return 0;
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
    if (start_child(argv + optind) != 0)
        return PYSCOPE_ERR_OTHER;

    struct traced *tr = calloc(1, sizeof *tr);
    if (!tr) {
        kill(child_pid, SIGKILL);
        return PYSCOPE_ERR_OTHER;
    }
    traced_add(tr, child_pid);
    bool reported = false;
    int exit_status = PYSCOPE_ERR_OTHER;
    for (;;) {
        int status;
        pid_t tid = waitpid(-1, &status, __WALL);
        if (tid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            traced_remove(tr, tid);
            if (tid == child_pid) {
                exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                break;
            }
            continue;
        }
        if (!WIFSTOPPED(status))
            continue;
        traced_add(tr, tid);
        int sig = WSTOPSIG(status);
        int event = status >> 16;
        if (event == PTRACE_EVENT_CLONE) {
            unsigned long new_tid = 0;
            if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &new_tid) == 0)
                traced_add(tr, (pid_t)new_tid);
            ptrace(PTRACE_CONT, tid, NULL, NULL);
            continue;
        }
        if (event == PTRACE_EVENT_STOP) {
            /* A group stop (SIGSTOP, Ctrl-Z) must stay a stop: listen
             * instead of resuming. Other event stops just continue. */
            if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
                ptrace(PTRACE_LISTEN, tid, NULL, NULL);
            else
                ptrace(PTRACE_CONT, tid, NULL, NULL);
            continue;
        }
        if (event != 0) {
            ptrace(PTRACE_CONT, tid, NULL, NULL);
            continue;
        }
        /* A signal for the program. */
        if (signal_is_crash(sig) && !reported) {
            reported = true;
            report_crash(tr, tid, sig, core_dir, output, json, native);
        }
        ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig);
    }
    free(tr);
    return exit_status;
}
