/* Decodes the _Py_DebugOffsets block that CPython 3.13+ keeps at the start of
 * _PyRuntime into a struct py_layout, and validates every value before pyscope
 * trusts it. Fields the block lacks come from the header-generated tables. */
#include "python/debug_offsets.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* cookie[8], uint64_t version, uint64_t free_threaded */
#define HEADER_SIZE 24
#define COOKIE "xdebugpy"
#define COOKIE_LEN 8

#define KIB 1024L
#define MIB (1024L * 1024L)

/* The uint64_t slots after the header, named "group.field" in the order the
 * struct declares them. Slots pyscope never reads are still listed, because
 * they fix the positions of the ones it does read. */

/* 3.13: struct _Py_DebugOffsets in Include/internal/pycore_runtime.h; the
 * same in pyenv 3.13.0 and Debian 3.13.18 headers (70 slots, 584 bytes). */
static const char *const slots_313[] = {
    "runtime_state.size", "runtime_state.finalizing", "runtime_state.interpreters_head",
    "interpreter_state.size", "interpreter_state.id", "interpreter_state.next",
    "interpreter_state.threads_head", "interpreter_state.gc",
    "interpreter_state.imports_modules", "interpreter_state.sysdict",
    "interpreter_state.builtins", "interpreter_state.ceval_gil",
    "interpreter_state.gil_runtime_state", "interpreter_state.gil_runtime_state_enabled",
    "interpreter_state.gil_runtime_state_locked", "interpreter_state.gil_runtime_state_holder",
    "thread_state.size", "thread_state.prev", "thread_state.next", "thread_state.interp",
    "thread_state.current_frame", "thread_state.thread_id", "thread_state.native_thread_id",
    "thread_state.datastack_chunk", "thread_state.status",
    "interpreter_frame.size", "interpreter_frame.previous", "interpreter_frame.executable",
    "interpreter_frame.instr_ptr", "interpreter_frame.localsplus", "interpreter_frame.owner",
    "code_object.size", "code_object.filename", "code_object.name", "code_object.qualname",
    "code_object.linetable", "code_object.firstlineno", "code_object.argcount",
    "code_object.localsplusnames", "code_object.localspluskinds", "code_object.co_code_adaptive",
    "pyobject.size", "pyobject.ob_type",
    "type_object.size", "type_object.tp_name", "type_object.tp_repr", "type_object.tp_flags",
    "tuple_object.size", "tuple_object.ob_item", "tuple_object.ob_size",
    "list_object.size", "list_object.ob_item", "list_object.ob_size",
    "dict_object.size", "dict_object.ma_keys", "dict_object.ma_values",
    "float_object.size", "float_object.ob_fval",
    "long_object.size", "long_object.lv_tag", "long_object.ob_digit",
    "bytes_object.size", "bytes_object.ob_size", "bytes_object.ob_sval",
    "unicode_object.size", "unicode_object.state", "unicode_object.length",
    "unicode_object.asciiobject_size",
    "gc.size", "gc.collecting",
};

/* 3.14: Include/internal/pycore_debug_offsets.h of 3.14.10 (Debian
 * libpython3.14-dev); 92 slots, 760 bytes, as also described for 3.14.0. */
static const char *const slots_314[] = {
    "runtime_state.size", "runtime_state.finalizing", "runtime_state.interpreters_head",
    "interpreter_state.size", "interpreter_state.id", "interpreter_state.next",
    "interpreter_state.threads_head", "interpreter_state.threads_main", "interpreter_state.gc",
    "interpreter_state.imports_modules", "interpreter_state.sysdict",
    "interpreter_state.builtins", "interpreter_state.ceval_gil",
    "interpreter_state.gil_runtime_state", "interpreter_state.gil_runtime_state_enabled",
    "interpreter_state.gil_runtime_state_locked", "interpreter_state.gil_runtime_state_holder",
    "interpreter_state.code_object_generation", "interpreter_state.tlbc_generation",
    "thread_state.size", "thread_state.prev", "thread_state.next", "thread_state.interp",
    "thread_state.current_frame", "thread_state.thread_id", "thread_state.native_thread_id",
    "thread_state.datastack_chunk", "thread_state.status",
    "interpreter_frame.size", "interpreter_frame.previous", "interpreter_frame.executable",
    "interpreter_frame.instr_ptr", "interpreter_frame.localsplus", "interpreter_frame.owner",
    "interpreter_frame.stackpointer", "interpreter_frame.tlbc_index",
    "code_object.size", "code_object.filename", "code_object.name", "code_object.qualname",
    "code_object.linetable", "code_object.firstlineno", "code_object.argcount",
    "code_object.localsplusnames", "code_object.localspluskinds", "code_object.co_code_adaptive",
    "code_object.co_tlbc",
    "pyobject.size", "pyobject.ob_type",
    "type_object.size", "type_object.tp_name", "type_object.tp_repr", "type_object.tp_flags",
    "tuple_object.size", "tuple_object.ob_item", "tuple_object.ob_size",
    "list_object.size", "list_object.ob_item", "list_object.ob_size",
    "set_object.size", "set_object.used", "set_object.table", "set_object.mask",
    "dict_object.size", "dict_object.ma_keys", "dict_object.ma_values",
    "float_object.size", "float_object.ob_fval",
    "long_object.size", "long_object.lv_tag", "long_object.ob_digit",
    "bytes_object.size", "bytes_object.ob_size", "bytes_object.ob_sval",
    "unicode_object.size", "unicode_object.state", "unicode_object.length",
    "unicode_object.asciiobject_size",
    "gc.size", "gc.collecting",
    "gen_object.size", "gen_object.gi_name", "gen_object.gi_iframe", "gen_object.gi_frame_state",
    "llist_node.next", "llist_node.prev",
    "debugger_support.eval_breaker", "debugger_support.remote_debugger_support",
    "debugger_support.remote_debugging_enabled", "debugger_support.debugger_pending_call",
    "debugger_support.debugger_script_path", "debugger_support.debugger_script_path_size",
};

/* 3.15: Include/internal/pycore_debug_offsets.h of 3.15.2 (Debian
 * libpython3.15-dev); 108 slots, 888 bytes. */
static const char *const slots_315[] = {
    "runtime_state.size", "runtime_state.finalizing", "runtime_state.interpreters_head",
    "interpreter_state.size", "interpreter_state.id", "interpreter_state.next",
    "interpreter_state.threads_head", "interpreter_state.threads_main", "interpreter_state.gc",
    "interpreter_state.imports_modules", "interpreter_state.sysdict",
    "interpreter_state.builtins", "interpreter_state.ceval_gil",
    "interpreter_state.gil_runtime_state", "interpreter_state.gil_runtime_state_enabled",
    "interpreter_state.gil_runtime_state_locked", "interpreter_state.gil_runtime_state_holder",
    "interpreter_state.code_object_generation", "interpreter_state.tlbc_generation",
    "thread_state.size", "thread_state.prev", "thread_state.next", "thread_state.interp",
    "thread_state.current_frame", "thread_state.base_frame", "thread_state.last_profiled_frame",
    "thread_state.last_profiled_frame_seq", "thread_state.thread_id",
    "thread_state.native_thread_id", "thread_state.datastack_chunk", "thread_state.status",
    "thread_state.holds_gil", "thread_state.gil_requested", "thread_state.current_exception",
    "thread_state.exc_state",
    "err_stackitem.exc_value",
    "interpreter_frame.size", "interpreter_frame.previous", "interpreter_frame.executable",
    "interpreter_frame.instr_ptr", "interpreter_frame.localsplus", "interpreter_frame.owner",
    "interpreter_frame.stackpointer", "interpreter_frame.tlbc_index",
    "code_object.size", "code_object.filename", "code_object.name", "code_object.qualname",
    "code_object.linetable", "code_object.firstlineno", "code_object.argcount",
    "code_object.localsplusnames", "code_object.localspluskinds", "code_object.co_code_adaptive",
    "code_object.co_tlbc",
    "pyobject.size", "pyobject.ob_type",
    "type_object.size", "type_object.tp_name", "type_object.tp_repr", "type_object.tp_flags",
    "type_object.tp_basicsize", "type_object.tp_dictoffset",
    "heap_type_object.size", "heap_type_object.ht_cached_keys",
    "tuple_object.size", "tuple_object.ob_item", "tuple_object.ob_size",
    "list_object.size", "list_object.ob_item", "list_object.ob_size",
    "set_object.size", "set_object.used", "set_object.table", "set_object.mask",
    "dict_object.size", "dict_object.ma_keys", "dict_object.ma_values",
    "float_object.size", "float_object.ob_fval",
    "long_object.size", "long_object.lv_tag", "long_object.ob_digit",
    "bytes_object.size", "bytes_object.ob_size", "bytes_object.ob_sval",
    "unicode_object.size", "unicode_object.state", "unicode_object.length",
    "unicode_object.asciiobject_size", "unicode_object.compactunicodeobject_size",
    "gc.size", "gc.collecting", "gc.frame", "gc.generation_stats_size", "gc.generation_stats",
    "gen_object.size", "gen_object.gi_name", "gen_object.gi_iframe", "gen_object.gi_frame_state",
    "llist_node.next", "llist_node.prev",
    "debugger_support.eval_breaker", "debugger_support.remote_debugger_support",
    "debugger_support.remote_debugging_enabled", "debugger_support.debugger_pending_call",
    "debugger_support.debugger_script_path", "debugger_support.debugger_script_path_size",
};

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

struct block_schema {
    unsigned minor;
    const char *const *slots;
    size_t slot_count;
    const char *source;     /* becomes py_layout.source */
};

static const struct block_schema schemas[] = {
    { 13, slots_313, COUNT_OF(slots_313),
      "target's _Py_DebugOffsets (3.13 block) + 3.13 header facts" },
    { 14, slots_314, COUNT_OF(slots_314),
      "target's _Py_DebugOffsets (3.14 block) + 3.14 header facts" },
    { 15, slots_315, COUNT_OF(slots_315),
      "target's _Py_DebugOffsets (3.15 block) + 3.15 header facts" },
};

/* Anything bigger than this is not an offset but garbage; it also keeps the
 * uint64_t -> long conversion exact. */
#define MAX_PLAUSIBLE_VALUE (64 * MIB)

struct decoder {
    const unsigned char *buf;
    const struct block_schema *schema;
    char version_text[32];
    char *err;
    size_t errlen;
    bool failed;
};

static void fail(struct decoder *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail(struct decoder *d, const char *fmt, ...)
{
    if (d->failed)
        return;     /* the first problem is the one worth reporting */
    d->failed = true;
    if (!d->err || d->errlen == 0)
        return;
    int used = snprintf(d->err, d->errlen, "_Py_DebugOffsets of CPython %s: ", d->version_text);
    if (used < 0 || (size_t)used >= d->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err + used, d->errlen - (size_t)used, fmt, ap);
    va_end(ap);
}

static uint64_t load_u64(const unsigned char *p)
{
    /* The target is x86-64 like us, so the block's byte order is ours. */
    uint64_t value;
    memcpy(&value, p, sizeof value);
    return value;
}

static long slot_index(const struct block_schema *schema, const char *name)
{
    for (size_t i = 0; i < schema->slot_count; i++)
        if (strcmp(schema->slots[i], name) == 0)
            return (long)i;
    return -1;
}

static bool has_slot(const struct decoder *d, const char *name)
{
    return slot_index(d->schema, name) >= 0;
}

static long slot(struct decoder *d, const char *name)
{
    long index = slot_index(d->schema, name);
    if (index < 0) {
        fail(d, "pyscope bug: no slot %s in the 3.%u block", name, d->schema->minor);
        return PY_OFF_NONE;
    }
    uint64_t value = load_u64(d->buf + HEADER_SIZE + (size_t)index * 8);
    if (value > (uint64_t)MAX_PLAUSIBLE_VALUE) {
        fail(d, "%s = %llu is not a plausible offset or size", name, (unsigned long long)value);
        return PY_OFF_NONE;
    }
    return (long)value;
}

static void format_version(unsigned version, char *text, size_t len)
{
    unsigned level = (version >> 4) & 0xf;
    unsigned serial = version & 0xf;
    int used = snprintf(text, len, "%u.%u.%u", version >> 24, (version >> 16) & 0xff,
                        (version >> 8) & 0xff);
    if (used < 0 || (size_t)used >= len || level == 0xf)
        return;
    const char *tag = level == 0xa ? "a" : level == 0xb ? "b" : level == 0xc ? "rc" : "?";
    snprintf(text + used, len - (size_t)used, "%s%u", tag, serial);
}

unsigned py_debug_offsets_version(const unsigned char *buf, size_t len)
{
    if (!buf || len < HEADER_SIZE || memcmp(buf, COOKIE, COOKIE_LEN) != 0)
        return 0;
    uint64_t version = load_u64(buf + 8);
    if (version == 0 || version > UINT32_MAX)
        return 0;
    return (unsigned)version;
}

/* Facts are offsets the block does not carry. They are trusted only while the
 * block agrees with the same table on the fields both have for that struct;
 * otherwise the struct moved in a patch release we have no headers for, and
 * the fact is dropped rather than guessed. */
static void keep_fact_if(bool anchors_agree, long *field)
{
    if (!anchors_agree)
        *field = PY_OFF_NONE;
}

/* Values the block carries that have no home in struct py_layout but are
 * needed to validate it. */
struct block_extras {
    long pyobject_size, type_size, heap_type_size, tuple_size, list_size, dict_size;
    long float_size, long_size, bytes_size, unicode_size, gen_size;
    long gil_base;          /* offsetof(PyInterpreterState, _gil) */
};

static void decode_fields(struct decoder *d, const struct py_layout *facts, struct py_layout *out,
                          struct block_extras *x)
{
    *out = *facts;
    out->source = d->schema->source;

    out->runtime_size = slot(d, "runtime_state.size");
    out->runtime_interpreters_head = slot(d, "runtime_state.interpreters_head");
    out->runtime_tstate_current = PY_OFF_NONE;
    out->runtime_gil = PY_OFF_NONE;
    out->runtime_gc = PY_OFF_NONE;

    out->interp_size = slot(d, "interpreter_state.size");
    out->interp_next = slot(d, "interpreter_state.next");
    out->interp_threads_head = slot(d, "interpreter_state.threads_head");
    if (has_slot(d, "interpreter_state.threads_main")) {
        out->interp_threads_main = slot(d, "interpreter_state.threads_main");
    } else {
        /* 3.13's block lacks it; in struct pythreads `main` follows `head`. */
        long delta = facts->interp_threads_main - facts->interp_threads_head;
        out->interp_threads_main = out->interp_threads_head + delta;
    }
    out->interp_id = slot(d, "interpreter_state.id");
    out->interp_modules = slot(d, "interpreter_state.imports_modules");
    out->interp_sysdict = slot(d, "interpreter_state.sysdict");
    out->interp_builtins = slot(d, "interpreter_state.builtins");
    out->interp_gil_ptr = slot(d, "interpreter_state.ceval_gil");
    out->interp_gc = slot(d, "interpreter_state.gc");

    out->gc_size = slot(d, "gc.size");
    out->gc_collecting = slot(d, "gc.collecting");

    /* The block gives interp->_gil and its members as offsets into the
     * interpreter; the layout wants them relative to the GIL struct, whose
     * size and switch_number only the headers know. */
    x->gil_base = slot(d, "interpreter_state.gil_runtime_state");
    out->gil_locked = slot(d, "interpreter_state.gil_runtime_state_locked") - x->gil_base;
    out->gil_last_holder = slot(d, "interpreter_state.gil_runtime_state_holder") - x->gil_base;
    bool gil_agrees = out->gil_locked == facts->gil_locked &&
                      out->gil_last_holder == facts->gil_last_holder;
    keep_fact_if(gil_agrees, &out->gil_switch_number);

    out->tstate_size = slot(d, "thread_state.size");
    out->tstate_prev = slot(d, "thread_state.prev");
    out->tstate_next = slot(d, "thread_state.next");
    out->tstate_interp = slot(d, "thread_state.interp");
    out->tstate_current_frame = slot(d, "thread_state.current_frame");
    out->tstate_thread_id = slot(d, "thread_state.thread_id");
    out->tstate_native_thread_id = slot(d, "thread_state.native_thread_id");
    out->tstate_datastack_chunk = slot(d, "thread_state.datastack_chunk");
    /* datastack_top and datastack_limit have followed datastack_chunk
     * directly since 3.11; keep that relation instead of absolute facts. */
    out->tstate_datastack_top = out->tstate_datastack_chunk +
        (facts->tstate_datastack_top - facts->tstate_datastack_chunk);
    out->tstate_datastack_limit = out->tstate_datastack_chunk +
        (facts->tstate_datastack_limit - facts->tstate_datastack_chunk);

    out->iframe_size = slot(d, "interpreter_frame.size");
    out->iframe_previous = slot(d, "interpreter_frame.previous");
    out->iframe_executable = slot(d, "interpreter_frame.executable");
    out->iframe_instr_ptr = slot(d, "interpreter_frame.instr_ptr");
    out->iframe_localsplus = slot(d, "interpreter_frame.localsplus");
    out->iframe_owner = slot(d, "interpreter_frame.owner");
    bool frame_agrees = out->iframe_size == facts->iframe_size &&
                        out->iframe_previous == facts->iframe_previous &&
                        out->iframe_executable == facts->iframe_executable &&
                        out->iframe_instr_ptr == facts->iframe_instr_ptr &&
                        out->iframe_localsplus == facts->iframe_localsplus &&
                        out->iframe_owner == facts->iframe_owner;
    if (has_slot(d, "interpreter_frame.stackpointer"))
        out->iframe_stackpointer = slot(d, "interpreter_frame.stackpointer");
    else
        keep_fact_if(frame_agrees, &out->iframe_stackpointer);
    keep_fact_if(frame_agrees, &out->iframe_funcobj);

    out->code_size = slot(d, "code_object.size");
    out->code_filename = slot(d, "code_object.filename");
    out->code_name = slot(d, "code_object.name");
    out->code_qualname = slot(d, "code_object.qualname");
    out->code_linetable = slot(d, "code_object.linetable");
    out->code_firstlineno = slot(d, "code_object.firstlineno");
    out->code_argcount = slot(d, "code_object.argcount");
    out->code_localsplusnames = slot(d, "code_object.localsplusnames");
    out->code_localspluskinds = slot(d, "code_object.localspluskinds");
    out->code_code_adaptive = slot(d, "code_object.co_code_adaptive");
    bool code_agrees = out->code_size == facts->code_size &&
                       out->code_filename == facts->code_filename &&
                       out->code_name == facts->code_name &&
                       out->code_qualname == facts->code_qualname &&
                       out->code_linetable == facts->code_linetable &&
                       out->code_firstlineno == facts->code_firstlineno &&
                       out->code_argcount == facts->code_argcount &&
                       out->code_localsplusnames == facts->code_localsplusnames &&
                       out->code_localspluskinds == facts->code_localspluskinds &&
                       out->code_code_adaptive == facts->code_code_adaptive;
    keep_fact_if(code_agrees, &out->code_nlocals);
    keep_fact_if(code_agrees, &out->code_flags);
    keep_fact_if(code_agrees, &out->code_consts);
    keep_fact_if(code_agrees, &out->code_entry_read);

    x->pyobject_size = slot(d, "pyobject.size");
    out->ob_type = slot(d, "pyobject.ob_type");
    x->tuple_size = slot(d, "tuple_object.size");
    out->ob_size = slot(d, "tuple_object.ob_size");
    out->tuple_items = slot(d, "tuple_object.ob_item");
    x->list_size = slot(d, "list_object.size");
    out->list_items = slot(d, "list_object.ob_item");

    x->type_size = slot(d, "type_object.size");
    out->type_name = slot(d, "type_object.tp_name");
    out->type_flags = slot(d, "type_object.tp_flags");
    bool type_agrees = out->type_name == facts->type_name && out->type_flags == facts->type_flags;
    if (has_slot(d, "type_object.tp_basicsize")) {
        out->type_basicsize = slot(d, "type_object.tp_basicsize");
        out->type_dictoffset = slot(d, "type_object.tp_dictoffset");
    } else {
        keep_fact_if(type_agrees, &out->type_basicsize);
        keep_fact_if(type_agrees, &out->type_dictoffset);
    }
    x->heap_type_size = PY_OFF_NONE;
    if (has_slot(d, "heap_type_object.ht_cached_keys")) {
        x->heap_type_size = slot(d, "heap_type_object.size");
        out->heaptype_cached_keys = slot(d, "heap_type_object.ht_cached_keys");
    } else {
        keep_fact_if(type_agrees, &out->heaptype_cached_keys);
    }

    x->unicode_size = slot(d, "unicode_object.size");
    out->unicode_state = slot(d, "unicode_object.state");
    out->unicode_length = slot(d, "unicode_object.length");
    out->unicode_ascii_size = slot(d, "unicode_object.asciiobject_size");
    bool unicode_agrees = out->unicode_state == facts->unicode_state &&
                          out->unicode_length == facts->unicode_length &&
                          out->unicode_ascii_size == facts->unicode_ascii_size;
    if (has_slot(d, "unicode_object.compactunicodeobject_size")) {
        out->unicode_compact_size = slot(d, "unicode_object.compactunicodeobject_size");
        unicode_agrees = unicode_agrees && out->unicode_compact_size == facts->unicode_compact_size;
    } else {
        keep_fact_if(unicode_agrees, &out->unicode_compact_size);
    }
    keep_fact_if(unicode_agrees, &out->unicode_data_any);

    x->bytes_size = slot(d, "bytes_object.size");
    out->bytes_sval = slot(d, "bytes_object.ob_sval");
    x->dict_size = slot(d, "dict_object.size");
    out->dict_keys = slot(d, "dict_object.ma_keys");
    out->dict_values = slot(d, "dict_object.ma_values");
    keep_fact_if(out->dict_keys == facts->dict_keys && out->dict_values == facts->dict_values,
                 &out->dict_used);
    x->float_size = slot(d, "float_object.size");
    out->float_value = slot(d, "float_object.ob_fval");
    x->long_size = slot(d, "long_object.size");
    out->long_tag = slot(d, "long_object.lv_tag");
    out->long_digits = slot(d, "long_object.ob_digit");

    x->gen_size = PY_OFF_NONE;
    if (has_slot(d, "gen_object.gi_iframe")) {
        x->gen_size = slot(d, "gen_object.size");
        out->gen_iframe = slot(d, "gen_object.gi_iframe");
    }
    /* The pending exception and sets, where the block carries them. */
    if (has_slot(d, "thread_state.current_exception"))
        out->tstate_current_exception = slot(d, "thread_state.current_exception");
    if (has_slot(d, "set_object.used")) {
        out->set_used = slot(d, "set_object.used");
        out->set_mask = slot(d, "set_object.mask");
        out->set_table = slot(d, "set_object.table");
    }
    /* module_dict, the chunk fields, gil_size, the owner values and the rest
     * of the exception, frame-variable, callable and dict-keys fields are
     * header facts for every 3.13+ minor (see the generated tables). */
}

struct bounds_check {
    const char *name;
    long value;
    long width;         /* bytes the field occupies (1 for trailing arrays) */
    long container;     /* size of the struct it lies in */
    const char *container_name;
};

static void check_size(struct decoder *d, const char *name, long size, long min, long max)
{
    if (size == PY_OFF_NONE)
        return;
    if (size < min || size > max)
        fail(d, "%s = %ld is outside the plausible range %ld..%ld", name, size, min, max);
}

static void check_within(struct decoder *d, const struct bounds_check *c)
{
    if (c->value == PY_OFF_NONE || c->container == PY_OFF_NONE)
        return;
    if (c->value < 0 || c->value + c->width > c->container) {
        fail(d, "%s = %ld lies outside %s (size %ld)", c->name, c->value, c->container_name,
             c->container);
        return;
    }
    long alignment = c->width >= 8 ? 8 : c->width;
    if (alignment > 1 && c->value % alignment != 0)
        fail(d, "%s = %ld is not %ld-byte aligned", c->name, c->value, alignment);
}

static void validate(struct decoder *d, const struct py_layout *l, const struct block_extras *x)
{
    check_size(d, "runtime_state.size", l->runtime_size, 4 * KIB, 16 * MIB);
    check_size(d, "interpreter_state.size", l->interp_size, 4 * KIB, 16 * MIB);
    check_size(d, "thread_state.size", l->tstate_size, 64, MIB);
    check_size(d, "interpreter_frame.size", l->iframe_size, 32, KIB);
    check_size(d, "code_object.size", l->code_size, 64, 4 * KIB);
    check_size(d, "gc.size", l->gc_size, 16, MIB);
    check_size(d, "type_object.size", x->type_size, 128, 4 * KIB);
    check_size(d, "heap_type_object.size", x->heap_type_size, x->type_size, 8 * KIB);
    check_size(d, "tuple_object.size", x->tuple_size, 16, 4 * KIB);
    check_size(d, "list_object.size", x->list_size, 16, 4 * KIB);
    check_size(d, "dict_object.size", x->dict_size, 16, 4 * KIB);
    check_size(d, "float_object.size", x->float_size, 16, 4 * KIB);
    check_size(d, "long_object.size", x->long_size, 16, 4 * KIB);
    check_size(d, "bytes_object.size", x->bytes_size, 16, 4 * KIB);
    check_size(d, "unicode_object.size", x->unicode_size, 16, 4 * KIB);
    check_size(d, "gen_object.size", x->gen_size, 16, 4 * KIB);
    if (d->failed)
        return;

    /* Every other offset pyscope reads assumes the plain 16-byte header;
     * Py_TRACE_REFS and free-threaded builds change it. */
    if (x->pyobject_size != 16 || l->ob_type != 8) {
        fail(d, "PyObject is %ld bytes with ob_type at %ld; only the standard 16-byte "
             "object header is supported", x->pyobject_size, l->ob_type);
        return;
    }

    const char *runtime = "_PyRuntimeState", *interp = "PyInterpreterState";
    const char *tstate = "PyThreadState", *frame = "_PyInterpreterFrame";
    const char *code = "PyCodeObject", *gil = "struct _gil_runtime_state";
    const struct bounds_check checks[] = {
        { "runtime_state.interpreters_head", l->runtime_interpreters_head, 8, l->runtime_size, runtime },
        { "interpreter_state.next", l->interp_next, 8, l->interp_size, interp },
        { "interpreter_state.threads_head", l->interp_threads_head, 8, l->interp_size, interp },
        { "interpreter_state.threads_main", l->interp_threads_main, 8, l->interp_size, interp },
        { "interpreter_state.id", l->interp_id, 8, l->interp_size, interp },
        { "interpreter_state.imports_modules", l->interp_modules, 8, l->interp_size, interp },
        { "interpreter_state.sysdict", l->interp_sysdict, 8, l->interp_size, interp },
        { "interpreter_state.builtins", l->interp_builtins, 8, l->interp_size, interp },
        { "interpreter_state.ceval_gil", l->interp_gil_ptr, 8, l->interp_size, interp },
        { "interpreter_state.gc", l->interp_gc, l->gc_size, l->interp_size, interp },
        { "interpreter_state.gil_runtime_state", x->gil_base, l->gil_size, l->interp_size, interp },
        { "gc.collecting", l->gc_collecting, 4, l->gc_size, "struct _gc_runtime_state" },
        { "gil_runtime_state_locked", l->gil_locked, 4, l->gil_size, gil },
        { "gil_runtime_state_holder", l->gil_last_holder, 8, l->gil_size, gil },
        { "gil switch_number", l->gil_switch_number, 8, l->gil_size, gil },
        { "thread_state.prev", l->tstate_prev, 8, l->tstate_size, tstate },
        { "thread_state.next", l->tstate_next, 8, l->tstate_size, tstate },
        { "thread_state.interp", l->tstate_interp, 8, l->tstate_size, tstate },
        { "thread_state.current_frame", l->tstate_current_frame, 8, l->tstate_size, tstate },
        { "thread_state.thread_id", l->tstate_thread_id, 8, l->tstate_size, tstate },
        { "thread_state.native_thread_id", l->tstate_native_thread_id, 8, l->tstate_size, tstate },
        { "thread_state.datastack_chunk", l->tstate_datastack_chunk, 8, l->tstate_size, tstate },
        { "datastack_top", l->tstate_datastack_top, 8, l->tstate_size, tstate },
        { "datastack_limit", l->tstate_datastack_limit, 8, l->tstate_size, tstate },
        { "thread_state.current_exception", l->tstate_current_exception, 8, l->tstate_size, tstate },
        { "interpreter_frame.previous", l->iframe_previous, 8, l->iframe_size, frame },
        { "interpreter_frame.executable", l->iframe_executable, 8, l->iframe_size, frame },
        { "interpreter_frame.instr_ptr", l->iframe_instr_ptr, 8, l->iframe_size, frame },
        /* an int stacktop up to 3.13, a pointer from 3.14 */
        { "interpreter_frame.stackpointer", l->iframe_stackpointer,
          l->stackref_tagged ? 8 : 4, l->iframe_size, frame },
        { "interpreter_frame.owner", l->iframe_owner, 1, l->iframe_size, frame },
        { "interpreter_frame.localsplus", l->iframe_localsplus, 8, l->iframe_size, frame },
        { "code_object.argcount", l->code_argcount, 4, l->code_size, code },
        { "co_nlocals", l->code_nlocals, 4, l->code_size, code },
        { "co_flags", l->code_flags, 4, l->code_size, code },
        { "code_object.firstlineno", l->code_firstlineno, 4, l->code_size, code },
        { "code_object.filename", l->code_filename, 8, l->code_size, code },
        { "code_object.name", l->code_name, 8, l->code_size, code },
        { "code_object.qualname", l->code_qualname, 8, l->code_size, code },
        { "code_object.linetable", l->code_linetable, 8, l->code_size, code },
        { "code_object.localsplusnames", l->code_localsplusnames, 8, l->code_size, code },
        { "code_object.localspluskinds", l->code_localspluskinds, 8, l->code_size, code },
        { "code_object.co_code_adaptive", l->code_code_adaptive, 1, l->code_size, code },
        { "tuple_object.ob_size", l->ob_size, 8, x->tuple_size, "PyTupleObject" },
        { "tuple_object.ob_item", l->tuple_items, 8, x->tuple_size, "PyTupleObject" },
        { "list_object.ob_item", l->list_items, 8, x->list_size, "PyListObject" },
        { "type_object.tp_name", l->type_name, 8, x->type_size, "PyTypeObject" },
        { "type_object.tp_flags", l->type_flags, 8, x->type_size, "PyTypeObject" },
        { "tp_basicsize", l->type_basicsize, 8, x->type_size, "PyTypeObject" },
        { "tp_dictoffset", l->type_dictoffset, 8, x->type_size, "PyTypeObject" },
        { "ht_cached_keys", l->heaptype_cached_keys, 8, x->heap_type_size, "PyHeapTypeObject" },
        { "unicode_object.length", l->unicode_length, 8, x->unicode_size, "PyUnicodeObject" },
        { "unicode_object.state", l->unicode_state, 4, x->unicode_size, "PyUnicodeObject" },
        { "unicode_object.asciiobject_size", l->unicode_ascii_size, 1, x->unicode_size, "PyUnicodeObject" },
        { "compact unicode size", l->unicode_compact_size, 1, x->unicode_size, "PyUnicodeObject" },
        { "PyUnicodeObject.data", l->unicode_data_any, 8, x->unicode_size, "PyUnicodeObject" },
        { "bytes_object.ob_sval", l->bytes_sval, 1, x->bytes_size, "PyBytesObject" },
        { "dict_object.ma_used", l->dict_used, 8, x->dict_size, "PyDictObject" },
        { "dict_object.ma_keys", l->dict_keys, 8, x->dict_size, "PyDictObject" },
        { "dict_object.ma_values", l->dict_values, 8, x->dict_size, "PyDictObject" },
        { "float_object.ob_fval", l->float_value, 8, x->float_size, "PyFloatObject" },
        { "long_object.lv_tag", l->long_tag, 8, x->long_size, "PyLongObject" },
        { "long_object.ob_digit", l->long_digits, 4, x->long_size, "PyLongObject" },
        /* the generator's frame is stored inline, so all of it must fit */
        { "gen_object.gi_iframe", l->gen_iframe, l->iframe_size, x->gen_size, "PyGenObject" },
    };
    for (size_t i = 0; i < COUNT_OF(checks) && !d->failed; i++)
        check_within(d, &checks[i]);
    if (d->failed)
        return;

    if (l->unicode_compact_size != PY_OFF_NONE && l->unicode_compact_size < l->unicode_ascii_size)
        fail(d, "PyCompactUnicodeObject (%ld bytes) is smaller than PyASCIIObject (%ld bytes)",
             l->unicode_compact_size, l->unicode_ascii_size);
}

int py_debug_offsets_decode(const unsigned char *buf, size_t len, struct py_layout *out,
                            char *err, size_t errlen)
{
    struct decoder d = { .buf = buf, .err = err, .errlen = errlen };
    snprintf(d.version_text, sizeof d.version_text, "(unknown version)");
    if (err && errlen)
        err[0] = '\0';

    unsigned version = py_debug_offsets_version(buf, len);
    if (version == 0) {
        if (err && errlen)
            snprintf(err, errlen, "no _Py_DebugOffsets block: %s",
                     (!buf || len < HEADER_SIZE) ? "fewer bytes than its header"
                                                 : "the \"xdebugpy\" cookie is missing");
        return -1;
    }
    format_version(version, d.version_text, sizeof d.version_text);

    unsigned major = version >> 24, minor = (version >> 16) & 0xff;
    for (size_t i = 0; i < COUNT_OF(schemas); i++)
        if (major == 3 && schemas[i].minor == minor)
            d.schema = &schemas[i];
    if (!d.schema) {
        fail(&d, "version %u.%u is not supported; pyscope knows the _Py_DebugOffsets "
             "layouts of 3.13, 3.14 and 3.15 only", major, minor);
        return -1;
    }
    if (((version >> 4) & 0xf) != 0xf) {
        /* The block's own layout moved between pre-releases (3.13.0rc2 for one). */
        fail(&d, "pre-releases are not supported; the block layout is known for finals only");
        return -1;
    }

    uint64_t free_threaded = load_u64(buf + 16);
    if (free_threaded != 0) {
        fail(&d, free_threaded == 1
                 ? "this is a free-threaded (--disable-gil) build, which pyscope does not support"
                 : "free_threaded = %llu is neither 0 nor 1", (unsigned long long)free_threaded);
        return -1;
    }

    size_t block_size = HEADER_SIZE + d.schema->slot_count * 8;
    if (len < block_size) {
        fail(&d, "truncated: %zu bytes read, the 3.%u block needs %zu", len, minor, block_size);
        return -1;
    }

    const struct py_layout *facts = py_layout_for_version(version);
    if (!facts || facts->iframe_size == PY_OFF_NONE) {
        fail(&d, "pyscope has no compiled-in header facts for this version");
        return -1;
    }

    struct py_layout decoded;
    struct block_extras extras;
    decode_fields(&d, facts, &decoded, &extras);
    if (!d.failed)
        validate(&d, &decoded, &extras);
    if (d.failed)
        return -1;
    decoded.version_hex = version;
    *out = decoded;
    return 0;
}

/* 3.14+: struct _Py_AsyncioModuleDebugOffsets (Modules/_asynciomodule.c),
 * which _asyncio exports in its AsyncioDebug section for out-of-process
 * readers: 13 uint64_t, in this order. */
enum {
    AD_TASK_SIZE, AD_TASK_NAME, AD_TASK_AWAITED_BY, AD_TASK_IS_TASK, AD_TASK_AWAITED_BY_IS_SET,
    AD_TASK_CORO, AD_TASK_NODE,
    AD_INTERP_SIZE, AD_INTERP_TASKS_HEAD,
    AD_TSTATE_SIZE, AD_TSTATE_RUNNING_LOOP, AD_TSTATE_RUNNING_TASK, AD_TSTATE_TASKS_HEAD,
    AD_SLOTS
};

int py_asyncio_debug_decode(const unsigned char *buf, size_t len, struct py_asyncio_layout *A,
                            char *err, size_t errlen)
{
    uint64_t v[AD_SLOTS];
    if (!buf || len < sizeof v) {
        /* An early 3.14 development copy had 9 fields and no task_node. */
        snprintf(err, errlen, "the AsyncioDebug section has %zu bytes, fewer than the %zu of "
                 "its 13 fields", buf ? len : 0, sizeof v);
        return -1;
    }
    memcpy(v, buf, sizeof v);
    for (int i = 0; i < AD_SLOTS; i++)
        if (v[i] > (uint64_t)MAX_PLAUSIBLE_VALUE) {
            snprintf(err, errlen, "AsyncioDebug field %d = %llu is not a plausible offset or "
                     "size", i, (unsigned long long)v[i]);
            return -1;
        }
    static const struct { int slot, size; const char *name; } within[] = {
        {AD_TASK_NAME, AD_TASK_SIZE, "task_name"},
        {AD_TASK_AWAITED_BY, AD_TASK_SIZE, "task_awaited_by"},
        {AD_TASK_IS_TASK, AD_TASK_SIZE, "task_is_task"},
        {AD_TASK_AWAITED_BY_IS_SET, AD_TASK_SIZE, "task_awaited_by_is_set"},
        {AD_TASK_CORO, AD_TASK_SIZE, "task_coro"},
        {AD_TASK_NODE, AD_TASK_SIZE, "task_node"},
        {AD_INTERP_TASKS_HEAD, AD_INTERP_SIZE, "interpreter asyncio_tasks_head"},
        {AD_TSTATE_RUNNING_LOOP, AD_TSTATE_SIZE, "thread asyncio_running_loop"},
        {AD_TSTATE_RUNNING_TASK, AD_TSTATE_SIZE, "thread asyncio_running_task"},
        {AD_TSTATE_TASKS_HEAD, AD_TSTATE_SIZE, "thread asyncio_tasks_head"},
    };
    for (size_t i = 0; i < COUNT_OF(within); i++)
        if (v[within[i].slot] + 8 > v[within[i].size] || v[within[i].slot] < 8) {
            snprintf(err, errlen, "AsyncioDebug's %s (%llu) lies outside its struct (%llu bytes)",
                     within[i].name, (unsigned long long)v[within[i].slot],
                     (unsigned long long)v[within[i].size]);
            return -1;
        }
    /* The Task object's other fields (its waiter, state, loop...) come from
     * the headers: they hold only while the fields both know agree. */
    static const struct { int slot; size_t field; const char *name; } task[] = {
        {AD_TASK_SIZE, offsetof(struct py_asyncio_layout, task_size), "size"},
        {AD_TASK_NAME, offsetof(struct py_asyncio_layout, task_name), "task_name"},
        {AD_TASK_AWAITED_BY, offsetof(struct py_asyncio_layout, fut_awaited_by), "task_awaited_by"},
        {AD_TASK_AWAITED_BY_IS_SET, offsetof(struct py_asyncio_layout, fut_awaited_by_is_set),
         "task_awaited_by_is_set"},
        {AD_TASK_CORO, offsetof(struct py_asyncio_layout, task_coro), "task_coro"},
        {AD_TASK_NODE, offsetof(struct py_asyncio_layout, task_node), "task_node"},
    };
    for (size_t i = 0; i < COUNT_OF(task); i++) {
        long known;
        memcpy(&known, (const char *)A + task[i].field, sizeof known);
        if (known != (long)v[task[i].slot]) {
            snprintf(err, errlen, "the interpreter's AsyncioDebug section gives the Task's %s "
                     "as %llu, pyscope's tables for this version %ld: the Task object changed "
                     "in this build", task[i].name, (unsigned long long)v[task[i].slot], known);
            return -1;
        }
    }
    A->interp_tasks_head = (long)v[AD_INTERP_TASKS_HEAD];
    A->tstate_running_loop = (long)v[AD_TSTATE_RUNNING_LOOP];
    A->tstate_running_task = (long)v[AD_TSTATE_RUNNING_TASK];
    A->tstate_tasks_head = (long)v[AD_TSTATE_TASKS_HEAD];
    return 0;
}
