/* The agent's HTTP/1.1 endpoints, served by libmicrohttpd driven from the
 * agent's own loop (no server thread). A request that needs time to answer
 * (a pprof of the next N seconds, a fresh why) is suspended and resumed by
 * the loop once its answer exists. Every endpoint only reads. */
#include "agent/agent.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

/* libmicrohttpd is opened by the agent alone, when it starts serving:
 * linked into the binary, it brought GnuTLS and eight more libraries into
 * every dump and record, and their loading and constructors cost about
 * 2 ms of each run. */
#define MHD_FUNCTIONS(X)                                                                    \
    X(MHD_start_daemon) X(MHD_stop_daemon) X(MHD_add_response_header)                      \
    X(MHD_create_response_from_buffer) X(MHD_destroy_response) X(MHD_get_daemon_info)      \
    X(MHD_get_timeout) X(MHD_lookup_connection_value) X(MHD_queue_response)                \
    X(MHD_resume_connection) X(MHD_run) X(MHD_suspend_connection)

static struct {
#define MHD_FIELD(name) __typeof__(name) *name;
    MHD_FUNCTIONS(MHD_FIELD)
#undef MHD_FIELD
} mhd;

static int mhd_open(struct agent *a)
{
    static void *lib;
    if (lib)
        return 0;
    static const char *const sonames[] = {"libmicrohttpd.so.12", "libmicrohttpd.so"};
    void *h = NULL;
    for (size_t i = 0; !h && i < sizeof sonames / sizeof sonames[0]; i++)
        h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        agent_log(a, "cannot load libmicrohttpd, which serves the agent's endpoints (Debian's "
                     "libmicrohttpd12): %s", dlerror());
        return -1;
    }
    void *sym;
#define MHD_LOAD(name)                                                                      \
    if (!(sym = dlsym(h, #name))) {                                                         \
        agent_log(a, "libmicrohttpd has no %s: %s", #name, dlerror());                      \
        dlclose(h);                                                                         \
        return -1;                                                                          \
    }                                                                                       \
    memcpy(&mhd.name, &sym, sizeof sym);
    MHD_FUNCTIONS(MHD_LOAD)
#undef MHD_LOAD
    lib = h;
    return 0;
}

enum pending_kind { PENDING_PPROF = 1, PENDING_WHY };

struct pending {
    enum pending_kind kind;
    struct MHD_Connection *conn;
    pid_t pid;
    uint64_t start_ns, end_ns;  /* pprof: the stretch asked for */
    uint64_t generation;        /* why: answered once past this evaluation */
    bool resumed;
    struct pending *next;
};

struct agent_http {
    struct MHD_Daemon *daemon;
    int epoll_fd;
    unsigned port;
    struct pending *pending;
};

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *type,
                               char *body, size_t len, bool owned)
{
    struct MHD_Response *r = mhd.MHD_create_response_from_buffer(
        len, body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
    if (!r) {
        if (owned)
            free(body);
        return MHD_NO;
    }
    mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ret = mhd.MHD_queue_response(conn, status, r);
    mhd.MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result respond_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
    return respond(conn, status, "text/plain; charset=utf-8", (char *)text, strlen(text), false);
}

/* pid=P: 0 when absent; -1 when malformed. */
static pid_t query_pid(struct MHD_Connection *conn)
{
    const char *v = mhd.MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "pid");
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n <= 0 || n > 0x7fffffff)
        return -1;
    return (pid_t)n;
}

static enum MHD_Result answer_pending(struct agent *a, struct pending *p)
{
    if (p->kind == PENDING_PPROF) {
        size_t len = 0;
        char *data = agent_pprof(a, p->start_ns, p->end_ns, p->pid, &len);
        if (!data)
            return respond_text(p->conn, 500, "could not write the profile\n");
        return respond(p->conn, 200, "application/octet-stream", data, len, true);
    }
    struct agent_proc *proc = agent_find(a, p->pid);
    if (!proc || proc->state != AGENT_PROC_SAMPLING)
        return respond_text(p->conn, 404, "process not sampled (exited?)\n");
    if (!proc->why_json)
        return respond_text(p->conn, 500, "why could not read the process\n");
    return respond(p->conn, 200, "application/json", proc->why_json, proc->why_json_len, false);
}

static enum MHD_Result start_pprof(struct agent *a, struct MHD_Connection *conn, void **con_cls)
{
    const char *sv = mhd.MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "seconds");
    double seconds = 30; /* net/http/pprof's default */
    if (sv) {
        char *end;
        seconds = strtod(sv, &end);
        if (end == sv || *end || !(seconds > 0) || seconds > AGENT_MAX_PPROF_SECONDS) {
            char msg[96];
            snprintf(msg, sizeof msg, "seconds must be a number in (0, %d]\n",
                     AGENT_MAX_PPROF_SECONDS);
            return respond_text(conn, 400, msg);
        }
    }
    pid_t pid = query_pid(conn);
    if (pid < 0)
        return respond_text(conn, 400, "pid must be a process id\n");
    if (pid && (!agent_find(a, pid) || agent_find(a, pid)->state != AGENT_PROC_SAMPLING))
        return respond_text(conn, 404, "process not sampled\n");
    struct pending *p = calloc(1, sizeof *p);
    if (!p)
        return respond_text(conn, 500, "out of memory\n");
    p->kind = PENDING_PPROF;
    p->conn = conn;
    p->pid = pid;
    p->start_ns = monotonic_ns();
    p->end_ns = p->start_ns + (uint64_t)(seconds * 1e9);
    p->next = a->http->pending;
    a->http->pending = p;
    *con_cls = p;
    mhd.MHD_suspend_connection(conn);
    return MHD_YES;
}

static enum MHD_Result start_why(struct agent *a, struct MHD_Connection *conn, void **con_cls,
                                 struct agent_proc *proc)
{
    struct pending *p = calloc(1, sizeof *p);
    if (!p)
        return respond_text(conn, 500, "out of memory\n");
    p->kind = PENDING_WHY;
    p->conn = conn;
    p->pid = proc->pid;
    p->generation = proc->why_generation + (proc->why_pending ? 1 : 0);
    /* A fresh evaluation now, rather than one up to --why-every old; one
     * under way began before the request, so the next follows it at once. */
    if (!proc->why_pending)
        proc->next_why_ns = 0;
    else
        proc->why_again = true;
    agent_why_due_changed(proc);
    p->next = a->http->pending;
    a->http->pending = p;
    *con_cls = p;
    mhd.MHD_suspend_connection(conn);
    return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload;
    struct agent *a = cls;
    if (*con_cls) {
        struct pending *p = *con_cls;
        if (p->resumed)
            return answer_pending(a, p);
        return MHD_YES; /* spurious call while suspended */
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return respond_text(conn, 405, "only GET\n");
    if (*upload_size)
        return respond_text(conn, 400, "no body expected\n");
    a->http_requests++;
    if (strcmp(url, "/metrics") == 0) {
        size_t len = 0;
        char *text = agent_metrics(a, &len);
        if (!text)
            return respond_text(conn, 500, "out of memory\n");
        return respond(conn, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, true);
    }
    if (strcmp(url, "/debug/pprof/profile") == 0)
        return start_pprof(a, conn, con_cls);
    bool dump = strcmp(url, "/debug/pyscope/dump") == 0;
    bool why = strcmp(url, "/debug/pyscope/why") == 0;
    if ((dump || why) && a->opts.debug_endpoints) {
        pid_t pid = query_pid(conn);
        if (pid <= 0)
            return respond_text(conn, 400, "pid=PID is required\n");
        struct agent_proc *proc = agent_find(a, pid);
        if (!proc || proc->state != AGENT_PROC_SAMPLING)
            return respond_text(conn, 404, "process not sampled\n");
        if (why)
            return start_why(a, conn, con_cls, proc);
        size_t len = 0;
        int status = 500;
        char *json = agent_dump_json(a, proc, &len, &status);
        if (!json)
            return respond_text(conn, (unsigned)status, "dump could not read the process\n");
        return respond(conn, 200, "application/json", json, len, true);
    }
    if (strcmp(url, "/") == 0)
        return respond_text(conn, 200,
                            a->opts.debug_endpoints
                                ? "pyscope agent: /metrics, /debug/pprof/profile?seconds=N[&pid=P], "
                                  "/debug/pyscope/dump?pid=P, /debug/pyscope/why?pid=P\n"
                                : "pyscope agent: /metrics, /debug/pprof/profile?seconds=N[&pid=P]\n");
    return respond_text(conn, 404, "not found\n");
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode code)
{
    (void)conn;
    (void)code;
    struct agent *a = cls;
    struct pending *p = *con_cls;
    if (!p)
        return;
    for (struct pending **pp = &a->http->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    free(p);
    *con_cls = NULL;
}

/* HOST:PORT, [V6]:PORT or :PORT (loopback); 0 or -1. */
static int parse_listen(const char *listen, struct sockaddr_storage *ss)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || colon - listen >= (long)sizeof host)
        return -1;
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || port < 0 || port > 65535)
        return -1;
    memset(ss, 0, sizeof *ss);
    size_t hl = strlen(host);
    if (hl == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        host[hl - 1] = '\0';
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        return inet_pton(AF_INET6, host + 1, &s6->sin6_addr) == 1 ? 0 : -1;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    return inet_pton(AF_INET, host, &s4->sin_addr) == 1 ? 0 : -1;
}

int agent_http_start(struct agent *a)
{
    struct sockaddr_storage ss;
    if (parse_listen(a->opts.listen, &ss) != 0) {
        agent_log(a, "--listen takes HOST:PORT with a numeric address, e.g. 127.0.0.1:9464 or "
                     "[::1]:9464 (got '%s')", a->opts.listen);
        return -1;
    }
    if (mhd_open(a) != 0)
        return -1;
    a->http = calloc(1, sizeof *a->http);
    if (!a->http)
        return -1;
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    a->http->daemon = mhd.MHD_start_daemon(
        flags, 0, NULL, NULL, handle, a, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_NOTIFY_COMPLETED, completed, a, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
    if (!a->http->daemon) {
        agent_log(a, "cannot listen on %s: %s", a->opts.listen, strerror(errno));
        free(a->http);
        a->http = NULL;
        return -1;
    }
    const union MHD_DaemonInfo *info = mhd.MHD_get_daemon_info(a->http->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    a->http->epoll_fd = info ? info->epoll_fd : -1;
    info = mhd.MHD_get_daemon_info(a->http->daemon, MHD_DAEMON_INFO_BIND_PORT);
    a->http->port = info ? info->port : 0;
    return 0;
}

unsigned agent_port(const struct agent *a)
{
    return a->http ? a->http->port : 0;
}

void agent_http_poll(struct agent *a, uint64_t deadline_ns)
{
    struct agent_http *h = a->http;
    uint64_t now = monotonic_ns();
    for (struct pending *p = h->pending; p; p = p->next) {
        if (p->resumed)
            continue;
        bool ready = false;
        if (p->kind == PENDING_PPROF) {
            ready = now >= p->end_ns;
            if (!ready && p->end_ns < deadline_ns)
                deadline_ns = p->end_ns;
        } else {
            struct agent_proc *proc = agent_find(a, p->pid);
            ready = !proc || proc->state != AGENT_PROC_SAMPLING ||
                    proc->why_generation > p->generation;
        }
        if (ready) {
            p->resumed = true;
            mhd.MHD_resume_connection(p->conn);
            deadline_ns = now;
        }
    }
    MHD_UNSIGNED_LONG_LONG mhd_ms;
    if (mhd.MHD_get_timeout(h->daemon, &mhd_ms) == MHD_YES && now + mhd_ms * 1000000ull < deadline_ns)
        deadline_ns = now + mhd_ms * 1000000ull;
    int timeout_ms = deadline_ns > now ? (int)((deadline_ns - now + 999999) / 1000000) : 0;
    struct pollfd pfd = {.fd = h->epoll_fd, .events = POLLIN};
    poll(&pfd, 1, timeout_ms); /* interrupted by a signal: the loop looks at its flags */
    mhd.MHD_run(h->daemon);
}

void agent_http_stop(struct agent *a)
{
    if (!a->http)
        return;
    /* Suspended requests are resumed so that the daemon can close them. */
    for (struct pending *p = a->http->pending; p; p = p->next)
        if (!p->resumed) {
            p->resumed = true;
            mhd.MHD_resume_connection(p->conn);
        }
    mhd.MHD_stop_daemon(a->http->daemon);
    free(a->http);
    a->http = NULL;
}
