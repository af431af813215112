/* Signal descriptions. si_code values are the kernel's (asm-generic/siginfo.h);
 * a fault below one page is reported as a NULL pointer dereference because
 * that is what reading a field of a NULL struct pointer looks like. */
#include "target/signals.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NULL_PAGE 4096u

const char *signal_name(int signo, char *buf, size_t bufsize)
{
    static const struct { int signo; const char *name; } names[] = {
        {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"}, {SIGILL, "SIGILL"},
        {SIGABRT, "SIGABRT"}, {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"}, {SIGKILL, "SIGKILL"},
        {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"}, {SIGQUIT, "SIGQUIT"}, {SIGHUP, "SIGHUP"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"},
        {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSTOP, "SIGSTOP"}, {SIGCHLD, "SIGCHLD"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].signo == signo)
            return names[i].name;
    snprintf(buf, bufsize, "signal %d", signo);
    return buf;
}

int signal_from_name(const char *text)
{
    char *end;
    long number = strtol(text, &end, 10);
    if (end != text && *end == '\0')
        return number > 0 && number < NSIG ? (int)number : 0;
    if (strncasecmp(text, "SIG", 3) == 0)
        text += 3;
    for (int signo = 1; signo < NSIG; signo++) {
        const char *abbrev = sigabbrev_np(signo);
        if (abbrev && strcasecmp(abbrev, text) == 0)
            return signo;
    }
    return 0;
}

int signal_is_fatal_by_default(int signo)
{
    switch (signo) {
    case 0: case SIGSTOP: case SIGTSTP: case SIGTTIN: case SIGTTOU: case SIGCONT: case SIGCHLD:
    case SIGURG: case SIGWINCH:
        return 0;
    }
    return signo > 0 && signo < 65;
}

int signal_is_crash(int signo)
{
    return signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL ||
           signo == SIGABRT;
}

/* Causes that apply to any signal: who sent it. */
static int sender_cause(const struct signal_facts *s, char *out, size_t outsize)
{
    switch (s->code) {
    case SI_USER:
        snprintf(out, outsize, "sent by kill() from process %d", s->sender_pid);
        return 1;
    case SI_TKILL:
        if (s->signo == SIGABRT)
            snprintf(out, outsize, "abort() or raise() in the process");
        else
            snprintf(out, outsize, "sent by tgkill() from process %d", s->sender_pid);
        return 1;
    case SI_QUEUE:
        snprintf(out, outsize, "sent by sigqueue() from process %d", s->sender_pid);
        return 1;
    }
    return 0;
}

void signal_cause(const struct signal_facts *s, char *out, size_t outsize)
{
    unsigned long long addr = (unsigned long long)s->addr;
    if (sender_cause(s, out, outsize))
        return;
    switch (s->signo) {
    case SIGSEGV:
        if (s->code == SEGV_MAPERR && s->addr < NULL_PAGE)
            snprintf(out, outsize, "NULL pointer dereference at 0x%llx", addr);
        else if (s->code == SEGV_MAPERR)
            snprintf(out, outsize, "access to unmapped address 0x%llx", addr);
        else if (s->code == SEGV_ACCERR)
            snprintf(out, outsize, "access to 0x%llx not allowed by the mapping's permissions",
                     addr);
        else if (s->code == SI_KERNEL)
            snprintf(out, outsize, "general protection fault (non-canonical address or "
                                   "privileged instruction)");
        else
            snprintf(out, outsize, "invalid memory access at 0x%llx (si_code %d)", addr, s->code);
        return;
    case SIGBUS:
        if (s->code == BUS_ADRALN)
            snprintf(out, outsize, "misaligned access at 0x%llx", addr);
        else if (s->code == BUS_ADRERR)
            snprintf(out, outsize, "access to 0x%llx beyond the end of a mapped file", addr);
        else
            snprintf(out, outsize, "bus error at 0x%llx (si_code %d)", addr, s->code);
        return;
    case SIGFPE: {
        static const char *const causes[] = {"", "integer divide by zero", "integer overflow",
                                             "floating-point divide by zero",
                                             "floating-point overflow",
                                             "floating-point underflow",
                                             "inexact floating-point result",
                                             "invalid floating-point operation",
                                             "subscript out of range"};
        if (s->code >= 1 && s->code <= 8)
            snprintf(out, outsize, "%s at 0x%llx", causes[s->code], addr);
        else
            snprintf(out, outsize, "arithmetic exception at 0x%llx", addr);
        return;
    }
    case SIGILL:
        snprintf(out, outsize, "%s at 0x%llx",
                 s->code == ILL_ILLOPC ? "illegal opcode" : s->code == ILL_PRVOPC
                                                                ? "privileged opcode"
                                                                : "illegal instruction",
                 addr);
        return;
    case SIGABRT:
        snprintf(out, outsize, "abort");
        return;
    }
    snprintf(out, outsize, "si_code %d", s->code);
}
