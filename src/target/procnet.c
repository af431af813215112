/* Socket tables and fd links from /proc. Addresses in /proc/net/{tcp,udp}*
 * are the kernel's in-memory words printed as hex on this (little-endian)
 * host, so each 32-bit word is byte-swapped back before formatting; ports
 * are printed in host order already. */
#include "target/procnet.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A namespace with this many sockets is read only this far. */
#define PROCNET_MAX_FILE_BYTES (64u << 20)

const char *procnet_kind_name(enum procnet_kind kind)
{
    switch (kind) {
    case PROCNET_TCP: return "tcp";
    case PROCNET_TCP6: return "tcp6";
    case PROCNET_UDP: return "udp";
    case PROCNET_UDP6: return "udp6";
    case PROCNET_UNIX: return "unix";
    }
    return "?";
}

const char *procnet_tcp_state_name(unsigned state)
{
    static const char *const names[] = {
        NULL,        "ESTABLISHED", "SYN_SENT",   "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2", "TIME_WAIT",
        "CLOSE",     "CLOSE_WAIT",  "LAST_ACK",   "LISTEN",   "CLOSING",   "NEW_SYN_RECV",
    };
    if (state < sizeof names / sizeof names[0] && names[state])
        return names[state];
    return "UNKNOWN";
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reads exactly ndigits hex digits at *p into *value and advances *p. */
static int take_hex(const char **p, int ndigits, uint64_t *value)
{
    uint64_t v = 0;
    for (int i = 0; i < ndigits; i++) {
        int d = hex_value((*p)[i]);
        if (d < 0)
            return -1;
        v = (v << 4) | (uint64_t)d;
    }
    *p += ndigits;
    *value = v;
    return 0;
}

/* Reads hex digits up to the first non-hex character (at most 16). */
static int take_hex_any(const char **p, uint64_t *value)
{
    uint64_t v = 0;
    int n = 0;
    while (hex_value(**p) >= 0) {
        if (++n > 16)
            return -1;
        v = (v << 4) | (uint64_t)hex_value(**p);
        (*p)++;
    }
    if (n == 0)
        return -1;
    *value = v;
    return 0;
}

static void skip_spaces(const char **p)
{
    while (**p == ' ' || **p == '\t')
        (*p)++;
}

/* "0100007F:1F90" (or the 32-digit IPv6 form) into "127.0.0.1:8080". */
static int take_inet_address(const char **p, bool ipv6, char *out, size_t outsize)
{
    unsigned char bytes[16];
    int words = ipv6 ? 4 : 1;
    for (int w = 0; w < words; w++) {
        uint64_t word;
        if (take_hex(p, 8, &word) != 0)
            return -1;
        uint32_t host = (uint32_t)word;
        /* The word was printed from memory as a host-order integer. */
        memcpy(&bytes[w * 4], &host, 4);
    }
    uint64_t port;
    if (**p != ':')
        return -1;
    (*p)++;
    if (take_hex(p, 4, &port) != 0)
        return -1;
    char text[INET6_ADDRSTRLEN];
    if (!inet_ntop(ipv6 ? AF_INET6 : AF_INET, bytes, text, sizeof text))
        return -1;
    if (ipv6)
        snprintf(out, outsize, "[%s]:%u", text, (unsigned)port);
    else
        snprintf(out, outsize, "%s:%u", text, (unsigned)port);
    return 0;
}

int procnet_parse_inet_line(const char *line, enum procnet_kind kind, struct procnet_socket *out)
{
    bool ipv6 = kind == PROCNET_TCP6 || kind == PROCNET_UDP6;
    bool tcp = kind == PROCNET_TCP || kind == PROCNET_TCP6;
    if (kind == PROCNET_UNIX)
        return -1;
    memset(out, 0, sizeof *out);
    out->kind = kind;
    const char *p = line;
    skip_spaces(&p);
    /* "sl:" slot number */
    if (!isdigit((unsigned char)*p))
        return -1;
    while (isdigit((unsigned char)*p))
        p++;
    if (*p++ != ':')
        return -1;
    skip_spaces(&p);
    if (take_inet_address(&p, ipv6, out->local, sizeof out->local) != 0)
        return -1;
    skip_spaces(&p);
    if (take_inet_address(&p, ipv6, out->remote, sizeof out->remote) != 0)
        return -1;
    skip_spaces(&p);
    uint64_t state;
    if (take_hex(&p, 2, &state) != 0)
        return -1;
    skip_spaces(&p);
    if (take_hex_any(&p, &out->tx_queue) != 0 || *p++ != ':' || take_hex_any(&p, &out->rx_queue) != 0)
        return -1;
    /* tr:tm->when retrnsmt uid timeout inode */
    skip_spaces(&p);
    uint64_t ignored;
    if (take_hex_any(&p, &ignored) != 0 || *p++ != ':' || take_hex_any(&p, &ignored) != 0)
        return -1;
    skip_spaces(&p);
    if (take_hex_any(&p, &ignored) != 0)
        return -1;
    char *end;
    for (int field = 0; field < 3; field++) {
        skip_spaces(&p);
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || errno)
            return -1;
        p = end;
        if (field == 2)
            out->inode = v;
    }
    if (tcp)
        snprintf(out->state, sizeof out->state, "%s", procnet_tcp_state_name((unsigned)state));
    else
        snprintf(out->state, sizeof out->state, "%s",
                 state == 1 ? "ESTABLISHED" : state == 7 ? "UNCONN" : procnet_tcp_state_name((unsigned)state));
    /* An unconnected peer reads 0.0.0.0:0 or [::]:0: say nothing instead. */
    if (strcmp(out->remote, "0.0.0.0:0") == 0 || strcmp(out->remote, "[::]:0") == 0)
        out->remote[0] = '\0';
    return 0;
}

int procnet_parse_unix_line(const char *line, struct procnet_socket *out)
{
    memset(out, 0, sizeof *out);
    out->kind = PROCNET_UNIX;
    const char *p = line;
    skip_spaces(&p);
    /* Num: RefCount Protocol Flags Type St Inode Path */
    uint64_t ignored, flags, state;
    if (take_hex_any(&p, &ignored) != 0 || *p++ != ':')
        return -1;
    skip_spaces(&p);
    if (take_hex_any(&p, &ignored) != 0)
        return -1;
    skip_spaces(&p);
    if (take_hex_any(&p, &ignored) != 0)
        return -1;
    skip_spaces(&p);
    if (take_hex_any(&p, &flags) != 0)
        return -1;
    skip_spaces(&p);
    if (take_hex_any(&p, &ignored) != 0)
        return -1;
    skip_spaces(&p);
    if (take_hex_any(&p, &state) != 0)
        return -1;
    skip_spaces(&p);
    char *end;
    errno = 0;
    unsigned long long inode = strtoull(p, &end, 10);
    if (end == p || errno)
        return -1;
    out->inode = inode;
    p = end;
    skip_spaces(&p);
    size_t len = strcspn(p, "\n");
    if (len >= sizeof out->local)
        len = sizeof out->local - 1;
    memcpy(out->local, p, len);
    out->local[len] = '\0';
    /* __SO_ACCEPTCON marks a listening socket. */
    if (flags & 0x10000)
        snprintf(out->state, sizeof out->state, "LISTEN");
    else
        snprintf(out->state, sizeof out->state, "%s",
                 state == 1 ? "UNCONNECTED" : state == 2 ? "CONNECTING" : state == 3 ? "CONNECTED"
                 : state == 4 ? "DISCONNECTING" : "UNKNOWN");
    return 0;
}

static int table_append(struct procnet_table *table, const struct procnet_socket *s)
{
    if (table->count == table->capacity) {
        size_t capacity = table->capacity ? table->capacity * 2 : 64;
        struct procnet_socket *items = realloc(table->items, capacity * sizeof *items);
        if (!items)
            return -1;
        table->items = items;
        table->capacity = capacity;
    }
    table->items[table->count++] = *s;
    return 0;
}

int procnet_table_parse(struct procnet_table *table, const char *text, enum procnet_kind kind)
{
    const char *line = text;
    while (*line) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char buf[512];
        if (len < sizeof buf) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            struct procnet_socket s;
            int rc = kind == PROCNET_UNIX ? procnet_parse_unix_line(buf, &s)
                                          : procnet_parse_inet_line(buf, kind, &s);
            if (rc == 0 && table_append(table, &s) != 0)
                return -1;
        }
        if (!eol)
            break;
        line = eol + 1;
    }
    return 0;
}

static char *read_whole_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t size = 0, capacity = 16384;
    char *buf = malloc(capacity);
    while (buf) {
        if (size + 1 >= capacity) {
            if (capacity >= PROCNET_MAX_FILE_BYTES)
                break;
            char *bigger = realloc(buf, capacity * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            capacity *= 2;
        }
        ssize_t n = read(fd, buf + size, capacity - size - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size += (size_t)n;
    }
    close(fd);
    if (buf)
        buf[size] = '\0';
    return buf;
}

static const struct {
    const char *name;
    enum procnet_kind kind;
    int group;                   /* for procnet_table_lookup */
} procnet_files[] = {
    {"tcp", PROCNET_TCP, 2}, {"tcp6", PROCNET_TCP6, 2}, {"udp", PROCNET_UDP, 2},
    {"udp6", PROCNET_UDP6, 2}, {"unix", PROCNET_UNIX, 1},
};

static int load_files(struct procnet_table *table, pid_t pid, int group)
{
    for (size_t i = 0; i < sizeof procnet_files / sizeof procnet_files[0]; i++) {
        if (group && procnet_files[i].group != group)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/net/%s", (int)pid, procnet_files[i].name);
        char *text = read_whole_file(path);
        if (!text)
            continue;
        int rc = procnet_table_parse(table, text, procnet_files[i].kind);
        free(text);
        if (rc != 0)
            return -1;
    }
    return 0;
}

const struct procnet_socket *procnet_table_lookup(struct procnet_table *table, pid_t pid,
                                                  uint64_t inode)
{
    const struct procnet_socket *s = procnet_table_find(table, inode);
    while (!s && !table->loaded && table->groups_loaded < 2) {
        if (load_files(table, pid, ++table->groups_loaded) != 0)
            return NULL;
        table->loaded = table->groups_loaded == 2;
        s = procnet_table_find(table, inode);
    }
    return s;
}

int procnet_table_load(struct procnet_table *table, pid_t pid)
{
    if (table->loaded)
        return 0;
    int group = table->groups_loaded ? 2 : 0;   /* 1: unix is in already */
    table->loaded = true;
    table->groups_loaded = 2;
    return load_files(table, pid, group);
}

const struct procnet_socket *procnet_table_find(const struct procnet_table *table, uint64_t inode)
{
    for (size_t i = 0; i < table->count; i++)
        if (table->items[i].inode == inode)
            return &table->items[i];
    return NULL;
}

void procnet_table_free(struct procnet_table *table)
{
    free(table->items);
    memset(table, 0, sizeof *table);
}

/* Splits "1.2.3.4:80" or "[::1]:80" into a bare address and a port; an
 * IPv4-mapped IPv6 address is reduced to its IPv4 form. */
static bool split_address(const char *text, char *host, size_t hostsize, unsigned *port)
{
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text)
        return false;
    char *end;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (*end || p > 65535)
        return false;
    const char *start = text;
    size_t len = (size_t)(colon - text);
    if (*start == '[' && len >= 2 && start[len - 1] == ']') {
        start++;
        len -= 2;
    }
    static const char mapped[] = "::ffff:";
    if (len > sizeof mapped - 1 && strncmp(start, mapped, sizeof mapped - 1) == 0 &&
        memchr(start, '.', len)) {
        start += sizeof mapped - 1;
        len -= sizeof mapped - 1;
    }
    if (len >= hostsize)
        return false;
    memcpy(host, start, len);
    host[len] = '\0';
    *port = (unsigned)p;
    return true;
}

bool procnet_accepted(const struct procnet_table *table, const struct procnet_socket *s)
{
    char host[112], listen_host[112];
    unsigned port, listen_port;
    if ((s->kind != PROCNET_TCP && s->kind != PROCNET_TCP6) ||
        !split_address(s->local, host, sizeof host, &port))
        return false;
    for (size_t i = 0; i < table->count; i++) {
        const struct procnet_socket *l = &table->items[i];
        if ((l->kind != PROCNET_TCP && l->kind != PROCNET_TCP6) || strcmp(l->state, "LISTEN") != 0 ||
            !split_address(l->local, listen_host, sizeof listen_host, &listen_port) ||
            listen_port != port)
            continue;
        if (strcmp(listen_host, host) == 0 || strcmp(listen_host, "0.0.0.0") == 0 ||
            strcmp(listen_host, "::") == 0)
            return true;
    }
    return false;
}

int procnet_socket_inode(const char *link, uint64_t *inode)
{
    static const char prefix[] = "socket:[";
    if (strncmp(link, prefix, sizeof prefix - 1) != 0)
        return -1;
    const char *p = link + sizeof prefix - 1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p || errno || strcmp(end, "]") != 0)
        return -1;
    *inode = v;
    return 0;
}

int procnet_parse_epoll_fdinfo(const char *text, int *fds, int max)
{
    int n = 0;
    const char *line = text;
    while (line && *line && n < max) {
        if (strncmp(line, "tfd:", 4) == 0) {
            char *end;
            errno = 0;
            long fd = strtol(line + 4, &end, 10);
            if (end != line + 4 && !errno && fd >= 0 && fd <= 0x7fffffff)
                fds[n++] = (int)fd;
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return n;
}

int procnet_fd_link(pid_t pid, int fd, char *out, size_t outsize)
{
    char path[64];
    if (fd < 0 || outsize == 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
    ssize_t n = readlink(path, out, outsize - 1);
    if (n < 0)
        return -1;
    out[n] = '\0';
    return 0;
}
