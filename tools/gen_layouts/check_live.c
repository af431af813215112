/* Verifies a py_layout against a live live_target.py process: every offset is
 * used to read /proc/PID/mem and the result is compared with ground truth the
 * target reported about itself. Also captures _Py_DebugOffsets fixtures. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "python/debug_offsets.h"
#include "python/layout.h"

#define MAX_FACT_VALUES 16

struct fact {
    char key[48];
    uint64_t values[MAX_FACT_VALUES];
    int count;
};

static struct fact facts[128];
static int fact_count;
static int mem_fd = -1;
static int passed, failed;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void check(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (ok) {
        passed++;
    } else {
        failed++;
        fputs("  FAIL: ", stdout);
        vprintf(fmt, ap);
        fputc('\n', stdout);
    }
    va_end(ap);
}

static int load_facts(const char *path)
{
    FILE *in = fopen(path, "r");
    if (!in)
        return -1;
    char key[48];
    unsigned long long value;
    while (fscanf(in, "%47s %llu", key, &value) == 2) {
        struct fact *f = NULL;
        for (int i = 0; i < fact_count; i++)
            if (strcmp(facts[i].key, key) == 0)
                f = &facts[i];
        if (!f && fact_count < (int)(sizeof facts / sizeof facts[0])) {
            f = &facts[fact_count++];
            snprintf(f->key, sizeof f->key, "%s", key);
        }
        if (f && f->count < MAX_FACT_VALUES)
            f->values[f->count++] = value;
    }
    fclose(in);
    return 0;
}

static const struct fact *find_fact(const char *key)
{
    for (int i = 0; i < fact_count; i++)
        if (strcmp(facts[i].key, key) == 0)
            return &facts[i];
    return NULL;
}

static uint64_t fact_value(const char *key)
{
    const struct fact *f = find_fact(key);
    if (!f) {
        fprintf(stderr, "missing fact %s\n", key);
        exit(2);
    }
    return f->values[0];
}

static bool read_mem(uint64_t addr, void *buf, size_t len)
{
    return pread(mem_fd, buf, len, (off_t)addr) == (ssize_t)len;
}

static uint64_t read_u64(uint64_t addr)
{
    uint64_t value = 0;
    if (!read_mem(addr, &value, sizeof value))
        return 0;
    return value;
}

static int64_t read_i64(uint64_t addr)
{
    return (int64_t)read_u64(addr);
}

static uint32_t read_u32(uint64_t addr)
{
    uint32_t value = 0;
    if (!read_mem(addr, &value, sizeof value))
        return 0;
    return value;
}

static uint8_t read_u8(uint64_t addr)
{
    uint8_t value = 0;
    if (!read_mem(addr, &value, sizeof value))
        return 0;
    return value;
}

static void read_cstring(uint64_t addr, char *out, size_t len)
{
    out[0] = '\0';
    if (addr == 0 || !read_mem(addr, out, len - 1)) {
        /* A string near the end of a mapping: fall back to short reads. */
        size_t i = 0;
        for (; addr && i + 1 < len; i++) {
            if (!read_mem(addr + i, &out[i], 1))
                break;
            if (out[i] == '\0')
                break;
        }
        out[i] = '\0';
    }
    out[len - 1] = '\0';
}

static void type_name_of(const struct py_layout *L, uint64_t object, char *out, size_t len)
{
    uint64_t type = read_u64(object + (uint64_t)L->ob_type);
    read_cstring(read_u64(type + (uint64_t)L->type_name), out, len);
}

static bool has_type(const struct py_layout *L, uint64_t object, const char *expected)
{
    char name[64];
    type_name_of(L, object, name, sizeof name);
    return strcmp(name, expected) == 0;
}

/* Text of a compact ASCII str; empty if the object is anything else. */
static void read_ascii_str(const struct py_layout *L, uint64_t object, char *out, size_t len)
{
    out[0] = '\0';
    if (!has_type(L, object, "str"))
        return;
    int64_t length = read_i64(object + (uint64_t)L->unicode_length);
    if (length < 0 || (size_t)length >= len)
        return;
    if (!read_mem(object + (uint64_t)L->unicode_ascii_size, out, (size_t)length))
        length = 0;
    out[length] = '\0';
}

static bool is_known_tstate(uint64_t tstate, const uint64_t *tstates, int count)
{
    for (int i = 0; i < count; i++)
        if (tstates[i] == tstate)
            return true;
    return false;
}

/* Frame walk: collects the function names of one thread, outermost last. */
static int walk_frames(const struct py_layout *L, uint64_t tstate, char names[][64], int max,
                       uint64_t *level_two_frame)
{
    int count = 0;
    if (L->frames == PY_FRAMES_OBJECTS) {
        for (uint64_t f = read_u64(tstate + (uint64_t)L->tstate_frame); f && count < max;
             f = read_u64(f + (uint64_t)L->frame_back)) {
            uint64_t code = read_u64(f + (uint64_t)L->frame_code);
            check(has_type(L, code, "code"), "frame %#" PRIx64 " f_code is not a code object", f);
            read_ascii_str(L, read_u64(code + (uint64_t)L->code_name), names[count], 64);
            if (strcmp(names[count], "level_two") == 0)
                *level_two_frame = f;
            count++;
        }
        return count;
    }
    uint64_t f;
    if (L->tstate_cframe != PY_OFF_NONE)
        f = read_u64(read_u64(tstate + (uint64_t)L->tstate_cframe) + (uint64_t)L->cframe_current_frame);
    else
        f = read_u64(tstate + (uint64_t)L->tstate_current_frame);
    for (; f && count < max; f = read_u64(f + (uint64_t)L->iframe_previous)) {
        int owner = read_u8(f + (uint64_t)L->iframe_owner);
        uint64_t executable = read_u64(f + (uint64_t)L->iframe_executable);
        if (L->stackref_tagged)
            executable &= ~(uint64_t)3;
        check(owner == L->owner_thread || owner == L->owner_generator ||
              owner == L->owner_frame_object || owner == L->owner_cstack ||
              owner == L->owner_interpreter, "frame %#" PRIx64 " owner %d unknown", f, owner);
        if (owner == L->owner_cstack || owner == L->owner_interpreter) {
            snprintf(names[count++], 64, "<c-stack/base>");
            continue;
        }
        if (!has_type(L, executable, "code")) {
            /* 3.12's shim frames carry a code object named <shim>; anything
             * else here would be a wrong offset. */
            check(false, "frame %#" PRIx64 " (owner %d) executable is not a code object", f, owner);
            continue;
        }
        read_ascii_str(L, read_u64(executable + (uint64_t)L->code_name), names[count], 64);
        if (strcmp(names[count], "level_two") == 0)
            *level_two_frame = f;
        count++;
    }
    return count;
}

static bool names_contain(char names[][64], int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

static void check_threads(const struct py_layout *L, uint64_t runtime, uint64_t interp)
{
    uint64_t tstates[32];
    int count = 0;
    for (uint64_t t = read_u64(interp + (uint64_t)L->interp_threads_head); t && count < 32;
         t = read_u64(t + (uint64_t)L->tstate_next))
        tstates[count++] = t;
    const struct fact *idents = find_fact("thread_ident");
    const struct fact *native_ids = find_fact("thread_native_id");
    check(idents && count == idents->count, "thread list has %d entries, target has %d threads",
          count, idents ? idents->count : -1);
    uint64_t main_ident = fact_value("main_ident");
    uint64_t main_tstate = 0;
    bool saw_worker = false, saw_main = false;

    for (int i = 0; i < count; i++) {
        uint64_t t = tstates[i];
        check(read_u64(t + (uint64_t)L->tstate_interp) == interp, "tstate %#" PRIx64 "->interp", t);
        if (i > 0)
            check(read_u64(t + (uint64_t)L->tstate_prev) == tstates[i - 1], "tstate->prev chain");
        uint64_t ident = read_u64(t + (uint64_t)L->tstate_thread_id);
        bool ident_known = false;
        for (int k = 0; idents && k < idents->count; k++)
            ident_known |= idents->values[k] == ident;
        check(ident_known, "tstate %#" PRIx64 " thread_id %#" PRIx64 " is not a thread ident", t, ident);
        if (ident == main_ident)
            main_tstate = t;
        if (L->tstate_native_thread_id != PY_OFF_NONE) {
            uint64_t tid = read_u64(t + (uint64_t)L->tstate_native_thread_id);
            bool tid_known = false;
            for (int k = 0; native_ids && k < native_ids->count; k++)
                tid_known |= native_ids->values[k] == tid;
            check(tid_known, "native_thread_id %" PRIu64 " is not a thread of the target", tid);
        }
        if (L->tstate_datastack_chunk != PY_OFF_NONE) {
            uint64_t chunk = read_u64(t + (uint64_t)L->tstate_datastack_chunk);
            uint64_t top = read_u64(t + (uint64_t)L->tstate_datastack_top);
            uint64_t limit = read_u64(t + (uint64_t)L->tstate_datastack_limit);
            uint64_t chunk_size = read_u64(chunk + (uint64_t)L->chunk_size);
            check(chunk && limit == chunk + chunk_size, "datastack limit %#" PRIx64
                  " != chunk %#" PRIx64 " + size %" PRIu64, limit, chunk, chunk_size);
            check(top >= chunk + (uint64_t)L->chunk_data && top <= limit,
                  "datastack_top outside its chunk");
            /* chunks are at least _PY_DATA_STACK_CHUNK_SIZE (16 KiB) */
            check(chunk_size >= 16384 && chunk_size < (1u << 30), "chunk size %" PRIu64, chunk_size);
        }

        char names[64][64];
        uint64_t level_two_frame = 0;
        int depth = walk_frames(L, t, names, 64, &level_two_frame);
        if (names_contain(names, depth, "worker_sleep"))
            saw_worker = true;
        if (names_contain(names, depth, "level_two")) {
            saw_main = true;
            check(names_contain(names, depth, "level_one") && names_contain(names, depth, "<module>"),
                  "main thread stack lacks level_one/<module>");
            uint64_t code = L->frames == PY_FRAMES_OBJECTS
                ? read_u64(level_two_frame + (uint64_t)L->frame_code)
                : read_u64(level_two_frame + (uint64_t)L->iframe_executable) & ~(uint64_t)3;
            check(code == fact_value("level_two_code"), "level_two frame's code object");
            if (L->frames == PY_FRAMES_OBJECTS) {
                int lasti = (int)read_u32(level_two_frame + (uint64_t)L->frame_lasti);
                int units = (int)fact_value("level_two_code_len");
                if (L->linetable == PY_LINETABLE_310)
                    units /= 2;
                check(lasti >= 0 && lasti < units, "f_lasti %d outside 0..%d", lasti, units);
            } else {
                uint64_t start = code + (uint64_t)L->code_code_adaptive;
                uint64_t ip = read_u64(level_two_frame + (uint64_t)L->iframe_instr_ptr);
                check(ip >= start - 2 && ip < start + fact_value("level_two_code_len"),
                      "instr_ptr %#" PRIx64 " outside the code of level_two", ip);
                if (L->stackref_tagged) {
                    uint64_t sp = read_u64(level_two_frame + (uint64_t)L->iframe_stackpointer);
                    check(sp >= level_two_frame + (uint64_t)L->iframe_localsplus && sp < level_two_frame + 4096,
                          "stackpointer %#" PRIx64 " not above localsplus", sp);
                } else {
                    int stacktop = (int)read_u32(level_two_frame + (uint64_t)L->iframe_stackpointer);
                    /* -1 marks a frame whose stack pointer lives in a register
                     * of the evaluation loop, as for any frame mid-call */
                    check(stacktop == -1 ||
                          (stacktop >= (int)fact_value("level_two_nlocals") && stacktop < 64),
                          "stacktop %d implausible", stacktop);
                }
                uint64_t chunk = read_u64(t + (uint64_t)L->tstate_datastack_chunk);
                check(level_two_frame > chunk && level_two_frame < chunk + read_u64(chunk + (uint64_t)L->chunk_size),
                      "thread-owned frame outside the datastack chunk");
                check(read_u8(level_two_frame + (uint64_t)L->iframe_owner) == L->owner_thread,
                      "level_two owner is not THREAD");
                if (L->iframe_is_entry != PY_OFF_NONE)
                    check(read_u8(level_two_frame + (uint64_t)L->iframe_is_entry) <= 1, "is_entry not a bool");
            }
            /* local_marker = depth * 6 = 42 sits in the frame's locals */
            uint64_t locals = level_two_frame + (uint64_t)(L->frames == PY_FRAMES_OBJECTS
                                                           ? L->frame_localsplus : L->iframe_localsplus);
            uint64_t marker = read_u64(locals + 2 * 8);
            if (L->stackref_tagged)
                marker &= ~(uint64_t)3;
            check(has_type(L, marker, "int"), "localsplus[2] (local_marker) is not an int");
            long globals = L->frames == PY_FRAMES_OBJECTS ? L->frame_globals : L->iframe_globals;
            check(read_u64(level_two_frame + (uint64_t)globals) == fact_value("main_globals"),
                  "level_two frame's f_globals");
            if (L->frames == PY_FRAMES_OBJECTS) {
                /* the value stack starts right after the named slots */
                uint64_t valuestack = read_u64(level_two_frame + (uint64_t)L->frame_valuestack);
                check(valuestack == locals + fact_value("level_two_nlocals") * 8, "f_valuestack");
            } else if (L->stackpointer_is_pointer) {
                uint64_t sp = read_u64(level_two_frame + (uint64_t)L->iframe_stackpointer);
                check(sp >= locals + fact_value("level_two_nlocals") * 8 &&
                      sp <= locals + (fact_value("level_two_nlocals") + fact_value("level_two_stacksize")) * 8,
                      "stackpointer outside the value stack");
            }
        }
    }
    check(saw_worker, "no thread shows worker_sleep");
    check(saw_main, "no thread shows level_two");
    check(main_tstate != 0, "main thread's tstate not found");
    if (L->interp_threads_main != PY_OFF_NONE)
        check(read_u64(interp + (uint64_t)L->interp_threads_main) == main_tstate, "threads.main");

    /* Whoever last held the GIL is one of our threads. */
    uint64_t gil = 0;
    if (L->runtime_gil != PY_OFF_NONE)
        gil = runtime + (uint64_t)L->runtime_gil;
    else if (L->interp_gil_ptr != PY_OFF_NONE)
        gil = read_u64(interp + (uint64_t)L->interp_gil_ptr);
    check(gil != 0, "no GIL found");
    uint64_t holder = read_u64(gil + (uint64_t)L->gil_last_holder);
    uint32_t locked = read_u32(gil + (uint64_t)L->gil_locked);
    check(is_known_tstate(holder, tstates, count), "gil last_holder %#" PRIx64 " is no tstate", holder);
    check(locked <= 1, "gil locked = %u", locked);
    check(read_u64(gil + (uint64_t)L->gil_switch_number) < (1ull << 40), "gil switch_number implausible");
    if (L->runtime_tstate_current != PY_OFF_NONE) {
        uint64_t current = read_u64(runtime + (uint64_t)L->runtime_tstate_current);
        check(current == 0 || is_known_tstate(current, tstates, count), "gilstate.tstate_current");
    }
}

static void check_objects(const struct py_layout *L)
{
    char text[128];

    uint64_t sys_module = fact_value("sys_module");
    check(read_u64(sys_module + (uint64_t)L->module_dict) == fact_value("sys_dict"), "module md_dict");

    uint64_t ascii = fact_value("ascii_text");
    read_ascii_str(L, ascii, text, sizeof text);
    check(strcmp(text, "pyscope-ascii-marker") == 0, "ascii str data: '%s'", text);
    uint32_t state = read_u32(ascii + (uint64_t)L->unicode_state);
    /* state bits: interned:2, kind:3, compact:1, ascii:1 in every version */
    check(((state >> 2) & 7) == 1 && ((state >> 5) & 1) && ((state >> 6) & 1),
          "ascii str state %#x", state);

    uint64_t latin1 = fact_value("latin1_text");
    state = read_u32(latin1 + (uint64_t)L->unicode_state);
    check(((state >> 2) & 7) == 1 && ((state >> 5) & 1) && !((state >> 6) & 1),
          "latin-1 str state %#x", state);
    check(read_i64(latin1 + (uint64_t)L->unicode_length) == (int64_t)fact_value("latin1_text_len"),
          "latin-1 length");
    char latin[32] = {0};
    read_mem(latin1 + (uint64_t)L->unicode_compact_size, latin, 22);
    check(memcmp(latin, "pyscope-l\xe9tin1-marker", 22) == 0, "compact latin-1 data");
    if (L->unicode_data_any != PY_OFF_NONE)
        check(L->unicode_data_any >= L->unicode_compact_size, "data.any precedes compact data");

    uint64_t widget = fact_value("widget_type");
    read_cstring(read_u64(widget + (uint64_t)L->type_name), text, sizeof text);
    check(strcmp(text, "Widget") == 0, "tp_name '%s'", text);
    check(read_i64(widget + (uint64_t)L->type_basicsize) == (int64_t)fact_value("widget_basicsize"), "tp_basicsize");
    check(read_i64(widget + (uint64_t)L->type_dictoffset) == (int64_t)fact_value("widget_dictoffset"), "tp_dictoffset");
    check(read_u64(widget + (uint64_t)L->type_flags) == fact_value("widget_flags"), "tp_flags");
    if (L->heaptype_cached_keys != PY_OFF_NONE)
        check(read_u64(widget + (uint64_t)L->heaptype_cached_keys) != 0, "ht_cached_keys is NULL");

    uint64_t tuple = fact_value("a_tuple");
    check(read_i64(tuple + (uint64_t)L->ob_size) == 3, "tuple ob_size");
    check(read_u64(tuple + (uint64_t)L->tuple_items) == ascii, "tuple ob_item[0]");
    uint64_t list = fact_value("a_list");
    check(read_i64(list + (uint64_t)L->ob_size) == 2, "list ob_size");
    uint64_t items = read_u64(list + (uint64_t)L->list_items);
    check(read_u64(items) == fact_value("a_bytes") && read_u64(items + 8) == fact_value("big_int"),
          "list ob_item");
    uint64_t bytes = fact_value("a_bytes");
    read_mem(bytes + (uint64_t)L->bytes_sval, text, 14);
    check(memcmp(text, "pyscope-bytes", 14) == 0, "bytes ob_sval");
    check(read_i64(bytes + (uint64_t)L->ob_size) == 13, "bytes ob_size");
    uint64_t dict = fact_value("a_dict");
    check(read_i64(dict + (uint64_t)L->dict_used) == 3, "dict ma_used");
    check(read_u64(dict + (uint64_t)L->dict_keys) != 0, "dict ma_keys NULL");
    check(read_u64(dict + (uint64_t)L->dict_values) == 0, "a combined dict has ma_values");
    double value = 0;
    read_mem(fact_value("a_float") + (uint64_t)L->float_value, &value, sizeof value);
    check(value == 2.718281828, "float ob_fval %g", value);

    /* 123456789012345678901234567890 in 30-bit digits */
    uint64_t big = fact_value("big_int");
    int64_t ndigits = L->long_tag != PY_OFF_NONE
        ? (int64_t)(read_u64(big + (uint64_t)L->long_tag) >> 3)
        : read_i64(big + (uint64_t)L->ob_size);
    check(ndigits == 4, "long has %" PRId64 " digits", ndigits);
    unsigned __int128 total = 0;
    for (int64_t i = ndigits - 1; i >= 0 && ndigits <= 4; i--)
        total = (total << 30) | read_u32(big + (uint64_t)L->long_digits + (uint64_t)i * 4);
    unsigned __int128 expected = (unsigned __int128)123456789012345678ull * 1000000000000ull + 901234567890ull;
    check(total == expected, "long digits");

    uint64_t generator = fact_value("generator");
    if (L->gen_frame != PY_OFF_NONE) {
        check(read_u64(generator + (uint64_t)L->gen_frame) == fact_value("generator_frame"), "gi_frame");
    } else {
        uint64_t frame = generator + (uint64_t)L->gen_iframe;
        uint64_t code = read_u64(frame + (uint64_t)L->iframe_executable);
        if (L->stackref_tagged)
            code &= ~(uint64_t)3;
        check(code == fact_value("generator_code"), "gi_iframe executable");
        check(read_u8(frame + (uint64_t)L->iframe_owner) == L->owner_generator, "gi_iframe owner");
    }

    uint64_t level_two = fact_value("level_two_code");
    check(read_u32(level_two + (uint64_t)L->code_argcount) == fact_value("level_two_argcount"), "co_argcount");
    check(read_u32(level_two + (uint64_t)L->code_nlocals) == fact_value("level_two_nlocals"), "co_nlocals");
    check(read_u32(level_two + (uint64_t)L->code_flags) == fact_value("level_two_flags"), "co_flags");
    check(read_u32(level_two + (uint64_t)L->code_firstlineno) == fact_value("level_two_firstlineno"), "co_firstlineno");
    read_ascii_str(L, read_u64(level_two + (uint64_t)L->code_filename), text, sizeof text);
    check(strstr(text, "live_target.py") != NULL, "co_filename '%s'", text);
    if (L->code_qualname != PY_OFF_NONE) {
        read_ascii_str(L, read_u64(level_two + (uint64_t)L->code_qualname), text, sizeof text);
        check(strcmp(text, "Outer.level_two") == 0, "co_qualname '%s'", text);
    }
    check(has_type(L, read_u64(level_two + (uint64_t)L->code_linetable), "bytes"), "line table is bytes");
    uint64_t names = read_u64(level_two + (uint64_t)(L->code_varnames != PY_OFF_NONE
                                                     ? L->code_varnames : L->code_localsplusnames));
    read_ascii_str(L, read_u64(names + (uint64_t)L->tuple_items + 2 * 8), text, sizeof text);
    check(strcmp(text, "local_marker") == 0, "third local name '%s'", text);
    if (L->code_localspluskinds != PY_OFF_NONE)
        check(has_type(L, read_u64(level_two + (uint64_t)L->code_localspluskinds), "bytes"), "co_localspluskinds");
    if (L->code_code != PY_OFF_NONE)
        check(has_type(L, read_u64(level_two + (uint64_t)L->code_code), "bytes"), "co_code");
}

/* The fields behind uncaught exceptions, frame variables, callables and
 * dict keys, against the objects the target built for them. */
static void check_version_facts(const struct py_layout *L)
{
    char text[128];
    uint64_t exc = fact_value("exception");
    check(read_u64(exc + (uint64_t)L->exc_args) == fact_value("exception_args"), "exception args");
    uint64_t tb = read_u64(exc + (uint64_t)L->exc_traceback);
    check(tb == fact_value("exception_tb"), "exception traceback");
    uint64_t tb_next = read_u64(tb + (uint64_t)L->tb_next);
    check(tb_next == fact_value("tb_next"), "tb_next");
    /* 3.11+ may keep -1 there and compute the line from tb_lasti when asked */
    int32_t lineno = (int32_t)read_u32(tb + (uint64_t)L->tb_lineno);
    check(lineno == (int32_t)fact_value("tb_lineno") || (L->frameobj_iframe != PY_OFF_NONE && lineno == -1),
          "tb_lineno %d", lineno);
    check(read_u32(tb + (uint64_t)L->tb_lasti) == (uint32_t)fact_value("tb_lasti"), "tb_lasti");
    uint64_t frame = read_u64(tb + (uint64_t)L->tb_frame);
    check(frame == fact_value("tb_frame"), "tb_frame");
    if (L->frameobj_iframe != PY_OFF_NONE) {
        uint64_t iframe = read_u64(frame + (uint64_t)L->frameobj_iframe);
        uint64_t code = read_u64(iframe + (uint64_t)L->iframe_executable) & ~(uint64_t)3;
        check(code == fact_value("tb_frame_code"), "frame object's f_frame executable");
    }

    uint64_t level_two = fact_value("level_two_code");
    check(read_u32(level_two + (uint64_t)L->code_stacksize) == fact_value("level_two_stacksize"),
          "co_stacksize");
    uint64_t inner = fact_value("inner_code");
    check(read_u32(inner + (uint64_t)L->code_kwonlyargcount) == fact_value("inner_kwonly"),
          "co_kwonlyargcount");
    if (L->code_nlocalsplus != PY_OFF_NONE)
        check(read_u32(inner + (uint64_t)L->code_nlocalsplus) == fact_value("inner_nlocalsplus"),
              "co_nlocalsplus");
    if (L->code_freevars != PY_OFF_NONE) {
        check(read_u64(inner + (uint64_t)L->code_freevars) == fact_value("inner_freevars"), "co_freevars");
        check(read_u64(fact_value("maker_code") + (uint64_t)L->code_cellvars) ==
              fact_value("maker_cellvars"), "co_cellvars");
    }
    check(read_u64(fact_value("a_cell") + (uint64_t)L->cell_ref) == fact_value("a_cell_contents"),
          "cell ob_ref");

    uint64_t func = fact_value("level_two_func");
    check(read_u64(func + (uint64_t)L->func_code) == level_two, "func_code");
    check(read_u64(func + (uint64_t)L->func_name) == fact_value("level_two_name"), "func_name");
    read_ascii_str(L, read_u64(func + (uint64_t)L->func_qualname), text, sizeof text);
    check(strcmp(text, "Outer.level_two") == 0, "func_qualname '%s'", text);

    check(read_u64(fact_value("widget_type") + (uint64_t)L->type_base) == fact_value("object_type"),
          "tp_base");
    uint64_t builtin = fact_value("bound_builtin");
    read_cstring(read_u64(read_u64(builtin + (uint64_t)L->cfunction_ml) + (uint64_t)L->methoddef_name),
                 text, sizeof text);
    check(strcmp(text, "append") == 0, "m_ml->ml_name '%s'", text);
    check(read_u64(builtin + (uint64_t)L->cfunction_self) == fact_value("a_list"), "m_self");
    uint64_t method = fact_value("bound_method");
    check(read_u64(method + (uint64_t)L->method_func) == fact_value("bound_method_func"), "im_func");
    check(read_u64(method + (uint64_t)L->method_self) == fact_value("bound_method_self"), "im_self");
    read_ascii_str(L, read_u64(fact_value("method_descr") + (uint64_t)L->descr_name), text, sizeof text);
    check(strcmp(text, "append") == 0, "method descriptor d_name '%s'", text);
    check(read_u64(fact_value("staticmethod") + (uint64_t)L->staticmethod_callable) ==
          fact_value("closure"), "staticmethod callable");
    check(read_u64(fact_value("property") + (uint64_t)L->property_get) == fact_value("closure"),
          "property fget");

    /* dict keys: a str-keyed dict and an int-keyed (general) one */
    uint64_t dicts[2] = { fact_value("a_dict"), fact_value("int_dict") };
    for (int i = 0; i < 2; i++) {
        uint64_t keys = read_u64(dicts[i] + (uint64_t)L->dict_keys);
        check(read_i64(keys + (uint64_t)L->dictkeys_nentries) == (i == 0 ? 3 : 1), "dk_nentries");
        uint64_t entries;
        long key = L->dictentry_key, value = L->dictentry_value;
        if (L->dict_keys_kind == PY_DICT_KEYS_SIZED) {
            int64_t size = read_i64(keys + (uint64_t)L->dictkeys_size);
            entries = keys + (uint64_t)L->dictkeys_indices + (uint64_t)size * (size <= 0xff ? 1 : 2);
        } else {
            entries = keys + (uint64_t)L->dictkeys_indices +
                      (1ull << read_u8(keys + (uint64_t)L->dictkeys_log2_index_bytes));
            bool general = read_u8(keys + (uint64_t)L->dictkeys_kind) == 0;
            check(general == (i == 1), "dk_kind of the %s dict", i == 0 ? "str-keyed" : "int-keyed");
            if (!general) {
                check(L->dictunicode_size == 16, "unicode entry size");
                key = L->dictunicode_key;
                value = L->dictunicode_value;
            }
        }
        if (i == 0) {
            read_ascii_str(L, read_u64(entries + (uint64_t)key), text, sizeof text);
            check(strcmp(text, "k1") == 0, "first key of a_dict '%s'", text);
            check(has_type(L, read_u64(entries + (uint64_t)value), "int"), "first value of a_dict");
        } else {
            check(read_u64(entries + (uint64_t)key) == fact_value("big_int") &&
                  read_u64(entries + (uint64_t)value) == fact_value("a_float"), "int_dict entry");
        }
    }
    uint64_t set = fact_value("a_set");
    check(read_i64(set + (uint64_t)L->set_used) == 1 && read_i64(set + (uint64_t)L->set_mask) == 7 &&
          read_u64(set + (uint64_t)L->set_table) != 0, "set used/mask/table");
}

static void check_layout(const struct py_layout *L, uint64_t runtime)
{
    uint64_t interp = read_u64(runtime + (uint64_t)L->runtime_interpreters_head);
    check(interp != 0, "interpreters.head is NULL");
    check(read_u64(interp + (uint64_t)L->interp_next) == 0, "a second interpreter?");
    check(read_i64(interp + (uint64_t)L->interp_id) == 0, "main interpreter id");
    check(read_u64(interp + (uint64_t)L->interp_sysdict) == fact_value("sys_dict"), "interp->sysdict");
    check(read_u64(interp + (uint64_t)L->interp_modules) == fact_value("sys_modules"), "interp modules");
    check(read_u64(interp + (uint64_t)L->interp_builtins) == fact_value("builtins_dict"), "interp->builtins");
    uint64_t gc = L->runtime_gc != PY_OFF_NONE ? runtime + (uint64_t)L->runtime_gc
                                               : interp + (uint64_t)L->interp_gc;
    check(read_u32(gc + (uint64_t)L->gc_collecting) == 0, "gc.collecting while idle");
    check_threads(L, runtime, interp);
    check_objects(L);
    check_version_facts(L);
}

/* Field-by-field comparison of two layouts, for the 3.13+ cross-check. */
static void compare_layouts(const struct py_layout *a, const struct py_layout *b)
{
    static const struct { const char *name; size_t offset; } fields[] = {
#define FIELD(f) { #f, offsetof(struct py_layout, f) }
        FIELD(runtime_size), FIELD(runtime_interpreters_head), FIELD(interp_size),
        FIELD(interp_next), FIELD(interp_threads_head), FIELD(interp_threads_main),
        FIELD(interp_id), FIELD(interp_modules), FIELD(interp_sysdict), FIELD(interp_builtins),
        FIELD(interp_gil_ptr), FIELD(interp_gc), FIELD(gc_size), FIELD(gc_collecting),
        FIELD(gil_size), FIELD(gil_last_holder), FIELD(gil_locked), FIELD(gil_switch_number),
        FIELD(tstate_size), FIELD(tstate_prev), FIELD(tstate_next), FIELD(tstate_interp),
        FIELD(tstate_current_frame), FIELD(tstate_thread_id), FIELD(tstate_native_thread_id),
        FIELD(tstate_datastack_chunk), FIELD(tstate_datastack_top), FIELD(tstate_datastack_limit),
        FIELD(iframe_size), FIELD(iframe_executable), FIELD(iframe_previous),
        FIELD(iframe_instr_ptr), FIELD(iframe_stackpointer), FIELD(iframe_owner),
        FIELD(iframe_localsplus), FIELD(chunk_previous), FIELD(chunk_size), FIELD(chunk_top),
        FIELD(chunk_data), FIELD(code_size), FIELD(code_argcount), FIELD(code_nlocals),
        FIELD(code_flags), FIELD(code_firstlineno), FIELD(code_filename), FIELD(code_name),
        FIELD(code_qualname), FIELD(code_linetable), FIELD(code_localsplusnames),
        FIELD(code_localspluskinds), FIELD(code_code_adaptive), FIELD(ob_type), FIELD(ob_size),
        FIELD(type_name), FIELD(type_basicsize), FIELD(type_dictoffset), FIELD(type_flags),
        FIELD(heaptype_cached_keys), FIELD(unicode_length), FIELD(unicode_state),
        FIELD(unicode_ascii_size), FIELD(unicode_compact_size), FIELD(unicode_data_any),
        FIELD(bytes_sval), FIELD(tuple_items), FIELD(list_items), FIELD(dict_used),
        FIELD(dict_keys), FIELD(dict_values), FIELD(long_digits), FIELD(long_tag),
        FIELD(float_value), FIELD(module_dict), FIELD(gen_iframe),
        FIELD(tstate_current_exception), FIELD(set_used), FIELD(set_mask), FIELD(set_table),
#undef FIELD
    };
    int differences = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        long va, vb;
        memcpy(&va, (const char *)a + fields[i].offset, sizeof va);
        memcpy(&vb, (const char *)b + fields[i].offset, sizeof vb);
        if (va != vb) {
            printf("  differs: %-26s decoded %ld, table %ld\n", fields[i].name, va, vb);
            differences++;
        }
    }
    printf("  decoded vs table: %d differing fields\n", differences);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s PID FACTS-FILE [--dump FIXTURE]\n", argv[0]);
        return 2;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/mem", argv[1]);
    mem_fd = open(path, O_RDONLY);
    if (mem_fd < 0 || load_facts(argv[2]) != 0) {
        fprintf(stderr, "cannot open %s or %s: %s\n", path, argv[2], strerror(errno));
        return 2;
    }
    uint64_t runtime = fact_value("runtime");
    unsigned hexversion = (unsigned)fact_value("hexversion");
    unsigned char block[PY_DEBUG_OFFSETS_READ_SIZE];
    if (!read_mem(runtime, block, sizeof block)) {
        fprintf(stderr, "cannot read _PyRuntime at %#" PRIx64 "\n", runtime);
        return 2;
    }
    if (argc == 5 && strcmp(argv[3], "--dump") == 0) {
        FILE *out = fopen(argv[4], "wb");
        if (!out || fwrite(block, 1, sizeof block, out) != sizeof block || fclose(out) != 0) {
            fprintf(stderr, "cannot write %s\n", argv[4]);
            return 2;
        }
    }

    const struct py_layout *table = py_layout_for_version(hexversion);
    printf("CPython %#x: table %s\n", hexversion, table ? table->source : "(none)");
    if (table) {
        check_layout(table, runtime);
        printf("  table layout: %d passed, %d failed\n", passed, failed);
    }
    if (py_debug_offsets_version(block, sizeof block) != 0) {
        struct py_layout decoded;
        char err[256];
        int before_failed = failed, before_passed = passed;
        if (py_debug_offsets_decode(block, sizeof block, &decoded, err, sizeof err) != 0) {
            check(false, "decode: %s", err);
        } else {
            check(decoded.version_hex == hexversion, "decoded version %#x", decoded.version_hex);
            check_layout(&decoded, runtime);
            printf("  decoded layout: %d passed, %d failed\n", passed - before_passed,
                   failed - before_failed);
            if (table)
                compare_layouts(&decoded, table);
        }
    }
    printf("live: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
