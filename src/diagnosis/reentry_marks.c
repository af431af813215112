/* Which frames of a re-entering thread lie between the two activations of
 * the watched function, and which are the garbage collector, a finalizer or
 * a deallocator (CPython 3.8-3.15's own names; stripped builds show fewer). */
#include <stdlib.h>
#include <string.h>

#include "diagnosis/reentry_marks.h"

/* The garbage collector's functions across versions: allocation that
 * triggers a collection (<=3.11), the collection itself, and 3.12+'s run
 * from the eval breaker. */
static const char *const gc_symbols[] = {
    "collect", "collect_with_callback", "collect_generations", "gc_collect_main",
    "gc_collect_region", "gc_collect_full", "gc_collect_young", "gc_collect_increment",
    "gc_collect_impl", "gc_collect", "_PyGC_Collect", "PyGC_Collect", "_PyGC_CollectNoFail",
    "_Py_RunGC", "_PyObject_GC_Alloc", "_PyObject_GC_Malloc", "_PyObject_GC_New",
    "_PyObject_GC_NewVar", "gc_alloc", "_PyObject_GC_Link", "delete_garbage",
    "handle_legacy_finalizers", "handle_weakrefs", "finalize_garbage", "invoke_gc_callback",
    "gc_collect_with_callback",
};

static const char *const finalizer_symbols[] = {
    "slot_tp_finalize", "PyObject_CallFinalizer", "PyObject_CallFinalizerFromDealloc",
    "slot_tp_del", "_PyGen_Finalize", "call_finalizer",
};

/* gcc names split or specialised copies "name.isra.0", "name.cold". */
static size_t base_length(const char *symbol)
{
    const char *dot = strchr(symbol, '.');
    return dot ? (size_t)(dot - symbol) : strlen(symbol);
}

static bool in_list(const char *symbol, size_t len, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == len && strncmp(list[i], symbol, len) == 0)
            return true;
    return false;
}

const char *reentry_frame_category(const char *python_function, const char *native_symbol)
{
    if (python_function) {
        size_t len = strlen(python_function);
        if (len >= 7 && strcmp(python_function + len - 7, "__del__") == 0)
            return "finalizer";
        return NULL;
    }
    if (!native_symbol)
        return NULL;
    size_t len = base_length(native_symbol);
    if (in_list(native_symbol, len, finalizer_symbols,
                sizeof finalizer_symbols / sizeof finalizer_symbols[0]))
        return "finalizer";
    if (in_list(native_symbol, len, gc_symbols, sizeof gc_symbols / sizeof gc_symbols[0]))
        return "gc";
    if ((len >= 7 && strncmp(native_symbol + len - 7, "dealloc", 7) == 0) ||
        (len >= 7 && strncmp(native_symbol + len - 7, "Dealloc", 7) == 0))
        return "dealloc";
    return NULL;
}

static int add_mark(struct report_reentry *re, bool python, size_t index, enum reentry_role role,
                    const char *category)
{
    struct report_reentry_mark *grown = realloc(re->marks, (re->n_marks + 1) * sizeof *grown);
    if (!grown)
        return -1;
    re->marks = grown;
    re->marks[re->n_marks++] = (struct report_reentry_mark){python, index, role, category};
    if (role == REENTRY_BETWEEN && category) {
        if (strcmp(category, "gc") == 0)
            re->gc_frames = true;
        else
            re->finalizer = true;
    }
    return 0;
}

static const char *category_of(const struct report_thread *th, bool python, size_t index)
{
    if (python)
        return reentry_frame_category(th->frames[index].function, NULL);
    return reentry_frame_category(NULL, th->native->frames[index].symbol);
}

static bool entry_is(const struct report_stack_entry *e, bool python, size_t index)
{
    return e->python == python && e->index == index;
}

int reentry_mark_frames(struct stack_report *report, const struct report_thread *th,
                        size_t inner, size_t outer)
{
    struct report_reentry *re = report->reentry;
    bool python = !re->native;
    re->gc_flag = th->gc || report->gc_collecting;
    const struct report_native *native = th->native;
    if (native && native->merged) {
        size_t first = native->n_entries, last = native->n_entries;
        for (size_t e = 0; e < native->n_entries; e++) {
            if (first == native->n_entries && entry_is(&native->entries[e], python, inner))
                first = e;
            if (entry_is(&native->entries[e], python, outer))
                last = e;
        }
        if (first < last && last < native->n_entries) {
            for (size_t e = first; e <= last; e++) {
                const struct report_stack_entry *entry = &native->entries[e];
                enum reentry_role role = e == first  ? REENTRY_INNER
                                         : e == last ? REENTRY_OUTER
                                                     : REENTRY_BETWEEN;
                const char *category =
                    role == REENTRY_BETWEEN ? category_of(th, entry->python, entry->index) : NULL;
                if (add_mark(re, entry->python, entry->index, role, category) != 0)
                    return -1;
            }
            return 0;
        }
    }
    /* Unmerged: the activations and what lies between them in their own
     * stack; the other stack's frames cannot be placed between them. */
    size_t limit = python ? th->n_frames : native ? native->n_frames : 0;
    if (inner >= outer || outer >= limit)
        return 0;
    for (size_t i = inner; i <= outer; i++) {
        enum reentry_role role = i == inner   ? REENTRY_INNER
                                 : i == outer ? REENTRY_OUTER
                                              : REENTRY_BETWEEN;
        const char *category = role == REENTRY_BETWEEN ? category_of(th, python, i) : NULL;
        if (add_mark(re, python, i, role, category) != 0)
            return -1;
    }
    if (python && native) {
        /* Still say what the C stack shows: its GC and finalizer frames. */
        for (size_t i = 0; i < native->n_frames; i++) {
            const char *category = category_of(th, false, i);
            if (category && add_mark(re, false, i, REENTRY_BETWEEN, category) != 0)
                return -1;
        }
        snprintf(re->note, sizeof re->note,
                 "the C frames could not be placed between the Python frames (%s); the C "
                 "stack's GC, finalizer and dealloc frames are marked there",
                 native->error[0] ? native->error : "stacks not merged");
    } else if (!python && th->n_frames) {
        snprintf(re->note, sizeof re->note,
                 "the Python frames could not be placed between the C frames (%s)",
                 native && native->error[0] ? native->error : "stacks not merged");
    }
    return 0;
}

const struct report_reentry_mark *reentry_mark_of(const struct stack_report *report,
                                                  const struct report_thread *th, bool python,
                                                  size_t index)
{
    const struct report_reentry *re = report->reentry;
    if (!re || !th->tid || th->tid != re->tid)
        return NULL;
    for (size_t i = 0; i < re->n_marks; i++)
        if (re->marks[i].python == python && re->marks[i].index == index)
            return &re->marks[i];
    return NULL;
}
