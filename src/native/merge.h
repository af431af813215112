/* Interleaving a thread's native stack with its Python frames: the Python
 * frames an interpreter-loop activation ran are placed just above (inner to)
 * that activation's eval frame. */
#ifndef PYSCOPE_NATIVE_MERGE_H
#define PYSCOPE_NATIVE_MERGE_H

#include "report/stack_report.h"

/* Sets native->entries and native->merged. The Python frames are split into
 * activations at their is_entry marks (every frame on <=3.10); when the
 * number of activations differs from the number of eval frames on the
 * native stack nothing is guessed: merged stays false and native->error
 * says why. Returns -1 only when out of memory. */
int native_merge(struct report_native *native, const struct report_frame *py, size_t n_py);

#endif
