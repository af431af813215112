/* --push: the newest stretch of samples as pprof, POSTed to a Pyroscope-
 * compatible /ingest (Pyroscope's server, Grafana Alloy's
 * pyroscope.receive_http) as Pyroscope documents it: name, from, until,
 * sampleRate, spyName, units, aggregationType and format=pprof in the query,
 * the gzipped profile as the "profile" part of a multipart/form-data body.
 * Plain http:// only, one request at a time with short timeouts, so that a
 * slow server delays sampling by seconds at most (a local Alloy terminates
 * TLS for a remote one). */
#include "agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PUSH_TIMEOUT_MS 3000

static int wait_fd(int fd, short events)
{
    struct pollfd p = {.fd = fd, .events = events};
    int n;
    do
        n = poll(&p, 1, PUSH_TIMEOUT_MS);
    while (n < 0 && errno == EINTR);
    return n == 1 ? 0 : -1;
}

static int send_all(int fd, const char *data, size_t len)
{
    while (len) {
        if (wait_fd(fd, POLLOUT) != 0)
            return -1;
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static int connect_to(const char *host, const char *port, char *why, size_t whysize)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        snprintf(why, whysize, "%.100s: %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
            snprintf(why, whysize, "connect: %s", strerror(errno));
            close(fd);
            fd = -1;
            continue;
        }
        int err = 0;
        socklen_t len = sizeof err;
        if (wait_fd(fd, POLLOUT) != 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
            err != 0) {
            snprintf(why, whysize, "connect: %s", err ? strerror(err) : "timed out");
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

static void url_encode(char *out, size_t outsize, const char *s)
{
    size_t n = 0;
    for (; *s && n + 4 < outsize; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~')
            out[n++] = (char)c;
        else
            n += (size_t)snprintf(out + n, outsize - n, "%%%02X", c);
    }
    out[n] = '\0';
}

/* http://HOST[:PORT][/PREFIX] into its parts; 0 or -1. */
static int parse_url(const char *url, char *host, size_t hostsize, char *port, size_t portsize,
                     char *prefix, size_t prefixsize)
{
    if (strncmp(url, "http://", 7) != 0)
        return -1;
    const char *h = url + 7, *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    if (hl == 0 || hl >= hostsize)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, portsize, "80");
    char *colon = host[0] == '[' ? strchr(host, ']') : host;
    colon = colon ? strrchr(colon, ':') : NULL;
    if (colon) {
        snprintf(port, portsize, "%s", colon + 1);
        *colon = '\0';
    }
    if (host[0] == '[') {
        memmove(host, host + 1, strlen(host));
        char *close = strchr(host, ']');
        if (close)
            *close = '\0';
    }
    snprintf(prefix, prefixsize, "%s", slash ? slash : "");
    size_t pl = strlen(prefix);
    while (pl && prefix[pl - 1] == '/')
        prefix[--pl] = '\0';
    return 0;
}

int agent_push_url_valid(const char *url)
{
    char host[256], port[16], prefix[512];
    return parse_url(url, host, sizeof host, port, sizeof port, prefix, sizeof prefix) == 0;
}

int agent_push(struct agent *a, uint64_t now_ns)
{
    char host[256], port[16], prefix[512];
    if (parse_url(a->opts.push_url, host, sizeof host, port, sizeof port, prefix, sizeof prefix))
        return -1;
    uint64_t from_ns = a->push_from_ns ? a->push_from_ns : a->start_ns;
    a->push_from_ns = now_ns;
    size_t len = 0;
    char *profile = agent_pprof(a, from_ns, now_ns, 0, &len);
    if (!profile) {
        snprintf(a->push_error, sizeof a->push_error, "out of memory");
        return -1;
    }
    char hostname[128] = "";
    gethostname(hostname, sizeof hostname - 1);
    char name[512], ename[1024];
    snprintf(name, sizeof name, "%s.cpu{hostname=%s}", a->opts.app_name, hostname);
    url_encode(ename, sizeof ename, name);
    uint64_t unix_from = a->start_unix_ns + (from_ns - a->start_ns);
    uint64_t unix_until = a->start_unix_ns + (now_ns - a->start_ns);
    static const char boundary[] = "pyscope-agent-7f3c91d2e5a8";
    char head[2048], part[256];
    int part_len = snprintf(part, sizeof part,
                            "--%s\r\nContent-Disposition: form-data; name=\"profile\"; "
                            "filename=\"profile.pprof\"\r\nContent-Type: application/octet-stream"
                            "\r\n\r\n",
                            boundary);
    char tail[64];
    int tail_len = snprintf(tail, sizeof tail, "\r\n--%s--\r\n", boundary);
    int head_len = snprintf(
        head, sizeof head,
        "POST %s/ingest?name=%s&from=%llu&until=%llu&sampleRate=%g&spyName=pyscope"
        "&units=samples&aggregationType=sum&format=pprof HTTP/1.1\r\n"
        "Host: %s:%s\r\nUser-Agent: pyscope-agent\r\n"
        "Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %zu\r\n"
        "Connection: close\r\n\r\n",
        prefix, ename, (unsigned long long)(unix_from / 1000000000ull),
        (unsigned long long)((unix_until + 999999999ull) / 1000000000ull), a->rate_hz, host, port,
        boundary, (size_t)part_len + len + (size_t)tail_len);
    int rc = -1;
    int fd = connect_to(host, port, a->push_error, sizeof a->push_error);
    if (fd >= 0) {
        if (send_all(fd, head, (size_t)head_len) == 0 && send_all(fd, part, (size_t)part_len) == 0 &&
            send_all(fd, profile, len) == 0 && send_all(fd, tail, (size_t)tail_len) == 0) {
            char reply[256];
            size_t got = 0;
            while (got < sizeof reply - 1 && !memchr(reply, '\n', got) &&
                   wait_fd(fd, POLLIN) == 0) {
                ssize_t n = recv(fd, reply + got, sizeof reply - 1 - got, 0);
                if (n <= 0)
                    break;
                got += (size_t)n;
            }
            reply[got] = '\0';
            int status = 0;
            if (sscanf(reply, "HTTP/1.%*d %d", &status) == 1 && status >= 200 && status < 300)
                rc = 0;
            else
                snprintf(a->push_error, sizeof a->push_error, "the server answered %.60s",
                         got ? strtok(reply, "\r\n") : "nothing");
        } else {
            snprintf(a->push_error, sizeof a->push_error, "sending: %s", strerror(errno));
        }
        close(fd);
    }
    free(profile);
    return rc;
}
