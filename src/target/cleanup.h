/* What pyscope has changed in a target, kept where a signal handler can
 * undo it: int3 bytes written into its code, debug registers armed in its
 * threads, threads held under ptrace. The primitives that make each change
 * (breakpoint.c, hwbreak.c, kernelbp.c, tracer.c) record it here, so every
 * command gets the same signal-safe cleanup. */
#ifndef PYSCOPE_TARGET_CLEANUP_H
#define PYSCOPE_TARGET_CLEANUP_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

/* Every signal that ends pyscope by default and can be caught or blocked:
 * SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1/2, SIGXCPU,
 * SIGVTALRM, SIGPROF, SIGIO, SIGPWR, the real-time signals, ... A command
 * that handles them in its own loop blocks this set and waits for it. */
void cleanup_terminating_signals(sigset_t *set);
/* Takes out of set the signals that were ignored when pyscope started
 * (nohup's SIGHUP, a background job's SIGINT and SIGQUIT): they stay
 * ignored, whenever they come. cleanup_install leaves them alone too. */
void cleanup_without_ignored(sigset_t *set);

/* Installs handlers for those signals (not the ones ignored at start) and
 * for pyscope's own crashes (SIGSEGV, SIGBUS, SIGABRT, ...): they undo
 * every recorded change, then pyscope dies of the signal as it would have.
 * A blocked signal still waits for the command. Safe to call more than
 * once. */
void cleanup_install(void);
/* Dies of sig as if nothing handled it (async-signal-safe). */
void cleanup_die_of(int sig);

/* An int3 went in at addr; fd is the target's /proc/PID/mem, open for
 * writing for as long as the breakpoint may be there. */
void cleanup_code_changed(int fd, uint64_t addr, uint8_t original);
/* The original byte at addr is back. */
void cleanup_code_restored(uint64_t addr);
/* fd is about to be closed: forget what was written through it (after an
 * exec the addresses mean something else, and the number will be reused). */
void cleanup_code_forget(int fd);

/* tid is traced (seized) by pyscope / no longer. */
void cleanup_thread_traced(pid_t tid);
void cleanup_thread_released(pid_t tid);
/* tid's debug registers hold breakpoints or watchpoints of ours / not any more. */
void cleanup_debugregs_armed(pid_t tid);
void cleanup_debugregs_cleared(pid_t tid);

/* A perf event of ours (target/kernelbp.c) was opened / closed: the undo
 * closes every one still open before it lets a thread go. */
void cleanup_perf_opened(int fd);
void cleanup_perf_closed(int fd);

/* Undoes everything recorded, from any context (async-signal-safe): puts
 * the code back, stops each traced thread (bounded), clears its debug
 * registers, moves a thread that stopped on one of our int3s back to the
 * instruction, drops the SIGTRAP our breakpoints caused and detaches. */
void cleanup_run(void);

#endif
