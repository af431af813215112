/* /metrics: the Prometheus text exposition format (0.0.4). Every family has
 * its HELP and TYPE; per-process series carry pid, command, python_version
 * and container, per-thread ones add tid and thread (the name). Counters are
 * seconds (the base unit) and end in _total. */
#include "agent/agent.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sampling/ring.h"

static void label_value(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '"')
            fputs("\\\"", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void proc_labels(FILE *f, const struct agent_proc *p)
{
    fprintf(f, "pid=\"%d\",command=\"", (int)p->pid);
    label_value(f, p->command);
    fputs("\",python_version=\"", f);
    label_value(f, p->version);
    fputs("\",container=\"", f);
    label_value(f, p->container);
    fputc('"', f);
}

static void thread_labels(FILE *f, const struct agent_proc *p, const struct agent_thread *t)
{
    proc_labels(f, p);
    fprintf(f, ",tid=\"%d\",thread=\"", (int)t->tid);
    label_value(f, t->name);
    fputc('"', f);
}

static bool verdict_hung(enum why_verdict v)
{
    return v != WHY_NOT_HUNG && v != WHY_IDLE && v != WHY_UNCHECKED;
}

static long resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * sysconf(_SC_PAGESIZE);
}

static double gc_seconds(const struct agent_proc *p) { return p->gc_seconds; }
static double gc_collections(const struct agent_proc *p) { return (double)p->gc_collections; }
static double why_evaluations(const struct agent_proc *p) { return (double)p->why_generation; }
static double passes(const struct agent_proc *p) { return (double)p->passes; }

/* A family with one series per sampled process. */
static void per_process(FILE *f, const struct agent *a, const char *name, const char *type,
                        const char *help, double (*value)(const struct agent_proc *p))
{
    family(f, name, type, help);
    for (size_t i = 0; i < a->n_procs; i++) {
        const struct agent_proc *p = a->procs[i];
        if (p->state != AGENT_PROC_SAMPLING)
            continue;
        fprintf(f, "%s{", name);
        proc_labels(f, p);
        fprintf(f, "} %.9g\n", value(p));
    }
}

static double live_threads(const struct agent_proc *p) { return (double)p->live_threads; }

static void write_metrics(FILE *f, struct agent *a)
{
    per_process(f, a, "pyscope_process_threads", "gauge",
                "Python threads of a sampled process, as the newest pass found them.",
                live_threads);

    family(f, "pyscope_thread_seconds_total", "counter",
           "Seconds a thread spent in each GIL state, from samples: holding_gil, waiting_gil, "
           "running (on CPU without the GIL), idle (blocked in a system call), unknown.");
    for (size_t i = 0; i < a->n_procs; i++) {
        const struct agent_proc *p = a->procs[i];
        if (p->state != AGENT_PROC_SAMPLING)
            continue;
        for (size_t k = 0; k < p->n_threads; k++)
            for (int s = 0; s < PROFILE_STATE_COUNT; s++) {
                fputs("pyscope_thread_seconds_total{", f);
                thread_labels(f, p, &p->threads[k]);
                fprintf(f, ",state=\"%s\"} %.6f\n", profile_state_name((enum profile_state)s),
                        p->threads[k].seconds[s]);
            }
    }

    per_process(f, a, "pyscope_process_gc_seconds_total", "counter",
                "Seconds during which samples found the garbage collector running.", gc_seconds);
    per_process(f, a, "pyscope_process_gc_collections_total", "counter",
                "Garbage collections that samples saw start (shorter ones between two samples "
                "are not seen).",
                gc_collections);
    family(f, "pyscope_process_hung", "gauge",
           "1 when the newest why found the process hung, 0 otherwise; verdict as why --json "
           "names it.");
    for (size_t i = 0; i < a->n_procs; i++) {
        const struct agent_proc *p = a->procs[i];
        if (p->state != AGENT_PROC_SAMPLING || !p->why_known)
            continue;
        fputs("pyscope_process_hung{", f);
        proc_labels(f, p);
        fprintf(f, ",verdict=\"%s\"} %d\n", why_verdict_name(p->verdict), verdict_hung(p->verdict));
    }
    per_process(f, a, "pyscope_process_why_evaluations_total", "counter",
                "Evaluations of why on the process (each takes two snapshots 150 ms apart).",
                why_evaluations);
    per_process(f, a, "pyscope_process_samples_total", "counter",
                "Sampling passes over the process.", passes);
    family(f, "pyscope_process_unreadable", "gauge",
           "A process that looks like Python but cannot be read, with the reason; retried.");
    for (size_t i = 0; i < a->n_procs; i++) {
        const struct agent_proc *p = a->procs[i];
        if (p->state != AGENT_PROC_UNREADABLE)
            continue;
        fprintf(f, "pyscope_process_unreadable{pid=\"%d\",command=\"", (int)p->pid);
        label_value(f, p->command);
        fputs("\",container=\"", f);
        label_value(f, p->container);
        fputs("\",reason=\"", f);
        label_value(f, p->reason);
        fputs("\"} 1\n", f);
    }

    size_t sampling = 0, unreadable = 0;
    for (size_t i = 0; i < a->n_procs; i++) {
        sampling += a->procs[i]->state == AGENT_PROC_SAMPLING;
        unreadable += a->procs[i]->state == AGENT_PROC_UNREADABLE;
    }
    family(f, "pyscope_agent_processes", "gauge", "Python processes by what the agent does with them.");
    fprintf(f, "pyscope_agent_processes{state=\"sampling\"} %zu\n", sampling);
    fprintf(f, "pyscope_agent_processes{state=\"unreadable\"} %zu\n", unreadable);
    family(f, "pyscope_agent_samples_total", "counter", "Thread samples taken, all processes.");
    fprintf(f, "pyscope_agent_samples_total %llu\n", (unsigned long long)a->samples);
    family(f, "pyscope_agent_process_passes_total", "counter",
           "Passes over one process: read, or repeated because none of its threads had run "
           "since the last (see pyscope_agent_run_source_info).");
    fprintf(f, "pyscope_agent_process_passes_total{kind=\"read\"} %llu\n",
            (unsigned long long)(a->passes - a->passes_repeated));
    fprintf(f, "pyscope_agent_process_passes_total{kind=\"repeated\"} %llu\n",
            (unsigned long long)a->passes_repeated);
    family(f, "pyscope_agent_quiet_ticks_skipped_total", "counter",
           "Ticks at which a settled process was not looked at: a pass at another tick of the "
           "same stretch stands for them (see --idle-stride).");
    fprintf(f, "pyscope_agent_quiet_ticks_skipped_total %llu\n",
            (unsigned long long)a->ticks_skipped);
    size_t by_stride[4] = {0};
    for (size_t i = 0; i < a->n_hot; i++)
        if (a->hot[i].proc)
            by_stride[a->hot[i].stride >= 8   ? 3
                      : a->hot[i].stride >= 4 ? 2
                      : a->hot[i].stride >= 2 ? 1
                                              : 0]++;
    family(f, "pyscope_agent_processes_by_stride", "gauge",
           "Sampled processes by the ticks each pass stands for: 1 (every tick), or 2, 4 or 8 "
           "for a process under a quarter, a sixteenth or a sixty-fourth of whose recent "
           "ticks found it changed.");
    for (int k = 0; k < 4; k++)
        fprintf(f, "pyscope_agent_processes_by_stride{stride=\"%d\"} %zu\n", 1 << k, by_stride[k]);
    family(f, "pyscope_agent_run_source_info", "gauge",
           "What tells whether a process ran since the last pass: a BPF program counting the "
           "scheduler's charges (bpf), or each process's CPU clock (cpu_clock).");
    fprintf(f, "pyscope_agent_run_source_info{source=\"%s\"} 1\n", a->counting ? "bpf" : "cpu_clock");
    family(f, "pyscope_agent_sample_errors_total", "counter",
           "Passes in which some stack could not be read whole (it changed under the reader).");
    fprintf(f, "pyscope_agent_sample_errors_total %llu\n", (unsigned long long)a->sample_errors);
    family(f, "pyscope_agent_why_second_snapshots_total", "counter",
           "The periodic why's second snapshots: read, or spared because none of the "
           "process's threads had run since just before the first (no asyncio loop).");
    fprintf(f, "pyscope_agent_why_second_snapshots_total{kind=\"read\"} %llu\n",
            (unsigned long long)a->why_second_read);
    fprintf(f, "pyscope_agent_why_second_snapshots_total{kind=\"spared\"} %llu\n",
            (unsigned long long)a->why_second_spared);
    family(f, "pyscope_agent_lag_seconds_total", "counter",
           "Summed lateness of sampling rounds behind the clock of the rate in force.");
    fprintf(f, "pyscope_agent_lag_seconds_total %.6f\n", a->lag_seconds);
    family(f, "pyscope_agent_rounds_skipped_total", "counter",
           "Sampling rounds skipped because the previous one ran late.");
    fprintf(f, "pyscope_agent_rounds_skipped_total %llu\n", (unsigned long long)a->ticks_late);
    family(f, "pyscope_agent_cpu_seconds_total", "counter", "CPU seconds the agent used (user and system).");
    fprintf(f, "pyscope_agent_cpu_seconds_total %.6f\n", agent_cpu_seconds());
    family(f, "pyscope_agent_resident_memory_bytes", "gauge", "The agent's resident set size.");
    fprintf(f, "pyscope_agent_resident_memory_bytes %ld\n", resident_bytes());
    /* RSS also counts what the allocator keeps after frees (arenas not yet
     * trimmed, fragments): the heap in use is what a leak would raise. */
    struct mallinfo2 mi = mallinfo2();
    family(f, "pyscope_agent_heap_bytes", "gauge",
           "The agent's heap: bytes in use (allocated and not freed) and free but kept by the allocator.");
    fprintf(f, "pyscope_agent_heap_bytes{kind=\"in_use\"} %zu\n", mi.uordblks + mi.hblkhd);
    fprintf(f, "pyscope_agent_heap_bytes{kind=\"free_kept\"} %zu\n", mi.fordblks);
    family(f, "pyscope_agent_requested_rate_hz", "gauge", "Sampling rate asked for (--rate), per process.");
    fprintf(f, "pyscope_agent_requested_rate_hz %g\n", a->opts.rate_hz);
    family(f, "pyscope_agent_rate_hz", "gauge",
           "Sampling rate in force, per process: below the requested one when over the CPU budget.");
    fprintf(f, "pyscope_agent_rate_hz %g\n", a->rate_hz);
    family(f, "pyscope_agent_cpu_budget_ratio", "gauge", "CPU budget (--cpu-budget), as a fraction of one core.");
    fprintf(f, "pyscope_agent_cpu_budget_ratio %g\n", a->opts.cpu_budget);
    family(f, "pyscope_agent_cpu_budget_limited", "gauge",
           "1 while the rate is lowered to keep within the CPU budget.");
    fprintf(f, "pyscope_agent_cpu_budget_limited %d\n", a->budget_limited);
    family(f, "pyscope_agent_why_interval_seconds", "gauge",
           "How often why runs on each process: --why-every, longer when the CPU budget needs it.");
    fprintf(f, "pyscope_agent_why_interval_seconds %g\n", a->opts.why_every_s * a->why_scale);
    family(f, "pyscope_agent_window_bytes", "gauge", "Memory of the window of samples kept for pprof.");
    fprintf(f, "pyscope_agent_window_bytes %zu\n", sample_ring_memory(&a->ring));
    family(f, "pyscope_agent_interned", "gauge",
           "Frames, stacks, threads and processes interned for the window (rebuilt past a cap).");
    fprintf(f, "pyscope_agent_interned{kind=\"frames\"} %zu\n", a->profile.n_frames);
    fprintf(f, "pyscope_agent_interned{kind=\"stacks\"} %zu\n", a->profile.n_stacks);
    fprintf(f, "pyscope_agent_interned{kind=\"threads\"} %zu\n", a->profile.n_threads);
    fprintf(f, "pyscope_agent_interned{kind=\"processes\"} %zu\n", a->profile.n_processes);
    family(f, "pyscope_agent_profile_resets_total", "counter",
           "Times the interned stacks passed their cap and the window was started afresh.");
    fprintf(f, "pyscope_agent_profile_resets_total %llu\n", (unsigned long long)a->resets);
    if (a->opts.push_url) {
        family(f, "pyscope_agent_pushes_total", "counter", "Pushes to --push, by result.");
        fprintf(f, "pyscope_agent_pushes_total{result=\"ok\"} %llu\n", (unsigned long long)a->push_ok);
        fprintf(f, "pyscope_agent_pushes_total{result=\"failed\"} %llu\n",
                (unsigned long long)a->push_failed);
    }
}

char *agent_metrics(struct agent *a, size_t *len)
{
    char *text = NULL;
    uint64_t now_ns = monotonic_ns();
    for (size_t i = 0; i < a->n_procs; i++)
        agent_settle(a->procs[i], now_ns);
    FILE *f = open_memstream(&text, len);
    if (!f)
        return NULL;
    write_metrics(f, a);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
