/* Every file pyscope writes on the user's behalf (-o, cores): checked before
 * a long recording starts, written beside the destination under a name
 * nobody can guess and renamed over it, or written directly when the
 * destination is not a regular file (a device, a FIFO, - for stdout). */
#ifndef PYSCOPE_UTIL_OUTFILE_H
#define PYSCOPE_UTIL_OUTFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "util/error.h"

enum outfile_kind {
    /* The file appears whole, or not at all (profiles, reports, cores). */
    OUTFILE_REPLACE,
    /* Written as it goes, for a reader who follows it (watch's reports). */
    OUTFILE_STREAM,
};

struct outfile {
    FILE *fp;
    int fd;
    char path[PATH_MAX]; /* as the user named it, for messages */
    char dest[PATH_MAX]; /* where the temporary is renamed to */
    char tmp[PATH_MAX];  /* "" when written directly */
};

/* perm: the mode of a newly created file (before the umask); an existing
 * regular file keeps its own. Errors name the path. */
int outfile_open(struct outfile *o, const char *path, enum outfile_kind kind, unsigned perm,
                 struct pyscope_error *err);
/* Flushes, checks every write, closes and renames into place. */
int outfile_close(struct outfile *o, struct pyscope_error *err);
/* After a failure: the destination is left as it was. */
void outfile_discard(struct outfile *o);
/* Whether outfile_open would succeed, without touching the destination:
 * run before a recording starts, not after it ends. */
int outfile_check(const char *path, enum outfile_kind kind, struct pyscope_error *err);

/* Standard output at the end of a command, flushed (and left open for exit
 * handlers): a failed write (a full disk, a closed pipe) is an error, not
 * success. */
int outfile_close_stdout(void);

#endif
