/* An ELF core file (kernel or gdb gcore) as a target: memory from its PT_LOAD
 * segments, and what the core left out read from the mapped files on disk
 * (found through NT_FILE, --exe, --debug-dir by build-id, --lib-path and
 * --sysroot, build-ids checked); threads
 * and registers from NT_PRSTATUS, the fatal signal from NT_SIGINFO. */
#ifndef PYSCOPE_TARGET_CORE_H
#define PYSCOPE_TARGET_CORE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "target/decompress.h"
#include "target/signals.h"
#include "target/target.h"
#include "util/error.h"

#define CORE_NREGS 27   /* struct user_regs_struct on x86-64, in elf_gregset_t order */
enum core_reg {
    CORE_REG_R15 = 0, CORE_REG_R14, CORE_REG_R13, CORE_REG_R12, CORE_REG_RBP, CORE_REG_RBX,
    CORE_REG_R11, CORE_REG_R10, CORE_REG_R9, CORE_REG_R8, CORE_REG_RAX, CORE_REG_RCX,
    CORE_REG_RDX, CORE_REG_RSI, CORE_REG_RDI, CORE_REG_ORIG_RAX, CORE_REG_RIP, CORE_REG_CS,
    CORE_REG_EFLAGS, CORE_REG_RSP, CORE_REG_SS, CORE_REG_FS_BASE, CORE_REG_GS_BASE,
};

struct core_options {
    const char *exe;                 /* --exe: the executable, NULL to use the recorded path */
    const char *sysroot;             /* --sysroot: recorded paths are looked up below it only */
    const char *debug_dir;           /* --debug-dir: binaries by build-id, DIR/.build-id/xx/yyyy */
    const char *const *lib_paths;    /* --lib-path directories, searched by file name */
    int n_lib_paths;
    FILE *warnings;                  /* where build-id mismatches are reported; NULL: nowhere */
    uint64_t max_expanded;           /* a compressed core expands to at most this (0: no limit) */
    bool cache;                      /* look up and keep large expansions (target/core_cache.h) */
};

struct core_thread {
    pid_t tid;
    int cursig;                      /* the signal this thread was handling, 0 if none */
    uint64_t regs[CORE_NREGS];
};

struct core_info {
    pid_t pid;
    char fname[17];                  /* the process's comm */
    char psargs[84];                 /* its command line, as truncated by the kernel
                                        ("…" at the end when it was) */
    char exe[PATH_MAX];              /* the executable's path as recorded ("" unknown) */
    struct signal_facts signal;      /* signo 0 when the core records none */
    pid_t signal_tid;                /* the thread that received it, 0 if unknown */
    const struct core_thread *threads;
    size_t n_threads;
    uint64_t bytes_missing;          /* memory the segments claim but the file lacks */
    enum compression compression;    /* how the file was compressed (read through a copy) */
    struct decompress_stats expanded;
};

/* Opens and checks a core file, expanding a compressed one first. Errors
 * name the file and what is wrong with it (not ELF, not a core, truncated
 * headers, no threads, a truncated or corrupt compressed stream). */
struct target *core_open(const char *path, const struct core_options *opts,
                         struct pyscope_error *err);

const struct core_info *core_get_info(const struct target *t);
/* The registers a thread had when the core was written; NULL if no such thread. */
const struct core_thread *core_thread(const struct target *t, pid_t tid);

/* Mapped files the core refers to that could not be opened: up to max paths
 * (owned by the target); returns how many there are. */
size_t core_missing_files(const struct target *t, const char **paths, size_t max);
/* The build-id of a mapped file as the core's copy of its headers says
 * ("" when the core does not hold them). */
void core_mapped_build_id(const struct target *t, const char *recorded, char *out,
                          size_t outsize);
/* --debug-dir, or NULL (also for a live process). */
const char *core_debug_dir(const struct target *t);
/* When a file opened for the core (--exe, --lib-path, or the recorded path)
 * has another build-id than the one the process had mapped: a sentence
 * saying so; else NULL. */
const char *core_mismatch(const struct target *t);
/* The file actually opened for a recorded path (after --exe/--lib-path), or NULL. */
const char *core_resolved_path(const struct target *t, const char *recorded);

#endif
