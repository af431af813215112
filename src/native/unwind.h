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

/* Unwinds one thread. Returns a report_native (never NULL unless out of
 * memory); a failed unwind has complete=false and error set. */
struct report_native *native_unwind(struct native_unwinder *u, pid_t tid);

/* Unwinds one thread to addresses only (no symbols, no lines): for checks
 * that run on every breakpoint hit. pcs[0] is the thread's pc; the others
 * are the call instructions (return address - 1). Returns the count; an
 * unwind that stops early gives the frames found so far. */
int native_unwind_pcs(struct native_unwinder *u, pid_t tid, uint64_t *pcs, int max);

/* Is this symbol an interpreter-loop activation? */
bool native_is_eval_symbol(const char *symbol);

#endif
