/* A plain C library for the tests that load it with ctypes (every
 * interpreter, including those without headers): a C function that calls
 * back into Python, one that dereferences NULL, and a thread that Python does
 * not know. Built at -O0 -g so frames and lines are exact. */
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>

typedef void (*callback_t)(void);

__attribute__((noinline)) void pyscope_call_through(callback_t callback)
{
    callback();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) int pyscope_crash_read(volatile int *pointer)
{
    return *pointer; /* crash-here */
}

static void *idle_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "pyscope-idle");
    for (;;)
        pause();
    return NULL;
}

int pyscope_start_idle_thread(void)
{
    pthread_t thread;
    return pthread_create(&thread, NULL, idle_main, NULL);
}
