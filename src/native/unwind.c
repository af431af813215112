/* libdwfl unwinding over struct target. Modules are reported from the
 * target's own map list (so a core's --exe/--lib-path resolution and a live
 * process's /proc/PID/root both apply); registers come from PTRACE_GETREGS of
 * a thread we have stopped, or from the core's NT_PRSTATUS. libdwfl's stack
 * walk is bounded by NATIVE_MAX_FRAMES and stops on a repeated frame. */
#include "native/unwind.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <unistd.h>

#include "elf/elf_image.h"
#include "target/core.h"
#include "target/process.h"

#define MAX_MODULES 1024

/* One module's function symbols sorted by address: libdwfl's own
 * dwfl_module_addrinfo scans the whole table on every call, which costs
 * more than the unwinding itself for a few thousand frames. */
struct sym_entry {
    uint64_t start, end;
    const char *name;           /* owned by libelf, valid while the Dwfl lives */
};

struct sym_table {
    Dwfl_Module *mod;
    struct sym_entry *entries;
    size_t n;
};

struct native_unwinder {
    struct target *t;
    struct sym_table *tables;
    size_t n_tables;
    Dwfl *dwfl;
    char **interp_paths;
    int n_interp_paths;
    bool attached;
    bool lines_for_internal;     /* look up file:line of interpreter frames too */
    pid_t current_tid;           /* the thread being unwound */
    /* When set, the registers and stack top come from this copy (a perf
     * sample) instead of ptrace or the core. */
    const struct native_regs_copy *copy;
};

struct frame_walk {
    struct native_unwinder *u;
    struct report_native *out;
    size_t cap;
    Dwarf_Addr last_pc;
    Dwarf_Addr last_sp;
    int repeats;
};

bool native_is_eval_symbol(const char *symbol)
{
    if (!symbol)
        return false;
    /* gcc may split out "_PyEval_EvalFrameDefault.cold"; clang's tail-call
     * interpreter (3.14+) runs bytecode in _TAIL_CALL_* functions. */
    return strncmp(symbol, "_PyEval_EvalFrameDefault", 24) == 0 ||
           strncmp(symbol, "_TAIL_CALL_", 11) == 0;
}

static char *debuginfo_path_storage = NULL;

static const Dwfl_Callbacks dwfl_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path_storage,
};

/* ---- thread callbacks ---- */

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    (void)dwfl;
    (void)arg;
    (void)thread_argp;
    return 0;   /* threads are only ever asked for by tid */
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    (void)dwfl;
    struct native_unwinder *u = arg;
    *thread_argp = u;
    return tid == u->current_tid;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    (void)dwfl;
    struct native_unwinder *u = arg;
    const struct native_regs_copy *c = u->copy;
    /* The copied stack is what the thread had at the sample; past its end
     * (outer frames, which rarely change) the live memory stands in. */
    if (c && addr >= c->sp && addr - c->sp + 8 <= c->stack_len) {
        uint64_t v;
        memcpy(&v, c->stack + (addr - c->sp), 8);
        *result = v;
        return true;
    }
    uint64_t v;
    if (target_read_u64(u->t, addr, &v) != 0)
        return false;
    *result = v;
    return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
    struct native_unwinder *u = arg;
    if (u->copy) {
        if (!dwfl_thread_state_registers(thread, 0, 17, u->copy->dwarf_regs))
            return false;
        dwfl_thread_state_register_pc(thread, u->copy->dwarf_regs[16]);
        return true;
    }
    uint64_t r[CORE_NREGS];
    if (target_can(u->t, TARGET_CAN_SAVED_REGISTERS)) {
        const struct core_thread *th = core_thread(u->t, u->current_tid);
        if (!th)
            return false;
        memcpy(r, th->regs, sizeof r);
    } else {
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, u->current_tid, NULL, &regs) != 0)
            return false;
        memcpy(r, &regs, sizeof r < sizeof regs ? sizeof r : sizeof regs);
    }
    /* DWARF numbering on x86-64: rax rdx rcx rbx rsi rdi rbp rsp r8..r15, rip. */
    Dwarf_Word dw[17] = {
        r[CORE_REG_RAX], r[CORE_REG_RDX], r[CORE_REG_RCX], r[CORE_REG_RBX], r[CORE_REG_RSI],
        r[CORE_REG_RDI], r[CORE_REG_RBP], r[CORE_REG_RSP], r[CORE_REG_R8], r[CORE_REG_R9],
        r[CORE_REG_R10], r[CORE_REG_R11], r[CORE_REG_R12], r[CORE_REG_R13], r[CORE_REG_R14],
        r[CORE_REG_R15], r[CORE_REG_RIP],
    };
    if (!dwfl_thread_state_registers(thread, 0, 17, dw))
        return false;
    dwfl_thread_state_register_pc(thread, r[CORE_REG_RIP]);
    return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
    .next_thread = cb_next_thread,
    .get_thread = cb_get_thread,
    .memory_read = cb_memory_read,
    .set_initial_registers = cb_set_initial_registers,
};

/* ---- modules ---- */

static bool seen_path(const struct target *t, size_t index)
{
    for (size_t i = 0; i < index; i++)
        if (t->maps[i].path && strcmp(t->maps[i].path, t->maps[index].path) == 0)
            return true;
    return false;
}

static void report_modules(struct native_unwinder *u)
{
    struct target *t = u->t;
    int reported = 0;
    for (size_t i = 0; i < t->nmaps && reported < MAX_MODULES; i++) {
        const char *path = t->maps[i].path;
        if (!path || path[0] != '/' || strncmp(path, "/dev/", 5) == 0 ||
            strncmp(path, "/memfd:", 7) == 0 || seen_path(t, i))
            continue;
        /* The lowest mapping of the file gives its load address. */
        const struct target_map *lowest = &t->maps[i];
        for (size_t k = i + 1; k < t->nmaps; k++)
            if (t->maps[k].path && strcmp(t->maps[k].path, path) == 0 &&
                t->maps[k].offset < lowest->offset)
                lowest = &t->maps[k];
        /* Already there (a refresh after new libraries were loaded). */
        if (dwfl_addrmodule(u->dwfl, lowest->start))
            continue;
        int fd = target_open_file(t, path);
        if (fd < 0)
            continue;
        int probe = dup(fd);
        struct elf_image *img = probe >= 0 ? elf_image_open_fd(probe) : NULL;
        if (!img) {
            close(fd);
            continue;
        }
        uint64_t bias = lowest->start - lowest->offset - elf_image_base_vaddr(img);
        bool shared = elf_image_is_shared(img);
        elf_image_close(img);
        const char *name = strrchr(path, '/') + 1;
        if (dwfl_report_elf(u->dwfl, name, path, fd, shared ? bias : 0, true))
            reported++;
        else
            close(fd);
    }
}

static bool python_named(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "python", 6) == 0;
}

int native_interp_paths(const struct target *t, const char *binary, const char *out[2])
{
    int n = 0;
    if (binary)
        out[n++] = binary;
    /* The python executable of a shared build only holds main(). */
    for (size_t i = 0; i < t->nmaps; i++) {
        const char *path = t->maps[i].path;
        if (path && t->maps[i].offset == 0 && python_named(path) &&
            (!binary || strcmp(path, binary) != 0)) {
            out[n++] = path;
            break;
        }
    }
    return n;
}

struct native_unwinder *native_open(struct target *t, const char *const *interp_paths,
                                    int n_interp_paths, bool lines_for_internal,
                                    struct pyscope_error *err)
{
    struct native_unwinder *u = calloc(1, sizeof *u);
    if (!u) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        return NULL;
    }
    u->t = t;
    u->lines_for_internal = lines_for_internal;
    /* Where separate debug files are looked for (libdwfl's syntax, default
     * ":.debug:/usr/lib/debug"); tests point it elsewhere to see the
     * no-debug-info case. */
    debuginfo_path_storage = getenv("PYSCOPE_DEBUGINFO_PATH");
    /* A core's --debug-dir holds .build-id/xx/yyyy.debug files too. */
    static char with_debug_dir[PATH_MAX + 64];
    const char *debug_dir = core_debug_dir(t);
    if (debug_dir && (size_t)snprintf(with_debug_dir, sizeof with_debug_dir, "%s:%s",
                                      debuginfo_path_storage ? debuginfo_path_storage
                                                             : ":.debug:/usr/lib/debug",
                                      debug_dir) < sizeof with_debug_dir)
        debuginfo_path_storage = with_debug_dir;
    u->interp_paths = calloc((size_t)(n_interp_paths > 0 ? n_interp_paths : 1), sizeof(char *));
    for (int i = 0; u->interp_paths && i < n_interp_paths; i++)
        if (interp_paths[i] && (u->interp_paths[u->n_interp_paths] = strdup(interp_paths[i])))
            u->n_interp_paths++;
    u->dwfl = dwfl_begin(&dwfl_callbacks);
    if (!u->dwfl) {
        error_set(err, PYSCOPE_ERR_OTHER, "libdwfl: %s", dwfl_errmsg(-1));
        native_close(u);
        return NULL;
    }
    dwfl_report_begin(u->dwfl);
    report_modules(u);
    dwfl_report_end(u->dwfl, NULL, NULL);
    u->attached = dwfl_attach_state(u->dwfl, NULL, t->pid ? t->pid : 1, &thread_callbacks, u);
    if (!u->attached) {
        error_set(err, PYSCOPE_ERR_OTHER, "cannot set up native unwinding: %s", dwfl_errmsg(-1));
        native_close(u);
        return NULL;
    }
    return u;
}

int native_refresh_modules(struct native_unwinder *u)
{
    if (!target_can(u->t, TARGET_CAN_CHANGE) || target_refresh_maps(u->t) != 0)
        return -1;
    dwfl_report_begin_add(u->dwfl);
    report_modules(u);
    dwfl_report_end(u->dwfl, NULL, NULL);
    return 0;
}

void native_close(struct native_unwinder *u)
{
    if (!u)
        return;
    for (size_t i = 0; i < u->n_tables; i++)
        free(u->tables[i].entries);
    free(u->tables);
    if (u->dwfl)
        dwfl_end(u->dwfl);
    for (int i = 0; i < u->n_interp_paths; i++)
        free(u->interp_paths[i]);
    free(u->interp_paths);
    free(u);
}

static int compare_syms(const void *a, const void *b)
{
    const struct sym_entry *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static struct sym_table *symbols_of(struct native_unwinder *u, Dwfl_Module *mod)
{
    for (size_t i = 0; i < u->n_tables; i++)
        if (u->tables[i].mod == mod)
            return &u->tables[i];
    struct sym_table *grown = realloc(u->tables, (u->n_tables + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    u->tables = grown;
    struct sym_table *table = &u->tables[u->n_tables++];
    memset(table, 0, sizeof *table);
    table->mod = mod;
    int count = dwfl_module_getsymtab(mod);
    if (count <= 0)
        return table;
    table->entries = calloc((size_t)count, sizeof *table->entries);
    if (!table->entries)
        return table;
    for (int i = 1; i < count; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        GElf_Word shndx;
        const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
        if (!name || !name[0] || GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF)
            continue;
        struct sym_entry *e = &table->entries[table->n++];
        e->start = addr;
        e->end = addr + (sym.st_size ? sym.st_size : 1);
        e->name = name;
    }
    qsort(table->entries, table->n, sizeof *table->entries, compare_syms);
    return table;
}

/* The function symbol containing addr, or NULL: never the nearest one
 * before it, which in a stripped file would be a wrong name. */
static const struct sym_entry *symbol_at(struct native_unwinder *u, Dwfl_Module *mod,
                                         uint64_t addr)
{
    struct sym_table *table = symbols_of(u, mod);
    if (!table || table->n == 0)
        return NULL;
    size_t lo = 0, hi = table->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (table->entries[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* lo is the first entry starting after addr; look back over aliases and
     * the odd nested symbol. */
    const struct sym_entry *best = NULL;
    for (size_t k = lo, steps = 0; k > 0 && steps < 32; k--, steps++) {
        const struct sym_entry *e = &table->entries[k - 1];
        if (addr < e->end && (!best || e->end - e->start < best->end - best->start))
            best = e;
    }
    return best;
}

static bool is_c_runtime(const char *module)
{
    static const char *const prefixes[] = {"libc.so", "ld-linux", "libpthread.so", "libm.so",
                                           "libdl.so", "librt.so"};
    for (size_t i = 0; module && i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(module, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

/* The interpreter's own plumbing: the eval loop, the call and vectorcall
 * trampolines between a call site and the callee, and the start-up and
 * thread-start frames below the first Python frame. The Python frames
 * already say what these do; every other interpreter frame (the collector,
 * take_gil, the regex matcher, lock and sleep implementations) explains a
 * state and is shown. */
static bool is_plumbing_symbol(const char *symbol)
{
    static const char *const prefixes[] = {
        "_PyEval_EvalFrame", "_TAIL_CALL_", "_PyEval_Vector", "PyEval_EvalCode", "_PyEval_EvalCode",
        "_PyFunction_Vectorcall", "_PyFunction_FastCall", "function_code_fastcall",
        "_PyObject_Vectorcall", "PyObject_Vectorcall", "_PyObject_Call", "PyObject_Call",
        "_PyObject_MakeTpCall", "_PyObject_FastCall", "object_vacall", "_PyVectorcall_Call",
        "PyVectorcall_Call", "method_vectorcall", "cfunction_vectorcall", "cfunction_call",
        "vectorcall_", "slot_tp_call", "call_function", "do_call_core", "_PyCFunction_",
        "PyCFunction_Call", "wrapperdescr_call", "wrapper_call", "partial_vectorcall",
        "partial_call", "run_mod", "run_eval_code_obj", "pyrun_", "_PyRun_", "PyRun_",
        "Py_RunMain", "pymain_", "Py_BytesMain", "Py_Main", "t_bootstrap", "thread_run",
        "pythread_wrapper", "builtin_exec", "_start",
    };
    if (!symbol)
        return true; /* no name to say what it does */
    if (strcmp(symbol, "main") == 0)
        return true;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(symbol, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

static bool is_interp_module(struct native_unwinder *u, const char *path)
{
    for (int i = 0; path && i < u->n_interp_paths; i++)
        if (strcmp(u->interp_paths[i], path) == 0)
            return true;
    return false;
}

static int describe_at(struct native_unwinder *u, Dwarf_Addr pc, Dwarf_Addr lookup,
                       struct report_native_frame *f);

static int describe_frame(struct native_unwinder *u, Dwarf_Addr pc, bool activation,
                          struct report_native_frame *f)
{
    /* A return address points after the call: look up the call itself. */
    return describe_at(u, pc, activation ? pc : pc - 1, f);
}

int native_describe_pc(struct native_unwinder *u, uint64_t pc, struct report_native_frame *f)
{
    return describe_at(u, pc, pc, f);
}

static int describe_at(struct native_unwinder *u, Dwarf_Addr pc, Dwarf_Addr lookup,
                       struct report_native_frame *f)
{
    memset(f, 0, sizeof *f);
    f->pc = pc;
    Dwfl_Module *mod = dwfl_addrmodule(u->dwfl, lookup);
    if (!mod)
        return 0;
    const char *mainfile = NULL;
    const char *modname = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &mainfile, NULL);
    if (modname && !(f->module = strdup(modname)))
        return -1;
    /* Modules are reported by name with the recorded path as file name. */
    const char *recorded = NULL;
    for (size_t i = 0; i < u->t->nmaps; i++) {
        const struct target_map *m = &u->t->maps[i];
        if (m->path && lookup >= m->start && lookup < m->end) {
            recorded = m->path;
            break;
        }
    }
    f->internal = is_interp_module(u, recorded);
    const struct sym_entry *sym = symbol_at(u, mod, lookup);
    if (sym) {
        if (!(f->symbol = strdup(sym->name)))
            return -1;
        f->offset = pc - sym->start;
        f->is_eval = native_is_eval_symbol(sym->name);
    }
    f->internal = f->internal && is_plumbing_symbol(f->symbol);
    /* Line tables are the expensive part: skip them for frames not shown,
     * and for glibc, whose separate, compressed debug info takes longer to
     * load than the rest of a dump (--native-all looks them up anyway). */
    if ((f->internal || is_c_runtime(modname)) && !u->lines_for_internal)
        return 0;
    Dwfl_Line *line = dwfl_module_getsrc(mod, lookup);
    int lineno = 0;
    const char *src = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
    if (src && lineno > 0) {
        if (!(f->file = strdup(src)))
            return -1;
        f->line = lineno;
    }
    (void)mainfile;
    return 0;
}

static int frame_cb(Dwfl_Frame *state, void *arg)
{
    struct frame_walk *w = arg;
    Dwarf_Addr pc;
    bool activation = false;
    if (!dwfl_frame_pc(state, &pc, &activation))
        return DWARF_CB_ABORT;
    if (w->out->n_frames >= NATIVE_MAX_FRAMES) {
        snprintf(w->out->error, sizeof w->out->error, "more than %d native frames",
                 NATIVE_MAX_FRAMES);
        return DWARF_CB_ABORT;
    }
    /* A corrupt stack can make the unwinder report the same frame forever. */
    Dwarf_Addr sp = 0;
    if (pc == w->last_pc && ++w->repeats > 16) {
        snprintf(w->out->error, sizeof w->out->error, "the unwinder looped at 0x%llx",
                 (unsigned long long)pc);
        return DWARF_CB_ABORT;
    }
    if (pc != w->last_pc)
        w->repeats = 0;
    w->last_pc = pc;
    w->last_sp = sp;
    if (w->out->n_frames == w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 64;
        struct report_native_frame *grown = realloc(w->out->frames, ncap * sizeof *grown);
        if (!grown)
            return DWARF_CB_ABORT;
        w->out->frames = grown;
        w->cap = ncap;
    }
    if (describe_frame(w->u, pc, activation, &w->out->frames[w->out->n_frames]) != 0)
        return DWARF_CB_ABORT;
    w->out->n_frames++;
    return DWARF_CB_OK;
}

struct report_native *native_unwind(struct native_unwinder *u, pid_t tid)
{
    struct report_native *out = calloc(1, sizeof *out);
    if (!out)
        return NULL;
    struct frame_walk w = {.u = u, .out = out};
    u->current_tid = tid;
    int rc = dwfl_getthread_frames(u->dwfl, tid, frame_cb, &w);
    out->complete = rc == 0;
    if (rc != 0 && !out->error[0]) {
        /* libdwfl reports the natural end of some stacks (no CFI for the
         * outermost frame) as an error: only call it incomplete when it
         * stopped before reaching a thread-start or main frame. */
        const char *msg = dwfl_errmsg(-1);
        bool at_root = false;
        if (out->n_frames > 0) {
            const char *last = out->frames[out->n_frames - 1].symbol;
            at_root = native_frame_is_root(last);
        }
        if (at_root)
            out->complete = true;
        else
            snprintf(out->error, sizeof out->error, "native unwind stopped after %zu frames: %s",
                     out->n_frames, msg ? msg : "unknown error");
    }
    return out;
}

struct pc_walk {
    uint64_t *pcs;
    int max, n;
    Dwarf_Addr last_pc;
    int repeats;
};

static int pc_frame_cb(Dwfl_Frame *state, void *arg)
{
    struct pc_walk *w = arg;
    Dwarf_Addr pc;
    bool activation = false;
    if (!dwfl_frame_pc(state, &pc, &activation) || w->n >= w->max)
        return DWARF_CB_ABORT;
    if (pc == w->last_pc && ++w->repeats > 16)
        return DWARF_CB_ABORT;
    if (pc != w->last_pc)
        w->repeats = 0;
    w->last_pc = pc;
    /* Return addresses point after the call: report the call itself. */
    w->pcs[w->n++] = activation ? pc : pc - 1;
    return DWARF_CB_OK;
}

int native_unwind_pcs(struct native_unwinder *u, pid_t tid, uint64_t *pcs, int max)
{
    struct pc_walk w = {.pcs = pcs, .max = max};
    u->current_tid = tid;
    dwfl_getthread_frames(u->dwfl, tid, pc_frame_cb, &w);
    return w.n;
}

int native_unwind_copy(struct native_unwinder *u, pid_t tid, const struct native_regs_copy *copy,
                       uint64_t *pcs, int max, bool *complete)
{
    struct pc_walk w = {.pcs = pcs, .max = max};
    u->current_tid = tid;
    u->copy = copy;
    int rc = dwfl_getthread_frames(u->dwfl, tid, pc_frame_cb, &w);
    u->copy = NULL;
    if (complete)
        *complete = rc == 0 || w.n > 0;
    return w.n;
}

bool native_frame_is_root(const char *symbol)
{
    return symbol && (strcmp(symbol, "clone3") == 0 || strcmp(symbol, "clone") == 0 ||
                      strcmp(symbol, "_start") == 0 || strstr(symbol, "start_thread") ||
                      strstr(symbol, "libc_start"));
}
