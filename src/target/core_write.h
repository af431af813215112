/* Writing an ELF core file of a live process whose threads are all
 * ptrace-stopped by us (pyscope run, at a crash), readable by pyscope dump
 * --core. */
#ifndef PYSCOPE_TARGET_CORE_WRITE_H
#define PYSCOPE_TARGET_CORE_WRITE_H

#include <signal.h>
#include <sys/types.h>
#include "target/target.h"
#include "util/error.h"

/* tids: the stopped threads, the crashing one first; info: its siginfo
 * (may be NULL). Dumps writable and anonymous memory in full and the first
 * page of each mapped ELF file (its headers and build-id), like the
 * kernel's default coredump_filter; the rest is on disk. */
int core_write(struct target *t, const pid_t *tids, int n_tids, const siginfo_t *info,
               const char *path, struct pyscope_error *err);

#endif
