/* Looking up systemd-coredump's store by process id or age. The file name
 * is the only index: systemd writes the PID and a microsecond timestamp
 * into it, so nothing has to be opened to choose. PIDs are reused (across
 * boots too), hence the newest match wins and the caller says how many
 * there were. */
#include "target/coredump_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static char extracted[PATH_MAX];

static void remove_extracted(void)
{
    if (extracted[0])
        unlink(extracted);
}

static bool coredumpctl_on_path(void)
{
    const char *path = getenv("PATH");
    char dir[PATH_MAX], file[PATH_MAX];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        if (n > 0 && n < sizeof dir) {
            memcpy(dir, path, n);
            dir[n] = '\0';
            if ((size_t)snprintf(file, sizeof file, "%s/coredumpctl", dir) < sizeof file &&
                access(file, X_OK) == 0)
                return true;
        }
        path += n + (path[n] == ':');
    }
    return false;
}

int coredump_store_extract(pid_t pid, char *out, size_t outsize, struct pyscope_error *err)
{
    const char *env_dir = getenv("PYSCOPE_COREDUMP_DIR");
    if ((env_dir && *env_dir) || !coredumpctl_on_path())
        return -1;
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if ((size_t)snprintf(extracted, sizeof extracted, "%s/pyscope-coredumpctl-XXXXXX", dir) >=
        sizeof extracted)
        return -1;
    int fd = mkostemp(extracted, O_CLOEXEC);
    if (fd < 0) {
        error_set(err, PYSCOPE_ERR_OTHER, "cannot create a file in %s for coredumpctl: %s", dir,
                  strerror(errno));
        extracted[0] = '\0';
        return -1;
    }
    close(fd);
    atexit(remove_extracted);
    char match[16];
    snprintf(match, sizeof match, "%d", (int)pid);
    /* "dump" with no match extracts the newest core; coredumpctl finds
     * those kept in the journal too, and expands them. */
    char *argv[] = {"coredumpctl", "--no-pager", "dump", pid ? match : NULL, NULL, NULL, NULL};
    int k = pid ? 4 : 3;
    argv[k++] = "-o";
    argv[k] = extracted;
    fflush(stderr);
    pid_t child = fork();
    if (child == 0) {
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execvp("coredumpctl", argv);
        _exit(127);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        if (pid)
            error_set(err, PYSCOPE_ERR_NO_PROCESS, "no core of process %d in systemd-coredump's "
                      "store %s, and coredumpctl found none either", (int)pid, COREDUMP_STORE_DIR);
        else
            error_set(err, PYSCOPE_ERR_NO_PROCESS, "no core in systemd-coredump's store %s, and "
                      "coredumpctl found none either", COREDUMP_STORE_DIR);
        return -1;
    }
    snprintf(out, outsize, "%s", extracted);
    return 0;
}
