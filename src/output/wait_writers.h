/* Writers of a thread's wait: the one line of text dump and why print, and
 * the "waiting_for" and "stopped" members of their JSON. */
#ifndef PYSCOPE_OUTPUT_WAIT_WRITERS_H
#define PYSCOPE_OUTPUT_WAIT_WRITERS_H

#include <stddef.h>

#include "report/stack_report.h"

struct json_writer;

/* One line: what the thread waits for, e.g.
 * "Lock 0x7f.. (self._lock in RWLock.acquire_write), locked, no known owner; 3 threads wait". */
void wait_describe(const struct stack_report *report, const struct report_thread *th, char *out,
                   size_t outsize);
/* The "waiting_for" object of --json (docs/json.md); null when not waiting. */
void wait_write_json(struct json_writer *w, const struct stack_report *report,
                     const struct report_thread *th);

/* A stopped thread runs nothing, whatever its last syscall state says:
 * "stopped by a signal" or "stopped by its tracer, process 812 (gdb)";
 * "" when the thread is not stopped. */
void wait_stopped_describe(const struct stack_report *report, const struct report_thread *th,
                           char *out, size_t size);
/* "stopped": null, or {"by": "signal"|"tracer", "tracer_pid", "tracer_command", "resume"}. */
void wait_write_stopped_json(struct json_writer *w, const struct stack_report *report,
                             const struct report_thread *th);

#endif
