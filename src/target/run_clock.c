/* run_clock: the thread group's scheduler totals from taskstats (generic
 * netlink: the family looked up by name, then a TGID query per process per
 * look, many to a message when looked at together), or run_counter's count
 * once it is running, compared from one look to the next. One socket serves
 * every clock of the process. */
#include "target/run_clock.h"

#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "target/proc_file.h"
#include "target/run_counter.h"

#define REPLY_MAX 1024        /* a TGID reply: headers and struct taskstats (about 450) */
#define BATCH_MAX 64

struct request {
    struct nlmsghdr n;
    struct genlmsghdr g;
    char attrs[16];           /* one u32 attribute */
};

static int sock = -1;
static int users;
static uint16_t family_id;
static uint32_t next_seq;

static size_t nla_put(char *at, uint16_t type, const void *data, uint16_t len)
{
    struct nlattr a = {.nla_len = (uint16_t)(NLA_HDRLEN + len), .nla_type = type};
    memcpy(at, &a, sizeof a);
    memcpy(at + NLA_HDRLEN, data, len);
    return NLA_ALIGN(a.nla_len);
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

static size_t build(struct request *r, uint16_t family, uint8_t cmd, uint16_t attr,
                    const void *data, uint16_t len, uint32_t seq)
{
    memset(r, 0, sizeof *r);
    size_t alen = nla_put(r->attrs, attr, data, len);
    r->n.nlmsg_len = (uint32_t)(NLMSG_LENGTH(GENL_HDRLEN) + alen);
    r->n.nlmsg_type = family;
    r->n.nlmsg_flags = NLM_F_REQUEST;
    r->n.nlmsg_seq = seq;
    r->g.cmd = cmd;
    r->g.version = 1;
    return NLMSG_ALIGN(r->n.nlmsg_len);
}

/* A reply's sequence number and attributes; NULL for an error or a
 * malformed one (*errno_out set for an error). */
static const char *reply_attrs(const char *buf, size_t got, uint32_t *seq, size_t *attrs_len,
                               int *errno_out)
{
    struct nlmsghdr h;
    *errno_out = 0;
    if (got < NLMSG_HDRLEN)
        return NULL;
    memcpy(&h, buf, sizeof h);
    *seq = h.nlmsg_seq;
    if (h.nlmsg_len > got || h.nlmsg_len < NLMSG_HDRLEN)
        return NULL;
    if (h.nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr e;
        if (h.nlmsg_len >= NLMSG_LENGTH(sizeof e)) {
            memcpy(&e, buf + NLMSG_HDRLEN, sizeof e);
            *errno_out = -e.error;
        }
        return NULL;
    }
    if (h.nlmsg_len < NLMSG_LENGTH(GENL_HDRLEN))
        return NULL;
    *attrs_len = h.nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
    return buf + NLMSG_LENGTH(GENL_HDRLEN);
}

static uint16_t taskstats_family(char *why, size_t why_size)
{
    struct request r;
    static const char name[] = TASKSTATS_GENL_NAME;
    uint32_t seq = ++next_seq;
    size_t len = build(&r, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_NAME, name,
                       sizeof name, seq);
    if (send(sock, &r, len, 0) != (ssize_t)len) {
        snprintf(why, why_size, "netlink send: %s", strerror(errno));
        return 0;
    }
    char buf[4096];
    /* The kernel answers within send(): a reply not there now never comes. */
    ssize_t got = recv(sock, buf, sizeof buf, MSG_DONTWAIT);
    uint32_t got_seq = 0;
    size_t alen = 0;
    int err = 0;
    const char *attrs = got > 0 ? reply_attrs(buf, (size_t)got, &got_seq, &alen, &err) : NULL;
    uint16_t idlen = 0, id = 0;
    const char *at = attrs && got_seq == seq ? nla_find(attrs, alen, CTRL_ATTR_FAMILY_ID, &idlen)
                                             : NULL;
    if (!at || idlen < sizeof id) {
        snprintf(why, why_size, "no taskstats in this kernel or network namespace (%s)",
                 err ? strerror(err) : got < 0 ? strerror(errno) : "no family");
        return 0;
    }
    memcpy(&id, at, sizeof id);
    return id;
}

/* A zombie's threads never run again: its count would stand for ever
 * where a taskstats query for it fails. */
static bool zombie(pid_t pid)
{
    char path[48], buf[160];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (proc_read_text(path, buf, sizeof buf) != 0)
        return true;
    const char *end = strrchr(buf, ')');
    return !end || end[1] != ' ' || end[2] == 'Z' || end[2] == 'X';
}

int run_clock_open(struct run_clock *c, pid_t pid)
{
    memset(c, 0, sizeof *c);
    c->pid = pid;
    /* Only for a process that is there: a count kept for none would stand
     * still. */
    if (run_counter_on() && (kill(pid, 0) == 0 || errno == EPERM) && !zombie(pid) &&
        (c->slot = run_counter_watch(pid)) >= 0) {
        c->counted = true;
        c->open = true;
        return 0;
    }
    if (sock < 0) {
        sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
        struct sockaddr_nl me = {.nl_family = AF_NETLINK};
        if (sock < 0 || bind(sock, (struct sockaddr *)&me, sizeof me) != 0) {
            snprintf(c->why_not, sizeof c->why_not, "netlink socket: %s", strerror(errno));
            if (sock >= 0)
                close(sock);
            sock = -1;
            return -1;
        }
        /* Replies for a batch of looks wait in the socket together. */
        int rcvbuf = BATCH_MAX * REPLY_MAX * 2;
        setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
        family_id = taskstats_family(c->why_not, sizeof c->why_not);
    }
    if (!family_id) {
        if (!c->why_not[0])
            snprintf(c->why_not, sizeof c->why_not, "no taskstats in this kernel");
        if (users == 0) {
            close(sock);
            sock = -1;
        }
        return -1;
    }
    users++;
    c->open = true;
    return 0;
}

/* Compares the totals of a reply with the last ones. */
static bool judge(struct run_clock *c, const char *attrs, size_t len)
{
    uint16_t alen = 0, slen = 0;
    const char *aggr = attrs ? nla_find(attrs, len, TASKSTATS_TYPE_AGGR_TGID, &alen) : NULL;
    const char *st = aggr ? nla_find(aggr, alen, TASKSTATS_TYPE_STATS, &slen) : NULL;
    if (!st || slen < offsetof(struct taskstats, nivcsw) + sizeof(uint64_t)) {
        c->known = false;
        return false;
    }
    /* Kernels send their own version of the struct: only fields at offsets
     * every version since 2 has had. */
    struct taskstats ts;
    memset(&ts, 0, sizeof ts);
    memcpy(&ts, st, slen < sizeof ts ? slen : sizeof ts);
    /* Scheduled in (sched_info's count), time charged on a CPU (at each
     * switch and tick), and switches: a thread that ran moves one. */
    uint64_t now[4] = {ts.cpu_count, ts.cpu_run_virtual_total, ts.nvcsw + ts.nivcsw,
                       ts.ac_utime + ts.ac_stime};
    bool still = c->known && memcmp(now, c->last, sizeof now) == 0;
    memcpy(c->last, now, sizeof now);
    c->known = true;
    return still;
}

/* A look at the count the BPF program keeps: it moved if any thread ran.
 * An exit moves it too (the exiting thread's last switch is charged), and
 * the pass it leads to finds the process gone. */
static bool judge_count(struct run_clock *c)
{
    uint64_t n = run_counter_count(c->slot);
    bool still = c->known && n == c->last_count;
    c->last_count = n;
    c->known = true;
    return still;
}

/* One batch: a message of n requests, then their replies, matched by
 * sequence number; a clock whose reply is missing is not still and forgets
 * its totals. */
static void look_batch(struct run_clock *const *cs, size_t n)
{
    /* The requests one after the other, each at its aligned length. */
    static char reqs[BATCH_MAX * sizeof(struct request)];
    static char replies[BATCH_MAX][REPLY_MAX];
    uint32_t first = next_seq + 1;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t tgid = (uint32_t)cs[i]->pid;
        struct request r;
        cs[i]->ahead = true;
        cs[i]->ahead_still = false;
        size_t len = build(&r, family_id, TASKSTATS_CMD_GET, TASKSTATS_CMD_ATTR_TGID, &tgid,
                           sizeof tgid, first + (uint32_t)i);
        memcpy(reqs + total, &r, len);
        total += len;
    }
    next_seq += (uint32_t)n;
    bool answered[BATCH_MAX] = {false};
    if (send(sock, reqs, total, 0) == (ssize_t)total) {
        struct mmsghdr msgs[BATCH_MAX];
        struct iovec iov[BATCH_MAX];
        memset(msgs, 0, sizeof msgs);
        for (size_t i = 0; i < n; i++) {
            iov[i] = (struct iovec){replies[i], REPLY_MAX};
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        /* Every reply is queued by the time send() returns; stale ones (of
         * a batch that gave up) are passed over by their numbers. */
        size_t answers = 0;
        for (int rounds = 0; rounds < 4 && answers < n; rounds++) {
            int got = recvmmsg(sock, msgs, (unsigned)n, MSG_DONTWAIT, NULL);
            if (got <= 0)
                break;
            for (int k = 0; k < got; k++) {
                uint32_t seq = 0;
                size_t alen = 0;
                int err = 0;
                const char *attrs = reply_attrs(replies[k], msgs[k].msg_len, &seq, &alen, &err);
                if (seq < first || seq - first >= n || answered[seq - first])
                    continue;
                size_t i = seq - first;
                answered[i] = true;
                answers++;
                cs[i]->ahead_still = judge(cs[i], attrs, alen);
                if (err)
                    snprintf(cs[i]->why_not, sizeof cs[i]->why_not, "taskstats: %s",
                             strerror(err));
            }
            if ((size_t)got < n)
                break;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (!answered[i])
            cs[i]->known = false;
}

void run_clock_look_all(struct run_clock *const *cs, size_t n)
{
    struct run_clock *batch[BATCH_MAX];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!cs[i] || !cs[i]->open)
            continue;
        if (cs[i]->ahead)
            cs[i]->known = false; /* its last look was never used */
        if (cs[i]->counted) {
            cs[i]->ahead = true;
            cs[i]->ahead_still = judge_count(cs[i]);
            continue;
        }
        if (sock < 0 || !family_id)
            continue;
        batch[k++] = cs[i];
        if (k == BATCH_MAX) {
            look_batch(batch, k);
            k = 0;
        }
    }
    if (k)
        look_batch(batch, k);
}

bool run_clock_still(struct run_clock *c)
{
    if (!c->open)
        return false;
    if (c->ahead) {
        c->ahead = false;
        return c->ahead_still;
    }
    if (c->counted)
        return judge_count(c);
    look_batch(&c, 1);
    c->ahead = false;
    return c->ahead_still;
}

void run_clock_close(struct run_clock *c)
{
    if (c->open && c->counted)
        run_counter_unwatch(c->pid, c->slot);
    else if (c->open && --users == 0 && sock >= 0) {
        close(sock);
        sock = -1;
        family_id = 0;
    }
    c->open = false;
    c->known = false;
}
