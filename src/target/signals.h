/* Names and plain-language causes of fatal signals, from the siginfo a core
 * file (NT_SIGINFO) or ptrace (PTRACE_GETSIGINFO) gives. */
#ifndef PYSCOPE_TARGET_SIGNALS_H
#define PYSCOPE_TARGET_SIGNALS_H

#include <stddef.h>
#include <stdint.h>

struct signal_facts {
    int signo;            /* 0: none */
    int code;             /* si_code */
    uint64_t addr;        /* si_addr for SIGSEGV/SIGBUS/SIGFPE/SIGILL */
    int sender_pid;       /* si_pid for kill()/tgkill() signals */
};

/* "SIGSEGV", or "signal 40". */
const char *signal_name(int signo, char *buf, size_t bufsize);

/* "NULL pointer dereference at 0x0", "integer divide by zero at 0x401136",
 * "abort() or raise() in the process", ... */
void signal_cause(const struct signal_facts *sig, char *out, size_t outsize);

/* Does the signal end the process when not handled? False for the stop and
 * ignore-by-default signals, such as the SIGSTOP gdb's gcore records. */
int signal_is_fatal_by_default(int signo);

/* The signal named by text: "SIGUSR2", "USR2" (any case) or a number.
 * Returns 0 when there is none. */
int signal_from_name(const char *text);

/* Is this one of the signals `run` treats as a crash? */
int signal_is_crash(int signo);

#endif
