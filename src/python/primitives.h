/* Reading the objects threads block on: _thread.lock and _thread.RLock in
 * both of their implementations, socket objects, the containers behind
 * queues, and the `with` blocks a frame is inside. */
#ifndef PYSCOPE_PYTHON_PRIMITIVES_H
#define PYSCOPE_PYTHON_PRIMITIVES_H

#include <stdbool.h>
#include <stdint.h>
#include "python/frame_vars.h"
#include "python/objects.h"

enum py_lock_impl {
    PY_LOCK_UNKNOWN = 0,     /* a lock of a size pyscope does not know: state unread */
    PY_LOCK_SEMAPHORE,       /* PyThread_type_lock: a pointer to a glibc sem_t */
    PY_LOCK_PYMUTEX,         /* PyMutex: one byte inside the object, waiters park */
};

struct py_lock {
    uint64_t obj;
    bool recursive;          /* _thread.RLock */
    enum py_lock_impl impl;
    /* What a blocked acquirer's futex wait points at: the sem_t itself, or,
     * for a PyMutex, the mutex byte recorded in the waiter's parking entry. */
    uint64_t wait_key;
    bool locked;
    bool waiters_known;
    uint32_t waiters;        /* semaphore waiter count; 1 for "some" on a PyMutex */
    uint64_t owner;          /* RLock: the owner's thread ident (threading.get_ident()), 0 if none */
    uint64_t count;          /* RLock: recursion depth, 0 when unlocked */
};

/* Reads a _thread.lock or _thread.RLock; -1 when obj is neither. */
int py_lock_read(struct py_reader *r, uint64_t obj, struct py_lock *out);

/* A thread blocked in futex(uaddr): the two keys a lock wait can match. */
struct py_futex_wait {
    uint64_t uaddr;
    uint64_t parked_on;      /* the address a parking-lot wait entry records, 0 if unreadable */
};
void py_futex_wait_read(struct py_reader *r, uint64_t uaddr, struct py_futex_wait *out);
bool py_lock_matches_wait(const struct py_lock *lock, const struct py_futex_wait *wait);

/* queue.SimpleQueue (the C _queue.SimpleQueue): does a thread blocked in
 * futex wait on this queue's get()? */
bool py_simple_queue_matches_wait(struct py_reader *r, uint64_t obj, const struct py_futex_wait *wait);
/* Its number of items; -1 where the layout is not known (3.13+). */
int py_simple_queue_length(struct py_reader *r, uint64_t obj, int64_t *length);

/* A socket.socket / _socket.socket object. */
struct py_socket {
    uint64_t obj;
    int fd;
    int family, type, proto;
    int64_t timeout_ns;      /* negative: no timeout (blocking forever) */
};
int py_socket_read(struct py_reader *r, uint64_t obj, struct py_socket *out);

/* Is the object's type, or one of its bases, named name (tp_name)? */
bool py_type_is_or_inherits(struct py_reader *r, uint64_t obj, const char *name);
/* len() of a list, tuple or collections.deque; -1 when obj is none of them. */
int py_sequence_length(struct py_reader *r, uint64_t obj, int64_t *length);
/* A float or int as a double; -1 otherwise. */
int py_number(struct py_reader *r, uint64_t obj, double *value);
/* Is obj None? */
bool py_is_none(struct py_reader *r, uint64_t obj);

/* The objects whose `with` block this frame is inside, from the __exit__
 * the interpreter keeps on the value stack for the block's duration (a bound
 * method up to 3.13, a method/self pair from 3.14). Returns how many were
 * stored in out (at most max). */
int py_frame_with_targets(struct py_reader *r, const struct py_frame_vars *vars, uint64_t *out, int max);

#endif
