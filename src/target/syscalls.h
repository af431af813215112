/* Names of x86-64 Linux system calls, for reporting what a blocked thread is
 * waiting in (from /proc/PID/task/TID/syscall). */
#ifndef PYSCOPE_TARGET_SYSCALLS_H
#define PYSCOPE_TARGET_SYSCALLS_H

/* The name without the __NR_ prefix ("futex"), or NULL for a number this
 * build does not know (negative, a gap, or newer than the generated table). */
const char *syscall_name(long nr);

#endif
