/* pyscope agent: the command line of the host agent (src/agent/), its
 * signals (SIGTERM and SIGINT end it cleanly, SIGHUP reopens the log). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void agent_usage(FILE *out)
{
    fprintf(out,
            "usage: pyscope agent [options]\n"
            "\n"
            "Samples every CPython 3.8-3.15 process of the host (or those chosen) at a low\n"
            "rate without stopping any, runs why on each now and then, and serves:\n"
            "  /metrics                         Prometheus text format\n"
            "  /debug/pprof/profile?seconds=N[&pid=P]   gzipped pprof of the next N seconds\n"
            "  /debug/pyscope/dump?pid=P        dump --json (no locals)\n"
            "  /debug/pyscope/why?pid=P         why --json, evaluated afresh\n"
            "\n"
            "  -l, --listen HOST:PORT  address to serve on (default 127.0.0.1:9464; another\n"
            "                          address only when given; port 0 picks a free one)\n"
            "  -r, --rate HZ           samples per second per process (default 19)\n"
            "  -p, --pid PID           only this process (repeatable; default: every one)\n"
            "  -m, --match REGEX       only processes whose command line matches (extended regex)\n"
            "      --why-every SECS    how often why runs on each process (default 30)\n"
            "      --cpu-budget PCT    percent of one core the agent may use (default 1); over\n"
            "                          it the rate is lowered, and the metrics say so; 0: no limit\n"
            "      --window SECS       samples kept for the pprof endpoint (default 60)\n"
            "      --max-processes N   sampled at once (default 256); more are listed in the\n"
            "                          metrics as unreadable, and taken up as others exit\n"
            "      --no-debug-endpoints  serve /metrics and /debug/pprof only\n"
            "      --push URL          every --push-every seconds, POST pprof to URL/ingest\n"
            "                          (Pyroscope's ingest API; http:// only)\n"
            "      --push-every SECS   default 10\n"
            "      --app-name NAME     application name pushed (default pyscope)\n"
            "      --log FILE          log here instead of stderr (reopened on SIGHUP)\n"
            "  -h, --help              this help\n");
}

int cmd_agent(int argc, char **argv)
{
    enum { O_WHY = 256, O_BUDGET, O_WINDOW, O_NO_DEBUG, O_PUSH, O_PUSH_EVERY, O_APP, O_LOG, O_MAX };
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"rate", required_argument, NULL, 'r'},
        {"pid", required_argument, NULL, 'p'},
        {"match", required_argument, NULL, 'm'},
        {"why-every", required_argument, NULL, O_WHY},
        {"cpu-budget", required_argument, NULL, O_BUDGET},
        {"window", required_argument, NULL, O_WINDOW},
        {"no-debug-endpoints", no_argument, NULL, O_NO_DEBUG},
        {"push", required_argument, NULL, O_PUSH},
        {"push-every", required_argument, NULL, O_PUSH_EVERY},
        {"app-name", required_argument, NULL, O_APP},
        {"log", required_argument, NULL, O_LOG},
        {"max-processes", required_argument, NULL, O_MAX},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct agent_options opts = {
        .listen = "127.0.0.1:9464",
        .rate_hz = 19,
        .why_every_s = 30,
        .cpu_budget = 0.01,
        .debug_endpoints = true,
        .push_every_s = 10,
        .app_name = "pyscope",
        .window_s = 60,
        .max_bytes = 16u << 20,
        .max_processes = 256,
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "l:r:p:m:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': opts.listen = optarg; break;
        case 'r':
            if (!cli_parse_rate(optarg, 1000, false, &opts.rate_hz)) {
                fprintf(stderr, "pyscope: --rate takes samples per second, up to 1000\n");
                return PYSCOPE_ERR_USAGE;
            }
            break;
        case 'p':
            if (opts.n_pids == AGENT_MAX_PIDS) {
                fprintf(stderr, "pyscope: at most %d --pid\n", AGENT_MAX_PIDS);
                return PYSCOPE_ERR_USAGE;
            }
            if (!cli_parse_pid(optarg, &opts.pids[opts.n_pids]))
                return PYSCOPE_ERR_USAGE;
            opts.n_pids++;
            break;
        case 'm': opts.match = optarg; break;
        case O_WHY:
            if (!cli_parse_seconds(optarg, &opts.why_every_s)) {
                fprintf(stderr, "pyscope: --why-every takes a positive number of seconds\n");
                return PYSCOPE_ERR_USAGE;
            }
            break;
        case O_BUDGET: {
            char *end;
            double pct = strtod(optarg, &end);
            if (end != optarg && *end == '%')
                end++;
            if (end == optarg || *end || !(pct >= 0) || pct > 100) {
                fprintf(stderr, "pyscope: --cpu-budget takes a percentage of one core, 0 to 100\n");
                return PYSCOPE_ERR_USAGE;
            }
            opts.cpu_budget = pct / 100;
            break;
        }
        case O_WINDOW:
            if (!cli_parse_seconds(optarg, &opts.window_s) || opts.window_s > 3600) {
                fprintf(stderr, "pyscope: --window takes seconds, at most 3600\n");
                return PYSCOPE_ERR_USAGE;
            }
            break;
        case O_NO_DEBUG: opts.debug_endpoints = false; break;
        case O_PUSH:
            if (!agent_push_url_valid(optarg)) {
                fprintf(stderr, "pyscope: --push takes http://HOST[:PORT][/PATH]\n");
                return PYSCOPE_ERR_USAGE;
            }
            opts.push_url = optarg;
            break;
        case O_PUSH_EVERY:
            if (!cli_parse_seconds(optarg, &opts.push_every_s)) {
                fprintf(stderr, "pyscope: --push-every takes a positive number of seconds\n");
                return PYSCOPE_ERR_USAGE;
            }
            break;
        case O_APP: opts.app_name = optarg; break;
        case O_LOG: opts.log_path = optarg; break;
        case O_MAX: {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (end == optarg || *end || n < 1 || n > 100000) {
                fprintf(stderr, "pyscope: --max-processes takes a number from 1 to 100000\n");
                return PYSCOPE_ERR_USAGE;
            }
            opts.max_processes = (size_t)n;
            break;
        }
        case 'h': agent_usage(stdout); return 0;
        default: agent_usage(stderr); return PYSCOPE_ERR_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "pyscope: unexpected argument '%s'\n", argv[optind]);
        agent_usage(stderr);
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
    agent_run(&agent, &stop_requested, &reopen_requested);
    agent_log(&agent, "stopping");
    agent_free(&agent);
    return 0;
}
