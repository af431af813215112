/* The C library of native_hog.py (record/top --native): hog_checksum keeps
 * the GIL for a bounded spin (it is called through ctypes.PyDLL), and
 * wait_for_lock blocks in pthread_mutex_lock on a mutex another thread took
 * with take_lock (called through ctypes.CDLL, without the GIL). Built with
 * -O0 -g by the tests, which read the marked lines from this file. */
#include <pthread.h>
#include <stddef.h>

unsigned hog_checksum(const unsigned char *buf, size_t n, unsigned rounds)
{
    unsigned sum = 0;
    for (unsigned r = 0; r < rounds; r++) { /* hog-begin */
        for (size_t i = 0; i < n; i++)
            sum = sum * 31 + buf[i];
    } /* hog-end */
    return sum;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void take_lock(void)
{
    pthread_mutex_lock(&lock);
}

void wait_for_lock(void)
{
    pthread_mutex_lock(&lock); /* wait-here */
    pthread_mutex_unlock(&lock);
}

/* hog_checksum over a copy of buf on its own stack: a frame of 64 KiB,
 * larger than the stack a perf sample copies, so that the copy ends inside
 * it, before its return address and its Python caller's frames. */
unsigned hog_big_frame(const unsigned char *buf, size_t n, unsigned rounds)
{
    unsigned char copy[65536];
    size_t m = n < sizeof copy ? n : sizeof copy;
    for (size_t i = 0; i < m; i++)
        copy[i] = buf[i];
    unsigned sum = 0;
    for (unsigned r = 0; r < rounds; r++) { /* big-begin */
        for (size_t i = 0; i < m; i++)
            sum = sum * 31 + copy[i];
    } /* big-end */
    return sum;
}
