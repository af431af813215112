/* Breakpoints the kernel owns (perf_event_open with sigtrap, Linux 5.13+):
 * a uprobe (the kernel's own int3, which it steps over by itself) or a
 * debug-register watchpoint, one perf event per thread. The kernel takes
 * them out when their descriptors close, so also when pyscope is killed
 * with SIGKILL; a hit stops the traced thread with SIGTRAP (si_code
 * TRAP_PERF) carrying the cookie given here. Forked children do not get
 * them: the events belong to the threads they were opened on. */
#ifndef PYSCOPE_TARGET_KERNELBP_H
#define PYSCOPE_TARGET_KERNELBP_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef TRAP_PERF
#define TRAP_PERF 6
#endif

/* Cookies: a tag in the top byte, below it an address (uprobes) or a
 * watchpoint slot. A SIGTRAP with such a tag is pyscope's, also when the
 * breakpoint it came from has been removed since. */
#define KBP_TAG_MASK (0xffull << 56)
#define KBP_TAG_UPROBE (0x50ull << 56)
#define KBP_TAG_WATCH (0x57ull << 56)

/* A uprobe at offset of file (as mapped by tid's process), reported on tid
 * only. Returns the descriptor, or -1 with errno set (EACCES/EPERM: not
 * permitted; ENOENT: no uprobe support). */
int kbp_uprobe_open(pid_t tid, const char *file, uint64_t offset, uint64_t cookie);
/* A watchpoint on writes to the len bytes at addr (aligned), on tid only. */
int kbp_watch_open(pid_t tid, uint64_t addr, int len, uint64_t cookie);
/* The same for reads and writes (x86 has no read-only watchpoint). */
int kbp_access_watch_open(pid_t tid, uint64_t addr, int len, uint64_t cookie);
void kbp_close(int fd);

/* The cookie of a SIGTRAP that a perf event sent, else 0. */
uint64_t kbp_cookie(const siginfo_t *si);

/* Whether this kernel lets pyscope open uprobes and watchpoints on tid:
 * 1 yes, 0 no; why (strerror) in *why_not. */
int kbp_probe_uprobes(pid_t tid, const char **why_not);
int kbp_probe_watchpoints(pid_t tid, const char **why_not);
/* Whether this machine's debug registers trap at all: 1 yes, 0 no (they
 * can be set, but the hypervisor never delivers the trap), -1 unknown
 * (perf's breakpoint events refused). Decided once. */
int kbp_debug_registers_trap(void);

#endif
