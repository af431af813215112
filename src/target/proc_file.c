/* One-read /proc file access for the analyses that follow other processes'
 * state (pipe peers, scheduler clocks). */
#include "target/proc_file.h"

#include <fcntl.h>
#include <unistd.h>

int proc_read_text(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return 0;
}
