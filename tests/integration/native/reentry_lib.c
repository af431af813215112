/* The pool's append in a plain C library loaded with ctypes (interpreters
 * without headers): pyscope_pool_append allocates and calls back into
 * Python to insert, where the collector and a finalizer can re-enter it
 * through ctypes on the same thread. Built at -O0 -g. */
#include <stdlib.h>

typedef void (*insert_t)(int size);

__attribute__((noinline)) void pyscope_pool_append(insert_t insert, int size)
{
    void *scratch = malloc(64);
    insert(size);
    free(scratch);
    __asm__ volatile("" ::: "memory");
}
