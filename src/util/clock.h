/* Monotonic time in milliseconds, for timings pyscope reports about itself. */
#ifndef PYSCOPE_UTIL_CLOCK_H
#define PYSCOPE_UTIL_CLOCK_H

#include <time.h>

static inline double monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#endif
