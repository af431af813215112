/* The x86-64 syscall name table. Its contents are generated from the kernel
 * header by tools/gen_syscalls.sh into syscall_names.inc. */
#include "target/syscalls.h"

#include <stddef.h>

static const char *const syscall_names[] = {
#include "target/syscall_names.inc"
};

const char *syscall_name(long nr)
{
    if (nr < 0 || (size_t)nr >= sizeof(syscall_names) / sizeof(syscall_names[0]))
        return NULL;
    return syscall_names[nr];
}
