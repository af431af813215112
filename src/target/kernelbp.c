/* Opening the perf events behind kernel-owned breakpoints, and recognising
 * their SIGTRAPs. Every descriptor is recorded with target/cleanup.c, which
 * closes them first when pyscope dies of a signal it can catch, before it
 * lets any thread go (an event left open would send SIGTRAP to a thread no
 * longer traced). */
#include "target/kernelbp.h"

#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "target/cleanup.h"

static int uprobe_type(void)
{
    static int type = -2;
    if (type != -2)
        return type;
    type = -1;
    FILE *fp = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
    if (fp) {
        if (fscanf(fp, "%d", &type) != 1)
            type = -1;
        fclose(fp);
    }
    return type;
}

static int open_event(struct perf_event_attr *attr, pid_t tid, uint64_t cookie)
{
    attr->size = sizeof *attr;
    attr->sample_period = 1;
    attr->sigtrap = 1;
    attr->remove_on_exec = 1;          /* the kernel requires it with sigtrap */
    attr->exclude_kernel = 1;
    attr->exclude_hv = 1;
    attr->sig_data = cookie;
    int fd = (int)syscall(SYS_perf_event_open, attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd >= 0)
        cleanup_perf_opened(fd);
    return fd;
}

int kbp_uprobe_open(pid_t tid, const char *file, uint64_t offset, uint64_t cookie)
{
    int type = uprobe_type();
    if (type < 0) {
        errno = ENOENT;
        return -1;
    }
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = (uint32_t)type;
    attr.config1 = (uint64_t)(uintptr_t)file;
    attr.config2 = offset;
    return open_event(&attr, tid, cookie);
}

static int watch_open(pid_t tid, uint64_t addr, int len, uint32_t type, uint64_t cookie)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_BREAKPOINT;
    attr.bp_type = type;
    attr.bp_addr = addr;
    attr.bp_len = (uint64_t)len;
    return open_event(&attr, tid, cookie);
}

int kbp_watch_open(pid_t tid, uint64_t addr, int len, uint64_t cookie)
{
    return watch_open(tid, addr, len, HW_BREAKPOINT_W, cookie);
}

int kbp_access_watch_open(pid_t tid, uint64_t addr, int len, uint64_t cookie)
{
    return watch_open(tid, addr, len, HW_BREAKPOINT_RW, cookie);
}

void kbp_close(int fd)
{
    if (fd < 0)
        return;
    cleanup_perf_closed(fd);
    close(fd);
}

uint64_t kbp_cookie(const siginfo_t *si)
{
    if (si->si_signo != SIGTRAP || si->si_code != TRAP_PERF)
        return 0;
    /* The kernel's _sigfault._perf: the address, then the perf data. */
    uint64_t data;
    memcpy(&data, (const char *)si + offsetof(siginfo_t, si_addr) + sizeof(void *), sizeof data);
    return data;
}

int kbp_probe_uprobes(pid_t tid, const char **why_not)
{
    if (uprobe_type() < 0) {
        *why_not = "the kernel has no uprobe event source";
        return 0;
    }
    /* Offset 0 of our own executable: registered, never placed in code. */
    int fd = kbp_uprobe_open(tid, "/proc/self/exe", 0, KBP_TAG_UPROBE);
    if (fd < 0) {
        *why_not = strerror(errno);
        return 0;
    }
    kbp_close(fd);
    return 1;
}

int kbp_probe_watchpoints(pid_t tid, const char **why_not)
{
    static int probe_word;
    int fd = kbp_watch_open(tid, (uint64_t)(uintptr_t)&probe_word, 4, KBP_TAG_WATCH);
    if (fd < 0) {
        *why_not = strerror(errno);
        return 0;
    }
    kbp_close(fd);
    return 1;
}

/* A counting watchpoint on a word of pyscope's own, written a few times:
 * some hypervisors accept debug registers and never deliver their traps
 * (seen on a Firecracker guest: perf's mem: events and gdb's hardware
 * watchpoints both stay silent), and a watch relying on them would wait
 * for ever while re-entries go by. */
int kbp_debug_registers_trap(void)
{
    static int answer = -2;
    if (answer != -2)
        return answer;
    static volatile uint32_t probe_word;
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_BREAKPOINT;
    attr.bp_type = HW_BREAKPOINT_W;
    attr.bp_addr = (uint64_t)(uintptr_t)&probe_word;
    attr.bp_len = HW_BREAKPOINT_LEN_4;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        answer = -1;
        return answer;
    }
    for (int i = 0; i < 4; i++)
        probe_word = probe_word + 1;
    uint64_t count = 0;
    answer = read(fd, &count, sizeof count) == (ssize_t)sizeof count ? count > 0 : -1;
    close(fd);
    return answer;
}
