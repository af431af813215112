/* What a Python thread is doing with respect to the GIL, from the GIL's own
 * record of its holder plus what the kernel says the thread is blocked in. */
#ifndef PYSCOPE_PYTHON_THREAD_STATE_H
#define PYSCOPE_PYTHON_THREAD_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include "target/process.h"

enum thread_run_state {
    THREAD_UNKNOWN = 0,
    THREAD_HOLDING_GIL,      /* holds the GIL (running, or blocked while holding it) */
    THREAD_WAITING_GIL,      /* blocked in futex on an address inside the GIL */
    THREAD_RUNNING,          /* on CPU without the GIL: native code */
    THREAD_IDLE,             /* blocked in some other syscall */
};

/* gil/gil_size: the struct _gil_runtime_state the thread's interpreter uses. */
enum thread_run_state thread_classify(const struct thread_activity *activity, bool holds_gil,
                                      uint64_t gil, uint64_t gil_size);

const char *thread_state_name(enum thread_run_state state);   /* JSON names */

#endif
