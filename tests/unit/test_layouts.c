/* Unit tests for the per-version layout tables (layouts_generated.c, layout.c)
 * and the _Py_DebugOffsets decoder (debug_offsets.c), using blocks captured
 * from live 3.13/3.14/3.15 processes. Usage: test_layouts [FIXTURE-DIR] */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/debug_offsets.h"
#include "python/layout.h"

static int passed, failed;

static void expect(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void expect(bool ok, const char *fmt, ...)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

#define EXPECT_EQ(actual, expected, what) \
    expect((long)(actual) == (long)(expected), "%s: %s = %ld, want %ld", what, #actual, \
           (long)(actual), (long)(expected))

static unsigned minor_of(unsigned version_hex)
{
    return (version_hex >> 16) & 0xff;
}

/* ---- generated tables --------------------------------------------------- */

/* offset + width must fit in the struct, for every field a version has */
static void expect_within(const char *who, const char *field, long offset, long width, long size)
{
    if (offset == PY_OFF_NONE)
        return;
    expect(size != PY_OFF_NONE && offset >= 0 && offset + width <= size,
           "%s: %s = %ld (+%ld) outside its struct of size %ld", who, field, offset, width, size);
}

#define WITHIN(field, width, size) expect_within(who, #field, L->field, width, L->size)

static void expect_present(const char *who, const char *field, long value, bool wanted)
{
    expect((value != PY_OFF_NONE) == wanted, "%s: %s should be %s (is %ld)", who, field,
           wanted ? "present" : "PY_OFF_NONE", value);
}

#define PRESENT(field, wanted) expect_present(who, #field, L->field, wanted)

/* The exception, frame-variable, callable, dict-keys and behaviour fields:
 * each present exactly where its version has it, inside its struct. */
static void check_version_facts(const struct py_layout *L, const char *who, unsigned minor)
{
    bool objects = L->frames == PY_FRAMES_OBJECTS;
    PRESENT(tstate_curexc_type, minor <= 11);
    PRESENT(tstate_curexc_value, minor <= 11);
    PRESENT(tstate_curexc_traceback, minor <= 11);
    PRESENT(tstate_current_exception, minor >= 12);
    WITHIN(tstate_curexc_type, 8, tstate_size);
    WITHIN(tstate_curexc_value, 8, tstate_size);
    WITHIN(tstate_curexc_traceback, 8, tstate_size);
    WITHIN(tstate_current_exception, 8, tstate_size);
    PRESENT(frameobj_iframe, !objects);
    expect(L->exc_args >= 16 && L->exc_traceback > L->exc_args,
           "%s: exception args %ld, traceback %ld", who, L->exc_args, L->exc_traceback);
    expect(L->tb_next == 16 && L->tb_frame > L->tb_next && L->tb_lasti > L->tb_frame &&
           L->tb_lineno == L->tb_lasti + 4, "%s: traceback fields", who);
    WITHIN(code_stacksize, 4, code_size);
    WITHIN(code_kwonlyargcount, 4, code_size);
    WITHIN(code_nlocalsplus, 4, code_size);
    WITHIN(code_cellvars, 8, code_size);
    WITHIN(code_freevars, 8, code_size);
    WITHIN(frame_valuestack, 8, frame_size);
    WITHIN(frame_globals, 8, frame_size);
    WITHIN(iframe_globals, 8, iframe_size);
    PRESENT(code_nlocalsplus, !objects);
    PRESENT(code_cellvars, objects);
    PRESENT(code_freevars, objects);
    PRESENT(frame_valuestack, objects);
    PRESENT(frame_globals, objects);
    PRESENT(iframe_globals, !objects);
    EXPECT_EQ(L->stackpointer_is_pointer, minor >= 14, who);
    EXPECT_EQ(L->executable_any, minor >= 13, who);
    EXPECT_EQ(L->cell_ref, 16, who);
    expect(L->type_base > L->type_flags && L->cfunction_self > L->cfunction_ml &&
           L->method_self > L->method_func && L->descr_name >= 16 && L->methoddef_name == 0 &&
           L->staticmethod_callable == 16 && L->property_get == 16,
           "%s: callable fields", who);
    expect(L->func_code >= 16 && L->func_name >= 16 && L->func_qualname >= 16 &&
           L->func_code != L->func_name && L->func_name != L->func_qualname,
           "%s: function fields", who);
    EXPECT_EQ(L->dict_keys_kind, objects ? PY_DICT_KEYS_SIZED : PY_DICT_KEYS_LOG2, who);
    PRESENT(dictkeys_size, objects);
    PRESENT(dictkeys_log2_size, !objects);
    PRESENT(dictkeys_log2_index_bytes, !objects);
    PRESENT(dictkeys_kind, !objects);
    PRESENT(dictunicode_size, !objects);
    expect(L->dictkeys_nentries + 8 <= L->dictkeys_indices && L->dictkeys_indices <= 64,
           "%s: dict keys header (nentries %ld, indices %ld)", who, L->dictkeys_nentries,
           L->dictkeys_indices);
    expect(L->dictentry_size == 24 && L->dictentry_value + 8 <= L->dictentry_size &&
           L->dictentry_key + 8 <= L->dictentry_value, "%s: dict entry", who);
    if (!objects)
        expect(L->dictunicode_size == 16 && L->dictunicode_key + 8 <= L->dictunicode_value,
               "%s: unicode dict entry", who);
    expect(L->set_used < L->set_mask && L->set_mask < L->set_table, "%s: set fields", who);
    EXPECT_EQ(L->parking_lot, minor >= 13, who);
    EXPECT_EQ(L->with_exit_unbound, minor >= 14, who);
}

static void check_table_consistency(const struct py_layout_entry *entry)
{
    const struct py_layout *L = &entry->layout;
    char who[96];
    snprintf(who, sizeof who, "table %#x (%s)", L->version_hex, L->source ? L->source : "?");
    unsigned minor = minor_of(L->version_hex);

    expect(L->source != NULL && L->source[0] != '\0', "%s: no source", who);
    expect(entry->version_min <= L->version_hex && L->version_hex <= entry->version_max,
           "%s: version_hex outside [%#x, %#x]", who, entry->version_min, entry->version_max);
    expect(minor_of(entry->version_min) == minor && minor_of(entry->version_max) == minor,
           "%s: range crosses a minor version", who);
    expect((entry->version_min & 0xf0) == 0xf0, "%s: range starts at a pre-release", who);

    /* structure sizes first: everything else is checked against them */
    expect(L->runtime_size > 0 && L->interp_size > 0 && L->tstate_size > 0 && L->code_size > 0 &&
           L->gc_size > 0 && L->gil_size > 0, "%s: a struct size is missing", who);
    expect(L->tstate_size <= 1024 * 1024, "%s: tstate_size %ld", who, L->tstate_size);

    WITHIN(runtime_interpreters_head, 8, runtime_size);
    WITHIN(runtime_tstate_current, 8, runtime_size);
    WITHIN(runtime_gil, L->gil_size, runtime_size);
    WITHIN(runtime_gc, L->gc_size, runtime_size);
    WITHIN(interp_next, 8, interp_size);
    WITHIN(interp_threads_head, 8, interp_size);
    WITHIN(interp_threads_main, 8, interp_size);
    WITHIN(interp_id, 8, interp_size);
    WITHIN(interp_modules, 8, interp_size);
    WITHIN(interp_sysdict, 8, interp_size);
    WITHIN(interp_builtins, 8, interp_size);
    WITHIN(interp_gil_ptr, 8, interp_size);
    WITHIN(interp_gc, L->gc_size, interp_size);
    WITHIN(gc_collecting, 4, gc_size);
    WITHIN(gil_last_holder, 8, gil_size);
    WITHIN(gil_locked, 4, gil_size);
    WITHIN(gil_switch_number, 8, gil_size);
    WITHIN(tstate_prev, 8, tstate_size);
    WITHIN(tstate_next, 8, tstate_size);
    WITHIN(tstate_interp, 8, tstate_size);
    WITHIN(tstate_frame, 8, tstate_size);
    WITHIN(tstate_cframe, 8, tstate_size);
    WITHIN(tstate_current_frame, 8, tstate_size);
    WITHIN(tstate_thread_id, 8, tstate_size);
    WITHIN(tstate_native_thread_id, 8, tstate_size);
    WITHIN(tstate_datastack_chunk, 8, tstate_size);
    WITHIN(tstate_datastack_top, 8, tstate_size);
    WITHIN(tstate_datastack_limit, 8, tstate_size);
    WITHIN(frame_back, 8, frame_size);
    WITHIN(frame_code, 8, frame_size);
    WITHIN(frame_lasti, 4, frame_size);
    WITHIN(frame_lineno, 4, frame_size);
    WITHIN(frame_localsplus, 8, frame_size);
    WITHIN(iframe_executable, 8, iframe_size);
    WITHIN(iframe_previous, 8, iframe_size);
    WITHIN(iframe_instr_ptr, 8, iframe_size);
    WITHIN(iframe_stackpointer, L->stackref_tagged ? 8 : 4, iframe_size);
    WITHIN(iframe_owner, 1, iframe_size);
    WITHIN(iframe_is_entry, 1, iframe_size);
    WITHIN(iframe_localsplus, 8, iframe_size);
    WITHIN(code_argcount, 4, code_size);
    WITHIN(code_nlocals, 4, code_size);
    WITHIN(code_flags, 4, code_size);
    WITHIN(code_firstlineno, 4, code_size);
    WITHIN(code_filename, 8, code_size);
    WITHIN(code_name, 8, code_size);
    WITHIN(code_qualname, 8, code_size);
    WITHIN(code_linetable, 8, code_size);
    WITHIN(code_varnames, 8, code_size);
    WITHIN(code_localsplusnames, 8, code_size);
    WITHIN(code_localspluskinds, 8, code_size);
    WITHIN(code_code, 8, code_size);
    WITHIN(code_code_adaptive, 1, code_size);
    WITHIN(unicode_length, 8, unicode_ascii_size);
    WITHIN(unicode_state, 4, unicode_ascii_size);
    expect(L->unicode_ascii_size <= L->unicode_compact_size &&
           L->unicode_compact_size <= L->unicode_data_any,
           "%s: unicode sizes not ordered ascii <= compact <= data", who);
    expect(L->ob_type == 8 && L->ob_size == 16, "%s: object header", who);
    expect(L->heaptype_cached_keys > L->type_flags, "%s: ht_cached_keys inside PyTypeObject", who);
    if (L->chunk_previous != PY_OFF_NONE)
        expect(L->chunk_previous < L->chunk_data && L->chunk_size < L->chunk_data &&
               L->chunk_top < L->chunk_data, "%s: chunk header fields after data", who);

    /* what each frame model needs */
    bool objects = L->frames == PY_FRAMES_OBJECTS;
    expect(objects == (minor <= 10), "%s: frame model", who);
    PRESENT(tstate_frame, objects);
    PRESENT(frame_size, objects);
    PRESENT(frame_back, objects);
    PRESENT(frame_code, objects);
    PRESENT(frame_lasti, objects);
    PRESENT(frame_localsplus, objects);
    PRESENT(code_varnames, objects);
    PRESENT(code_code, objects);
    PRESENT(gen_frame, objects);
    PRESENT(iframe_size, !objects);
    PRESENT(iframe_executable, !objects);
    PRESENT(iframe_previous, !objects);
    PRESENT(iframe_instr_ptr, !objects);
    PRESENT(iframe_stackpointer, !objects);
    PRESENT(iframe_owner, !objects);
    PRESENT(iframe_localsplus, !objects);
    PRESENT(iframe_is_entry, minor == 11);
    PRESENT(tstate_cframe, minor == 11 || minor == 12);
    PRESENT(cframe_current_frame, minor == 11 || minor == 12);
    PRESENT(tstate_current_frame, minor >= 13);
    PRESENT(tstate_native_thread_id, !objects);
    PRESENT(tstate_datastack_chunk, !objects);
    PRESENT(tstate_datastack_top, !objects);
    PRESENT(tstate_datastack_limit, !objects);
    PRESENT(chunk_previous, !objects);
    PRESENT(chunk_size, !objects);
    PRESENT(chunk_data, !objects);
    PRESENT(code_qualname, !objects);
    PRESENT(code_localsplusnames, !objects);
    PRESENT(code_localspluskinds, !objects);
    PRESENT(code_code_adaptive, !objects);
    PRESENT(gen_iframe, !objects);
    PRESENT(interp_threads_main, minor >= 13);
    PRESENT(runtime_tstate_current, minor <= 11);
    PRESENT(runtime_gil, minor <= 11);
    PRESENT(interp_gil_ptr, minor >= 12);
    PRESENT(runtime_gc, minor == 8);
    PRESENT(interp_gc, minor >= 9);
    PRESENT(long_tag, minor >= 12);
    expect(L->linetable == (minor <= 9 ? PY_LINETABLE_LNOTAB
                            : minor == 10 ? PY_LINETABLE_310 : PY_LINETABLE_LOCATIONS),
           "%s: line table kind %d", who, (int)L->linetable);

    /* owner enum per minor: pycore_frame.h / pycore_interpframe_structs.h */
    static const int owners[16][5] = {
        /* thread, generator, frame_object, cstack, interpreter */
        [8] = { -1, -1, -1, -1, -1 }, [9] = { -1, -1, -1, -1, -1 }, [10] = { -1, -1, -1, -1, -1 },
        [11] = { 0, 1, 2, -1, -1 },
        [12] = { 0, 1, 2, 3, -1 }, [13] = { 0, 1, 2, 3, -1 },
        [14] = { 0, 1, 2, 4, 3 },
        [15] = { 0, 1, 2, -1, 3 },  /* 3.15 has no C-stack frames */
    };
    if (minor >= 8 && minor <= 15) {
        const int *want = owners[minor];
        expect(L->owner_thread == want[0] && L->owner_generator == want[1] &&
               L->owner_frame_object == want[2] && L->owner_cstack == want[3] &&
               L->owner_interpreter == want[4],
               "%s: owner values %d,%d,%d,%d,%d", who, L->owner_thread, L->owner_generator,
               L->owner_frame_object, L->owner_cstack, L->owner_interpreter);
    }
    EXPECT_EQ(L->stackref_tagged, minor >= 14, who);
    check_version_facts(L, who, minor);
}

static void test_tables(void)
{
    expect(py_generated_layouts_count >= 8, "only %zu generated tables", py_generated_layouts_count);
    bool minor_seen[16] = { false };
    for (size_t i = 0; i < py_generated_layouts_count; i++) {
        const struct py_layout_entry *entry = &py_generated_layouts[i];
        check_table_consistency(entry);
        unsigned minor = minor_of(entry->version_min);
        if (minor < 16)
            minor_seen[minor] = true;
        if (i > 0)
            expect(py_generated_layouts[i - 1].version_max < entry->version_min,
                   "tables %zu and %zu overlap or are unsorted", i - 1, i);
        expect(py_layout_for_version(entry->version_min) == &entry->layout &&
               py_layout_for_version(entry->version_max) == &entry->layout &&
               py_layout_for_version(entry->layout.version_hex) == &entry->layout,
               "lookup of table %zu's own range", i);
    }
    for (unsigned minor = 8; minor <= 15; minor++)
        expect(minor_seen[minor], "no table for 3.%u", minor);

    expect(py_layout_for_version(0x030712f0) == NULL, "3.7 must have no table");
    expect(py_layout_for_version(0x031000f0) == NULL, "3.16 must have no table");
    expect(py_layout_for_version(0x030e00b3) == NULL, "3.14.0b3 must have no table");
    expect(py_layout_for_version(0) == NULL, "version 0 must have no table");

    /* patch-level awareness: 3.13.18 appended fields to PyThreadState */
    const struct py_layout *early_313 = py_layout_for_version(0x030d05f0);
    const struct py_layout *late_313 = py_layout_for_version(0x030d12f0);
    expect(early_313 && late_313, "3.13.5 and 3.13.18 tables");
    if (early_313 && late_313) {
        EXPECT_EQ(early_313->tstate_size, 304, "3.13.5");
        EXPECT_EQ(late_313->tstate_size, 312, "3.13.18");
        EXPECT_EQ(late_313->tstate_current_frame, early_313->tstate_current_frame, "3.13 patch levels");
    }
    /* 3.11.2 (Debian) and 3.11.7 (pyenv) share one entry */
    expect(py_layout_for_version(0x030b02f0) == py_layout_for_version(0x030b07f0), "one 3.11 table");

    /* spot values measured independently (docs/layouts.md, live checks) */
    const struct py_layout *v38 = py_layout_for_version(0x030812f0);
    const struct py_layout *v310 = py_layout_for_version(0x030a0df0);
    const struct py_layout *v311 = py_layout_for_version(0x030b07f0);
    const struct py_layout *v312 = py_layout_for_version(0x030c01f0);
    if (v38 && v310 && v311 && v312) {
        EXPECT_EQ(v38->runtime_tstate_current, 1368, "3.8");
        EXPECT_EQ(v38->runtime_gil, 1152, "3.8");
        EXPECT_EQ(v38->runtime_gc, 344, "3.8");
        EXPECT_EQ(v38->module_dict, 16, "3.8");
        EXPECT_EQ(v38->frame_lasti, 104, "3.8");
        EXPECT_EQ(v310->frame_lasti, 96, "3.10");
        EXPECT_EQ(v311->runtime_gil, 360, "3.11");
        EXPECT_EQ(v311->cframe_current_frame, 8, "3.11");
        EXPECT_EQ(v311->iframe_is_entry, 68, "3.11");
        EXPECT_EQ(v311->iframe_owner, 69, "3.11");
        EXPECT_EQ(v311->unicode_ascii_size, 48, "3.11");
        EXPECT_EQ(v311->unicode_compact_size, 72, "3.11");
        EXPECT_EQ(v312->interp_gil_ptr, 384, "3.12");
        EXPECT_EQ(v312->cframe_current_frame, 0, "3.12");
        EXPECT_EQ(v312->unicode_ascii_size, 40, "3.12");
        EXPECT_EQ(v312->long_tag, 16, "3.12");
        /* the values uncaught.c, locals.c (now frame_vars.c), func_lookup.c and primitives.c
         * kept by hand before they were generated */
        EXPECT_EQ(v38->tstate_curexc_type, 88, "3.8");
        EXPECT_EQ(v38->exc_traceback, 32, "3.8");
        EXPECT_EQ(v311->tstate_curexc_traceback, 112, "3.11");
        EXPECT_EQ(v311->exc_traceback, 40, "3.11");
        EXPECT_EQ(v312->tstate_current_exception, 96, "3.12");
        EXPECT_EQ(v38->code_cellvars, 88, "3.8");
        EXPECT_EQ(v38->code_freevars, 80, "3.8");
        EXPECT_EQ(v38->frame_valuestack, 64, "3.8");
        EXPECT_EQ(v38->frame_globals, 48, "3.8");
        EXPECT_EQ(v311->code_stacksize, 68, "3.11");
        EXPECT_EQ(v311->code_nlocalsplus, 76, "3.11");
        EXPECT_EQ(v311->iframe_globals, 8, "3.11");
        EXPECT_EQ(v312->iframe_globals, 24, "3.12");
        EXPECT_EQ(v38->func_code, 16, "3.8");
        EXPECT_EQ(v38->func_name, 64, "3.8");
        EXPECT_EQ(v38->func_qualname, 104, "3.8");
        EXPECT_EQ(v310->func_code, 48, "3.10");
        EXPECT_EQ(v310->func_name, 32, "3.10");
        EXPECT_EQ(v310->func_qualname, 40, "3.10");
        EXPECT_EQ(v38->type_base, 256, "3.8");
        EXPECT_EQ(v38->set_table, 40, "3.8");
    } else {
        expect(false, "tables for 3.8, 3.10, 3.11, 3.12");
    }
}

/* ---- _Py_DebugOffsets fixtures ----------------------------------------- */

static char fixture_dir[512];

static bool load_fixture(const char *name, unsigned char *buf, size_t len)
{
    char path[640];
    snprintf(path, sizeof path, "%s/%s", fixture_dir, name);
    FILE *in = fopen(path, "rb");
    bool ok = in && fread(buf, 1, len, in) == len;
    if (in)
        fclose(in);
    expect(ok, "cannot read fixture %s", path);
    return ok;
}

static uint64_t slot_value(const unsigned char *block, int slot)
{
    uint64_t value;
    memcpy(&value, block + 24 + (size_t)slot * 8, sizeof value);
    return value;
}

static void set_slot(unsigned char *block, int slot, uint64_t value)
{
    memcpy(block + 24 + (size_t)slot * 8, &value, sizeof value);
}

static void set_version(unsigned char *block, uint64_t version)
{
    memcpy(block + 8, &version, sizeof version);
}

/* Every offset field must match the header-generated table of the same
 * version; sizes may legitimately differ (3.15's JIT build adds fields). */
static void expect_same_offsets(const struct py_layout *d, const struct py_layout *t, const char *who)
{
    static const size_t offset_fields[] = {
#define F(f) offsetof(struct py_layout, f)
        F(runtime_interpreters_head), F(interp_next), F(interp_threads_head),
        F(interp_threads_main), F(interp_id), F(interp_modules), F(interp_sysdict),
        F(interp_builtins), F(interp_gil_ptr), F(interp_gc), F(gc_collecting), F(gil_last_holder),
        F(gil_locked), F(gil_switch_number), F(tstate_prev), F(tstate_next), F(tstate_interp),
        F(tstate_current_frame), F(tstate_thread_id), F(tstate_native_thread_id),
        F(tstate_datastack_chunk), F(tstate_datastack_top), F(tstate_datastack_limit),
        F(iframe_executable), F(iframe_previous), F(iframe_instr_ptr), F(iframe_stackpointer),
        F(iframe_owner), F(iframe_localsplus), F(code_argcount), F(code_nlocals), F(code_flags),
        F(code_firstlineno), F(code_filename), F(code_name), F(code_qualname), F(code_linetable),
        F(code_localsplusnames), F(code_localspluskinds), F(code_code_adaptive), F(ob_type),
        F(ob_size), F(type_name), F(type_basicsize), F(type_dictoffset), F(type_flags),
        F(heaptype_cached_keys), F(unicode_length), F(unicode_state), F(unicode_ascii_size),
        F(unicode_compact_size), F(unicode_data_any), F(bytes_sval), F(tuple_items),
        F(list_items), F(dict_used), F(dict_keys), F(dict_values), F(long_digits), F(long_tag),
        F(float_value), F(module_dict), F(gen_iframe), F(iframe_size), F(code_size), F(gc_size),
        F(tstate_current_exception), F(set_used), F(set_mask), F(set_table), F(exc_args),
        F(tb_frame), F(code_stacksize), F(iframe_globals), F(dictkeys_indices), F(func_name),
#undef F
    };
    for (size_t i = 0; i < sizeof offset_fields / sizeof offset_fields[0]; i++) {
        long dv, tv;
        memcpy(&dv, (const char *)d + offset_fields[i], sizeof dv);
        memcpy(&tv, (const char *)t + offset_fields[i], sizeof tv);
        expect(dv == tv, "%s: field at py_layout+%zu decoded %ld, table %ld", who,
               offset_fields[i], dv, tv);
    }
}

struct fixture_expectation {
    const char *file;
    unsigned version;
    long runtime_size, interpreters_head, interp_threads_head, interp_threads_main;
    long tstate_size, tstate_native_thread_id, tstate_datastack_chunk;
    long iframe_size, iframe_owner, iframe_localsplus, code_co_code_adaptive, tuple_items;
    int owner_cstack, owner_interpreter, stackref_tagged;
};

static const struct fixture_expectation fixtures[] = {
    { "debug_offsets_3.13.0.bin", 0x030d00f0, 283320, 632, 7344, 7352, 304, 160, 232,
      80, 70, 72, 200, 24, 3, -1, 0 },
    { "debug_offsets_3.13.bin", 0x030d12f0, 283408, 632, 7344, 7352, 312, 160, 232,
      80, 70, 72, 200, 24, 3, -1, 0 },
    { "debug_offsets_3.14.bin", 0x030e0af0, 316616, 808, 7344, 7360, 832, 160, 232,
      88, 74, 80, 208, 32, 4, 3, 1 },
    { "debug_offsets_3.15.bin", 0x030f02f0, 346568, 936, 7336, 7352, 888, 184, 256,
      88, 74, 80, 208, 32, -1, 3, 1 },
};

static void test_fixture(const struct fixture_expectation *want)
{
    unsigned char block[PY_DEBUG_OFFSETS_READ_SIZE];
    if (!load_fixture(want->file, block, sizeof block))
        return;
    const char *who = want->file;
    EXPECT_EQ(py_debug_offsets_version(block, sizeof block), want->version, who);

    struct py_layout L;
    char err[256];
    int rc = py_debug_offsets_decode(block, sizeof block, &L, err, sizeof err);
    expect(rc == 0, "%s: decode failed: %s", who, err);
    if (rc != 0)
        return;
    EXPECT_EQ(L.version_hex, want->version, who);
    EXPECT_EQ(L.frames, PY_FRAMES_INTERPRETER, who);
    EXPECT_EQ(L.linetable, PY_LINETABLE_LOCATIONS, who);
    EXPECT_EQ(L.runtime_size, want->runtime_size, who);
    EXPECT_EQ(L.runtime_interpreters_head, want->interpreters_head, who);
    EXPECT_EQ(L.interp_threads_head, want->interp_threads_head, who);
    EXPECT_EQ(L.interp_threads_main, want->interp_threads_main, who);
    EXPECT_EQ(L.interp_gil_ptr, 16, who);
    EXPECT_EQ(L.gil_last_holder, 8, who);
    EXPECT_EQ(L.gil_locked, 16, who);
    EXPECT_EQ(L.tstate_size, want->tstate_size, who);
    EXPECT_EQ(L.tstate_interp, 16, who);
    EXPECT_EQ(L.tstate_current_frame, 72, who);
    EXPECT_EQ(L.tstate_native_thread_id, want->tstate_native_thread_id, who);
    EXPECT_EQ(L.tstate_datastack_chunk, want->tstate_datastack_chunk, who);
    EXPECT_EQ(L.tstate_datastack_top, want->tstate_datastack_chunk + 8, who);
    EXPECT_EQ(L.tstate_datastack_limit, want->tstate_datastack_chunk + 16, who);
    EXPECT_EQ(L.tstate_frame, PY_OFF_NONE, who);
    EXPECT_EQ(L.tstate_cframe, PY_OFF_NONE, who);
    EXPECT_EQ(L.runtime_gil, PY_OFF_NONE, who);
    EXPECT_EQ(L.runtime_tstate_current, PY_OFF_NONE, who);
    EXPECT_EQ(L.iframe_size, want->iframe_size, who);
    EXPECT_EQ(L.iframe_executable, 0, who);
    EXPECT_EQ(L.iframe_previous, 8, who);
    EXPECT_EQ(L.iframe_instr_ptr, 56, who);
    EXPECT_EQ(L.iframe_stackpointer, 64, who);
    EXPECT_EQ(L.iframe_owner, want->iframe_owner, who);
    EXPECT_EQ(L.iframe_localsplus, want->iframe_localsplus, who);
    EXPECT_EQ(L.iframe_is_entry, PY_OFF_NONE, who);
    EXPECT_EQ(L.owner_thread, 0, who);
    EXPECT_EQ(L.owner_generator, 1, who);
    EXPECT_EQ(L.owner_frame_object, 2, who);
    EXPECT_EQ(L.owner_cstack, want->owner_cstack, who);
    EXPECT_EQ(L.owner_interpreter, want->owner_interpreter, who);
    EXPECT_EQ(L.stackref_tagged, want->stackref_tagged, who);
    EXPECT_EQ(L.chunk_size, 8, who);
    EXPECT_EQ(L.chunk_data, 24, who);
    EXPECT_EQ(L.code_filename, 112, who);
    EXPECT_EQ(L.code_qualname, 128, who);
    EXPECT_EQ(L.code_linetable, 136, who);
    EXPECT_EQ(L.code_code_adaptive, want->code_co_code_adaptive, who);
    EXPECT_EQ(L.code_nlocals, 80, who);
    EXPECT_EQ(L.ob_type, 8, who);
    EXPECT_EQ(L.ob_size, 16, who);
    EXPECT_EQ(L.type_name, 24, who);
    EXPECT_EQ(L.type_flags, 168, who);
    EXPECT_EQ(L.unicode_ascii_size, 40, who);
    EXPECT_EQ(L.unicode_compact_size, 56, who);
    EXPECT_EQ(L.tuple_items, want->tuple_items, who);
    EXPECT_EQ(L.long_tag, 16, who);
    EXPECT_EQ(L.long_digits, 24, who);
    EXPECT_EQ(L.gen_iframe, 72, who);
    EXPECT_EQ(L.module_dict, 16, who);
    expect(L.source && strstr(L.source, "_Py_DebugOffsets") != NULL, "%s: source '%s'", who, L.source);

    const struct py_layout *table = py_layout_for_version(want->version);
    expect(table != NULL, "%s: no table", who);
    if (table)
        expect_same_offsets(&L, table, who);
}

/* Decoding must fail, and the message must mention `needle`. */
static void expect_rejected(const char *who, const unsigned char *block, size_t len, const char *needle)
{
    struct py_layout L;
    memset(&L, 0x5a, sizeof L);
    struct py_layout untouched = L;
    char err[256] = "";
    int rc = py_debug_offsets_decode(block, len, &L, err, sizeof err);
    expect(rc == -1, "%s: accepted", who);
    expect(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", who, err, needle);
    expect(memcmp(&L, &untouched, sizeof L) == 0, "%s: output written on failure", who);
}

static void test_rejections(void)
{
    unsigned char original[PY_DEBUG_OFFSETS_READ_SIZE], block[PY_DEBUG_OFFSETS_READ_SIZE];
    if (!load_fixture("debug_offsets_3.14.bin", original, sizeof original))
        return;

    memcpy(block, original, sizeof block);
    block[0] = 'X';
    EXPECT_EQ(py_debug_offsets_version(block, sizeof block), 0, "bad cookie");
    expect_rejected("bad cookie", block, sizeof block, "cookie");
    expect_rejected("shorter than the header", original, 20, "fewer bytes");
    expect_rejected("NULL buffer", NULL, 0, "fewer bytes");
    /* 24 + 92 * 8 = 760 bytes for 3.14; one byte short */
    expect_rejected("truncated block", original, 759, "truncated");

    memcpy(block, original, sizeof block);
    set_version(block, 0x031000f0);
    expect_rejected("unknown minor 3.16", block, sizeof block, "3.16");
    set_version(block, 0x020712f0);
    expect_rejected("Python 2", block, sizeof block, "2.7");
    set_version(block, 0x030c01f0);
    expect_rejected("3.12 has no block", block, sizeof block, "3.12");
    set_version(block, 0x030e00b2);
    expect_rejected("pre-release", block, sizeof block, "3.14.0b2");

    memcpy(block, original, sizeof block);
    block[16] = 1;
    expect_rejected("free-threaded", block, sizeof block, "free-threaded");
    block[16] = 7;
    expect_rejected("free_threaded garbage", block, sizeof block, "free_threaded");

    /* 3.14 slots: thread_state starts at slot 19 (size), native_thread_id is
     * slot 25, code_object.filename slot 37, pyobject.size slot 47. */
    memcpy(block, original, sizeof block);
    EXPECT_EQ(slot_value(block, 19), 832, "3.14 slot 19 is thread_state.size");
    EXPECT_EQ(slot_value(block, 25), 160, "3.14 slot 25 is thread_state.native_thread_id");
    set_slot(block, 25, 832);
    expect_rejected("native_thread_id past the thread state", block, sizeof block,
                    "thread_state.native_thread_id");

    memcpy(block, original, sizeof block);
    set_slot(block, 19, 2 * 1024 * 1024);
    expect_rejected("2 MiB thread state", block, sizeof block, "thread_state.size");

    memcpy(block, original, sizeof block);
    set_slot(block, 19, UINT64_MAX);
    expect_rejected("thread state size ~0", block, sizeof block, "thread_state.size");

    memcpy(block, original, sizeof block);
    EXPECT_EQ(slot_value(block, 37), 112, "3.14 slot 37 is code_object.filename");
    set_slot(block, 37, 113);
    expect_rejected("misaligned co_filename", block, sizeof block, "aligned");

    memcpy(block, original, sizeof block);
    EXPECT_EQ(slot_value(block, 47), 16, "3.14 slot 47 is pyobject.size");
    set_slot(block, 47, 32);
    set_slot(block, 48, 24);
    expect_rejected("Py_TRACE_REFS object header", block, sizeof block, "object header");

    /* 3.13 block: interpreter_frame.owner is slot 30, frame size slot 25 */
    unsigned char block313[PY_DEBUG_OFFSETS_READ_SIZE];
    if (load_fixture("debug_offsets_3.13.bin", block313, sizeof block313)) {
        EXPECT_EQ(slot_value(block313, 25), 80, "3.13 slot 25 is interpreter_frame.size");
        EXPECT_EQ(slot_value(block313, 30), 70, "3.13 slot 30 is interpreter_frame.owner");
        set_slot(block313, 30, 200);
        expect_rejected("3.13 owner outside the frame", block313, sizeof block313,
                        "interpreter_frame.owner");
    }

    /* 3.15 block: heap_type_object.ht_cached_keys is slot 64 */
    unsigned char block315[PY_DEBUG_OFFSETS_READ_SIZE];
    if (load_fixture("debug_offsets_3.15.bin", block315, sizeof block315)) {
        EXPECT_EQ(slot_value(block315, 64), 888, "3.15 slot 64 is heap_type_object.ht_cached_keys");
        set_slot(block315, 64, 100000);
        expect_rejected("3.15 ht_cached_keys outside the heap type", block315, sizeof block315,
                        "ht_cached_keys");
    }

    /* a tiny or missing error buffer must be safe */
    memcpy(block, original, sizeof block);
    block[16] = 1;
    struct py_layout L;
    char tiny[8];
    expect(py_debug_offsets_decode(block, sizeof block, &L, tiny, sizeof tiny) == -1 &&
           strlen(tiny) < sizeof tiny, "tiny error buffer");
    expect(py_debug_offsets_decode(block, sizeof block, &L, NULL, 0) == -1, "NULL error buffer");
}

/* ---- the AsyncioDebug section (3.14+) ----------------------------------- */

/* The 13 fields as the _asyncio of Debian's 3.14.10 exports them (a LIVE
 * dump of its AsyncioDebug section; asyncio-internals.md section 1). */
static void asyncio_block(uint64_t v[13])
{
    const uint64_t live[13] = {168, 136, 96, 108, 109, 128, 152, 225864, 10880,
                               936, 864, 872, 880};
    memcpy(v, live, sizeof live);
}

static void test_asyncio_debug(void)
{
    const struct py_layout *L = py_layout_for_version(0x030e0af0);
    expect(L != NULL, "3.14.10 has a table");
    if (!L)
        return;
    uint64_t v[13];
    char err[256] = "";
    struct py_asyncio_layout A = L->asyncio;
    asyncio_block(v);
    /* the thread and interpreter fields are taken as the section has them */
    v[12] = 888;
    expect(py_asyncio_debug_decode((const unsigned char *)v, sizeof v, &A, err, sizeof err) == 0,
           "the live 3.14.10 section agrees with the tables: %s", err);
    EXPECT_EQ(A.tstate_running_loop, 864, "3.14 section");
    EXPECT_EQ(A.tstate_running_task, 872, "3.14 section");
    EXPECT_EQ(A.tstate_tasks_head, 888, "3.14 section");
    EXPECT_EQ(A.interp_tasks_head, 10880, "3.14 section");
    EXPECT_EQ(A.task_coro, L->asyncio.task_coro, "3.14 section");

    /* a Task whose coroutine moved: refused, the layout left alone */
    A = L->asyncio;
    asyncio_block(v);
    v[5] = 136;
    expect(py_asyncio_debug_decode((const unsigned char *)v, sizeof v, &A, err, sizeof err) != 0 &&
           strstr(err, "task_coro as 136") != NULL, "a moved task_coro is refused: %s", err);
    EXPECT_EQ(A.tstate_tasks_head, L->asyncio.tstate_tasks_head, "refused section");

    /* the 9-field block of an early 3.14 development copy */
    asyncio_block(v);
    expect(py_asyncio_debug_decode((const unsigned char *)v, 9 * 8, &A, err, sizeof err) != 0 &&
           strstr(err, "fewer than") != NULL, "a short section is refused: %s", err);

    /* an offset past the end of its struct */
    asyncio_block(v);
    v[11] = 936;
    expect(py_asyncio_debug_decode((const unsigned char *)v, sizeof v, &A, err, sizeof err) != 0 &&
           strstr(err, "asyncio_running_task") != NULL, "an offset outside its struct: %s", err);
    asyncio_block(v);
    v[0] = (uint64_t)1 << 40;
    expect(py_asyncio_debug_decode((const unsigned char *)v, sizeof v, &A, err, sizeof err) != 0,
           "an implausible size is refused: %s", err);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        snprintf(fixture_dir, sizeof fixture_dir, "%s", argv[1]);
    } else {
        /* default: fixtures/ next to this source file, as compiled */
        snprintf(fixture_dir, sizeof fixture_dir, "%s", __FILE__);
        char *slash = strrchr(fixture_dir, '/');
        if (slash)
            snprintf(slash + 1, sizeof fixture_dir - (size_t)(slash + 1 - fixture_dir), "fixtures");
        else
            snprintf(fixture_dir, sizeof fixture_dir, "fixtures");
    }

    test_tables();
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
        test_fixture(&fixtures[i]);
    test_rejections();
    test_asyncio_debug();

    printf("layouts: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
