/* Native (C) stacks of a target's threads through elfutils libdwfl: DWARF CFI
 * from .eh_frame/.debug_frame, symbols from .symtab/.dynsym (or a debug file
 * found by build-id or .gnu_debuglink), file:line from DWARF when present.
 * Works for a live process whose threads are ptrace-stopped by us and for a
 * core file; memory is read through struct target either way. */
#ifndef PYSCOPE_NATIVE_UNWIND_H
#define PYSCOPE_NATIVE_UNWIND_H

#include "report/stack_report.h"
#include "target/target.h"
#include "util/error.h"

#define NATIVE_MAX_FRAMES 1024

struct native_unwinder;

/* interp_paths: the files of the interpreter itself (libpython and/or the
 * python executable), whose frames are marked internal; their file:line is
 * looked up only with lines_for_internal (--native-all). */
struct native_unwinder *native_open(struct target *t, const char *const *interp_paths,
                                    int n_interp_paths, bool lines_for_internal,
                                    struct pyscope_error *err);
void native_close(struct native_unwinder *u);

/* A live target loaded libraries since native_open (ctypes, extension
 * modules): re-reads its maps and reports the new files. */
int native_refresh_modules(struct native_unwinder *u);

/* The interpreter's files for native_open: binary (the file holding
 * _PyRuntime, or NULL) and a python executable t maps besides it. Returns
 * how many of out it filled (valid while t's maps are). */
int native_interp_paths(const struct target *t, const char *binary, const char *out[2]);

/* Unwinds one thread. Returns a report_native (never NULL unless out of
 * memory); a failed unwind has complete=false and error set. */
struct report_native *native_unwind(struct native_unwinder *u, pid_t tid);

/* Unwinds one thread to addresses only (no symbols, no lines): for checks
 * that run on every breakpoint hit. pcs[0] is the thread's pc; the others
 * are the call instructions (return address - 1). Returns the count; an
 * unwind that stops early gives the frames found so far. */
int native_unwind_pcs(struct native_unwinder *u, pid_t tid, uint64_t *pcs, int max);

/* A copy of a thread's registers (DWARF order: rax rdx rcx rbx rsi rdi rbp
 * rsp r8..r15 rip) and of its stack from sp, as a perf sample carries them. */
struct native_regs_copy {
    uint64_t dwarf_regs[17];
    uint64_t sp;
    const unsigned char *stack;
    size_t stack_len;
};

/* Unwinds tid from such a copy, to addresses as native_unwind_pcs gives
 * them; memory past the copied stack is read from the live process.
 * *from_copy (when asked): the index of the first frame the walk looked for
 * in the live stack (which may have changed since the sample), whether or
 * not it found one there; -1 when the copy held all the walk read. */
int native_unwind_copy(struct native_unwinder *u, pid_t tid, const struct native_regs_copy *copy,
                       uint64_t *pcs, int max, int *from_copy);

/* Describes one address as native_unwind_pcs returns them (already the call
 * instruction for return addresses): symbol, module, file:line, internal,
 * is_eval. The strings are the caller's to free (report_native_frame). */
int native_describe_pc(struct native_unwinder *u, uint64_t pc, struct report_native_frame *f);

/* A thread's outermost frame (clone, _start, ...)? */
bool native_frame_is_root(const char *symbol);

/* Is this symbol an interpreter-loop activation? */
bool native_is_eval_symbol(const char *symbol);

#endif
