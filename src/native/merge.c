/* The merge itself is pure bookkeeping over two lists; it refuses rather than
 * guesses, because attributing a C frame to the wrong Python caller is worse
 * than printing the two stacks one after the other. */
#include "native/merge.h"

#include <stdio.h>
#include <stdlib.h>

int native_merge(struct report_native *native, const struct report_frame *py, size_t n_py)
{
    native->merged = false;
    free(native->entries);
    native->entries = NULL;
    native->n_entries = 0;
    size_t n_eval = 0, n_groups = 0;
    for (size_t i = 0; i < native->n_frames; i++)
        n_eval += native->frames[i].is_eval;
    for (size_t i = 0; i < n_py; i++)
        n_groups += py[i].is_entry;
    bool trailing = n_py > 0 && !py[n_py - 1].is_entry;
    if (trailing || n_eval != n_groups) {
        snprintf(native->error, sizeof native->error,
                 "native and Python stacks not merged: %zu interpreter activations on the C "
                 "stack, %zu C-to-Python entries in the Python stack%s; shown separately",
                 n_eval, n_groups, trailing ? " (the outermost frame is not an entry)" : "");
        return 0;
    }
    native->entries = calloc(native->n_frames + n_py + 1, sizeof *native->entries);
    if (!native->entries)
        return -1;
    size_t next_py = 0;
    for (size_t i = 0; i < native->n_frames; i++) {
        if (!native->frames[i].is_eval) {
            native->entries[native->n_entries++] = (struct report_stack_entry){false, i};
            continue;
        }
        /* One activation: the Python frames it runs, up to and including its
         * entry frame, then the eval frame itself (shown by --native-all). */
        while (next_py < n_py) {
            native->entries[native->n_entries++] = (struct report_stack_entry){true, next_py};
            if (py[next_py++].is_entry)
                break;
        }
        native->entries[native->n_entries++] = (struct report_stack_entry){false, i};
    }
    native->merged = true;
    return 0;
}
