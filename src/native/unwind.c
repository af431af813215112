/* libdwfl unwinding over struct target. Modules are reported from the
 * target's own map list (so a core's --exe/--lib-path resolution and a live
 * process's /proc/PID/root both apply); registers come from PTRACE_GETREGS of
 * a thread we have stopped, or from the core's NT_PRSTATUS. libdwfl's stack
 * walk is bounded by NATIVE_MAX_FRAMES and stops on a repeated frame. */
#include "native/unwind.h"

#include <dwarf.h>
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

/* What the CFI says about one address, for the walk over a perf sample's
 * copy: a CFA of register + offset and, per register, one of the simple
 * rules below. An address whose CFI is anything else (an expression, a
 * signal frame, no CFI: libdwfl's frame-pointer guess) is marked so, and
 * the walk hands over to libdwfl there. The rules of an address in a
 * loaded file do not change, so they are kept (one table per unwinder,
 * overwritten on collision). */
enum reg_rule { RULE_UNDEFINED, RULE_SAME, RULE_AT_CFA, RULE_CFA_PLUS, RULE_REGISTER };

#define N_DWARF_REGS 17
#define RA_REG 16
#define CFI_SLOTS 4096u

struct cfi_rules {
    uint64_t addr;               /* 0: empty slot */
    bool simple;
    bool signal;                 /* a signal frame: libdwfl walks the whole stack */
    uint8_t cfa_reg;
    int64_t cfa_offset;
    uint8_t rule[N_DWARF_REGS];
    int64_t value[N_DWARF_REGS]; /* the offset from the CFA, or the register */
};

struct native_unwinder {
    struct target *t;
    struct cfi_rules *rules;     /* CFI_SLOTS of them, or NULL */
    /* Where libdwfl takes over a walk: the registers known at that frame
     * (bit i of resume_set: DWARF register i) and its pc. */
    const uint64_t *resume_regs;
    uint32_t resume_set;
    uint64_t resume_pc;
    uint64_t kept_frames, handovers, full_walks;   /* for PYSCOPE_CHECK_UNWIND */
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
    /* While walking a copy: the frames found so far (the walk's count),
     * and how many there were when the walk first needed memory past the
     * copy (-1: not yet). */
    const int *walk_n;
    int from_copy;
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
    /* (Below sp, where an epilogue's stale CFI may point, is not a copy
     * too short.) */
    if (c && u->walk_n && u->from_copy < 0 && addr >= c->sp && addr - c->sp + 8 > c->stack_len)
        u->from_copy = *u->walk_n;
    uint64_t v;
    if (target_read_u64(u->t, addr, &v) != 0)
        return false;
    *result = v;
    return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
    struct native_unwinder *u = arg;
    if (u->resume_set) {
        for (int i = 0; i < N_DWARF_REGS; i++)
            if ((u->resume_set >> i & 1) &&
                !dwfl_thread_state_registers(thread, i, 1, &u->resume_regs[i]))
                return false;
        dwfl_thread_state_register_pc(thread, u->resume_pc);
        return true;
    }
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
    if (getenv("PYSCOPE_CHECK_UNWIND") && u->kept_frames + u->full_walks)
        fprintf(stderr, "pyscope: unwind check: %llu frames from kept rules, %llu hand-overs to "
                "libdwfl, %llu whole walks by libdwfl\n", (unsigned long long)u->kept_frames,
                (unsigned long long)u->handovers, (unsigned long long)u->full_walks);
    for (size_t i = 0; i < u->n_tables; i++)
        free(u->tables[i].entries);
    free(u->tables);
    free(u->rules);
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

/* The rules of the frame at addr (where its CFI is looked up: the pc of
 * the innermost frame, the call instruction of the others), as libdwfl's
 * own step would apply them: .eh_frame first, else .debug_frame. */
static void read_rules(struct native_unwinder *u, uint64_t addr, struct cfi_rules *r)
{
    memset(r, 0, sizeof *r);
    r->addr = addr;
    Dwfl_Module *mod = dwfl_addrmodule(u->dwfl, addr);
    if (!mod)
        return;
    Dwarf_Addr bias;
    Dwarf_Frame *frame = NULL;
    Dwarf_CFI *cfi = dwfl_module_eh_cfi(mod, &bias);
    if (!cfi || dwarf_cfi_addrframe(cfi, addr - bias, &frame) != 0) {
        frame = NULL;
        cfi = dwfl_module_dwarf_cfi(mod, &bias);
        if (!cfi || dwarf_cfi_addrframe(cfi, addr - bias, &frame) != 0)
            return;
    }
    bool signal = false;
    Dwarf_Op *ops;
    size_t nops;
    if (dwarf_frame_info(frame, NULL, NULL, &signal) != RA_REG || (r->signal = signal) ||
        dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops != 1 || ops[0].atom != DW_OP_bregx ||
        ops[0].number >= N_DWARF_REGS) {
        free(frame);
        return;
    }
    r->cfa_reg = (uint8_t)ops[0].number;
    r->cfa_offset = (int64_t)ops[0].number2;
    for (int reg = 0; reg < N_DWARF_REGS; reg++) {
        Dwarf_Op mem[3];
        if (dwarf_frame_register(frame, reg, mem, &ops, &nops) != 0) {
            r->rule[reg] = RULE_UNDEFINED; /* libdwfl leaves it unset too */
        } else if (nops == 0) {
            r->rule[reg] = ops == NULL ? RULE_SAME : RULE_UNDEFINED;
        } else if (ops[0].atom == DW_OP_call_frame_cfa) {
            size_t k = 1;
            if (k < nops && ops[k].atom == DW_OP_plus_uconst)
                r->value[reg] = (int64_t)ops[k++].number;
            bool value = k < nops && ops[k].atom == DW_OP_stack_value;
            if (value)
                k++;
            if (k != nops) {
                free(frame);
                return;
            }
            r->rule[reg] = value ? RULE_CFA_PLUS : RULE_AT_CFA;
        } else if (nops == 1 && ops[0].atom == DW_OP_regx && ops[0].number < N_DWARF_REGS) {
            r->rule[reg] = RULE_REGISTER;
            r->value[reg] = (int64_t)ops[0].number;
        } else {
            free(frame);
            return;
        }
    }
    free(frame);
    r->simple = true;
}

static const struct cfi_rules *rules_at(struct native_unwinder *u, uint64_t addr)
{
    if (!u->rules && !(u->rules = calloc(CFI_SLOTS, sizeof *u->rules)))
        return NULL;
    size_t home = (size_t)((addr * 0x9E3779B97F4A7C15ull) >> 52) & (CFI_SLOTS - 1);
    for (size_t probe = 0; probe < 4; probe++) {
        struct cfi_rules *r = &u->rules[(home + probe) & (CFI_SLOTS - 1)];
        if (r->addr == addr)
            return r;
        if (r->addr == 0) {
            read_rules(u, addr, r);
            return r;
        }
    }
    read_rules(u, addr, &u->rules[home]);
    return &u->rules[home];
}

/* One step over simple rules: the caller's registers from this frame's.
 * Returns false where libdwfl's step ends the walk (the return address
 * undefined, unreadable or 0). */
static bool step(struct native_unwinder *u, const struct cfi_rules *r, const uint64_t *regs,
                 uint32_t set, uint64_t *out, uint32_t *out_set)
{
    *out_set = 0;
    bool have_cfa = set >> r->cfa_reg & 1;
    uint64_t cfa = regs[r->cfa_reg] + (uint64_t)r->cfa_offset;
    for (int reg = 0; reg < N_DWARF_REGS; reg++) {
        uint64_t v;
        Dwarf_Word word;
        switch (r->rule[reg]) {
        case RULE_SAME:
            if (!(set >> reg & 1))
                continue;
            v = regs[reg];
            break;
        case RULE_AT_CFA:
            if (!have_cfa ||
                !cb_memory_read(u->dwfl, cfa + (uint64_t)r->value[reg], &word, u))
                continue;
            v = word;
            break;
        case RULE_CFA_PLUS:
            if (!have_cfa)
                continue;
            v = cfa + (uint64_t)r->value[reg];
            break;
        case RULE_REGISTER:
            if (!(set >> r->value[reg] & 1))
                continue;
            v = regs[r->value[reg]];
            break;
        default:
            continue;
        }
        out[reg] = v;
        *out_set |= 1u << reg;
    }
    return (*out_set >> RA_REG & 1) && out[RA_REG] != 0;
}

/* libdwfl's walk over a copy, as native_unwind_copy did before rules were
 * kept: for checking the kept rules (PYSCOPE_CHECK_UNWIND). */
static int unwind_copy_dwfl(struct native_unwinder *u, pid_t tid,
                            const struct native_regs_copy *copy, uint64_t *pcs, int max)
{
    struct pc_walk w = {.pcs = pcs, .max = max};
    u->current_tid = tid;
    u->copy = copy;
    u->walk_n = &w.n;
    dwfl_getthread_frames(u->dwfl, tid, pc_frame_cb, &w);
    u->copy = NULL;
    u->walk_n = NULL;
    return w.n;
}

/* Walks the frames whose CFI is simple from the kept rules, and lets
 * libdwfl go on from the first that is not, starting from the registers
 * found for it (its pc given as the call instruction, which is where
 * libdwfl would have looked its CFI up and what it reports for it). */
static int unwind_copy_kept(struct native_unwinder *u, pid_t tid,
                            const struct native_regs_copy *copy, uint64_t *pcs, int max)
{
    uint64_t regs[N_DWARF_REGS], next[N_DWARF_REGS];
    memcpy(regs, copy->dwarf_regs, sizeof regs);
    uint32_t set = (1u << N_DWARF_REGS) - 1, next_set;
    uint64_t pc = regs[RA_REG];
    struct pc_walk w = {.pcs = pcs, .max = max};
    u->walk_n = &w.n;
    for (int k = 0;; k++) {
        uint64_t addr = k == 0 ? pc : pc - 1;
        const struct cfi_rules *r = rules_at(u, addr);
        if (!r || !r->simple) {
            /* libdwfl reports a signal frame's pc as it is, which only
             * its own walk knows to do. */
            if (k == 0 || (r && r->signal)) {
                u->full_walks++;
                u->from_copy = -1;
                return unwind_copy_dwfl(u, tid, copy, pcs, max);
            }
            u->handovers++;
            u->current_tid = tid;
            u->copy = copy;
            u->resume_regs = regs;
            u->resume_set = set;
            u->resume_pc = addr;
            dwfl_getthread_frames(u->dwfl, tid, pc_frame_cb, &w);
            u->resume_set = 0;
            u->copy = NULL;
            u->walk_n = NULL;
            return w.n;
        }
        if (w.n >= w.max || (pc == w.last_pc && ++w.repeats > 16))
            break;
        if (pc != w.last_pc)
            w.repeats = 0;
        w.last_pc = pc;
        w.pcs[w.n++] = addr;
        u->kept_frames++;
        u->copy = copy;
        bool more = step(u, r, regs, set, next, &next_set);
        u->copy = NULL;
        if (!more)
            break;
        memcpy(regs, next, sizeof regs);
        set = next_set;
        pc = regs[RA_REG];
    }
    u->walk_n = NULL;
    return w.n;
}

int native_unwind_copy(struct native_unwinder *u, pid_t tid, const struct native_regs_copy *copy,
                       uint64_t *pcs, int max, int *from_copy)
{
    static int check = -1;
    if (check < 0)
        check = getenv("PYSCOPE_CHECK_UNWIND") != NULL;
    u->from_copy = -1;
    int n = unwind_copy_kept(u, tid, copy, pcs, max);
    /* A walk that read past the copy for frame n and stopped there ended
     * on live memory too: its end is no more the sample's than a frame. */
    int left_copy = u->from_copy < 0 || u->from_copy > n ? -1 : u->from_copy;
    if (check) {
        uint64_t again[NATIVE_MAX_FRAMES];
        int m = unwind_copy_dwfl(u, tid, copy, again, max < NATIVE_MAX_FRAMES ? max : NATIVE_MAX_FRAMES);
        if (m != n || memcmp(again, pcs, (size_t)n * sizeof *pcs) != 0) {
            fprintf(stderr, "pyscope: unwind check: kept rules gave %d frames, libdwfl %d:", n, m);
            for (int i = 0; i < n || i < m; i++)
                fprintf(stderr, " %llx/%llx", i < n ? (unsigned long long)pcs[i] : 0ull,
                        i < m ? (unsigned long long)again[i] : 0ull);
            fputc('\n', stderr);
        }
    }
    if (from_copy)
        *from_copy = left_copy;
    return n;
}

bool native_frame_is_root(const char *symbol)
{
    return symbol && (strcmp(symbol, "clone3") == 0 || strcmp(symbol, "clone") == 0 ||
                      strcmp(symbol, "_start") == 0 || strstr(symbol, "start_thread") ||
                      strstr(symbol, "libc_start"));
}
