/* Reading one small /proc file in a single read: the kernel writes such a
 * file whole, so one read sees all of it. */
#ifndef PYSCOPE_TARGET_PROC_FILE_H
#define PYSCOPE_TARGET_PROC_FILE_H

#include <stddef.h>

/* Up to size - 1 bytes, NUL-terminated; 0, or -1 when it cannot be read. */
int proc_read_text(const char *path, char *buf, size_t size);

#endif
