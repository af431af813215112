/* A sampling session: one or more processes (the target, and its Python
 * children with --subprocesses), a clock that paces passes at the requested
 * rate, and the conditions that end a recording (duration, Ctrl-C, exit). */
#ifndef PYSCOPE_SAMPLING_SESSION_H
#define PYSCOPE_SAMPLING_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "profile/profile.h"
#include "sampling/sampler.h"
#include "util/error.h"

#define SESSION_MAX_PROCESSES 64

struct session_options {
    double rate_hz;            /* 0: as fast as possible */
    double duration_s;         /* 0: until stopped */
    bool subprocesses;
    bool record_timeline;
    bool async_tasks;          /* --async: loop threads sampled as task stacks */
    bool async_waiting;        /* and their suspended tasks as idle samples */
    char **command;            /* NULL-terminated; when set, start it instead of attaching */
    int native_mode;           /* --native: an enum native_mode, NATIVE_OFF (0) without */
    bool native_all;           /* --native-all: keep the interpreter's plumbing frames */
    bool quiet_native;         /* do not say on stderr how C stacks are taken */
};

struct session {
    struct session_options opts;
    struct profile *profile;
    struct sampler samplers[SESSION_MAX_PROCESSES];
    bool active[SESSION_MAX_PROCESSES];
    pid_t ignored[256];        /* children found not to be Python */
    int n_ignored;
    pid_t root;                /* the attached or started process */
    bool started_child;        /* we forked root */
    int child_status;          /* its wait status once it exited */
    bool child_exited;
    bool stopped;              /* session_stop has run */
    bool fds_exhausted;        /* a sampler ran out of descriptors for threads' files */
    uint64_t start_ns;
    uint64_t last_scan_ns;
    /* Optional: when it turns non-zero, on_tick runs at the next pass with
     * redraw_only set (top lays its last figures out again after a resize). */
    volatile sig_atomic_t *redraw_request;
    bool redraw_only;
};

/* Attaches to pid, or starts opts->command, and waits until Python runs in
 * it. The profile's meta (pid, command, version) is filled in. */
int session_start(struct session *s, pid_t pid, const struct session_options *opts,
                  struct profile *profile, struct pyscope_error *err);

/* Runs passes until the duration ends, *stop becomes true, or every
 * process has exited. on_tick, if set, is called about once a second. */
void session_run(struct session *s, volatile int *stop,
                 void (*on_tick)(struct session *s, void *ctx), void *ctx);

/* Stops sampling: closes open timeline segments and records the duration.
 * A started command is left running. Calling it again does nothing. */
void session_stop(struct session *s);

/* Waits for the started command, if any, to exit. When a signal interrupts
 * the wait with *forward set to its number, that signal is sent on to the
 * command and *forward cleared; the wait goes on. forward may be NULL. */
void session_wait_command(struct session *s, volatile sig_atomic_t *forward);

/* Ends the session: session_stop, then (when the command was started by us)
 * waits for it, after sending it SIGTERM if kill_child. */
void session_finish(struct session *s, bool kill_child);
/* The target of the process pid is sampled through, or NULL when it is not
 * sampled (any more). */
struct target *session_target(struct session *s, pid_t pid);

/* The exit status to report for a started command (its own), or 0. */
int session_exit_status(const struct session *s);

#endif
