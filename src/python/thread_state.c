/* Thread classification. A waiter for the GIL sleeps in futex on the GIL's
 * condition variable or mutex, which live inside struct _gil_runtime_state,
 * so the futex address alone tells a GIL wait from any other lock wait. */
#include "python/thread_state.h"

enum thread_run_state thread_classify(const struct thread_activity *activity, bool holds_gil,
                                      uint64_t gil, uint64_t gil_size)
{
    if (holds_gil)
        return THREAD_HOLDING_GIL;
    if (activity->run_state == 0 && activity->syscall_nr < 0 && !activity->on_cpu)
        return THREAD_UNKNOWN;
    /* A thread that has exited (a main thread after pthread_exit) and left
     * its thread state behind runs nothing. */
    if (activity->run_state == 'Z' || activity->run_state == 'X')
        return THREAD_UNKNOWN;
    if (activity->syscall_nr == SYSCALL_NR_FUTEX && gil && gil_size &&
        activity->syscall_args[0] >= gil && activity->syscall_args[0] < gil + gil_size)
        return THREAD_WAITING_GIL;
    if (activity->syscall_nr >= 0)
        return THREAD_IDLE;
    return THREAD_RUNNING;
}

const char *thread_state_name(enum thread_run_state state)
{
    switch (state) {
    case THREAD_HOLDING_GIL: return "holding_gil";
    case THREAD_WAITING_GIL: return "waiting_gil";
    case THREAD_RUNNING: return "running";
    case THREAD_IDLE: return "idle";
    case THREAD_UNKNOWN: break;
    }
    return "unknown";
}
