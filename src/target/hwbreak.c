/* Execute breakpoints for run's uncaught-exception stop: perf events, which
 * the kernel takes out when pyscope dies, or else the debug registers
 * through ptrace (DR0-DR3 hold the addresses, DR7 enables them as local
 * execute breakpoints, DR6 says which one fired). */
#include "target/hwbreak.h"

#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stddef.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

#include "target/cleanup.h"

#define DR_OFFSET(i) offsetof(struct user, u_debugreg[i])
/* DR7: bit 2i enables breakpoint i locally; its condition and length bits
 * (16 + 4i) stay 00 = break on instruction execution, length 1. */
#define DR7_LOCAL_ENABLE(i) (1ul << (2 * (i)))
#define DR6_HIT_MASK 0xful
/* RFLAGS.RF: the next instruction does not raise a debug exception. */
#define EFLAGS_RESUME (1ull << 16)

static int poke_debugreg(pid_t tid, int reg, unsigned long value)
{
    return ptrace(PTRACE_POKEUSER, tid, (void *)DR_OFFSET(reg), (void *)value) == 0 ? 0 : -1;
}

int hwbreak_arm(pid_t tid, const uint64_t *addrs, int n)
{
    if (n < 0 || n > HWBREAK_MAX)
        return -1;
    /* Disabled first: the kernel checks each address as it is enabled. */
    if (poke_debugreg(tid, 7, 0) != 0)
        return -1;
    unsigned long dr7 = 0;
    cleanup_debugregs_armed(tid);
    for (int i = 0; i < n; i++) {
        if (poke_debugreg(tid, i, (unsigned long)addrs[i]) != 0)
            return -1;
        dr7 |= DR7_LOCAL_ENABLE(i);
    }
    return poke_debugreg(tid, 7, dr7);
}

int hwbreak_disarm(pid_t tid)
{
    if (poke_debugreg(tid, 7, 0) != 0)
        return -1;
    cleanup_debugregs_cleared(tid);
    return 0;
}

int hwbreak_step_over(pid_t tid)
{
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) != 0)
        return -1;
    regs.eflags |= EFLAGS_RESUME;
    return ptrace(PTRACE_SETREGS, tid, NULL, &regs) == 0 ? 0 : -1;
}

int hwbreak_which(pid_t tid)
{
    errno = 0;
    long dr6 = ptrace(PTRACE_PEEKUSER, tid, (void *)DR_OFFSET(6), NULL);
    if (errno != 0)
        return -1;
    poke_debugreg(tid, 6, 0);
    for (int i = 0; i < HWBREAK_MAX; i++)
        if ((unsigned long)dr6 & (1ul << i) & DR6_HIT_MASK)
            return i;
    return -1;
}

int hwbreak_open(pid_t tid, uint64_t addr)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_BREAKPOINT;
    attr.bp_type = HW_BREAKPOINT_X;
    attr.bp_addr = addr;
    attr.bp_len = sizeof(long);
    attr.sample_period = 1;
    attr.sigtrap = 1;
    attr.remove_on_exec = 1;           /* required with sigtrap */
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}
