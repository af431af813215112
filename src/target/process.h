/* A live process as a target: memory through process_vm_readv (falling back to
 * /proc/PID/mem), and the per-thread facts only /proc knows. */
#ifndef PYSCOPE_TARGET_PROCESS_H
#define PYSCOPE_TARGET_PROCESS_H

#include <stdbool.h>
#include "target/target.h"
#include "util/error.h"

/* Opens pid for reading; on failure fills err (no such process, permission
 * denied with the ptrace_scope/CAP_SYS_PTRACE explanation, ...). */
struct target *process_open(pid_t pid, struct pyscope_error *err);

/* Re-reads /proc/PID/maps into t->maps. */
int process_read_maps(struct target *t);

/* The thread through which the process is read: pid itself, or a live
 * thread when the leader is a zombie (its main thread called pthread_exit);
 * 0 when no thread is alive. */
pid_t process_reader_tid(pid_t pid);

/* Changes when the process execs a new program: where its code and stack
 * were placed (randomised by every exec). 0 when unknown. */
uint64_t process_image_id(pid_t pid);

/* Is the process still there (some thread of it not a zombie)? */
bool process_alive(pid_t pid);

/* Has the process exited, or is it exiting with its memory already gone? */
bool process_gone(pid_t pid);

/* After a failure: has the process exited, or does it within a few tens of
 * milliseconds? A process in exit_group has threads not yet marked
 * exiting for a moment, while its leader already refuses ptrace. */
bool process_gone_soon(pid_t pid);

/* The most threads of one process that pyscope lists, pauses or samples. */
#define PROCESS_MAX_THREADS 8192

/* The kernel thread ids of the process, at most max; returns the count or -1. */
int process_list_tids(pid_t pid, pid_t *tids, int max);

/* What a thread is doing right now, from /proc/PID/task/TID/{stat,syscall}. */
struct thread_activity {
    char run_state;          /* R: on CPU or runnable; S: blocked in a syscall (D not told
                              * apart); else the stat letter when the syscall file
                              * could not be read; 0 if unknown */
    bool on_cpu;             /* the syscall file says "running" or the thread is outside a syscall */
    long syscall_nr;         /* -1 when not blocked in a syscall */
    uint64_t syscall_args[6];
};
/* x86-64's futex(2), the syscall every lock and GIL wait of CPython sleeps in
 * (the numbers are the target's; cores and live targets are x86-64). */
#define SYSCALL_NR_FUTEX 202
int process_thread_activity(pid_t pid, pid_t tid, struct thread_activity *out);

/* Raises the soft limit of open files to the hard one: samplers keep one
 * descriptor per thread (1,024 by default would cap them). Programs we
 * start were started before, with the limit they expect. */
void process_raise_fd_limit(void);

/* For samplers: the thread's syscall file, kept open and re-read with
 * pread (one system call per thread per sample instead of three); past the
 * limit of open files, -1 with errno EMFILE. */
int process_thread_syscall_fd(pid_t pid, pid_t tid);
int process_thread_activity_fd(int fd, struct thread_activity *out);
/* CPU time the thread has run, in ns (first field of /proc/PID/task/TID/schedstat). */
int process_thread_cpu_ns(pid_t pid, pid_t tid, uint64_t *ns);

/* How often the thread has given up its CPU of its own accord, to sleep
 * (voluntary_ctxt_switches of /proc/PID/task/TID/status). */
int process_thread_voluntary_switches(pid_t pid, pid_t tid, uint64_t *count);

/* The signals the process catches (SigCgt of /proc/PID/status): bit n-1 for signal n. */
int process_caught_signals(pid_t pid, uint64_t *mask);

/* Is the thread stopped? *state 'T' (by a signal: SIGSTOP, SIGTSTP, ...),
 * 't' (by its tracer) or 0; *tracer is TracerPid (0: none). From
 * /proc/PID/task/TID/status; -1 when it cannot be read. */
int process_thread_stopped(pid_t pid, pid_t tid, char *state, pid_t *tracer);

/* Reads /proc/PID/task/TID/comm (without the newline). */
int process_thread_comm(pid_t pid, pid_t tid, char *out, size_t outsize);

/* The thread's id in the innermost pid namespace, the last of its NSpid
 * line (one number when that is ours); *nested tells which. -1 when the
 * thread cannot be read. */
int process_own_tid(pid_t pid, pid_t tid, pid_t *own, bool *nested);

/* The command line, arguments separated by spaces. */
int process_cmdline(pid_t pid, char *out, size_t outsize);
/* The target's executable path as the target sees it. */
int process_exe(pid_t pid, char *out, size_t outsize);

#endif
