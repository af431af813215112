/* Re-entry of native functions: an int3 at the function's entry, a cheap
 * check of the thread's earlier entries, and an unwind of its C stack when
 * one of them may still be running. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>

#include "watch/session.h"
#include "native/symbol_find.h"
#include "target/process.h"

/* An entry made at a stack pointer not above the current one has returned,
 * so most hits need no unwind. Libraries loaded later are found at the
 * dynamic linker's notification hook (_dl_debug_state) and by polling. */

#define UNWIND_MAX 512

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Files an unqualified name is not looked for in: watching malloc or free
 * for re-entry is never meant by a plain name (native:NAME still can). */
static bool system_library(const char *path)
{
    static const char *const prefixes[] = {"libc.so", "ld-linux", "libm.so", "libpthread.so",
                                           "libdl.so", "librt.so", "libgcc_s.so", "libstdc++.so"};
    const char *base = base_name(path);
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

static bool searched(const struct watch_session *s, const char *path)
{
    for (int i = 0; i < s->n_searched; i++)
        if (strcmp(s->searched[i], path) == 0)
            return true;
    return false;
}

void watch_native_plant_dl_hook(struct watch_session *s)
{
    if (s->dl_bp_used)
        return;
    const char *files[WATCH_MAX_FILES];
    int n = native_code_files(s->t, files, WATCH_MAX_FILES);
    for (int i = 0; i < n; i++) {
        if (strncmp(base_name(files[i]), "ld-", 3) != 0)
            continue;
        struct native_symbol hook;
        const char *others[WATCH_MAX_FILES];
        int n_others = 0;
        for (int k = 0; k < n; k++)
            if (k != i)
                others[n_others++] = files[k];
        if (native_find_symbol(s->t, "_dl_debug_state", others, n_others, &hook, 1) != 1)
            continue;
        memset(&s->dl_bp, 0, sizeof s->dl_bp);
        s->dl_bp.addr = hook.addr;
        struct pyscope_error err = {0};
        if (watch_insert_breakpoint(s, &s->dl_bp, false, &err) == 0)
            s->dl_bp_used = true;
        return;
    }
}

static void add_watch(struct watch_session *s, int func, const struct native_symbol *sym)
{
    for (int i = 0; i < s->n_native; i++)
        if (s->native[i].bp.addr == sym->addr)
            return;
    if (s->n_native >= WATCH_MAX_NATIVE) {
        fprintf(stderr, "pyscope: too many native functions to watch; %s in %s left out\n",
                s->funcs[func].symbol, sym->module);
        return;
    }
    struct native_watch *w = &s->native[s->n_native];
    memset(w, 0, sizeof *w);
    w->bp.addr = sym->addr;
    w->size = sym->size;
    w->func = func;
    _Static_assert(sizeof w->module == sizeof sym->module, "module paths of one size");
    memcpy(w->module, sym->module, sizeof w->module);
    w->module[sizeof w->module - 1] = '\0';
    char label[sizeof w->label];
    snprintf(label, sizeof label, "%s (%s)", s->funcs[func].symbol, base_name(sym->module));
    memcpy(w->label, label, sizeof label);
    struct pyscope_error err = {0};
    if (watch_insert_breakpoint(s, &w->bp, false, &err) != 0) {
        fprintf(stderr, "pyscope: cannot watch %s: %s\n", w->label, err.message);
        return;
    }
    int index = s->n_native++;
    if (w->bp.uprobe && w->bp.first.kind == INSN_UNKNOWN)
        fprintf(stderr, "pyscope: watching native function %s at 0x%llx, %s (a uprobe: a thread "
                        "is stopped after the first instruction)\n", w->label,
                (unsigned long long)w->bp.addr, w->module);
    else if (w->bp.uprobe)
        fprintf(stderr, "pyscope: watching native function %s at 0x%llx, %s (a uprobe: a thread "
                        "is stopped after the first instruction, at +0x%x)\n", w->label,
                (unsigned long long)w->bp.addr, w->module, (unsigned)w->bp.first.len);
    else
        fprintf(stderr, "pyscope: watching native function %s at 0x%llx, %s\n", w->label,
                (unsigned long long)w->bp.addr, w->module);
    if (w->bp.first.kind == INSN_UNKNOWN && !w->bp.uprobe)
        fprintf(stderr, "pyscope: note: %s starts with an instruction pyscope does not emulate: "
                        "while one thread is stepped over it, another thread entering it is not "
                        "seen (a window of microseconds; see docs/watch.md)\n", w->label);
    /* Threads already running may be inside the function: their first
     * entry is checked by unwinding. */
    for (int i = 0; i < s->n_threads; i++) {
        struct watch_thread *wt = &s->threads[i];
        if (wt->n_records < WATCH_MAX_RECORDS)
            wt->records[wt->n_records++] = (struct watch_record){index, UINT64_MAX};
    }
    if (s->unwinder) {
        native_close(s->unwinder);
        s->unwinder = NULL;
    }
}

int watch_native_resolve(struct watch_session *s)
{
    if (s->awaiting_exec)
        return 0;
    bool wanted = false;
    for (int f = 0; f < s->n_funcs; f++)
        wanted |= s->funcs[f].want_native;
    if (!wanted)
        return 0;
    target_refresh_maps(s->t);
    watch_native_plant_dl_hook(s);
    const char *files[WATCH_MAX_FILES];
    int n = native_code_files(s->t, files, WATCH_MAX_FILES);
    int before = s->n_native;
    for (int i = 0; i < n; i++) {
        if (searched(s, files[i]))
            continue;
        for (int f = 0; f < s->n_funcs; f++) {
            struct watch_func *wf = &s->funcs[f];
            if (!wf->want_native || (wf->want_python && system_library(files[i])))
                continue;
            const char *others[WATCH_MAX_FILES];
            int n_others = 0;
            for (int k = 0; k < n; k++)
                if (k != i)
                    others[n_others++] = files[k];
            struct native_symbol found[4];
            int hits = native_find_symbol(s->t, wf->symbol, others, n_others, found, 4);
            for (int h = 0; h < hits; h++) {
                add_watch(s, f, &found[h]);
                wf->found_native = true;
            }
        }
        if (s->n_searched < WATCH_MAX_FILES)
            s->searched[s->n_searched++] = strdup(files[i]);
    }
    /* Symbols were looked for in the files mapped now; a file mapped later
     * is searched when it appears. */
    return s->n_native - before;
}

static bool in_function(const struct native_watch *w, uint64_t pc)
{
    return pc >= w->bp.addr && pc < w->bp.addr + w->size;
}

static struct native_unwinder *unwinder(struct watch_session *s)
{
    if (s->unwinder)
        return s->unwinder;
    const char *interp[1] = {s->have_rt ? s->rt.binary : NULL};
    struct pyscope_error err = {0};
    target_refresh_maps(s->t);
    s->unwinder = native_open(s->t, interp, s->have_rt ? 1 : 0, false, &err);
    if (!s->unwinder)
        fprintf(stderr, "pyscope: %s\n", err.message);
    return s->unwinder;
}

void watch_native_entry(struct watch_session *s, pid_t tid, int index,
                        const struct user_regs_struct *regs)
{
    s->stats.native_entries++;
    struct watch_thread *wt = watch_thread_get(s, tid);
    if (!wt)
        return;
    const struct native_watch *w = &s->native[index];
    uint64_t rsp = regs->rsp;
    /* An earlier entry whose stack pointer is not above ours has returned:
     * a running caller's frame always lies above (at higher addresses). */
    bool maybe_running = false;
    int kept = 0;
    for (int i = 0; i < wt->n_records; i++) {
        if (wt->records[i].watch == index && wt->records[i].rsp <= rsp)
            continue;
        maybe_running |= wt->records[i].watch == index;
        wt->records[kept++] = wt->records[i];
    }
    wt->n_records = kept;
    if (maybe_running) {
        /* Unwind from the function's entry, as if the int3 were not there
         * (past a uprobe the thread's registers are true as they are). */
        struct user_regs_struct at_entry = *regs;
        at_entry.rip = w->bp.addr;
        struct native_unwinder *u = unwinder(s);
        if (u && (w->bp.uprobe || ptrace(PTRACE_SETREGS, tid, NULL, &at_entry) == 0)) {
            uint64_t pcs[UNWIND_MAX];
            target_cache_invalidate(s->t);
            int n = native_unwind_pcs(u, tid, pcs, UNWIND_MAX);
            s->stats.unwinds++;
            bool running = false;
            for (int k = 1; k < n && !running; k++)
                running = in_function(w, pcs[k]);
            if (running) {
                watch_report(s, tid, -1, index);
            } else {
                kept = 0;
                for (int i = 0; i < wt->n_records; i++)
                    if (wt->records[i].watch != index)
                        wt->records[kept++] = wt->records[i];
                wt->n_records = kept;
            }
        }
    }
    if (wt->n_records == WATCH_MAX_RECORDS) {
        memmove(wt->records, wt->records + 1, sizeof wt->records[0] * (WATCH_MAX_RECORDS - 1));
        wt->n_records--;
    }
    wt->records[wt->n_records++] = (struct watch_record){index, rsp};
}

void watch_native_reset(struct watch_session *s)
{
    s->n_native = 0;
    s->dl_bp_used = false;
    s->dl_bp.inserted = false;
    for (int i = 0; i < s->n_searched; i++)
        free(s->searched[i]);
    s->n_searched = 0;
    for (int f = 0; f < s->n_funcs; f++)
        s->funcs[f].found_native = false;
    for (int i = 0; i < s->n_threads; i++)
        s->threads[i].n_records = 0;
    if (s->unwinder) {
        native_close(s->unwinder);
        s->unwinder = NULL;
    }
}
