/* pyscope agent: the command line of the host agent (src/agent/), its
 * signals (SIGTERM and SIGINT end it cleanly, SIGHUP reopens the log). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "util/error.h"

static volatile int stop_requested, reopen_requested;

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void on_hup(int sig)
{
    (void)sig;
    reopen_requested = 1;
}

/* The agent samples every process of the host: a lower ceiling than the
 * shared --rate rule of record, top and run. */
#define AGENT_MAX_RATE_HZ 1000

static int take_rate(const char *arg, void *value)
{
    if (!cli_parse_rate(arg, AGENT_MAX_RATE_HZ, false, value)) {
        fprintf(stderr, "pyscope: --rate takes samples per second, up to %d\n",
                AGENT_MAX_RATE_HZ);
        return PYSCOPE_ERR_USAGE;
    }
    return 0;
}

static int take_pid(const char *arg, void *value)
{
    struct agent_options *opts = value;
    if (opts->n_pids == AGENT_MAX_PIDS) {
        fprintf(stderr, "pyscope: at most %d --pid\n", AGENT_MAX_PIDS);
        return PYSCOPE_ERR_USAGE;
    }
    if (!cli_parse_pid(arg, &opts->pids[opts->n_pids]))
        return PYSCOPE_ERR_USAGE;
    opts->n_pids++;
    return 0;
}

static int take_budget(const char *arg, void *value)
{
    char *end;
    double pct = strtod(arg, &end);
    if (end != arg && *end == '%')
        end++;
    if (end == arg || *end || !(pct >= 0) || pct > 100) {
        fprintf(stderr, "pyscope: --cpu-budget takes a percentage of one core, 0 to 100\n");
        return PYSCOPE_ERR_USAGE;
    }
    *(double *)value = pct / 100;
    return 0;
}

static int take_window(const char *arg, void *value)
{
    if (!cli_parse_seconds(arg, value) || *(double *)value > 3600) {
        fprintf(stderr, "pyscope: --window takes seconds, at most 3600\n");
        return PYSCOPE_ERR_USAGE;
    }
    return 0;
}

static int take_push(const char *arg, void *value)
{
    if (!agent_push_url_valid(arg)) {
        fprintf(stderr, "pyscope: --push takes http://HOST[:PORT][/PATH]\n");
        return PYSCOPE_ERR_USAGE;
    }
    *(const char **)value = arg;
    return 0;
}

static int take_idle_stride(const char *arg, void *value)
{
    if (strcmp(arg, "1") && strcmp(arg, "2") && strcmp(arg, "4") && strcmp(arg, "8")) {
        fprintf(stderr, "pyscope: --idle-stride takes 1, 2, 4 or 8\n");
        return PYSCOPE_ERR_USAGE;
    }
    *(unsigned *)value = (unsigned)atoi(arg);
    return 0;
}

static int take_max_processes(const char *arg, void *value)
{
    char *end;
    long n = strtol(arg, &end, 10);
    if (end == arg || *end || n < 1 || n > 100000) {
        fprintf(stderr, "pyscope: --max-processes takes a number from 1 to 100000\n");
        return PYSCOPE_ERR_USAGE;
    }
    *(size_t *)value = (size_t)n;
    return 0;
}

int cmd_agent(int argc, char **argv)
{
    struct agent_options opts = {
        .listen = "127.0.0.1:9464",
        .rate_hz = 19,
        .why_every_s = 30,
        .cpu_budget = 0.01,
        .debug_endpoints = true,
        .push_every_s = 10,
        .app_name = "pyscope",
        .window_s = 60,
        .max_bytes = 8u << 20,
        .max_processes = 256,
        .idle_stride = 8,
    };
    const struct cli_option options[] = {
        CLI_OPT('l', "listen", "HOST:PORT", "address to serve on (default 127.0.0.1:9464; another"
                "\naddress only when given; port 0 picks a free one)", CLI_STRING, &opts.listen),
        CLI_OPT('r', "rate", "HZ", "samples per second per process (default 19)", CLI_CALL,
                &opts.rate_hz, .call = take_rate),
        CLI_OPT('p', "pid", "PID", "only this process (repeatable; default: every one)", CLI_CALL,
                &opts, .call = take_pid),
        CLI_OPT('m', "match", "REGEX", "only processes whose command line matches (extended "
                "regex)", CLI_STRING, &opts.match),
        CLI_OPT(0, "why-every", "SECS", "how often why runs on each process (default 30)",
                CLI_SECONDS, &opts.why_every_s,
                .error = "--why-every takes a positive number of seconds"),
        CLI_OPT(0, "cpu-budget", "PCT", "percent of one core the agent may use (default 1); over"
                "\nit the rate is lowered, and the metrics say so; 0: no limit", CLI_CALL,
                &opts.cpu_budget, .call = take_budget),
        CLI_OPT(0, "window", "SECS", "samples kept for the pprof endpoint (default 60)", CLI_CALL,
                &opts.window_s, .call = take_window),
        CLI_OPT(0, "max-processes", "N", "sampled at once (default 256); more are listed in the\n"
                "metrics as unreadable, and taken up as others exit", CLI_CALL,
                &opts.max_processes, .call = take_max_processes),
        CLI_OPT(0, "idle-stride", "N", "a process whose passes keep finding it as before (no\n"
                "thread ran, or each where it was) is looked at at one\ntick of 2, 4 or 8 "
                "(250 ms at most: 8 from 32 Hz), drawn\nat random, its sample counting for all "
                "of them;\n1: every tick (default 8)", CLI_CALL,
                &opts.idle_stride,
                .call = take_idle_stride),
        CLI_OPT(0, "no-debug-endpoints", NULL, "serve /metrics and /debug/pprof only", CLI_CLEAR,
                &opts.debug_endpoints),
        CLI_OPT(0, "bpf", NULL, "count processes' runs with a BPF program on sched_stat_runtime"
                "\ninstead of reading their CPU clocks: less of the agent's CPU,\nbut every "
                "context switch on the host costs more (see the README)", CLI_FLAG, &opts.bpf),
        CLI_OPT(0, "push", "URL", "every --push-every seconds, POST pprof to URL/ingest\n"
                "(Pyroscope's ingest API; http:// only)", CLI_CALL, &opts.push_url,
                .call = take_push),
        CLI_OPT(0, "push-every", "SECS", "default 10", CLI_SECONDS, &opts.push_every_s,
                .error = "--push-every takes a positive number of seconds"),
        CLI_OPT(0, "app-name", "NAME", "application name pushed (default pyscope)", CLI_STRING,
                &opts.app_name),
        CLI_OPT(0, "log", "FILE", "log here instead of stderr (reopened on SIGHUP)", CLI_STRING,
                &opts.log_path),
        CLI_HELP_OPTION,
        {0},
    };
    const struct cli_command cmd = {
        .usage = "usage: pyscope agent [options]\n"
                 "\n"
                 "Samples every CPython 3.8-3.15 process of the host (or those chosen) at a low\n"
                 "rate without stopping any, runs why on each now and then, and serves:\n"
                 "  /metrics                         Prometheus text format\n"
                 "  /debug/pprof/profile?seconds=N[&pid=P]   gzipped pprof of the next N seconds\n"
                 "  /debug/pyscope/dump?pid=P        dump --json (no locals)\n"
                 "  /debug/pyscope/why?pid=P         why --json, evaluated afresh\n"
                 "\n",
        .options = options,
        .help_column = 26,
    };
    int parsed = cli_parse(&cmd, argc, argv);
    if (parsed != CLI_CONTINUE)
        return parsed;
    if (optind < argc) {
        fprintf(stderr, "pyscope: unexpected argument '%s'\n", argv[optind]);
        cli_usage(&cmd, stderr);
        return PYSCOPE_ERR_USAGE;
    }
    if (opts.window_s < AGENT_MAX_PPROF_SECONDS)
        opts.window_s = AGENT_MAX_PPROF_SECONDS;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_hup;
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    static struct agent agent;
    if (agent_init(&agent, &opts) != 0)
        return PYSCOPE_ERR_OTHER;
    char host[256];
    size_t hl = (size_t)(strrchr(opts.listen, ':') - opts.listen);
    snprintf(host, sizeof host, "%.*s", (int)hl, opts.listen);
    agent_log(&agent, "listening on http://%s:%u/ (rate %g Hz, why every %g s, CPU budget "
                      "%g%% of a core)",
              hl ? host : "127.0.0.1", agent_port(&agent), opts.rate_hz, opts.why_every_s,
              opts.cpu_budget * 100);
    if (agent.counting)
        agent_log(&agent, "whether a process ran: counted by BPF on sched_stat_runtime");
    else if (opts.bpf)
        agent_log(&agent, "whether a process ran: its CPU clock (no BPF counter: %s)",
                  agent.counting_why_not);
    agent_run(&agent, &stop_requested, &reopen_requested);
    agent_log(&agent, "stopping");
    agent_free(&agent);
    return 0;
}
