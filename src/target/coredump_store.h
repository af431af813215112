/* systemd-coredump's store: finds the core of a process id, or the newest
 * core, among the files systemd-coredump names
 * core.COMM.UID.BOOTID.PID.TIMESTAMP[.zst|.lz4|.xz] in
 * /var/lib/systemd/coredump ($PYSCOPE_COREDUMP_DIR overrides the place). */
#ifndef PYSCOPE_TARGET_COREDUMP_STORE_H
#define PYSCOPE_TARGET_COREDUMP_STORE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

#define COREDUMP_STORE_DIR "/var/lib/systemd/coredump"

struct coredump_entry {
    char path[PATH_MAX];
    char comm[64];          /* as in the file name (systemd escapes '.', '/' and ' ') */
    uid_t uid;
    pid_t pid;
    uint64_t usec;          /* when the core was taken, microseconds since the epoch */
    unsigned matches;       /* how many cores matched the request (the newest is chosen) */
};

/* Is arg a store request ("latest" or a process id) rather than a path? A
 * file of that name in the current directory wins. */
bool coredump_store_request(const char *arg);

/* The store directory in use: $PYSCOPE_COREDUMP_DIR or COREDUMP_STORE_DIR. */
const char *coredump_store_dir(void);

/* The newest core of process pid (pid 0: of any process). Returns 0, or -1
 * with err set (no store, nothing matches). */
int coredump_store_find(pid_t pid, struct coredump_entry *out, struct pyscope_error *err);

/* When the store has no match: `coredumpctl dump [PID] -o FILE` (it also
 * finds cores kept in the journal) into a temporary file removed at exit,
 * when coredumpctl is on PATH and $PYSCOPE_COREDUMP_DIR is not set.
 * Returns 0 with its path in out; -1 without coredumpctl (err untouched)
 * or when it found nothing (err set). */
int coredump_store_extract(pid_t pid, char *out, size_t outsize, struct pyscope_error *err);

/* Parses one file name of the store; false when it is not one. */
bool coredump_store_parse_name(const char *name, struct coredump_entry *out);

#endif
