/* Ownership and queries of a stack report; output/dump_writers.h prints it. */
#include "report/stack_report.h"

#include <stdlib.h>
#include <string.h>

#include "util/text.h"

void report_native_free(struct report_native *native)
{
    if (!native)
        return;
    for (size_t i = 0; i < native->n_frames; i++) {
        free(native->frames[i].symbol);
        free(native->frames[i].module);
        free(native->frames[i].file);
    }
    free(native->frames);
    free(native->entries);
    free(native);
}

struct report_names {
    struct report_names *next;
    size_t used, cap;
    char text[];
};

char *report_names_add(struct report_names **pool, const char *text)
{
    size_t n = strlen(text) + 1;
    struct report_names *block = *pool;
    if (!block || block->cap - block->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        block = malloc(sizeof *block + cap);
        if (!block)
            return NULL;
        block->next = *pool;
        block->used = 0;
        block->cap = cap;
        *pool = block;
    }
    char *copy = block->text + block->used;
    memcpy(copy, text, n);
    block->used += n;
    return copy;
}

void report_names_free(struct report_names *pool)
{
    while (pool) {
        struct report_names *next = pool->next;
        free(pool);
        pool = next;
    }
}

void stack_report_free(struct stack_report *report)
{
    for (size_t i = 0; i < report->n_threads; i++) {
        struct report_thread *th = &report->threads[i];
        for (size_t k = 0; k < th->n_frames; k++) {
            struct report_frame *f = &th->frames[k];
            if (!f->names_pooled) {
                free(f->function);
                free(f->file);
            }
            for (size_t v = 0; v < f->n_locals; v++) {
                free(f->locals[v].name);
                free(f->locals[v].type);
                free(f->locals[v].repr);
            }
            free(f->locals);
        }
        free(th->frames);
        report_native_free(th->native);
        free(th->wait);
    }
    for (size_t i = 0; i < report->n_os_threads; i++)
        report_native_free(report->os_threads[i].native);
    free(report->os_threads);
    report->os_threads = NULL;
    report->n_os_threads = 0;
    report_names_free(report->names);
    task_report_free(report->tasks);
    report->names = NULL;
    free(report->threads);
    report->threads = NULL;
    report->n_threads = 0;
    for (size_t i = 0; i < report->n_prints; i++) {
        free(report->prints[i].repr);
        free(report->prints[i].error);
    }
    free(report->prints);
    report->prints = NULL;
    report->n_prints = 0;
    free(report->print_expr);
    report->print_expr = NULL;
    if (report->reentry) {
        free(report->reentry->marks);
        free(report->reentry);
        report->reentry = NULL;
    }
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

void stack_report_append_thread(char *out, size_t size, const struct report_thread *th)
{
    if (th->tid)
        text_append(out, size, "Thread %d", (int)th->tid);
    else
        text_append(out, size, "Thread 0x%llx", (unsigned long long)th->thread_id);
    if (th->name[0])
        text_append(out, size, " \"%s\"", th->name);
}
