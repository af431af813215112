/* Names of x86-64 Linux system calls, for reporting what a blocked thread is
 * waiting in (from /proc/PID/task/TID/syscall). */
#ifndef PYSCOPE_TARGET_SYSCALLS_H
#define PYSCOPE_TARGET_SYSCALLS_H

/* The name without the __NR_ prefix ("futex"), or NULL for a number this
 * build does not know (negative, a gap, or newer than the generated table). */
const char *syscall_name(long nr);

/* The numbers the wait analysis tells apart, as /proc/PID/task/TID/syscall
 * reports them. */
#define NR_READ 0
#define NR_WRITE 1
#define NR_POLL 7
#define NR_PREAD64 17
#define NR_PWRITE64 18
#define NR_READV 19
#define NR_WRITEV 20
#define NR_SELECT 23
#define NR_NANOSLEEP 35
#define NR_CONNECT 42
#define NR_ACCEPT 43
#define NR_SENDTO 44
#define NR_RECVFROM 45
#define NR_SENDMSG 46
#define NR_RECVMSG 47
#define NR_WAIT4 61
#define NR_CLOCK_NANOSLEEP 230
#define NR_EPOLL_WAIT 232
#define NR_WAITID 247
#define NR_PSELECT6 270
#define NR_PPOLL 271
#define NR_EPOLL_PWAIT 281
#define NR_ACCEPT4 288
#define NR_RECVMMSG 299
#define NR_EPOLL_PWAIT2 441

#endif
