/* Looking up systemd-coredump's store by process id or age. The file name
 * is the only index: systemd writes the PID and a microsecond timestamp
 * into it, so nothing has to be opened to choose. PIDs are reused (across
 * boots too), hence the newest match wins and the caller says how many
 * there were. */
#include "target/coredump_store.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ENTRIES 100000

const char *coredump_store_dir(void)
{
    const char *dir = getenv("PYSCOPE_COREDUMP_DIR");
    return dir && *dir ? dir : COREDUMP_STORE_DIR;
}

static bool all_digits(const char *s, size_t n, size_t max)
{
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

bool coredump_store_request(const char *arg)
{
    if (strcmp(arg, "latest") != 0 && (!all_digits(arg, strlen(arg), 10) || atol(arg) <= 0))
        return false;
    struct stat st;
    return stat(arg, &st) != 0;
}

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return n == 32;
}

bool coredump_store_parse_name(const char *name, struct coredump_entry *out)
{
    /* core . COMM . UID . BOOTID . PID . TIMESTAMP [. ext] */
    const char *field[7];
    size_t len[7];
    size_t n = 0;
    const char *p = name;
    while (n < 7) {
        const char *dot = strchr(p, '.');
        field[n] = p;
        len[n] = dot ? (size_t)(dot - p) : strlen(p);
        n++;
        if (!dot)
            break;
        p = dot + 1;
    }
    if (n < 6 || len[0] != 4 || memcmp(field[0], "core", 4) != 0 || len[1] == 0 ||
        len[1] >= sizeof out->comm || !all_digits(field[2], len[2], 10) ||
        !all_hex(field[3], len[3]) || !all_digits(field[4], len[4], 10) ||
        !all_digits(field[5], len[5], 20))
        return false;
    memset(out, 0, sizeof *out);
    memcpy(out->comm, field[1], len[1]);
    out->uid = (uid_t)strtoul(field[2], NULL, 10);
    long pid = strtol(field[4], NULL, 10);
    if (pid <= 0 || pid > 0x3fffffff)
        return false;
    out->pid = (pid_t)pid;
    out->usec = strtoull(field[5], NULL, 10);
    return true;
}

int coredump_store_find(pid_t pid, struct coredump_entry *out, struct pyscope_error *err)
{
    const char *dir = coredump_store_dir();
    const char *source = getenv("PYSCOPE_COREDUMP_DIR") && *getenv("PYSCOPE_COREDUMP_DIR")
                             ? " ($PYSCOPE_COREDUMP_DIR)"
                             : "";
    DIR *d = opendir(dir);
    if (!d) {
        error_set(err, errno == EACCES ? PYSCOPE_ERR_PERMISSION : PYSCOPE_ERR_NO_PROCESS,
                  "cannot read systemd-coredump's store %s%s: %s", dir, source, strerror(errno));
        if (errno == ENOENT)
            error_hint(err, "Is systemd-coredump installed? Set PYSCOPE_COREDUMP_DIR to look "
                       "elsewhere, or pass the core file's path to --core.");
        return -1;
    }
    unsigned matches = 0, seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) && seen < MAX_ENTRIES) {
        seen++;
        struct coredump_entry cand;
        if (!coredump_store_parse_name(e->d_name, &cand) || (pid && cand.pid != pid))
            continue;
        if ((size_t)snprintf(cand.path, sizeof cand.path, "%s/%s", dir, e->d_name) >=
            sizeof cand.path)
            continue;
        struct stat st;
        if (stat(cand.path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        matches++;
        /* Same microsecond: the name decides, so the choice is stable. */
        if (matches == 1 || cand.usec > out->usec ||
            (cand.usec == out->usec && strcmp(cand.path, out->path) > 0))
            *out = cand;
    }
    closedir(d);
    if (matches == 0) {
        if (pid)
            error_set(err, PYSCOPE_ERR_NO_PROCESS, "no core of process %d in systemd-coredump's "
                      "store %s%s", (int)pid, dir, source);
        else
            error_set(err, PYSCOPE_ERR_NO_PROCESS, "no core in systemd-coredump's store %s%s",
                      dir, source);
        return -1;
    }
    out->matches = matches;
    return 0;
}
