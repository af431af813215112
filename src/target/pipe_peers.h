/* Pipes between a process and its children: which child is blocked writing
 * to a pipe whose read end the process holds. A parent reading one pipe of
 * a child while the child blocks on another full pipe nobody reads is the
 * deadlock subprocess's documentation warns about. */
#ifndef PYSCOPE_TARGET_PIPE_PEERS_H
#define PYSCOPE_TARGET_PIPE_PEERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct pipe_blocked_writer {
    pid_t pid;                  /* the child */
    pid_t tid;                  /* its thread blocked in write */
    char comm[32];
    int child_fd;               /* the fd it writes to */
    uint64_t pipe;              /* that pipe's inode */
    int parent_fd;              /* the read end of the same pipe in the parent */
    bool writes_read_pipe;      /* the child also holds the write end of read_pipe */
};

/* The inode of "pipe:[123]", or 0. */
uint64_t pipe_inode(const char *link);

/* Looks at the children of pid (those of every thread; only the child
 * only_child when it is > 0) for one blocked in write() to a pipe, other than
 * read_pipe (0: none excluded), whose read end pid holds. 0 and *out when
 * found; -1 otherwise. At most max_children are looked at. */
int pipe_find_blocked_writer(pid_t pid, uint64_t read_pipe, pid_t only_child, int max_children,
                             struct pipe_blocked_writer *out);

#endif
