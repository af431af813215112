/* Hardware execution breakpoints in a traced thread (x86-64 debug registers
 * DR0-DR3 through PTRACE_POKEUSER): they stop the thread on entering an
 * address without writing to the target's memory, and a fork()ed child
 * does not inherit them. The thread must be in a ptrace stop. */
#ifndef PYSCOPE_TARGET_HWBREAK_H
#define PYSCOPE_TARGET_HWBREAK_H

#include <stdint.h>
#include <sys/types.h>

#define HWBREAK_MAX 4

/* Stops tid on executing any of addrs[0..n) (n <= HWBREAK_MAX). Returns 0,
 * or -1 (errno set) when the kernel refused. */
int hwbreak_arm(pid_t tid, const uint64_t *addrs, int n);

/* Clears all of tid's breakpoints. */
int hwbreak_disarm(pid_t tid);

/* Lets tid execute the instruction its breakpoint stopped it at (sets the
 * resume flag), for when the breakpoint stays armed. */
int hwbreak_step_over(pid_t tid);

/* After a SIGTRAP stop: which breakpoint fired (0..3, from DR6), or -1 when
 * none did. Clears DR6. */
int hwbreak_which(pid_t tid);

/* The si_code of a SIGTRAP caused by a hardware breakpoint. */
#define HWBREAK_SI_CODE 4   /* TRAP_HWBKPT */

/* The same breakpoint as a perf event (perf_event_open, PERF_TYPE_BREAKPOINT
 * with sigtrap, Linux 5.13): the kernel removes it when the descriptor
 * closes, also when pyscope is killed with SIGKILL, whereas debug registers
 * set with ptrace stay armed in the detached thread and kill it with
 * SIGTRAP at its next hit. A hit stops the traced thread with SIGTRAP
 * (si_code HWBREAK_PERF_SI_CODE) before the instruction at addr runs; exec
 * removes it. Returns the descriptor, or -1 (errno set). */
int hwbreak_open(pid_t tid, uint64_t addr);

#define HWBREAK_PERF_SI_CODE 6   /* TRAP_PERF */

#endif
