/* Checks diagnosis/reentry_marks.c: the frames between two activations of a
 * re-entered function, in merged and unmerged stacks, and the GC,
 * finalizer and dealloc categories of CPython's frames. */
#include <stdlib.h>
#include <string.h>

#include "native/merge.h"
#include "diagnosis/reentry_marks.h"
#include "unit.h"

static void test_categories(void)
{
    CHECK_EQ_STR(reentry_frame_category("Block.__del__", NULL), "finalizer");
    CHECK_EQ_STR(reentry_frame_category("__del__", NULL), "finalizer");
    CHECK(reentry_frame_category("Pool.free", NULL) == NULL);
    CHECK_EQ_STR(reentry_frame_category(NULL, "gc_collect_main"), "gc");
    CHECK_EQ_STR(reentry_frame_category(NULL, "collect.isra.0"), "gc");
    CHECK_EQ_STR(reentry_frame_category(NULL, "_PyObject_GC_Alloc"), "gc");
    CHECK_EQ_STR(reentry_frame_category(NULL, "_Py_RunGC"), "gc");
    CHECK_EQ_STR(reentry_frame_category(NULL, "slot_tp_finalize"), "finalizer");
    CHECK_EQ_STR(reentry_frame_category(NULL, "PyObject_CallFinalizerFromDealloc"), "finalizer");
    CHECK_EQ_STR(reentry_frame_category(NULL, "subtype_dealloc"), "dealloc");
    CHECK_EQ_STR(reentry_frame_category(NULL, "_Py_Dealloc"), "dealloc");
    CHECK(reentry_frame_category(NULL, "collections_deque") == NULL);
    CHECK(reentry_frame_category(NULL, "PySet_New") == NULL);
    CHECK(reentry_frame_category(NULL, NULL) == NULL);
}

static struct report_frame pyframe(const char *name, bool entry)
{
    struct report_frame f;
    memset(&f, 0, sizeof f);
    f.function = (char *)name;
    f.is_entry = entry;
    return f;
}

static struct report_native_frame cframe(const char *symbol, bool eval)
{
    struct report_native_frame f;
    memset(&f, 0, sizeof f);
    f.symbol = (char *)symbol;
    f.is_eval = eval;
    f.internal = true;
    return f;
}

/* pool.release -> set() -> GC -> finalizer -> Block.__del__ -> pool.release,
 * as 3.11 would have it: each Python run entered from C. */
static void test_merged_python(void)
{
    struct report_frame py[4] = {pyframe("Pool.release", true), pyframe("Block.__del__", true),
                                 pyframe("Pool.release", false), pyframe("<module>", true)};
    struct report_native_frame c[7] = {
        cframe("_PyEval_EvalFrameDefault", true), cframe("slot_tp_finalize", false),
        cframe("gc_collect_main", false),          cframe("_PyObject_GC_Alloc", false),
        cframe("PySet_New", false),                cframe("_PyEval_EvalFrameDefault", true),
        cframe("_PyEval_EvalFrameDefault", true),
    };
    /* Merge expects one eval frame per entry group: 3 groups here. */
    struct report_native native;
    memset(&native, 0, sizeof native);
    native.frames = c;
    native.n_frames = 7;
    native.complete = true;
    CHECK_EQ_INT(native_merge(&native, py, 4), 0);
    CHECK(native.merged);
    struct report_thread th;
    memset(&th, 0, sizeof th);
    th.tid = 42;
    th.frames = py;
    th.n_frames = 4;
    th.native = &native;
    struct stack_report report;
    memset(&report, 0, sizeof report);
    report.reentry = calloc(1, sizeof *report.reentry);
    report.reentry->tid = 42;
    CHECK_EQ_INT(reentry_mark_frames(&report, &th, 0, 2), 0);
    const struct report_reentry *re = report.reentry;
    CHECK(re->n_marks >= 5);
    CHECK(re->marks[0].python && re->marks[0].index == 0 && re->marks[0].role == REENTRY_INNER);
    CHECK(re->marks[re->n_marks - 1].python && re->marks[re->n_marks - 1].index == 2 &&
          re->marks[re->n_marks - 1].role == REENTRY_OUTER);
    CHECK(re->gc_frames);
    CHECK(re->finalizer);
    const struct report_reentry_mark *del = reentry_mark_of(&report, &th, true, 1);
    CHECK(del && del->role == REENTRY_BETWEEN && strcmp(del->category, "finalizer") == 0);
    const struct report_reentry_mark *gc = reentry_mark_of(&report, &th, false, 2);
    CHECK(gc && gc->role == REENTRY_BETWEEN && strcmp(gc->category, "gc") == 0);
    const struct report_reentry_mark *set = reentry_mark_of(&report, &th, false, 4);
    CHECK(set && set->category == NULL);
    CHECK(reentry_mark_of(&report, &th, true, 3) == NULL);    /* below the outer activation */
    CHECK(re->note[0] == '\0');
    free(native.entries);
    free(report.reentry->marks);
    free(report.reentry);
}

/* A native function re-entered with the stacks unmerged: the C frames
 * between are marked and the note says the Python ones could not be placed. */
static void test_unmerged_native(void)
{
    struct report_frame py[1] = {pyframe("callback", true)};
    struct report_native_frame c[5] = {
        cframe("pool_append", false), cframe("ffi_call", false), cframe("subtype_dealloc", false),
        cframe("gc_collect_main", false), cframe("pool_append", false),
    };
    struct report_native native;
    memset(&native, 0, sizeof native);
    native.frames = c;
    native.n_frames = 5;
    snprintf(native.error, sizeof native.error, "not merged for the test");
    struct report_thread th;
    memset(&th, 0, sizeof th);
    th.tid = 7;
    th.frames = py;
    th.n_frames = 1;
    th.native = &native;
    struct stack_report report;
    memset(&report, 0, sizeof report);
    report.reentry = calloc(1, sizeof *report.reentry);
    report.reentry->tid = 7;
    report.reentry->native = true;
    CHECK_EQ_INT(reentry_mark_frames(&report, &th, 0, 4), 0);
    CHECK_EQ_INT(report.reentry->n_marks, 5);
    CHECK(report.reentry->gc_frames && report.reentry->finalizer);
    CHECK(strstr(report.reentry->note, "not merged for the test") != NULL);
    CHECK(reentry_mark_of(&report, &th, false, 4)->role == REENTRY_OUTER);
    free(report.reentry->marks);
    free(report.reentry);
}

int main(void)
{
    test_categories();
    test_merged_python();
    test_unmerged_native();
    return unit_report("test_reentry_marks");
}
