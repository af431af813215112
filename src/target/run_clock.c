/* run_clock: the thread group's scheduler totals from taskstats (generic
 * netlink: the family looked up by name, then one TGID query per look),
 * compared from one look to the next. */
#include "target/run_clock.h"

#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MSG_MAX 2048

struct request {
    struct nlmsghdr n;
    struct genlmsghdr g;
    char attrs[64];
};

static size_t nla_put(char *at, uint16_t type, const void *data, uint16_t len)
{
    struct nlattr a = {.nla_len = (uint16_t)(NLA_HDRLEN + len), .nla_type = type};
    memcpy(at, &a, sizeof a);
    memcpy(at + NLA_HDRLEN, data, len);
    return NLA_ALIGN(a.nla_len);
}

/* Sends one request and takes its reply into buf: the reply's attributes
 * and their length, or NULL with why_not set. */
static const char *ask(struct run_clock *c, uint16_t family, uint8_t cmd, uint16_t attr,
                       const void *data, uint16_t len, char *buf, size_t *attrs_len)
{
    struct request r;
    memset(&r, 0, sizeof r);
    size_t alen = nla_put(r.attrs, attr, data, len);
    r.n.nlmsg_len = (uint32_t)(NLMSG_LENGTH(GENL_HDRLEN) + alen);
    r.n.nlmsg_type = family;
    r.n.nlmsg_flags = NLM_F_REQUEST;
    r.n.nlmsg_seq = ++c->seq;
    r.g.cmd = cmd;
    r.g.version = 1;
    if (send(c->sock, &r, r.n.nlmsg_len, 0) != (ssize_t)r.n.nlmsg_len) {
        snprintf(c->why_not, sizeof c->why_not, "netlink send: %s", strerror(errno));
        return NULL;
    }
    /* The kernel answers within send(): a reply not there now never comes.
     * Older replies (of a look that gave up) are passed over. */
    for (int tries = 0; tries < 8; tries++) {
        ssize_t got = recv(c->sock, buf, MSG_MAX, MSG_DONTWAIT);
        if (got < (ssize_t)NLMSG_HDRLEN) {
            snprintf(c->why_not, sizeof c->why_not, "netlink recv: %s",
                     got < 0 ? strerror(errno) : "short reply");
            return NULL;
        }
        struct nlmsghdr h;
        memcpy(&h, buf, sizeof h);
        if (h.nlmsg_len > (size_t)got || h.nlmsg_len < NLMSG_HDRLEN)
            break;
        if (h.nlmsg_seq != c->seq)
            continue;
        if (h.nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr e;
            if (h.nlmsg_len >= NLMSG_LENGTH(sizeof e)) {
                memcpy(&e, buf + NLMSG_HDRLEN, sizeof e);
                snprintf(c->why_not, sizeof c->why_not, "taskstats: %s", strerror(-e.error));
            }
            return NULL;
        }
        if (h.nlmsg_len < NLMSG_LENGTH(GENL_HDRLEN))
            break;
        *attrs_len = h.nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
        return buf + NLMSG_LENGTH(GENL_HDRLEN);
    }
    snprintf(c->why_not, sizeof c->why_not, "netlink: no reply");
    return NULL;
}

/* The attribute of this type among those at attrs, or NULL. */
static const char *nla_find(const char *attrs, size_t len, uint16_t type, uint16_t *out_len)
{
    size_t off = 0;
    for (int guard = 0; off + NLA_HDRLEN <= len && guard < 64; guard++) {
        struct nlattr a;
        memcpy(&a, attrs + off, sizeof a);
        if (a.nla_len < NLA_HDRLEN || off + a.nla_len > len)
            return NULL;
        if ((a.nla_type & NLA_TYPE_MASK) == type) {
            *out_len = (uint16_t)(a.nla_len - NLA_HDRLEN);
            return attrs + off + NLA_HDRLEN;
        }
        off += NLA_ALIGN(a.nla_len);
    }
    return NULL;
}

static uint16_t taskstats_family(struct run_clock *c)
{
    char buf[MSG_MAX];
    size_t len = 0;
    static const char name[] = TASKSTATS_GENL_NAME;
    const char *attrs = ask(c, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_NAME, name,
                            sizeof name, buf, &len);
    uint16_t alen = 0, id = 0;
    const char *at = attrs ? nla_find(attrs, len, CTRL_ATTR_FAMILY_ID, &alen) : NULL;
    if (!at || alen < sizeof id) {
        if (attrs)
            snprintf(c->why_not, sizeof c->why_not, "no taskstats family");
        return 0;
    }
    memcpy(&id, at, sizeof id);
    return id;
}

static uint16_t family_id;

int run_clock_open(struct run_clock *c, pid_t pid)
{
    memset(c, 0, sizeof *c);
    c->pid = pid;
    c->sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
    if (c->sock < 0) {
        snprintf(c->why_not, sizeof c->why_not, "netlink socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_nl me = {.nl_family = AF_NETLINK};
    if (bind(c->sock, (struct sockaddr *)&me, sizeof me) != 0) {
        snprintf(c->why_not, sizeof c->why_not, "netlink bind: %s", strerror(errno));
        run_clock_close(c);
        return -1;
    }
    if (!family_id)
        family_id = taskstats_family(c);
    if (!family_id) {
        run_clock_close(c);
        return -1;
    }
    return 0;
}

bool run_clock_still(struct run_clock *c)
{
    if (c->sock < 0 || !family_id)
        return false;
    char buf[MSG_MAX];
    size_t len = 0;
    uint32_t tgid = (uint32_t)c->pid;
    const char *attrs = ask(c, family_id, TASKSTATS_CMD_GET, TASKSTATS_CMD_ATTR_TGID, &tgid,
                            sizeof tgid, buf, &len);
    uint16_t alen = 0, slen = 0;
    const char *aggr = attrs ? nla_find(attrs, len, TASKSTATS_TYPE_AGGR_TGID, &alen) : NULL;
    const char *st = aggr ? nla_find(aggr, alen, TASKSTATS_TYPE_STATS, &slen) : NULL;
    if (!st || slen < offsetof(struct taskstats, nivcsw) + sizeof(uint64_t)) {
        c->known = false;
        return false;
    }
    /* Kernels send their own version of the struct: only fields that every
     * version since 2 has, at the offsets they have always had. */
    struct taskstats ts;
    memset(&ts, 0, sizeof ts);
    memcpy(&ts, st, slen < sizeof ts ? slen : sizeof ts);
    /* Scheduled in (sched_info's count), time charged on a CPU (updated at
     * each switch and tick), and switches: a thread that ran moves one. */
    uint64_t now[4] = {ts.cpu_count, ts.cpu_run_virtual_total, ts.nvcsw + ts.nivcsw,
                       ts.ac_utime + ts.ac_stime};
    bool still = c->known && memcmp(now, c->last, sizeof now) == 0;
    memcpy(c->last, now, sizeof now);
    c->known = true;
    return still;
}

void run_clock_close(struct run_clock *c)
{
    if (c->sock >= 0)
        close(c->sock);
    c->sock = -1;
    c->known = false;
}
