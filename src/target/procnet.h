/* What the kernel says about a target's sockets and file descriptors:
 * /proc/PID/net/{tcp,tcp6,udp,udp6,unix} (read in the target's network
 * namespace), /proc/PID/fd links and epoll fdinfo. Parsers take text so the
 * unit tests can feed them fixed lines. */
#ifndef PYSCOPE_TARGET_PROCNET_H
#define PYSCOPE_TARGET_PROCNET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum procnet_kind {
    PROCNET_TCP,
    PROCNET_TCP6,
    PROCNET_UDP,
    PROCNET_UDP6,
    PROCNET_UNIX,
};

struct procnet_socket {
    enum procnet_kind kind;
    char local[112];        /* "127.0.0.1:8080", "[::1]:8080", a unix path, or "" */
    char remote[112];       /* same; "" for an unconnected or unnamed peer */
    char state[16];         /* "ESTABLISHED", "LISTEN", "UNCONN", "CONNECTED", ... */
    uint64_t inode;
    uint64_t tx_queue;      /* bytes queued to send (inet only) */
    uint64_t rx_queue;      /* bytes received and not read yet (inet only) */
};

/* "tcp", "tcp6", "udp", "udp6" or "unix". */
const char *procnet_kind_name(enum procnet_kind kind);
/* The name of a TCP state number as the kernel numbers them ("ESTABLISHED"). */
const char *procnet_tcp_state_name(unsigned state);

/* One data line of /proc/net/tcp, tcp6, udp or udp6 (the header line fails).
 * Returns 0, or -1 when the line is not a socket line. */
int procnet_parse_inet_line(const char *line, enum procnet_kind kind, struct procnet_socket *out);
/* One data line of /proc/net/unix. */
int procnet_parse_unix_line(const char *line, struct procnet_socket *out);

/* Every socket of the target's network namespace, loaded once, found by inode. */
struct procnet_table {
    struct procnet_socket *items;
    size_t count, capacity;
    bool loaded;
    int groups_loaded;           /* procnet_table_lookup's: 1 unix, 2 the inet files too */
};
/* Parses a whole file's text (header included) and appends its sockets. */
int procnet_table_parse(struct procnet_table *table, const char *text, enum procnet_kind kind);
/* Reads all five files of /proc/PID/net; files that are missing are skipped. */
int procnet_table_load(struct procnet_table *table, pid_t pid);
const struct procnet_socket *procnet_table_find(const struct procnet_table *table, uint64_t inode);
/* The socket of inode, reading the files only as far as needed: unix first
 * (a local pipe, an event loop's wake-up), then the four inet ones together
 * (so that procnet_accepted sees every listener). Reading /proc/net/tcp costs
 * the kernel a walk of its whole connection hash, tens of milliseconds on a
 * busy machine, which a lookup of a unix socket never needs. */
const struct procnet_socket *procnet_table_lookup(struct procnet_table *table, pid_t pid,
                                                  uint64_t inode);
void procnet_table_free(struct procnet_table *table);

/* Was this TCP connection accepted from a listening socket of the table
 * (same port, same or wildcard address), rather than opened outwards? */
bool procnet_accepted(const struct procnet_table *table, const struct procnet_socket *s);

/* The inode of a "socket:[12345]" link text; -1 for any other link. */
int procnet_socket_inode(const char *link, uint64_t *inode);
/* The target fds an epoll instance watches, from its fdinfo text ("tfd: N ..."
 * lines); returns how many were stored (at most max). */
int procnet_parse_epoll_fdinfo(const char *text, int *fds, int max);

/* readlink of /proc/PID/fd/FD into out ("socket:[1]", "pipe:[2]", "/a/file");
 * 0, or -1 when the fd is closed or unreadable. */
int procnet_fd_link(pid_t pid, int fd, char *out, size_t outsize);

#endif
