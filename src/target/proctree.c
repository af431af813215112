/* Process trees from /proc: parents from /proc/PID/stat, a breadth-first
 * walk for the descendants, and the role words every command prints. */
#include "target/proctree.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/process.h"

pid_t proctree_parent(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name is in parentheses and may itself contain ") ". */
    const char *close_paren = strrchr(buf, ')');
    int ppid = 0;
    if (!close_paren || sscanf(close_paren + 1, " %*c %d", &ppid) != 1)
        return 0;
    return (pid_t)ppid;
}

bool proctree_forked(pid_t child, pid_t parent)
{
    char a[4096], b[4096];
    if (process_exe(child, a, sizeof a) != 0 || process_exe(parent, b, sizeof b) != 0 ||
        strcmp(a, b) != 0)
        return false;
    return process_cmdline(child, a, sizeof a) == 0 && process_cmdline(parent, b, sizeof b) == 0 &&
           strcmp(a, b) == 0;
}

void proctree_role(int depth, bool forked, char *out, size_t outsize)
{
    const char *how = forked ? "fork" : "exec";
    if (depth <= 0)
        snprintf(out, outsize, "parent");
    else if (depth == 1)
        snprintf(out, outsize, "%s child", how);
    else if (depth == 2)
        snprintf(out, outsize, "%s grandchild", how);
    else
        snprintf(out, outsize, "%s child (depth %d)", how, depth);
}

/* Bounds the /proc scan: a machine with more processes gets the first ones. */
#define MAX_PROCS 65536

int proctree_list(pid_t root, struct proctree_node *out, int max)
{
    if (max < 1 || proctree_parent(root) == 0)
        return -1;
    pid_t (*pairs)[2] = malloc(sizeof *pairs * MAX_PROCS);
    if (!pairs)
        return -1;
    size_t n_pairs = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && n_pairs < MAX_PROCS) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        pid_t ppid = proctree_parent(pid);
        if (ppid > 0) {
            pairs[n_pairs][0] = pid;
            pairs[n_pairs][1] = ppid;
            n_pairs++;
        }
    }
    if (d)
        closedir(d);
    int n = 0;
    out[n++] = (struct proctree_node){.pid = root, .ppid = proctree_parent(root)};
    proctree_role(0, false, out[0].role, sizeof out[0].role);
    /* Breadth first: out[] itself is the queue. */
    for (int q = 0; q < n; q++) {
        for (size_t i = 0; i < n_pairs && n < max; i++) {
            if (pairs[i][1] != out[q].pid)
                continue;
            struct proctree_node *c = &out[n++];
            *c = (struct proctree_node){.pid = pairs[i][0], .ppid = out[q].pid,
                                        .depth = out[q].depth + 1};
            c->forked = proctree_forked(c->pid, c->ppid);
            proctree_role(c->depth, c->forked, c->role, sizeof c->role);
        }
    }
    free(pairs);
    return n;
}
