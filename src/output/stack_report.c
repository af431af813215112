/* Ownership and queries of a stack report; the writers live beside it. */
#include "output/stack_report.h"

#include <stdlib.h>
#include <string.h>

void stack_report_free(struct stack_report *report)
{
    for (size_t i = 0; i < report->n_threads; i++) {
        struct report_thread *th = &report->threads[i];
        for (size_t k = 0; k < th->n_frames; k++) {
            free(th->frames[k].function);
            free(th->frames[k].file);
        }
        free(th->frames);
        free(th->wait);
    }
    free(report->threads);
    report->threads = NULL;
    report->n_threads = 0;
}

const struct report_thread *stack_report_gil_holder(const struct stack_report *report)
{
    for (size_t i = 0; i < report->n_threads; i++)
        if (report->threads[i].holds_gil && report->threads[i].interp_id == 0)
            return &report->threads[i];
    for (size_t i = 0; i < report->n_threads; i++)
        if (report->threads[i].holds_gil)
            return &report->threads[i];
    return NULL;
}

const struct report_thread *stack_report_gc_thread(const struct stack_report *report)
{
    for (size_t i = 0; i < report->n_threads; i++)
        if (report->threads[i].gc)
            return &report->threads[i];
    return NULL;
}

/* Standard-library and installed-package paths are long and say little:
 * show them from the package root, as tracebacks readers expect. */
const char *stack_report_short_path(const char *path)
{
    static const char *const markers[] = {"/site-packages/", "/dist-packages/"};
    for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++) {
        const char *m = strstr(path, markers[i]);
        if (m)
            return m + strlen(markers[i]);
    }
    const char *lib = strstr(path, "/lib/python");
    if (lib) {
        const char *slash = strchr(lib + 11, '/');
        if (slash)
            return slash + 1;
    }
    return path;
}
