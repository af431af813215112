/* Following pipes from a process to its children through /proc: children
 * from /proc/PID/task/TID/children, what a child's thread is blocked in
 * from its syscall file, fds from /proc/PID/fd links and /proc/PID/fdinfo
 * flags. Every read may fail (the child exits): then nothing is found. */
#include "target/pipe_peers.h"
#include "target/proc_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FDS_SCANNED 1024

uint64_t pipe_inode(const char *link)
{
    if (strncmp(link, "pipe:[", 6) != 0)
        return 0;
    char *end;
    unsigned long long v = strtoull(link + 6, &end, 10);
    return *end == ']' ? (uint64_t)v : 0;
}

static uint64_t fd_pipe(pid_t pid, int fd)
{
    char path[64], link[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0)
        return 0;
    link[n] = '\0';
    return pipe_inode(link);
}

/* O_ACCMODE of an fd, from the octal "flags:" line of fdinfo; -1 unknown. */
static int fd_access(pid_t pid, int fd)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)pid, fd);
    if (proc_read_text(path, buf, sizeof buf) != 0)
        return -1;
    const char *flags = strstr(buf, "flags:");
    return flags ? (int)(strtol(flags + 6, NULL, 8) & O_ACCMODE) : -1;
}

/* The fd of pid holding pipe with the given access mode, or -1. */
static int find_pipe_fd(pid_t pid, uint64_t pipe, int access)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *dir = opendir(path);
    if (!dir)
        return -1;
    int found = -1, scanned = 0;
    struct dirent *e;
    while (found < 0 && scanned++ < MAX_FDS_SCANNED && (e = readdir(dir)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name)
            continue;
        if (fd_pipe(pid, (int)fd) == pipe && fd_access(pid, (int)fd) == access)
            found = (int)fd;
    }
    closedir(dir);
    return found;
}

/* Is a thread of child blocked in write/writev to a pipe? */
static bool blocked_writing(pid_t child, struct pipe_blocked_writer *out)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)child);
    DIR *dir = opendir(path);
    if (!dir)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(dir)) != NULL) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name)
            continue;
        char buf[256];
        snprintf(path, sizeof path, "/proc/%d/task/%ld/syscall", (int)child, tid);
        if (proc_read_text(path, buf, sizeof buf) != 0)
            continue;
        long nr;
        unsigned long long fd;
        /* x86-64: 1 write, 20 writev */
        if (sscanf(buf, "%ld 0x%llx", &nr, &fd) != 2 || (nr != 1 && nr != 20) || fd > 1u << 20)
            continue;
        uint64_t pipe = fd_pipe(child, (int)fd);
        if (!pipe)
            continue;
        out->pid = child;
        out->tid = (pid_t)tid;
        out->child_fd = (int)fd;
        out->pipe = pipe;
        found = true;
    }
    closedir(dir);
    return found;
}

/* The children of pid, those of every thread: at most max of them; the
 * number found (more than max when some were left out), or -1. */
static int list_children(pid_t pid, pid_t *children, int max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *tasks = opendir(path);
    if (!tasks)
        return -1;
    int n = 0;
    struct dirent *e;
    while (n <= max && (e = readdir(tasks)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char list[1024];
        snprintf(path, sizeof path, "/proc/%d/task/%.16s/children", (int)pid, e->d_name);
        if (proc_read_text(path, list, sizeof list) != 0)
            continue;
        char *save = NULL;
        for (char *word = strtok_r(list, " \n", &save); word && n <= max;
             word = strtok_r(NULL, " \n", &save)) {
            pid_t child = (pid_t)atoi(word);
            if (child <= 0)
                continue;
            if (n < max)
                children[n] = child;
            n++;
        }
    }
    closedir(tasks);
    return n;
}

/* Does a child other than writer hold the read end of pipe (a pipeline,
 * `a | b`, whose parent kept its copy)? It may be draining it. Children
 * left out of the list count as readers: they were not looked at. */
static bool sibling_reads(const pid_t *children, int n, int max, uint64_t pipe, pid_t writer)
{
    if (n > max)
        return true;
    for (int i = 0; i < n; i++)
        if (children[i] != writer && find_pipe_fd(children[i], pipe, O_RDONLY) >= 0)
            return true;
    return false;
}

int pipe_find_blocked_writer(pid_t pid, uint64_t read_pipe, pid_t only_child, int max_children,
                             struct pipe_blocked_writer *out)
{
    enum { MAX_CHILDREN = 64 };
    pid_t children[MAX_CHILDREN];
    int max = max_children < MAX_CHILDREN ? max_children : MAX_CHILDREN;
    int n = list_children(pid, children, max);
    for (int i = 0; i < n && i < max; i++) {
        pid_t child = children[i];
        memset(out, 0, sizeof *out);
        if ((only_child > 0 && child != only_child) || !blocked_writing(child, out) ||
            out->pipe == read_pipe)
            continue;
        out->parent_fd = find_pipe_fd(pid, out->pipe, O_RDONLY);
        if (out->parent_fd < 0 || sibling_reads(children, n, max, out->pipe, child))
            continue;
        out->writes_read_pipe = read_pipe && find_pipe_fd(child, read_pipe, O_WRONLY) >= 0;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/comm", (int)child);
        if (proc_read_text(path, out->comm, sizeof out->comm) == 0)
            out->comm[strcspn(out->comm, "\n")] = '\0';
        return 0;
    }
    return -1;
}
