/* The process-tree driver behind dump -s and why -s: lists the tree from
 * /proc, keeps the processes that run CPython, and runs the command on each
 * in a forked pyscope, between a role header (text) or inside a JSON
 * envelope. */
#include "cmd/tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "python/runtime.h"
#include "target/process.h"
#include "target/proctree.h"
#include "util/error.h"

#define TREE_MAX 64

static bool is_subprocess_flag(const char *arg)
{
    return strcmp(arg, "-s") == 0 || strcmp(arg, "--subprocesses") == 0;
}

bool tree_requested(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (is_subprocess_flag(argv[i]))
            return true;
    return false;
}

static bool wants_json(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-j") == 0 || strcmp(argv[i], "--json") == 0)
            return true;
    return false;
}

static bool runs_python(pid_t pid)
{
    struct pyscope_error err = {0};
    struct target *t = process_open(pid, &err);
    if (!t)
        return false;
    struct py_runtime rt;
    bool found = py_runtime_find(t, &rt, &err) == 0;
    target_close(t);
    return found;
}

/* Runs cmd in a child. With capture, its standard output is collected into
 * *out (malloc'd, NUL-terminated) instead of passing through, so that a run
 * that fails leaves no half document in the envelope. */
static int run_one(int argc, char **argv, int (*cmd)(int, char **), bool capture, char **out)
{
    int fds[2] = {-1, -1};
    fflush(stdout);
    fflush(stderr);
    if (capture && pipe(fds) != 0)
        return PYSCOPE_ERR_OTHER;
    pid_t child = fork();
    if (child < 0) {
        if (capture) {
            close(fds[0]);
            close(fds[1]);
        }
        return PYSCOPE_ERR_OTHER;
    }
    if (child == 0) {
        if (capture) {
            close(fds[0]);
            dup2(fds[1], STDOUT_FILENO);
            close(fds[1]);
        }
        int status = cmd(argc, argv);
        fflush(stdout);
        fflush(stderr);
        _exit(status);
    }
    if (capture) {
        close(fds[1]);
        size_t len = 0, cap = 1 << 16;
        char *buf = malloc(cap);
        ssize_t got;
        while (buf) {
            if (len + 1 == cap) {
                char *grown = realloc(buf, cap * 2);
                if (!grown) {
                    free(buf);
                    buf = NULL;
                    break;
                }
                buf = grown;
                cap *= 2;
            }
            got = read(fds[0], buf + len, cap - 1 - len);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                break;
            len += (size_t)got;
        }
        close(fds[0]);
        if (buf)
            buf[len] = '\0';
        *out = buf;
    }
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            return PYSCOPE_ERR_OTHER;
    return WIFEXITED(status) ? WEXITSTATUS(status) : PYSCOPE_ERR_OTHER;
}

int tree_run(int argc, char **argv, int (*cmd)(int argc, char **argv))
{
    pid_t root;
    if (argc < 2 || !cli_parse_pid(argv[argc - 1], &root)) {
        fprintf(stderr, "pyscope: -s needs a process id as the last argument\n");
        return PYSCOPE_ERR_USAGE;
    }
    struct proctree_node nodes[TREE_MAX];
    int n = proctree_list(root, nodes, TREE_MAX);
    if (n < 0) {
        fprintf(stderr, "pyscope: no such process %d\n", (int)root);
        return PYSCOPE_ERR_NO_PROCESS;
    }
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args)
        return PYSCOPE_ERR_OTHER;
    int nargs = 0;
    for (int i = 0; i < argc - 1; i++)
        if (!is_subprocess_flag(argv[i]))
            args[nargs++] = argv[i];
    char pid_text[16];
    args[nargs++] = pid_text;
    args[nargs] = NULL;
    bool json = wants_json(argc, argv);
    int result = 0, shown = 0;
    if (json)
        printf("{\"processes\": [");
    for (int i = 0; i < n; i++) {
        if (!runs_python(nodes[i].pid))
            continue;
        snprintf(pid_text, sizeof pid_text, "%d", (int)nodes[i].pid);
        if (json) {
            printf("%s\n{\"pid\": %d, \"ppid\": %d, \"role\": \"%s\", \"report\": ",
                   shown ? "," : "", (int)nodes[i].pid, (int)nodes[i].ppid, nodes[i].role);
        } else {
            printf("%s=== process %d: %s", shown ? "\n" : "", (int)nodes[i].pid, nodes[i].role);
            if (nodes[i].depth > 0)
                printf(" of %d", (int)nodes[i].ppid);
            printf(" ===\n");
        }
        char *output = NULL;
        int status = run_one(nargs, args, cmd, json, &output);
        if (json) {
            /* A run that failed said why on stderr; its place says how. */
            if (status == 0 && output && output[0])
                printf("%s, \"exit_status\": 0}", output);
            else
                printf("null, \"exit_status\": %d}", status);
        }
        free(output);
        if (status != 0 && result == 0)
            result = status;
        shown++;
    }
    if (json)
        printf("\n]}\n");
    fflush(stdout);
    free(args);
    if (shown == 0) {
        fprintf(stderr, "pyscope: no process of the tree under %d runs Python\n", (int)root);
        return PYSCOPE_ERR_NOT_PYTHON;
    }
    return result;
}
