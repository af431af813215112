/* Spot-checks the generated x86-64 syscall name table, including the gaps
 * and the ends of the range that must yield NULL. */
#include <stddef.h>

#include "target/syscalls.h"
#include "unit.h"

int main(void)
{
    CHECK_EQ_STR(syscall_name(0), "read");
    CHECK_EQ_STR(syscall_name(7), "poll");
    CHECK_EQ_STR(syscall_name(23), "select");
    CHECK_EQ_STR(syscall_name(202), "futex");
    CHECK_EQ_STR(syscall_name(230), "clock_nanosleep");
    CHECK_EQ_STR(syscall_name(232), "epoll_wait");
    CHECK_EQ_STR(syscall_name(270), "pselect6");
    CHECK_EQ_STR(syscall_name(281), "epoll_pwait");
    CHECK_EQ_STR(syscall_name(334), "rseq");
    CHECK_EQ_STR(syscall_name(424), "pidfd_send_signal");
    /* 335-423 were never assigned on x86-64. */
    CHECK(syscall_name(335) == NULL);
    CHECK(syscall_name(423) == NULL);
    CHECK(syscall_name(-1) == NULL);
    CHECK(syscall_name(100000) == NULL);
    CHECK(syscall_name(512) == NULL); /* x32 numbers are not in the 64-bit table */
    return unit_report("test_syscalls");
}
