/* Reading the signal module's handler table out of a target. Up to 3.11 it
 * is the static array Handlers[NSIG] of signalmodule.c, found by its
 * symbol (absent from stripped builds). From 3.12 it is the first member of
 * _PyRuntime.signals, whose offset no header we generate from gives: it is
 * found in _PyRuntime by its shape, an array of {int tripped; PyObject
 * *func} followed by the wakeup fd, is_tripped, and the default_handler
 * and ignore_handler objects most entries point to. */
#include "python/signal_handlers.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf/elf_image.h"
#include "python/code.h"
#include "python/objects.h"
#include "util/text.h"

#define TABLE_SIGNALS 65            /* NSIG / Py_NSIG on Linux */
#define ENTRY_SIZE 16               /* {int tripped; pointer func}, padded */
#define TABLE_BYTES (TABLE_SIGNALS * ENTRY_SIZE)
/* After the table: wakeup {int fd; int warn_on_full_buffer}, int is_tripped
 * (padded), then default_handler and ignore_handler. */
#define DEFAULT_HANDLER_AT (TABLE_BYTES + 16)
#define MAX_RUNTIME_SCAN (4u << 20)
#define PYCFUNCTION_M_ML 16         /* PyCFunctionObject: PyObject_HEAD, then PyMethodDef *m_ml */

static uint64_t entry_func(const unsigned char *table, int signo)
{
    uint64_t func;
    memcpy(&func, table + signo * ENTRY_SIZE + 8, sizeof func);
    return func;
}

static bool plausible_entry(const unsigned char *table, int signo)
{
    uint32_t tripped, pad;
    memcpy(&tripped, table + signo * ENTRY_SIZE, 4);
    memcpy(&pad, table + signo * ENTRY_SIZE + 4, 4);
    uint64_t func = entry_func(table, signo);
    return tripped <= 1 && pad == 0 && (func == 0 || (func >= 4096 && func % 8 == 0));
}

/* Is there a handler table at offset off of the runtime copy? */
static bool table_at(const unsigned char *rt, size_t size, size_t off, uint64_t *dfl, uint64_t *ign)
{
    if (off + DEFAULT_HANDLER_AT + 16 > size)
        return false;
    const unsigned char *table = rt + off;
    memcpy(dfl, rt + off + DEFAULT_HANDLER_AT, 8);
    memcpy(ign, rt + off + DEFAULT_HANDLER_AT + 8, 8);
    if (!*dfl || !*ign || *dfl == *ign || *dfl % 8 || *ign % 8 || entry_func(table, 0) != 0)
        return false;
    int defaults = 0;
    for (int s = 0; s < TABLE_SIGNALS; s++) {
        if (!plausible_entry(table, s))
            return false;
        defaults += entry_func(table, s) == *dfl;
    }
    return defaults >= 16;
}

static bool read_symbol_table(struct py_runtime *rt, unsigned char *table, struct py_signal_handlers *out)
{
    int fd = target_open_file(rt->target, rt->binary);
    struct elf_image *img = fd >= 0 ? elf_image_open_fd(fd) : NULL;
    if (!img)
        return false;
    uint64_t value, size;
    bool found = elf_image_symbol(img, "Handlers", &value, &size) == 0 && size >= TABLE_BYTES;
    elf_image_close(img);
    if (!found || target_read(rt->target, value + rt->binary_bias, table, TABLE_BYTES) != 0)
        return false;
    text_format(out->source, sizeof out->source, "Handlers[] of signalmodule.c");
    rt->signal_table = value + rt->binary_bias;
    rt->signal_table_in_runtime = false;
    return true;
}

static bool read_runtime_table(struct py_runtime *rt, unsigned char *table, uint64_t *dfl,
                               uint64_t *ign, struct py_signal_handlers *out)
{
    long size = rt->layout.runtime_size;
    if (size <= 0 || (unsigned long)size > MAX_RUNTIME_SCAN)
        return false;
    unsigned char *copy = malloc((size_t)size);
    if (!copy)
        return false;
    bool found = false;
    if (target_read(rt->target, rt->runtime_addr, copy, (size_t)size) == 0) {
        for (size_t off = 0; off + DEFAULT_HANDLER_AT + 16 <= (size_t)size && !found; off += 8) {
            if (table_at(copy, (size_t)size, off, dfl, ign)) {
                memcpy(table, copy + off, TABLE_BYTES);
                found = true;
                text_format(out->source, sizeof out->source, "_PyRuntime.signals (+%zu)", off);
                rt->signal_table = rt->runtime_addr + off;
                rt->signal_table_in_runtime = true;
            }
        }
    }
    free(copy);
    return found;
}

static bool is_default_int_handler(struct py_reader *r, uint64_t func)
{
    const char *type;
    uint64_t type_addr, def, name_ptr;
    char name[32];
    if (py_type_of(r, func, &type_addr, &type) != 0 || strcmp(type, "builtin_function_or_method") != 0)
        return false;
    if (target_read_u64(r->t, func + PYCFUNCTION_M_ML, &def) != 0 || !def ||
        target_read_u64(r->t, def, &name_ptr) != 0 || !name_ptr ||
        target_read(r->t, name_ptr, name, sizeof name) != 0)
        return false;
    name[sizeof name - 1] = '\0';
    return strcmp(name, "default_int_handler") == 0;
}

/* asyncio.run's own SIGINT handler (3.11+): a functools.partial of
 * Runner._on_sigint, which cancels the main task the first time and raises
 * KeyboardInterrupt after; like default_int_handler, it sets, releases or
 * notifies nothing a thread could be waiting for. */
static bool is_asyncio_sigint(struct py_reader *r, uint64_t func)
{
    uint64_t type, fn = 0, im_func = 0, code_addr = 0;
    int64_t fn_at;
    if (py_type_of(r, func, &type, NULL) != 0 || !py_is_type(r, func, "functools.partial") ||
        py_member_offset(r, type, "func", &fn_at) != 0 ||
        target_read_u64(r->t, func + (uint64_t)fn_at, &fn) != 0 || !py_is_type(r, fn, "method") ||
        r->L->method_func == PY_OFF_NONE || r->L->func_code == PY_OFF_NONE ||
        target_read_u64(r->t, fn + (uint64_t)r->L->method_func, &im_func) != 0 ||
        !py_is_type(r, im_func, "function") ||
        target_read_u64(r->t, im_func + (uint64_t)r->L->func_code, &code_addr) != 0)
        return false;
    struct py_code_cache codes = {0};
    const struct py_code *code = py_code_get(&codes, r, code_addr);
    bool asyncio = code && strcmp(code->name, "_on_sigint") == 0 &&
                   strstr(code->filename, "asyncio/runners.py") != NULL;
    py_code_cache_clear(&codes);
    return asyncio;
}

/* The table where an earlier read found it: a symbol's is read as it is;
 * one found in _PyRuntime by its shape must still have that shape (the
 * default and ignore handlers after it included). */
static bool read_known_table(struct py_runtime *rt, unsigned char *table, uint64_t *dfl,
                             uint64_t *ign, struct py_signal_handlers *out)
{
    unsigned char copy[DEFAULT_HANDLER_AT + 16];
    size_t len = rt->signal_table_in_runtime ? sizeof copy : TABLE_BYTES;
    if (!rt->signal_table || target_read(rt->target, rt->signal_table, copy, len) != 0 ||
        (rt->signal_table_in_runtime && !table_at(copy, len, 0, dfl, ign)))
        return false;
    memcpy(table, copy, TABLE_BYTES);
    memcpy(out->source, rt->signal_table_source, sizeof out->source);
    return true;
}

void py_signal_handlers_read(struct py_runtime *rt, struct py_signal_handlers *out)
{
    memset(out, 0, sizeof *out);
    unsigned char table[TABLE_BYTES];
    uint64_t dfl = 0, ign = 0;
    bool found = read_known_table(rt, table, &dfl, &ign, out);
    if (!found && (read_symbol_table(rt, table, out) ||
                   read_runtime_table(rt, table, &dfl, &ign, out))) {
        found = true;
        memcpy(rt->signal_table_source, out->source, sizeof rt->signal_table_source);
    }
    if (!found) {
        rt->signal_table = 0;
        text_format(out->source, sizeof out->source,
                    "the signal module's handler table was not found (stripped build)");
        return;
    }
    struct py_reader r;
    py_reader_init(&r, rt);
    for (int s = 1; s < TABLE_SIGNALS; s++) {
        uint64_t func = entry_func(table, s);
        const char *type;
        uint64_t type_addr;
        if (!func || func == dfl || func == ign)
            continue;
        if (py_type_of(&r, func, &type_addr, &type) != 0) {
            /* An unreadable handler may be a Python one: count it. */
            out->python |= 1ull << (s - 1);
            continue;
        }
        /* SIG_DFL and SIG_IGN are ints; None marks a handler the signal
         * module did not install (glibc's, a C extension's). */
        if (strcmp(type, "int") == 0 || strcmp(type, "NoneType") == 0 ||
            (s == SIGINT && (is_default_int_handler(&r, func) || is_asyncio_sigint(&r, func))))
            continue;
        out->python |= 1ull << (s - 1);
    }
    out->known = true;
}
