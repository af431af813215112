/* A wait's constructor and the names of its kinds. */
#include "report/wait_report.h"

#include <string.h>

void wait_report_init(struct report_wait *w)
{
    memset(w, 0, sizeof *w);
    w->gil_holder = -1;
    w->reference_frame = -1;
    w->socket.fd = -1;
    w->socket.reference_frame = -1;
    w->owner = -1;
    w->join_target = -1;
    w->queue_length = -1;
    w->lock_locked = -1;
    w->timeout_seconds = -1;
    w->sleep_seconds = -1;
    w->io_fd = -1;
    w->total_fds = -1;
    w->waited_ms = -1;
}

const char *wait_kind_name(enum wait_kind kind)
{
    switch (kind) {
    case WAIT_NONE: return "none";
    case WAIT_GIL: return "gil";
    case WAIT_LOCK: return "lock";
    case WAIT_NOTIFY: return "notify";
    case WAIT_JOIN: return "join";
    case WAIT_SOCKET: return "socket";
    case WAIT_SELECT: return "select";
    case WAIT_SLEEP: return "sleep";
    case WAIT_CHILD: return "child";
    case WAIT_IO: return "io";
    case WAIT_FUTEX: return "futex";
    case WAIT_SYSCALL: return "syscall";
    }
    return "?";
}
