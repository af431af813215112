/* C stacks for the sampler (record, top, run --record-last with --native):
 * how each thread's C stack is taken at a pass (a perf_event sample of its
 * registers and stack top, or the ptrace fallback that stops the process for
 * the pass), and how it becomes part of the sample's profile stack. */
#ifndef PYSCOPE_NATIVE_NATIVE_SAMPLER_H
#define PYSCOPE_NATIVE_NATIVE_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile/profile.h"
#include "target/target.h"
#include "util/error.h"

enum native_mode {
    NATIVE_OFF = 0,
    NATIVE_AUTO,         /* perf_event where the kernel allows it, else ptrace */
    NATIVE_PERF,         /* perf_event only: fail when refused */
    NATIVE_PTRACE,       /* the fallback, forced */
};

/* "auto", "perf", "ptrace" -> the mode; false for anything else. */
bool native_mode_parse(const char *text, enum native_mode *mode);

/* The highest rate the ptrace fallback stops a process at. */
#define NATIVE_PTRACE_MAX_HZ 100.0

struct native_sampler;

/* The Python frames of one sample, innermost first, as the sampler read
 * them in this pass. */
struct native_py_stack {
    const uint32_t *ids;         /* profile frame ids */
    const bool *is_entry;        /* first frame of a C->Python call */
    size_t n;
    uint32_t leaf;               /* the "[C] callable" pseudo-frame, or UINT32_MAX */
    uint64_t top_frame;          /* where the innermost frame is, and its instruction: */
    long top_instr;              /* a C stack sampled before the pass belongs to the
                                  * same Python state only when these did not move */
    /* The C stack must be sampled between these (monotonic ns): for a
     * thread holding the GIL, since the first pass that saw this hold read
     * the GIL and before this pass did, so that it is of the hold and not of
     * the wait for the GIL before it. 0 and UINT64_MAX: no bound. */
    uint64_t not_before, not_after;
};

/* Opens the C-stack side for process pid. binary: the file holding
 * _PyRuntime. With NATIVE_AUTO a refused perf_event falls back to ptrace;
 * *note then says why (for stderr and the recording's metadata). */
struct native_sampler *native_sampler_open(struct target *t, pid_t pid, const char *binary,
                                           enum native_mode mode, bool all, double rate_hz,
                                           struct profile *profile, char *note, size_t note_size,
                                           struct pyscope_error *err);
void native_sampler_close(struct native_sampler *ns);
/* The mode in use: NATIVE_PERF or NATIVE_PTRACE. */
enum native_mode native_sampler_mode(const struct native_sampler *ns);

/* Around one sampling pass: the ptrace fallback stops every thread here and
 * lets them go at the end; the perf_event path does nothing. */
void native_sampler_begin_pass(struct native_sampler *ns, uint64_t now_ns);
void native_sampler_end_pass(struct native_sampler *ns);

/* The profile stack (outermost first) of thread tid's sample in this pass:
 * its C stack merged with py when both are from the same instant and match,
 * both one after the other when they do not match (counted unmerged), the
 * Python frames alone when no C stack of this instant exists (counted
 * missing). blocked: the thread is off CPU (idle or waiting for the GIL).
 * Writes at most max ids to out; returns how many. */
size_t native_sampler_stack(struct native_sampler *ns, pid_t tid, bool blocked,
                            const struct native_py_stack *py, uint32_t *out, size_t max);

/* Drops what is kept about threads not passed since (exited). */
void native_sampler_forget(struct native_sampler *ns, pid_t tid);

/* Of a thread a look found runnable: whether that is a blocked thread
 * interrupted once for a switch sample (a ptrace interrupt restarts its
 * system call), either not stopped and let go yet, or let go and not asleep
 * since nor run for more than the way back takes: runnable only because of
 * the interrupt, it still waits (POKE_ON_ITS_WAY). POKE_SLEPT_SINCE: it has
 * gone back to sleep since it was let go, maybe just after that look, which
 * is then to be taken again. POKE_NONE: its state is its own, as it is after
 * either answer, and once native_sampler_poke_settled, told of a look that
 * found it in a call, says it has slept since. */
enum poke_state { POKE_NONE, POKE_ON_ITS_WAY, POKE_SLEPT_SINCE };
enum poke_state native_sampler_poke_unrun(struct native_sampler *ns, pid_t tid);
void native_sampler_poke_settled(struct native_sampler *ns, pid_t tid);

#endif
