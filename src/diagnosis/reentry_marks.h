/* watch --reentry's marks on a stack report: which frames lie between a
 * function's new activation and the earlier one still on the stack, and
 * what each is (garbage collector, finalizer, dealloc). No target reads. */
#ifndef PYSCOPE_DIAGNOSIS_REENTRY_MARKS_H
#define PYSCOPE_DIAGNOSIS_REENTRY_MARKS_H

#include <stdbool.h>
#include <stddef.h>

#include "report/stack_report.h"

/* Marks the frames of thread th from the inner activation (a Python frame
 * index, or a native frame index when native_func) to the outer one, with
 * the category of each frame between; fills report->reentry (which the
 * caller allocated, with function, native, tid and hit set). Uses the
 * merged order when the thread's stacks are merged. -1 when out of memory. */
int reentry_mark_frames(struct stack_report *report, const struct report_thread *th,
                        size_t inner, size_t outer);
/* "gc", "finalizer", "dealloc" or NULL for a frame: a Python function
 * name or a C symbol (one of them NULL). */
const char *reentry_frame_category(const char *python_function, const char *native_symbol);
/* The mark of a frame of the re-entering thread, or NULL. */
const struct report_reentry_mark *reentry_mark_of(const struct stack_report *report,
                                                  const struct report_thread *th, bool python,
                                                  size_t index);

#endif
