/* The signal-safe undo of target/cleanup.c against a real child process:
 * an int3 recorded there is put back; debug registers armed through
 * hwbreak_arm are cleared and the thread detached, so that the child runs
 * through the breakpoint's address without dying of SIGTRAP; a memory
 * descriptor that was forgotten is left alone; and, as the control,
 * detaching alone leaves the debug registers armed. Needs ptrace of a
 * child (allowed to a parent). */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target/cleanup.h"
#include "target/kernelbp.h"
#include "target/hwbreak.h"
#include "unit.h"

static volatile sig_atomic_t go;
static volatile int sink;

__attribute__((noinline)) static int marked(int x)
{
    __asm__ volatile("");
    return x + 1;
}

static void on_usr1(int sig)
{
    (void)sig;
    go = 1;
}

/* Waits for SIGUSR1, then calls marked() and exits 0. SIGUSR1 is blocked
 * from before the fork until sigsuspend: a signal sent between the test of
 * go and a pause() would be lost, and the test would wait for ever. */
static pid_t start_child(void)
{
    signal(SIGUSR1, on_usr1);
    sigset_t usr1, before;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, &before);
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t waiting = before;
        sigdelset(&waiting, SIGUSR1);
        while (!go)
            sigsuspend(&waiting);
        sink = marked(sink);
        _exit(0);
    }
    sigprocmask(SIG_SETMASK, &before, NULL);
    return pid;
}

static int byte_at(int fd, uint64_t addr)
{
    uint8_t b;
    return pread(fd, &b, 1, (off_t)addr) == 1 ? b : -1;
}

static void test_code_put_back(void)
{
    pid_t pid = start_child();
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    uint64_t addr = (uint64_t)(uintptr_t)marked;
    int original = byte_at(fd, addr);
    uint8_t int3 = 0xcc;
    cleanup_code_changed(fd, addr, (uint8_t)original);
    CHECK(pwrite(fd, &int3, 1, (off_t)addr) == 1);
    CHECK_EQ_INT(byte_at(fd, addr), 0xcc);
    cleanup_run();
    CHECK_EQ_INT(byte_at(fd, addr), original);

    /* Forgotten: the undo no longer writes through this descriptor. */
    cleanup_code_changed(fd, addr, (uint8_t)original);
    CHECK(pwrite(fd, &int3, 1, (off_t)addr) == 1);
    cleanup_code_forget(fd);
    cleanup_run();
    CHECK_EQ_INT(byte_at(fd, addr), 0xcc);
    uint8_t back = (uint8_t)original;
    CHECK(pwrite(fd, &back, 1, (off_t)addr) == 1);
    close(fd);

    kill(pid, SIGUSR1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_debugregs_cleared(void)
{
    if (kbp_debug_registers_trap() == 0)
        return;                    /* nothing to show: see the control below */
    pid_t pid = start_child();
    int status;
    CHECK(ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0);
    CHECK(ptrace(PTRACE_INTERRUPT, pid, NULL, NULL) == 0);
    CHECK(waitpid(pid, &status, __WALL) == pid && WIFSTOPPED(status));
    uint64_t addr = (uint64_t)(uintptr_t)marked;
    CHECK_EQ_INT(hwbreak_arm(pid, &addr, 1), 0);
    /* Left in the interrupt stop, as pyscope would be when a signal came. */
    cleanup_run();
    /* Detached, with DR7 cleared: marked() runs without a trap. */
    kill(pid, SIGUSR1);
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (WIFSIGNALED(status))
        fprintf(stderr, "    the child died of signal %d\n", WTERMSIG(status));
}

/* The control: detaching alone leaves the debug registers armed (the
 * kernel does not clear them), and the child dies at the address. */
static void test_detach_alone_leaves_them(void)
{
    if (kbp_debug_registers_trap() == 0) {
        /* Then test_debugregs_cleared shows nothing either: say so. */
        printf("test_cleanup: the debug-register control and test skipped: this machine's "
               "debug registers never trap\n");
        return;
    }
    pid_t pid = start_child();
    int status;
    CHECK(ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0);
    CHECK(ptrace(PTRACE_INTERRUPT, pid, NULL, NULL) == 0);
    CHECK(waitpid(pid, &status, __WALL) == pid && WIFSTOPPED(status));
    uint64_t addr = (uint64_t)(uintptr_t)marked;
    CHECK_EQ_INT(hwbreak_arm(pid, &addr, 1), 0);
    CHECK(ptrace(PTRACE_DETACH, pid, NULL, NULL) == 0);
    cleanup_thread_released(pid);
    kill(pid, SIGUSR1);
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTRAP);
}

static void test_terminating_signals(void)
{
    sigset_t set;
    cleanup_terminating_signals(&set);
    int expected[] = {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1, SIGUSR2,
                      SIGXCPU, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGRTMIN, SIGRTMAX};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        CHECK(sigismember(&set, expected[i]) == 1);
    /* Not catchable, or faults that cannot wait for a loop. */
    int absent[] = {SIGKILL, SIGSTOP, SIGSEGV, SIGCHLD, SIGCONT};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        CHECK(sigismember(&set, absent[i]) == 0);
}

int main(void)
{
    test_terminating_signals();
    test_code_put_back();
    test_debugregs_cleared();
    test_detach_alone_leaves_them();
    return unit_report("test_cleanup");
}
