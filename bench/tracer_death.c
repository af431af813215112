/* What the kernel undoes when a tracer dies of SIGKILL (issue 13): a tracer
 * plants a breakpoint on f() in a child that calls f() every 50 ms, handles
 * its first hits, then kills itself; a subreaper sees how the child ends.
 *
 *   ptrace-dr   DR0/DR7 through PTRACE_POKEUSER (what run --record-last and
 *               watch's Python watchpoints used)
 *   perf-bp     perf_event_open PERF_TYPE_BREAKPOINT with sigtrap (what run
 *               --record-last uses now)
 *   perf-stuck  the same, the tracer dying while the child sits in the
 *               SIGTRAP stop of a hit
 *   uprobe      perf_event_open on the uprobe PMU with sigtrap (an int3 the
 *               kernel owns)
 *   int3        an int3 written through /proc/PID/mem (what watch uses)
 *
 * Build and run as root: gcc -O1 -o /tmp/tracer_death bench/tracer_death.c &&
 * /tmp/tracer_death. Prints, per mechanism, where the child stopped (rip - f)
 * and how it ended. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) int f(int x)
{
    __asm__ volatile("");
    return x * 3 + 1;
}
static volatile int sink;

static void child_work(void)
{
    usleep(300000);
    for (int i = 0; i < 20; i++) {
        sink += f(i);
        usleep(50000);
    }
    _exit(0);
}

static long perf_open(struct perf_event_attr *a, pid_t pid)
{
    return syscall(SYS_perf_event_open, a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static int uprobe_type(void)
{
    FILE *fp = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
    int t = -1;
    if (fp) {
        if (fscanf(fp, "%d", &t) != 1)
            t = -1;
        fclose(fp);
    }
    return t;
}

static uint64_t file_offset_of(pid_t pid, uint64_t addr, char *path, size_t n)
{
    char mp[64], line[512];
    snprintf(mp, sizeof mp, "/proc/%d/maps", pid);
    FILE *fp = fopen(mp, "r");
    uint64_t off = 0;
    while (fp && fgets(line, sizeof line, fp)) {
        unsigned long lo, hi, fo;
        char perm[8], p[400] = "";
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %399s", &lo, &hi, perm, &fo, p) >= 4 &&
            addr >= lo && addr < hi) {
            off = addr - lo + fo;
            snprintf(path, n, "%s", p);
            break;
        }
    }
    if (fp)
        fclose(fp);
    return off;
}

static void tracer(const char *mode)
{
    pid_t c = fork();
    if (c == 0) {
        raise(SIGSTOP);
        child_work();
    }
    int st;
    waitpid(c, &st, WUNTRACED);
    ptrace(PTRACE_SEIZE, c, 0, 0);
    kill(c, SIGCONT);
    uint64_t addr = (uint64_t)(uintptr_t)f;
    int fd = -1;
    if (!strcmp(mode, "ptrace-dr")) {
        ptrace(PTRACE_INTERRUPT, c, 0, 0);
        while (waitpid(c, &st, __WALL) == c && !((st >> 16) == PTRACE_EVENT_STOP &&
                                                  WSTOPSIG(st) == SIGTRAP))
            ptrace(PTRACE_CONT, c, 0, 0);
        ptrace(PTRACE_POKEUSER, c, (void *)offsetof(struct user, u_debugreg[0]), (void *)addr);
        ptrace(PTRACE_POKEUSER, c, (void *)offsetof(struct user, u_debugreg[7]), (void *)1L);
        ptrace(PTRACE_CONT, c, 0, 0);
    } else if (!strcmp(mode, "int3")) {
        char mp[64];
        snprintf(mp, sizeof mp, "/proc/%d/mem", c);
        int mem = open(mp, O_RDWR);
        unsigned char cc = 0xcc;
        if (pwrite(mem, &cc, 1, (off_t)addr) != 1)
            perror("pwrite");
    } else {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        char path[400];
        if (!strcmp(mode, "uprobe")) {
            a.type = uprobe_type();
            a.config1 = (uint64_t)(uintptr_t)path;
            a.config2 = file_offset_of(c, addr, path, sizeof path);
        } else {
            a.type = PERF_TYPE_BREAKPOINT;
            a.bp_type = HW_BREAKPOINT_X;
            a.bp_addr = addr;
            a.bp_len = sizeof(long);
        }
        a.sample_period = 1;
        a.sigtrap = 1;
        a.remove_on_exec = 1;
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        fd = (int)perf_open(&a, c);
        if (fd < 0)
            printf("  perf_event_open: %s\n", strerror(errno));
    }
    int hits = 0;
    time_t t0 = time(NULL);
    while (time(NULL) - t0 < 3) {
        if (!strcmp(mode, "ptrace-dr") || !strcmp(mode, "int3")) {
            /* Dies before the first hit: nothing of the tracer remains. */
            usleep(100000);
            printf("  tracer: SIGKILL before the first hit\n");
            raise(SIGKILL);
        }
        pid_t got = waitpid(c, &st, __WALL | WNOHANG);
        if (got != c) {
            usleep(1000);
            continue;
        }
        if (!WIFSTOPPED(st))
            break;
        if (!(WSTOPSIG(st) == SIGTRAP && (st >> 16) == 0)) {
            ptrace(PTRACE_CONT, c, 0, 0);
            continue;
        }
        siginfo_t si;
        struct user_regs_struct r;
        ptrace(PTRACE_GETSIGINFO, c, 0, &si);
        ptrace(PTRACE_GETREGS, c, 0, &r);
        if (hits++ == 0)
            printf("  hit: SIGTRAP si_code %d, rip - f = %lld\n", si.si_code,
                   (long long)(r.rip - addr));
        if (!strcmp(mode, "perf-stuck")) {
            printf("  tracer: SIGKILL while the child is in the SIGTRAP stop\n");
            raise(SIGKILL);
        }
        ptrace(PTRACE_CONT, c, 0, 0);
        if (hits == 3) {
            printf("  tracer: 3 hits handled, SIGKILL\n");
            raise(SIGKILL);
        }
    }
    (void)fd;
}

int main(int argc, char **argv)
{
    static const char *const modes[] = {"ptrace-dr", "perf-bp", "perf-stuck", "uprobe", "int3"};
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    setvbuf(stdout, NULL, _IONBF, 0);
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        if (argc > 1 && strcmp(argv[1], modes[m]) != 0)
            continue;
        printf("%s:\n", modes[m]);
        pid_t t = fork();
        if (t == 0) {
            tracer(modes[m]);
            _exit(0);
        }
        int st;
        pid_t p;
        while ((p = wait(&st)) > 0) {
            if (p == t)
                continue;
            if (WIFSIGNALED(st))
                printf("  child: killed by %s\n", sigabbrev_np(WTERMSIG(st)));
            else
                printf("  child: exited %d after its 20 calls\n", WEXITSTATUS(st));
        }
    }
    return 0;
}
