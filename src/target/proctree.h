/* The process tree under a root, from /proc: who is whose child, and how a
 * child came to be (forked copy of its parent, or a program it exec'd), so
 * that every command shows each process of a tree with its role. */
#ifndef PYSCOPE_TARGET_PROCTREE_H
#define PYSCOPE_TARGET_PROCTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PROCTREE_ROLE_MAX 40

struct proctree_node {
    pid_t pid, ppid;
    int depth;                 /* 0 for the root */
    bool forked;               /* runs its parent's image: forked without exec */
    char role[PROCTREE_ROLE_MAX];
};

/* The parent of pid from /proc/PID/stat, or 0. */
pid_t proctree_parent(pid_t pid);

/* Does child still run its parent's program (same executable and command
 * line), i.e. was it forked without an exec (multiprocessing's fork start
 * method, os.fork) rather than started as a program of its own (spawn,
 * subprocess)? */
bool proctree_forked(pid_t child, pid_t parent);

/* "parent", "fork child", "exec child", "fork grandchild", ..., "fork
 * child (depth 4)". */
void proctree_role(int depth, bool forked, char *out, size_t outsize);

/* root and its descendants, parents before their children, at most max.
 * Returns how many, or -1 when root does not exist. */
int proctree_list(pid_t root, struct proctree_node *out, int max);

#endif
