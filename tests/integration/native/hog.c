/* The ctypes library of c_callables.py: checksum_blocks stays inside C
 * (called through ctypes.CDLL, so without the GIL), sleeping between rounds
 * over its buffer, until stop_blocks is called. */
#include <stddef.h>
#include <time.h>

static volatile int stop;

unsigned checksum_blocks(const unsigned char *buf, size_t n)
{
    unsigned sum = 0;
    while (!stop) {
        for (size_t i = 0; i < n; i++)
            sum = sum * 31 + buf[i];
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL); /* sleep-here */
    }
    return sum;
}

void stop_blocks(void)
{
    stop = 1;
}
