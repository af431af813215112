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
/* The same rule over two lists of flags (both innermost first): fills out
 * (room for n_native + n_py entries) and returns 0, or -1 with why set
 * when the stacks cannot be matched. */
int native_merge_order(const bool *is_eval, size_t n_native, const bool *is_entry, size_t n_py,
                       struct report_stack_entry *out, size_t *n_out, char *why, size_t why_size);

int native_merge(struct report_native *native, const struct report_frame *py, size_t n_py);

#endif
