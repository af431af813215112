/* What one thread waits for, as dump and why show it: the model the wait
 * analysis (python/waits.c reads, diagnosis/waits.c decides) fills and
 * output/wait_writers.h prints. Fields that could not be learned stay at
 * their "unknown" values, never guessed. */
#ifndef PYSCOPE_REPORT_WAIT_REPORT_H
#define PYSCOPE_REPORT_WAIT_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum wait_kind {
    WAIT_NONE = 0,       /* not waiting: running, or its state is unknown */
    WAIT_GIL,            /* for the GIL */
    WAIT_LOCK,           /* to acquire a lock: Lock, RLock, a Condition's lock */
    WAIT_NOTIFY,         /* to be woken: Condition/Event/Barrier wait, Queue get/put, Semaphore acquire, Future result */
    WAIT_JOIN,           /* for another thread to finish */
    WAIT_SOCKET,         /* in I/O on one socket */
    WAIT_SELECT,         /* in select/poll/epoll on several fds */
    WAIT_SLEEP,          /* time.sleep */
    WAIT_CHILD,          /* for a child process */
    WAIT_IO,             /* file or pipe I/O, or uninterruptible (D state) I/O */
    WAIT_FUTEX,          /* a futex pyscope could not tie to a Python object */
    WAIT_SYSCALL,        /* another blocking syscall */
};

enum wait_timeout {
    WAIT_TIMEOUT_UNKNOWN = 0,
    WAIT_TIMEOUT_NONE,   /* blocks until woken: no timeout */
    WAIT_TIMEOUT_SET,
};

enum wait_owner_status {
    WAIT_OWNER_NOT_APPLICABLE = 0,
    WAIT_OWNER_UNKNOWN,  /* locked, and no thread is known to hold it */
    WAIT_OWNER_ALIVE,    /* held by a live thread (owner) */
    WAIT_OWNER_GONE,     /* held by a thread that no longer exists */
    WAIT_OWNER_FREE,     /* not locked right now (about to be acquired) */
};

enum wait_owner_source {
    WAIT_OWNER_SOURCE_NONE = 0,
    WAIT_OWNER_SOURCE_RECORDED,  /* the lock records its owner (RLock) */
    WAIT_OWNER_SOURCE_WITH,      /* the owner is inside a `with` block on the lock */
};

#define WAIT_MAX_FDS 8

struct wait_fd {
    int fd;
    char what[192];      /* "socket tcp 127.0.0.1:5 -> 127.0.0.1:80 ESTABLISHED", "pipe:[12]", a path */
};

struct wait_socket {
    int fd;                      /* -1 unknown */
    bool found;                  /* described by /proc/PID/net */
    char protocol[8];            /* "tcp", "tcp6", "udp", "udp6", "unix" */
    char local[112];
    char remote[112];
    char state[16];
    uint64_t rx_queue;
    bool accepted;               /* TCP: accepted by a listener here (server side), not opened outwards */
    uint64_t object;             /* the Python socket object, 0 when not found */
    char reference[160];         /* how the frames name it: "self._sock" */
    int reference_frame;         /* -1 when not found */
};

#define WAIT_MAX_OWNER_ATTRS 6

struct report_wait {
    enum wait_kind kind;
    const char *syscall;         /* the syscall blocked in, NULL when none */

    int gil_holder;              /* WAIT_GIL: index of the holding thread, -1 when free */

    /* WAIT_LOCK, WAIT_NOTIFY, WAIT_JOIN */
    char object_type[48];        /* Python type name: "Lock", "RLock", "Condition", "Queue", "Thread", ... */
    char operation[48];          /* "acquire", "wait", "get", "put", "join", "result" */
    uint64_t object;             /* its address (id()); 0 when unknown */
    char reference[160];         /* how the frames name it: "q", "self._lock", "LOCK" (a global) */
    int reference_frame;         /* index into the thread's frames, -1 when not found */
    uint64_t lock;               /* the _thread lock the thread sleeps on, 0 when unknown */
    bool lock_recursive;
    int lock_locked;             /* -1 unknown, 0, 1 */
    enum wait_owner_status owner_status;
    enum wait_owner_source owner_source;
    int owner;                   /* index of the owner thread, -1 */
    uint64_t owner_ident;        /* its thread ident as recorded, 0 when unknown */
    int waiters;                 /* threads of this process waiting on the same object */
    int64_t queue_length;        /* Queue: items in it, -1 unknown */
    int join_target;             /* WAIT_JOIN: index of the thread joined, -1 */
    uint64_t join_ident;

    enum wait_timeout timeout;
    double timeout_seconds;      /* < 0 when unknown */

    /* WAIT_SOCKET (and the socket behind WAIT_IO reads) */
    struct wait_socket socket;
    /* WAIT_SELECT */
    struct wait_fd fds[WAIT_MAX_FDS];
    int n_fds;                   /* stored */
    int total_fds;               /* watched (may exceed WAIT_MAX_FDS; -1 unknown) */
    /* WAIT_SLEEP */
    double sleep_seconds;        /* time left, < 0 when unknown */
    bool sleep_upper_bound;      /* sleep_seconds is the requested length, not the time left */
    /* WAIT_CHILD */
    pid_t child;                 /* -1: any child */
    char child_command[32];      /* its comm, "" when unknown */
    /* WAIT_IO */
    int io_fd;                   /* -1 unknown */
    char io_target[192];         /* the fd's link: a path, "pipe:[..]" */
    bool uninterruptible;        /* D state */

    /* How long: off the CPU for waited_ms, from the scheduler (< 0 unknown);
     * waited_at_least: only a lower bound is known (the observation interval). */
    double waited_ms;
    bool waited_at_least;

    /* The state behind the wait: when the object waited on is an attribute
     * of another object (self._cond), that owner's plain attributes. */
    char owner_type[48];         /* "" when none */
    uint64_t owner_object;
    int n_owner_attrs;
    char owner_attr_names[WAIT_MAX_OWNER_ATTRS][40];
    char owner_attr_reprs[WAIT_MAX_OWNER_ATTRS][48];
};

/* A wait that knows nothing yet: kind NONE, every index -1, every amount
 * unknown. */
void wait_report_init(struct report_wait *w);

const char *wait_kind_name(enum wait_kind kind);

#endif
