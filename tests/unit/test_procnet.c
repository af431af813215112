/* The /proc/net, fd-link and epoll-fdinfo parsers, fed lines captured from
 * this kernel (Linux 6.x, x86-64), including IPv4-mapped IPv6, abstract unix
 * names, queued bytes and malformed input. */
#include <stdlib.h>

#include "target/procnet.h"
#include "unit.h"

static void test_tcp_lines(void)
{
    struct procnet_socket s;
    CHECK_EQ_INT(procnet_parse_inet_line(
                     "   2: 0100007F:88A1 0100007F:A87E 01 00000000:00000005 00:00000000 00000000"
                     "     0        0 368706 1 0000000071d48e94 20 4 30 10 -1",
                     PROCNET_TCP, &s),
                 0);
    CHECK_EQ_STR(s.local, "127.0.0.1:34977");
    CHECK_EQ_STR(s.remote, "127.0.0.1:43134");
    CHECK_EQ_STR(s.state, "ESTABLISHED");
    CHECK_EQ_INT(s.inode, 368706);
    CHECK_EQ_INT(s.rx_queue, 5);
    CHECK_EQ_INT(s.tx_queue, 0);
    CHECK_EQ_STR(procnet_kind_name(s.kind), "tcp");

    CHECK_EQ_INT(procnet_parse_inet_line(
                     "   1: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000"
                     "     0        0 464 1 00000000be0fa0ad 100 0 0 10 0                       ",
                     PROCNET_TCP, &s),
                 0);
    CHECK_EQ_STR(s.local, "0.0.0.0:2024");
    CHECK_EQ_STR(s.remote, "");
    CHECK_EQ_STR(s.state, "LISTEN");
    CHECK_EQ_INT(s.inode, 464);

    /* The header line and garbage are not sockets. */
    CHECK_EQ_INT(procnet_parse_inet_line(
                     "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
                     "   uid  timeout inode",
                     PROCNET_TCP, &s),
                 -1);
    CHECK_EQ_INT(procnet_parse_inet_line("", PROCNET_TCP, &s), -1);
    CHECK_EQ_INT(procnet_parse_inet_line("   0: 0100007F:88A1", PROCNET_TCP, &s), -1);
    CHECK_EQ_INT(procnet_parse_inet_line("   0: 0100007G:88A1 0100007F:A87E 01 0:0 0:0 0 0 0 1",
                                         PROCNET_TCP, &s),
                 -1);
    /* An IPv4 line handed to the IPv6 parser is too short. */
    CHECK_EQ_INT(procnet_parse_inet_line(
                     "   2: 0100007F:88A1 0100007F:A87E 01 00000000:00000005 00:00000000 00000000"
                     "     0        0 368706 1",
                     PROCNET_TCP6, &s),
                 -1);
}

static void test_tcp6_and_udp_lines(void)
{
    struct procnet_socket s;
    CHECK_EQ_INT(procnet_parse_inet_line(
                     "   0: 0000000000000000FFFF00000100007F:DD93 00000000000000000000000000000000:0000"
                     " 0A 00000000:00000000 00:00000000 00000000     0        0 368709 1 "
                     "00000000344fde9d 100 0 0 10 0",
                     PROCNET_TCP6, &s),
                 0);
    CHECK_EQ_STR(s.local, "[::ffff:127.0.0.1]:56723");
    CHECK_EQ_STR(s.remote, "");
    CHECK_EQ_STR(s.state, "LISTEN");
    CHECK_EQ_INT(s.inode, 368709);

    CHECK_EQ_INT(procnet_parse_inet_line(
                     "   0: 00000000000000000000000001000000:A3D9 00000000000000000000000000000000:0000"
                     " 0A 00000000:00000000 00:00000000 00000000     0        0 368412 1 "
                     "000000000e590838 100 0 0 10 0",
                     PROCNET_TCP6, &s),
                 0);
    CHECK_EQ_STR(s.local, "[::1]:41945");

    CHECK_EQ_INT(procnet_parse_inet_line(
                     "12409: 0100007F:9B55 0100007F:0009 01 00000000:00000000 00:00000000 00000000"
                     "     0        0 368707 2 00000000ff0dfbb3 0",
                     PROCNET_UDP, &s),
                 0);
    CHECK_EQ_STR(s.local, "127.0.0.1:39765");
    CHECK_EQ_STR(s.remote, "127.0.0.1:9");
    CHECK_EQ_STR(s.state, "ESTABLISHED");
    CHECK_EQ_INT(s.inode, 368707);

    CHECK_EQ_INT(procnet_parse_inet_line(
                     " 5897: 00000000000000000000000000000000:C1E5 00000000000000000000000000000000:0000"
                     " 07 00000000:00000000 00:00000000 00000000     0        0 368708 2 "
                     "00000000b96313a5 0",
                     PROCNET_UDP6, &s),
                 0);
    CHECK_EQ_STR(s.local, "[::]:49637");
    CHECK_EQ_STR(s.state, "UNCONN");
    CHECK_EQ_STR(procnet_kind_name(s.kind), "udp6");
}

static void test_unix_lines(void)
{
    struct procnet_socket s;
    CHECK_EQ_INT(procnet_parse_unix_line(
                     "00000000050c9744: 00000002 00000000 00010000 0001 01 368710 /tmp/why/sock.s", &s),
                 0);
    CHECK_EQ_STR(s.local, "/tmp/why/sock.s");
    CHECK_EQ_STR(s.state, "LISTEN");
    CHECK_EQ_INT(s.inode, 368710);
    CHECK_EQ_STR(procnet_kind_name(s.kind), "unix");

    CHECK_EQ_INT(procnet_parse_unix_line(
                     "00000000b3714fe4: 00000002 00000000 00000000 0001 01 368712 @abstract-name", &s),
                 0);
    CHECK_EQ_STR(s.local, "@abstract-name");
    CHECK_EQ_STR(s.state, "UNCONNECTED");

    CHECK_EQ_INT(procnet_parse_unix_line("0000000052255807: 00000003 00000000 00000000 0001 03  1231",
                                         &s),
                 0);
    CHECK_EQ_STR(s.local, "");
    CHECK_EQ_STR(s.state, "CONNECTED");
    CHECK_EQ_INT(s.inode, 1231);

    CHECK_EQ_INT(procnet_parse_unix_line("Num       RefCount Protocol Flags    Type St Inode Path", &s),
                 -1);
    CHECK_EQ_INT(procnet_parse_unix_line("0000000052255807: 00000003", &s), -1);
}

static void test_table(void)
{
    struct procnet_table table = {0};
    const char *tcp =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0100007F:88A1 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 368703 1 0 100 0 0 10 0\n"
        "   1: 0100007F:A87E 0100007F:88A1 01 00000000:00000000 00:00000000 00000000     0        0 368705 2 0 20 0 0 11 -1\n"
        "   2: this line is broken\n";
    const char *unix_text =
        "Num       RefCount Protocol Flags    Type St Inode Path\n"
        "00000000050c9744: 00000002 00000000 00010000 0001 01 368710 /tmp/why/sock.s\n";
    CHECK_EQ_INT(procnet_table_parse(&table, tcp, PROCNET_TCP), 0);
    CHECK_EQ_INT(procnet_table_parse(&table, unix_text, PROCNET_UNIX), 0);
    CHECK_EQ_INT(table.count, 3);
    const struct procnet_socket *s = procnet_table_find(&table, 368705);
    CHECK(s != NULL);
    if (s) {
        CHECK_EQ_STR(s->local, "127.0.0.1:43134");
        CHECK_EQ_STR(s->remote, "127.0.0.1:34977");
    }
    s = procnet_table_find(&table, 368710);
    CHECK(s != NULL && s->kind == PROCNET_UNIX);
    CHECK(procnet_table_find(&table, 1) == NULL);
    procnet_table_free(&table);
    CHECK_EQ_INT(table.count, 0);
}

static void test_accepted(void)
{
    struct procnet_table table = {0};
    const char *tcp =
        "  sl  local_address rem_address   st\n"
        /* a listener on 127.0.0.1:34977, the connection it accepted, and the client end */
        "   0: 0100007F:88A1 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n"
        "   1: 0100007F:88A1 0100007F:A87E 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1\n"
        "   2: 0100007F:A87E 0100007F:88A1 01 00000000:00000000 00:00000000 00000000     0        0 3 2 0 20 0 0 11 -1\n";
    const char *tcp6 =
        "  sl  local_address                         remote_address                        st\n"
        /* a wildcard IPv6 listener on port 8080 and an IPv4 client it accepted */
        "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1 0 100 0 0 10 0\n"
        "   1: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 5 1 0 20 4 30 10 -1\n";
    CHECK_EQ_INT(procnet_table_parse(&table, tcp, PROCNET_TCP), 0);
    CHECK_EQ_INT(procnet_table_parse(&table, tcp6, PROCNET_TCP6), 0);
    CHECK_EQ_INT(table.count, 5);
    CHECK(procnet_accepted(&table, procnet_table_find(&table, 2)));
    CHECK(!procnet_accepted(&table, procnet_table_find(&table, 3)));
    CHECK(procnet_accepted(&table, procnet_table_find(&table, 5)));
    struct procnet_socket udp;
    CHECK_EQ_INT(procnet_parse_inet_line(
                     "12409: 0100007F:88A1 0100007F:0009 01 00000000:00000000 00:00000000 00000000"
                     "     0        0 368707 2 00000000ff0dfbb3 0",
                     PROCNET_UDP, &udp),
                 0);
    CHECK(!procnet_accepted(&table, &udp));
    procnet_table_free(&table);
}

static void test_links_and_epoll(void)
{
    uint64_t inode = 0;
    CHECK_EQ_INT(procnet_socket_inode("socket:[368705]", &inode), 0);
    CHECK_EQ_INT(inode, 368705);
    CHECK_EQ_INT(procnet_socket_inode("pipe:[368705]", &inode), -1);
    CHECK_EQ_INT(procnet_socket_inode("socket:[]", &inode), -1);
    CHECK_EQ_INT(procnet_socket_inode("socket:[12]x", &inode), -1);
    CHECK_EQ_INT(procnet_socket_inode("/tmp/socket:[12]", &inode), -1);

    int fds[4];
    const char *fdinfo = "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1038\n"
                         "tfd:        3 events:       1f data:                3  pos:0 ino:59f1c sdev:9\n"
                         "tfd:       12 events:       19 data:          c00000001  pos:0 ino:1 sdev:8\n";
    CHECK_EQ_INT(procnet_parse_epoll_fdinfo(fdinfo, fds, 4), 2);
    CHECK_EQ_INT(fds[0], 3);
    CHECK_EQ_INT(fds[1], 12);
    CHECK_EQ_INT(procnet_parse_epoll_fdinfo(fdinfo, fds, 1), 1);
    CHECK_EQ_INT(procnet_parse_epoll_fdinfo("pos:\t0\n", fds, 4), 0);
    CHECK_EQ_INT(procnet_parse_epoll_fdinfo("", fds, 4), 0);
    CHECK_EQ_STR(procnet_tcp_state_name(10), "LISTEN");
    CHECK_EQ_STR(procnet_tcp_state_name(0), "UNKNOWN");
    CHECK_EQ_STR(procnet_tcp_state_name(99), "UNKNOWN");
}

int main(void)
{
    test_tcp_lines();
    test_tcp6_and_udp_lines();
    test_unix_lines();
    test_table();
    test_accepted();
    test_links_and_epoll();
    return unit_report("test_procnet");
}
