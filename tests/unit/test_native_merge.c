/* Checks native/merge.c: Python frames go just above the eval frame of the
 * activation that ran them, split at entry frames; a count mismatch or a
 * trailing non-entry frame leaves the stacks unmerged. */
#include <stdlib.h>
#include <string.h>

#include "native/merge.h"
#include "unit.h"

static struct report_native *native_of(const char *pattern)
{
    /* 'e' = eval frame, 'c' = other C frame, innermost first. */
    struct report_native *n = calloc(1, sizeof *n);
    n->n_frames = strlen(pattern);
    n->frames = calloc(n->n_frames, sizeof *n->frames);
    for (size_t i = 0; i < n->n_frames; i++)
        n->frames[i].is_eval = pattern[i] == 'e';
    n->complete = true;
    return n;
}

static void python_of(const char *entries, struct report_frame *out)
{
    /* 'E' = entry frame, 'f' = plain frame. */
    for (size_t i = 0; entries[i]; i++)
        out[i].is_entry = entries[i] == 'E';
}

/* The merged order as a string: 'p' + index or 'n' + index. */
static void order_of(const struct report_native *n, char *out)
{
    out[0] = '\0';
    for (size_t i = 0; i < n->n_entries; i++) {
        char item[8];
        snprintf(item, sizeof item, "%c%zu ", n->entries[i].python ? 'p' : 'n', n->entries[i].index);
        strcat(out, item);
    }
}

int main(void)
{
    struct report_frame py[8];
    char order[256];

    /* C frame, activation running 2 Python frames, C frame between, activation with 1. */
    memset(py, 0, sizeof py);
    python_of("fEE", py);
    struct report_native *n = native_of("cecec");
    CHECK_EQ_INT(native_merge(n, py, 3), 0);
    CHECK(n->merged);
    order_of(n, order);
    CHECK_EQ_STR(order, "n0 p0 p1 n1 n2 p2 n3 n4 ");
    report_native_free(n);

    /* <=3.10: every frame is an entry, one eval frame each. */
    memset(py, 0, sizeof py);
    python_of("EEE", py);
    n = native_of("eee");
    native_merge(n, py, 3);
    order_of(n, order);
    CHECK_EQ_STR(order, "p0 n0 p1 n1 p2 n2 ");
    report_native_free(n);

    /* Counts differ: nothing is guessed. */
    memset(py, 0, sizeof py);
    python_of("EE", py);
    n = native_of("cec");
    native_merge(n, py, 2);
    CHECK(!n->merged);
    CHECK_EQ_INT(n->n_entries, 0);
    CHECK(strstr(n->error, "1 interpreter activations") != NULL);
    report_native_free(n);

    /* The outermost Python frame must be an entry. */
    memset(py, 0, sizeof py);
    python_of("Ef", py);
    n = native_of("ee");
    native_merge(n, py, 2);
    CHECK(!n->merged);
    report_native_free(n);

    /* No Python frames, no eval frames: a pure C thread merges trivially. */
    n = native_of("ccc");
    native_merge(n, py, 0);
    CHECK(n->merged);
    CHECK_EQ_INT(n->n_entries, 3);
    report_native_free(n);
    return unit_report("test_native_merge");
}
