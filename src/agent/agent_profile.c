/* The agent's pprof: a stretch of the shared window of samples, of every
 * process or of one, written by pyscope's pprof writer with pid and process
 * labels on every sample beside thread, tid and state. */
#include "agent/agent.h"

#include <stdlib.h>
#include <string.h>

#include "output/profile_writers.h"

char *agent_pprof(struct agent *a, uint64_t start_ns, uint64_t end_ns, pid_t pid, size_t *len)
{
    uint64_t rel_start = start_ns > a->start_ns ? start_ns - a->start_ns : 0;
    uint64_t rel_end = end_ns > a->start_ns ? end_ns - a->start_ns : 0;
    struct profile out;
    struct ring_window w;
    if (sample_ring_window_between(&a->ring, &a->profile, rel_start, rel_end, &out, &w) != 0)
        return NULL;
    out.meta.rate_hz = a->rate_hz;
    out.meta.pid = pid;
    snprintf(out.meta.command, sizeof out.meta.command, "%s",
             pid ? "" : "every Python process of the host");
    for (size_t i = 0; i < a->profile.n_processes; i++) {
        const struct profile_process *src = &a->profile.processes[i];
        if (pid && src->pid != pid)
            continue;
        uint32_t id = profile_process_id(&out, src->pid);
        if (id == UINT32_MAX)
            continue;
        struct profile_process *dst = &out.processes[id];
        memcpy(dst->command, src->command, sizeof dst->command);
        memcpy(dst->python_version, src->python_version, sizeof dst->python_version);
        if (pid)
            snprintf(out.meta.command, sizeof out.meta.command, "%s", src->command);
    }
    if (pid)
        for (size_t i = 0; i < out.n_counts; i++)
            if (out.counts[i].thread >= out.n_threads ||
                out.threads[out.counts[i].thread].pid != pid)
                out.counts[i].samples = 0;
    char *data = NULL;
    FILE *f = open_memstream(&data, len);
    struct profile_write_options o = {.process_labels = true};
    int rc = f ? profile_write_pprof(f, &out, &o) : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    profile_free(&out);
    if (rc != 0) {
        free(data);
        return NULL;
    }
    return data;
}
