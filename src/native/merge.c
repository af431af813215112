/* The merge itself is pure bookkeeping over two lists; it refuses rather than
 * guesses, because attributing a C frame to the wrong Python caller is worse
 * than printing the two stacks one after the other. */
#include "native/merge.h"

#include <stdio.h>
#include <stdlib.h>

int native_merge_order(const bool *is_eval, size_t n_native, const bool *is_entry, size_t n_py,
                       struct report_stack_entry *out, size_t *n_out, char *why, size_t why_size)
{
    size_t n_eval = 0, n_groups = 0;
    for (size_t i = 0; i < n_native; i++)
        n_eval += is_eval[i];
    for (size_t i = 0; i < n_py; i++)
        n_groups += is_entry[i];
    bool trailing = n_py > 0 && !is_entry[n_py - 1];
    *n_out = 0;
    if (trailing || n_eval != n_groups) {
        if (why)
            snprintf(why, why_size,
                     "native and Python stacks not merged: %zu interpreter activations on the C "
                     "stack, %zu C-to-Python entries in the Python stack%s; shown separately",
                     n_eval, n_groups, trailing ? " (the outermost frame is not an entry)" : "");
        return -1;
    }
    size_t next_py = 0;
    for (size_t i = 0; i < n_native; i++) {
        if (!is_eval[i]) {
            out[(*n_out)++] = (struct report_stack_entry){false, i};
            continue;
        }
        /* One activation: the Python frames it runs, up to and including its
         * entry frame, then the eval frame itself (shown by --native-all). */
        while (next_py < n_py) {
            out[(*n_out)++] = (struct report_stack_entry){true, next_py};
            if (is_entry[next_py++])
                break;
        }
        out[(*n_out)++] = (struct report_stack_entry){false, i};
    }
    return 0;
}

int native_merge(struct report_native *native, const struct report_frame *py, size_t n_py)
{
    native->merged = false;
    free(native->entries);
    native->entries = NULL;
    native->n_entries = 0;
    bool *flags = calloc(native->n_frames + n_py + 1, sizeof *flags);
    native->entries = calloc(native->n_frames + n_py + 1, sizeof *native->entries);
    if (!flags || !native->entries) {
        free(flags);
        return -1;
    }
    bool *is_eval = flags, *is_entry = flags + native->n_frames;
    for (size_t i = 0; i < native->n_frames; i++)
        is_eval[i] = native->frames[i].is_eval;
    for (size_t i = 0; i < n_py; i++)
        is_entry[i] = py[i].is_entry;
    native->merged = native_merge_order(is_eval, native->n_frames, is_entry, n_py,
                                        native->entries, &native->n_entries, native->error,
                                        sizeof native->error) == 0;
    free(flags);
    if (!native->merged) {
        free(native->entries);
        native->entries = NULL;
    }
    return 0;
}
