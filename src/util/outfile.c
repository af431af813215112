/* Output files written safely: the temporary is created exclusively, never
 * through a symbolic link, under a random name in the destination's own
 * directory (so the rename stays on one file system); only a regular file
 * is ever replaced. */
#include "util/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/text.h"

static int fail(struct outfile *o, struct pyscope_error *err, int e, const char *what)
{
    error_set(err, PYSCOPE_ERR_OTHER, "cannot %s %s: %s", what, o->path, strerror(e));
    return -1;
}

/* Where the data goes: a symbolic link is followed by hand, so that the
 * rename replaces what it points to and the link stays. */
static void resolve(struct outfile *o, struct stat *st, bool *exists)
{
    text_copy(o->dest, sizeof o->dest, o->path);
    *exists = lstat(o->path, st) == 0;
    if (*exists && S_ISLNK(st->st_mode)) {
        char *real = realpath(o->path, NULL);
        if (real && strlen(real) < sizeof o->dest) {
            text_copy(o->dest, sizeof o->dest, real);
            *exists = lstat(o->dest, st) == 0;
        }
        /* A dangling link: the rename replaces the link itself. */
        free(real);
    }
}

static int create_temporary(struct outfile *o, mode_t mode)
{
    char dir_buf[PATH_MAX], base_buf[PATH_MAX];
    text_copy(dir_buf, sizeof dir_buf, o->dest);
    text_copy(base_buf, sizeof base_buf, o->dest);
    const char *dir = dirname(dir_buf), *base = basename(base_buf);
    for (int attempt = 0; attempt < 16; attempt++) {
        unsigned char r[8];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            return -1;
        char hex[17];
        for (size_t i = 0; i < sizeof r; i++)
            snprintf(hex + 2 * i, 3, "%02x", r[i]);
        int n = snprintf(o->tmp, sizeof o->tmp, "%s/.%s.%s.tmp", dir, base, hex);
        if (n < 0 || (size_t)n >= sizeof o->tmp) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

static int open_fd(struct outfile *o, enum outfile_kind kind, unsigned perm)
{
    struct stat st;
    bool exists;
    resolve(o, &st, &exists);
    o->tmp[0] = '\0';
    if (exists && S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return -1;
    }
    /* A device or a FIFO is written to, never replaced. */
    if (exists && !S_ISREG(st.st_mode))
        return open(o->dest, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (kind == OUTFILE_STREAM)
        return open(o->dest, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC, perm);
    int fd = create_temporary(o, perm);
    if (fd >= 0) {
        if (exists)
            (void)fchmod(fd, st.st_mode & 07777);
        return fd;
    }
    int e = errno;
    o->tmp[0] = '\0';
    /* A file we may write in a directory we may not: written in place. */
    if ((e == EACCES || e == EPERM || e == EROFS) && exists && access(o->dest, W_OK) == 0)
        return open(o->dest, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    errno = e;
    return -1;
}

int outfile_open(struct outfile *o, const char *path, enum outfile_kind kind, unsigned perm,
                 struct pyscope_error *err)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    text_copy(o->path, sizeof o->path, path);
    if (strcmp(path, "-") == 0) {
        o->fp = stdout;
        o->fd = STDOUT_FILENO;
        return 0;
    }
    if (strlen(path) >= sizeof o->path)
        return fail(o, err, ENAMETOOLONG, "write");
    o->fd = open_fd(o, kind, perm);
    if (o->fd < 0)
        return fail(o, err, errno, "write");
    o->fp = fdopen(o->fd, "wb");
    if (!o->fp) {
        int e = errno;
        outfile_discard(o);
        return fail(o, err, e, "write");
    }
    return 0;
}

int outfile_close(struct outfile *o, struct pyscope_error *err)
{
    if (!o->fp)
        return fail(o, err, EBADF, "write");
    if (o->fp == stdout) {
        int e = fflush(stdout) != 0 ? errno : 0;
        bool bad = ferror(stdout);
        o->fp = NULL;
        return bad || e ? fail(o, err, e ? e : EIO, "write") : 0;
    }
    int e = fflush(o->fp) != 0 ? errno : 0;
    if (ferror(o->fp) && !e)
        e = EIO;
    if (fclose(o->fp) != 0 && !e)
        e = errno;
    o->fp = NULL;
    o->fd = -1;
    if (!e && o->tmp[0] && rename(o->tmp, o->dest) != 0)
        e = errno;
    if (e) {
        if (o->tmp[0])
            unlink(o->tmp);
        o->tmp[0] = '\0';
        return fail(o, err, e, "write");
    }
    o->tmp[0] = '\0';
    return 0;
}

void outfile_discard(struct outfile *o)
{
    if (o->fp && o->fp != stdout)
        fclose(o->fp);
    else if (!o->fp && o->fd >= 0 && o->fd != STDOUT_FILENO)
        close(o->fd);
    o->fp = NULL;
    o->fd = -1;
    if (o->tmp[0])
        unlink(o->tmp);
    o->tmp[0] = '\0';
}

/* Refused before anything starts, like any other bad argument. */
static int check_failed(struct outfile *o, struct pyscope_error *err, int e, const char *what)
{
    fail(o, err, e, what);
    if (err)
        err->status = PYSCOPE_ERR_USAGE;
    return -1;
}

int outfile_check(const char *path, enum outfile_kind kind, struct pyscope_error *err)
{
    if (strcmp(path, "-") == 0)
        return 0;
    struct outfile o;
    memset(&o, 0, sizeof o);
    text_copy(o.path, sizeof o.path, path);
    struct stat st;
    bool exists;
    resolve(&o, &st, &exists);
    if (exists && S_ISDIR(st.st_mode))
        return check_failed(&o, err, EISDIR, "write");
    /* Opening a FIFO would wait for its reader; a stream would truncate. */
    if ((exists && !S_ISREG(st.st_mode)) || (kind == OUTFILE_STREAM && exists)) {
        if (access(o.dest, W_OK) != 0)
            return check_failed(&o, err, errno, "write");
        return 0;
    }
    if (kind == OUTFILE_STREAM) {
        int fd = open(o.dest, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return check_failed(&o, err, errno, "write");
        close(fd);
        unlink(o.dest);
        return 0;
    }
    int fd = create_temporary(&o, 0600);
    if (fd >= 0) {
        close(fd);
        unlink(o.tmp);
        return 0;
    }
    int e = errno;
    if ((e == EACCES || e == EPERM || e == EROFS) && exists && access(o.dest, W_OK) == 0)
        return 0;
    return check_failed(&o, err, e, "write");
}

int outfile_close_stdout(void)
{
    /* A command that flushed on its own may have seen the error already:
     * the stream remembers that one failed, not why. */
    errno = 0;
    int e = fflush(stdout) != 0 ? errno : 0;
    bool bad = ferror(stdout);
    /* Not closed: exit handlers (top's terminal restore) still write. */
    if (!e && !bad)
        return 0;
    if (e)
        fprintf(stderr, "pyscope: cannot write the output: %s\n", strerror(e));
    else
        fprintf(stderr, "pyscope: cannot write the output: a write to standard output failed\n");
    return -1;
}
