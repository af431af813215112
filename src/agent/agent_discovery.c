/* What the agent learns about a process from /proc before attaching: whether
 * it may run CPython (cheap tests, so that the host's other processes cost
 * one look each), and the container it runs in, from its cgroup path. */
#include "agent/agent.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "python", "python3.12", "python3.14d", "uwsgi" embedding libpython... The
 * executable's name, else a libpython mapping; a static interpreter renamed
 * to something else is found only with --pid. */
bool agent_looks_python(pid_t pid)
{
    char path[64], exe[512];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n <= 0)
        return false; /* a kernel thread, or gone */
    exe[n] = '\0';
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    if (strncmp(base, "python", 6) == 0)
        return true;
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char line[1024];
    bool found = false;
    for (int lines = 0; !found && lines < 100000 && fgets(line, sizeof line, f); lines++)
        found = strstr(line, "/libpython3.") != NULL;
    fclose(f);
    return found;
}

/* /proc/loadavg ends "RUNNING/THREADS LAST_PID": the host's count of
 * threads and the pid last handed out in our pid namespace. */
bool agent_pids_from_loadavg(const char *text, uint64_t *threads, uint64_t *last_pid)
{
    const char *p = text;
    for (int field = 0; field < 3; field++) {
        p = strchr(p, ' ');
        if (!p)
            return false;
        p++;
    }
    const char *slash = strchr(p, '/');
    if (!slash || !isdigit((unsigned char)slash[1]))
        return false;
    char *end;
    unsigned long long t = strtoull(slash + 1, &end, 10);
    if (*end != ' ' || !isdigit((unsigned char)end[1]))
        return false;
    const char *pid_at = end + 1;
    unsigned long long last = strtoull(pid_at, &end, 10);
    if (end == pid_at || (*end != '\n' && *end != '\0'))
        return false;
    *threads = t;
    *last_pid = last;
    return true;
}

uint64_t agent_exe_hash(pid_t pid)
{
    char path[64], exe[512];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, exe, sizeof exe);
    if (n <= 0)
        return 0;
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (ssize_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)exe[i]) * 1099511628211ull;
    return h ? h : 1;
}

/* Docker (/docker/ID, docker-ID.scope), containerd and CRI-O under
 * Kubernetes (cri-containerd-ID.scope, crio-ID.scope), podman
 * (libpod-ID.scope): all name the container by 64 hex digits in the cgroup
 * path. The last such run of the path is the innermost container. */
void agent_container_from_cgroup(const char *text, char *out, size_t outsize)
{
    if (outsize)
        out[0] = '\0';
    int lines = 0;
    for (const char *line = text; line && *line && lines < 256; lines++) {
        const char *eol = strchr(line, '\n');
        const char *p = strchr(line, ':');
        p = p && (!eol || p < eol) ? strchr(p + 1, ':') : NULL;
        if (p && (!eol || p < eol)) {
            for (p++; *p && p != eol; p++) {
                size_t run = 0;
                while (isxdigit((unsigned char)p[run]) && !isupper((unsigned char)p[run]))
                    run++;
                if (run == 64 && !isalnum((unsigned char)p[run]) && outsize > 64) {
                    memcpy(out, p, 64);
                    out[64] = '\0';
                }
                if (run)
                    p += run - 1;
            }
        }
        line = eol ? eol + 1 : NULL;
    }
}

void agent_container_id(pid_t pid, char *out, size_t outsize)
{
    if (outsize)
        out[0] = '\0';
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    agent_container_from_cgroup(text, out, outsize);
}
