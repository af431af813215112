/* Breakpoints in a traced process: uprobes where the kernel allows them,
 * else int3s, stepping threads over those (by emulating the function's
 * first instruction where possible); and data watchpoints, as perf events
 * or else debug registers set through ptrace. */
#include "target/breakpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target/cleanup.h"
#include "target/kernelbp.h"
#include "target/uprobe_filter.h"

#define INT3 0xcc

/* A breakpoint is stepped over by emulating the instruction it replaced
 * when it is one compilers put first in a function, so the int3 never
 * leaves memory while other threads run; anything else is single-stepped
 * with the original byte back for that one step. */

/* ---- the instruction emulator ---- */

void insn_decode(const uint8_t *code, size_t n, struct insn *out)
{
    memset(out, 0, sizeof *out);
    if (n >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa) {
        out->kind = INSN_NOP;          /* endbr64 */
        out->len = 4;
        return;
    }
    if (n >= 1 && code[0] == 0x90) {
        out->kind = INSN_NOP;
        out->len = 1;
        return;
    }
    if (n >= 1 && code[0] >= 0x50 && code[0] <= 0x57) {
        out->kind = INSN_PUSH;
        out->src = code[0] - 0x50;
        out->len = 1;
        return;
    }
    if (n >= 2 && code[0] == 0x41 && code[1] >= 0x50 && code[1] <= 0x57) {
        out->kind = INSN_PUSH;
        out->src = 8 + code[1] - 0x50;
        out->len = 2;
        return;
    }
    /* An optional REX prefix without the index extension (REX.X), then
     * mov/xor between registers, or a rip-relative load or lea. */
    size_t at = 0;
    uint8_t rex = 0;
    if (n >= 1 && (code[0] & 0xf0) == 0x40) {
        rex = code[0];
        at = 1;
        if (rex & 2)
            goto unknown;
    }
    if (n >= at + 2) {
        uint8_t op = code[at], modrm = code[at + 1];
        int reg = ((modrm >> 3) & 7) | ((rex & 4) ? 8 : 0);
        int rm = (modrm & 7) | ((rex & 1) ? 8 : 0);
        bool wide = (rex & 8) != 0;
        bool regs_only = (modrm & 0xc0) == 0xc0;
        bool rip_relative = (modrm & 0xc7) == 0x05;
        if ((op == 0x89 || op == 0x8b) && regs_only) {
            out->kind = INSN_MOV_RR;
            out->len = (int)at + 2;
            out->dst = op == 0x89 ? rm : reg;
            out->src = op == 0x89 ? reg : rm;
            out->wide = wide;
            return;
        }
        if ((op == 0x31 || op == 0x33) && regs_only && reg == rm) {
            out->kind = INSN_XOR_SELF;
            out->len = (int)at + 2;
            out->dst = reg;
            out->wide = wide;
            return;
        }
        if ((op == 0x8b || (op == 0x8d && wide)) && rip_relative && n >= at + 6) {
            int32_t disp;
            memcpy(&disp, code + at + 2, sizeof disp);
            out->kind = op == 0x8b ? INSN_LOAD_RIP : INSN_LEA_RIP;
            out->len = (int)at + 6;
            out->dst = reg;
            out->imm = disp;
            out->wide = wide;
            return;
        }
    }
    if (n >= 4 && code[0] == 0x48 && code[1] == 0x83 && code[2] == 0xec) {
        out->kind = INSN_SUB_RSP;
        out->imm = (int8_t)code[3];
        out->len = 4;
        return;
    }
    if (n >= 7 && code[0] == 0x48 && code[1] == 0x81 && code[2] == 0xec) {
        int32_t imm;
        memcpy(&imm, code + 3, sizeof imm);
        out->kind = INSN_SUB_RSP;
        out->imm = imm;
        out->len = 7;
        return;
    }
unknown:
    out->kind = INSN_UNKNOWN;
}

static unsigned long long *reg_slot(struct user_regs_struct *r, int n)
{
    switch (n) {
    case 0: return &r->rax;
    case 1: return &r->rcx;
    case 2: return &r->rdx;
    case 3: return &r->rbx;
    case 4: return &r->rsp;
    case 5: return &r->rbp;
    case 6: return &r->rsi;
    case 7: return &r->rdi;
    case 8: return &r->r8;
    case 9: return &r->r9;
    case 10: return &r->r10;
    case 11: return &r->r11;
    case 12: return &r->r12;
    case 13: return &r->r13;
    case 14: return &r->r14;
    default: return &r->r15;
    }
}

#define FLAG_CF (1u << 0)
#define FLAG_PF (1u << 2)
#define FLAG_AF (1u << 4)
#define FLAG_ZF (1u << 6)
#define FLAG_SF (1u << 7)
#define FLAG_OF (1u << 11)

/* The flags a 64-bit sub sets, as the CPU would. */
static unsigned long long sub_flags(unsigned long long flags, uint64_t a, uint64_t b)
{
    uint64_t res = a - b;
    flags &= ~(unsigned long long)(FLAG_CF | FLAG_PF | FLAG_AF | FLAG_ZF | FLAG_SF | FLAG_OF);
    if (a < b)
        flags |= FLAG_CF;
    if (res == 0)
        flags |= FLAG_ZF;
    if (res >> 63)
        flags |= FLAG_SF;
    if (((a ^ b) & (a ^ res)) >> 63)
        flags |= FLAG_OF;
    if ((a ^ b ^ res) & 0x10)
        flags |= FLAG_AF;
    if (!(__builtin_popcount((unsigned)(res & 0xff)) & 1))
        flags |= FLAG_PF;
    return flags;
}

int insn_apply(const struct insn *in, struct user_regs_struct *regs, bool *store,
               uint64_t *store_addr, uint64_t *store_value,
               int (*read_mem)(void *ctx, uint64_t addr, void *buf, size_t len), void *ctx)
{
    *store = false;
    uint64_t next = regs->rip + (uint64_t)in->len;
    uint64_t mask = in->wide ? ~(uint64_t)0 : 0xffffffffu;
    switch (in->kind) {
    case INSN_PUSH:
        *store_value = *reg_slot(regs, in->src);   /* push %rsp pushes the old value */
        regs->rsp -= 8;
        *store_addr = regs->rsp;
        *store = true;
        break;
    case INSN_MOV_RR:
        *reg_slot(regs, in->dst) = *reg_slot(regs, in->src) & mask;
        break;
    case INSN_XOR_SELF:
        /* Zero, with CF OF SF cleared and ZF PF set (AF is undefined: 0). */
        *reg_slot(regs, in->dst) = 0;
        regs->eflags &= ~(unsigned long long)(FLAG_CF | FLAG_PF | FLAG_AF | FLAG_ZF | FLAG_SF |
                                              FLAG_OF);
        regs->eflags |= FLAG_ZF | FLAG_PF;
        break;
    case INSN_LOAD_RIP: {
        uint64_t value = 0;
        if (!read_mem || read_mem(ctx, next + (uint64_t)in->imm, &value, in->wide ? 8 : 4) != 0)
            return -1;
        *reg_slot(regs, in->dst) = value & mask;
        break;
    }
    case INSN_LEA_RIP:
        *reg_slot(regs, in->dst) = next + (uint64_t)in->imm;
        break;
    case INSN_SUB_RSP:
        regs->eflags = sub_flags(regs->eflags, regs->rsp, (uint64_t)in->imm);
        regs->rsp -= (uint64_t)in->imm;
        break;
    case INSN_NOP:
    case INSN_UNKNOWN:
        break;
    }
    regs->rip = next;
    return 0;
}

/* ---- memory ---- */

int bp_memory_open(struct bp_memory *m, pid_t pid, struct pyscope_error *err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    m->pid = pid;
    m->fd = open(path, O_RDWR | O_CLOEXEC);
    /* Another user's process: its /proc/PID/mem is that user's file (0600),
     * which CAP_SYS_PTRACE alone does not open. Uprobes need no write, and
     * the code is read with process_vm_readv (ptrace's permission); only
     * an int3 cannot go in then (bp_insert says why). */
    if (m->fd < 0 && errno == EACCES)
        return 0;
    if (m->fd < 0) {
        error_set(err, errno == ENOENT ? PYSCOPE_ERR_NO_PROCESS : PYSCOPE_ERR_PERMISSION,
                  "cannot open %s for writing breakpoints: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

void bp_memory_close(struct bp_memory *m)
{
    if (m->fd >= 0) {
        cleanup_code_forget(m->fd);
        close(m->fd);
    }
    m->fd = -1;
}

static int mem_write(struct bp_memory *m, uint64_t addr, const void *buf, size_t len)
{
    if (m->fd < 0) {
        errno = EACCES;
        return -1;
    }
    return pwrite(m->fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

static int mem_read(struct bp_memory *m, uint64_t addr, void *buf, size_t len)
{
    if (m->fd >= 0)
        return pread(m->fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    return process_vm_readv(m->pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

int bp_insert(struct bp_memory *m, struct sw_breakpoint *bp, struct pyscope_error *err)
{
    if (bp->inserted)
        return 0;
    if (m->fd < 0) {
        error_set(err, PYSCOPE_ERR_PERMISSION,
                  "cannot write a breakpoint into process %d: its /proc/%d/mem belongs to "
                  "another user (CAP_SYS_PTRACE does not open it), and uprobes, which need no "
                  "write, were refused (the kernel's uprobe events need CAP_SYS_ADMIN); run "
                  "pyscope as root or give it cap_sys_admin as well",
                  (int)m->pid, (int)m->pid);
        return -1;
    }
    if (mem_read(m, bp->addr, bp->original, sizeof bp->original) != 0) {
        error_set(err, PYSCOPE_ERR_OTHER, "cannot read the code at 0x%llx: %s",
                  (unsigned long long)bp->addr, strerror(errno));
        return -1;
    }
    if (bp->original[0] == INT3) {
        error_set(err, PYSCOPE_ERR_OTHER,
                  "there is already a breakpoint at 0x%llx (is a debugger attached?)",
                  (unsigned long long)bp->addr);
        return -1;
    }
    insn_decode(bp->original, sizeof bp->original, &bp->first);
    uint8_t int3 = INT3;
    /* Recorded before it goes in: a signal between the two must undo it. */
    cleanup_code_changed(m->fd, bp->addr, bp->original[0]);
    if (mem_write(m, bp->addr, &int3, 1) != 0) {
        cleanup_code_restored(bp->addr);
        error_set(err, PYSCOPE_ERR_OTHER, "cannot write a breakpoint at 0x%llx: %s",
                  (unsigned long long)bp->addr, strerror(errno));
        return -1;
    }
    bp->inserted = true;
    return 0;
}

static void close_events(struct sw_breakpoint *bp)
{
    for (int i = 0; i < bp->n_events; i++)
        kbp_close(bp->events[i].fd);
    bp->n_events = 0;
}

int bp_insert_uprobe(struct bp_memory *m, struct sw_breakpoint *bp, const char *file,
                     uint64_t file_offset, const pid_t *tids, int n)
{
    if (bp->inserted)
        return 0;
    if (mem_read(m, bp->addr, bp->original, sizeof bp->original) != 0 ||
        bp->original[0] == INT3) {
        errno = EEXIST;
        return -1;
    }
    insn_decode(bp->original, sizeof bp->original, &bp->first);
    if (bp->file != file) {
        free(bp->file);
        bp->file = strdup(file);
    }
    if (!bp->file)
        return -1;
    bp->file_offset = file_offset;
    bp->n_events = 0;
    bp->uprobe = true;
    for (int i = 0; i < n; i++) {
        if (bp_uprobe_add_thread(bp, tids[i]) != 0 && errno != ESRCH) {
            int saved = errno;
            close_events(bp);
            bp->uprobe = false;
            errno = saved;
            return -1;
        }
    }
    bp->inserted = true;
    return 0;
}

int bp_uprobe_add_thread(struct sw_breakpoint *bp, pid_t tid)
{
    if (!bp->uprobe)
        return 0;
    for (int i = 0; i < bp->n_events; i++)
        if (bp->events[i].tid == tid)
            return 0;
    if (bp->n_events == bp->cap_events) {
        int cap = bp->cap_events ? bp->cap_events * 2 : 8;
        struct bp_thread_event *grown = realloc(bp->events, (size_t)cap * sizeof *grown);
        if (!grown)
            return -1;
        bp->events = grown;
        bp->cap_events = cap;
    }
    int fd = kbp_uprobe_open(tid, bp->file, bp->file_offset, KBP_TAG_UPROBE | bp->addr);
    if (fd < 0)
        return -1;
    /* Not attached, the event stops the thread at every hit: slower, never
     * blind. */
    if (bp->filtered && ufilter_attach(fd, bp->filter_prog) != 0)
        bp->filter_refused++;
    bp->events[bp->n_events++] = (struct bp_thread_event){tid, fd};
    return 0;
}

void bp_uprobe_drop_thread(struct sw_breakpoint *bp, pid_t tid)
{
    for (int i = 0; i < bp->n_events; i++) {
        if (bp->events[i].tid == tid) {
            kbp_close(bp->events[i].fd);
            bp->events[i] = bp->events[--bp->n_events];
            return;
        }
    }
}

bool insn_keeps_args(const struct insn *in)
{
    switch (in->kind) {
    case INSN_NOP:
    case INSN_PUSH:
    case INSN_SUB_RSP:
        return true;
    case INSN_MOV_RR:
    case INSN_LOAD_RIP:
    case INSN_LEA_RIP:
    case INSN_XOR_SELF:
        return in->dst != 2 && in->dst != 6 && in->dst != 7;
    case INSN_UNKNOWN:
        break;
    }
    return false;
}

void bp_forget(struct sw_breakpoint *bp)
{
    close_events(bp);
    free(bp->events);
    free(bp->file);
    bp->events = NULL;
    bp->file = NULL;
    bp->cap_events = 0;
    bp->uprobe = false;
    bp->inserted = false;
}

int bp_remove(struct bp_memory *m, struct sw_breakpoint *bp)
{
    if (!bp->inserted)
        return 0;
    if (bp->uprobe) {
        close_events(bp);
        bp->inserted = false;
        return 0;
    }
    if (mem_write(m, bp->addr, bp->original, 1) != 0)
        return -1;
    bp->inserted = false;
    cleanup_code_restored(bp->addr);
    return 0;
}

/* ---- stepping over ---- */

int bp_single_step(struct tracer *tr, pid_t tid, int *pending_signal)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        if (ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL) != 0)
            return -1;
        struct tracer_thread *th = tracer_thread(tr, tid);
        if (th)
            th->stopped = false;
        int status;
        if (tracer_wait_thread(tr, tid, &status, -1) != 0 || !WIFSTOPPED(status))
            return -1;
        if (WSTOPSIG(status) == SIGTRAP && (status >> 16) == 0)
            return 0;
        /* A signal or an interrupt arrived instead: the step did not run.
         * Keep the signal for later and step again. */
        if ((status >> 16) == 0)
            *pending_signal = WSTOPSIG(status);
    }
    return -1;
}

static int read_target(void *ctx, uint64_t addr, void *buf, size_t len)
{
    struct bp_memory *m = ctx;
    return mem_read(m, addr, buf, len);
}

int bp_step_over_regs(struct tracer *tr, struct bp_memory *m, pid_t tid, struct sw_breakpoint *bp,
                      struct user_regs_struct *regs, bool *window, int *pending_signal)
{
    *window = false;
    if (bp->uprobe)
        return 0;                  /* the kernel ran the instruction already */
    regs->rip = bp->addr;
    if (bp->first.kind != INSN_UNKNOWN) {
        struct user_regs_struct after = *regs;
        bool store;
        uint64_t store_addr, store_value;
        if (insn_apply(&bp->first, &after, &store, &store_addr, &store_value, read_target, m) == 0 &&
            (!store || mem_write(m, store_addr, &store_value, sizeof store_value) == 0)) {
            *regs = after;
            return ptrace(PTRACE_SETREGS, tid, NULL, regs) == 0 ? 0 : -1;
        }
        /* A load that cannot be read here faults natively too: let the CPU do it. */
    }
    if (ptrace(PTRACE_SETREGS, tid, NULL, regs) != 0)
        return -1;
    *window = true;
    if (mem_write(m, bp->addr, bp->original, 1) != 0)
        return -1;
    int rc = bp_single_step(tr, tid, pending_signal);
    uint8_t int3 = INT3;
    if (mem_write(m, bp->addr, &int3, 1) != 0) {
        bp->inserted = false;
        cleanup_code_restored(bp->addr);
    }
    return rc;
}

int bp_step_over(struct tracer *tr, struct bp_memory *m, pid_t tid, struct sw_breakpoint *bp,
                 bool *window, int *pending_signal)
{
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) != 0)
        return -1;
    return bp_step_over_regs(tr, m, tid, bp, &regs, window, pending_signal);
}

/* ---- debug registers ---- */

static long dr_offset(int n)
{
    return (long)offsetof(struct user, u_debugreg) + (long)n * (long)sizeof(long);
}

/* Per thread: a perf event per armed slot (-1: none); the slots the
 * kernel refused as perf events go through ptrace (their address in DRn,
 * enabled in DR7 as ptrace_on says). */
struct wp_thread {
    pid_t tid;
    int fd[DR_SLOTS];
    uint64_t addr[DR_SLOTS];
    int len[DR_SLOTS];         /* 4 or 8 */
    unsigned access_slots;     /* slots that trap on reads too, not only writes */
    unsigned ptrace_slots, ptrace_on;
};

static unsigned long dr7_value(const struct wp_thread *w, unsigned enabled_mask)
{
    unsigned long v = 0;
    for (int slot = 0; slot < DR_SLOTS; slot++) {
        if (!(enabled_mask & (1u << slot)))
            continue;
        v |= 1ul << (slot * 2);                 /* local enable */
        /* R/W: 01 data writes, 11 data reads or writes */
        v |= (w->access_slots & (1u << slot) ? 3ul : 1ul) << (16 + slot * 4);
        /* LEN: 01 2 bytes, 11 4 bytes, 10 8 bytes */
        v |= (w->len[slot] == 8 ? 2ul : w->len[slot] == 2 ? 1ul : 3ul) << (18 + slot * 4);
    }
    return v;
}

static int ptrace_dr_enable(const struct wp_thread *w, unsigned enabled_mask)
{
    pid_t tid = w->tid;
    if (enabled_mask)
        cleanup_debugregs_armed(tid);
    if (ptrace(PTRACE_POKEUSER, tid, (void *)dr_offset(7), (void *)dr7_value(w, enabled_mask)) != 0)
        return -1;
    if (!enabled_mask)
        cleanup_debugregs_cleared(tid);
    return 0;
}

static struct wp_thread *wp_threads;
static int n_wp_threads, cap_wp_threads;
static bool perf_refused, used_ptrace;

static struct wp_thread *wp_get(pid_t tid, bool create)
{
    for (int i = 0; i < n_wp_threads; i++)
        if (wp_threads[i].tid == tid)
            return &wp_threads[i];
    if (!create)
        return NULL;
    if (n_wp_threads == cap_wp_threads) {
        int cap = cap_wp_threads ? cap_wp_threads * 2 : 16;
        struct wp_thread *grown = realloc(wp_threads, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        wp_threads = grown;
        cap_wp_threads = cap;
    }
    struct wp_thread *w = &wp_threads[n_wp_threads++];
    memset(w, 0, sizeof *w);
    w->tid = tid;
    for (int i = 0; i < DR_SLOTS; i++)
        w->fd[i] = -1;
    return w;
}

bool dr_used_ptrace(void)
{
    return used_ptrace;
}

void dr_forget(pid_t tid)
{
    struct wp_thread *w = wp_get(tid, false);
    if (!w)
        return;
    for (int i = 0; i < DR_SLOTS; i++)
        kbp_close(w->fd[i]);
    *w = wp_threads[--n_wp_threads];
    if (n_wp_threads == 0) {
        free(wp_threads);
        wp_threads = NULL;
        cap_wp_threads = 0;
    }
}

void dr_forget_all(void)
{
    while (n_wp_threads > 0)
        dr_forget(wp_threads[0].tid);
}

static int set_ptrace_on(struct wp_thread *w, unsigned on)
{
    if (on == w->ptrace_on)
        return 0;
    if (ptrace_dr_enable(w, on) != 0)
        return -1;
    w->ptrace_on = on;
    return 0;
}

int dr_enable(pid_t tid, unsigned enabled_mask)
{
    struct wp_thread *w = wp_get(tid, enabled_mask != 0);
    if (!w)
        return enabled_mask ? -1 : 0;
    int rc = 0;
    for (int i = 0; i < DR_SLOTS; i++) {
        unsigned bit = 1u << i;
        bool want = enabled_mask & bit;
        if (!want && w->fd[i] >= 0) {
            kbp_close(w->fd[i]);
            w->fd[i] = -1;
        }
        if (!want || w->fd[i] >= 0 || (w->ptrace_slots & bit) || !w->addr[i])
            continue;
        if (!perf_refused) {
            uint64_t cookie = KBP_TAG_WATCH | (unsigned)i;
            w->fd[i] = w->access_slots & bit
                           ? kbp_access_watch_open(tid, w->addr[i], w->len[i], cookie)
                           : kbp_watch_open(tid, w->addr[i], w->len[i], cookie);
            /* Not permitted or not supported: every later one goes through ptrace. */
            if (w->fd[i] < 0 && errno != ESRCH && errno != ENOSPC)
                perf_refused = true;
            if (w->fd[i] >= 0)
                continue;
        }
        used_ptrace = true;
        if (set_ptrace_on(w, w->ptrace_on & ~bit) != 0 ||
            ptrace(PTRACE_POKEUSER, tid, (void *)dr_offset(i), (void *)w->addr[i]) != 0) {
            rc = -1;
            continue;
        }
        w->ptrace_slots |= bit;
    }
    if (set_ptrace_on(w, w->ptrace_slots & enabled_mask) != 0)
        rc = -1;
    return rc;
}

static int arm_slot(pid_t tid, int slot, uint64_t addr, int len, bool access,
                    unsigned enabled_mask)
{
    if (slot < 0 || slot >= DR_SLOTS || (len != 2 && len != 4 && len != 8) ||
        (addr & (uint64_t)(len - 1)))
        return -1;
    struct wp_thread *w = wp_get(tid, true);
    if (!w)
        return -1;
    unsigned bit = 1u << slot;
    if (w->addr[slot] != addr || w->len[slot] != len || !(w->access_slots & bit) != !access) {
        kbp_close(w->fd[slot]);
        w->fd[slot] = -1;
        /* The kernel checks each address write against the current DR7. */
        if ((w->ptrace_on & bit) && set_ptrace_on(w, w->ptrace_on & ~bit) != 0)
            return -1;
        w->ptrace_slots &= ~bit;
        w->addr[slot] = addr;
        w->len[slot] = len;
        w->access_slots = access ? w->access_slots | bit : w->access_slots & ~bit;
    }
    return dr_enable(tid, enabled_mask);
}

int dr_arm(pid_t tid, int slot, uint64_t addr, unsigned enabled_mask)
{
    return arm_slot(tid, slot, addr, 4, false, enabled_mask);
}

int dr_arm_access(pid_t tid, int slot, uint64_t addr, int len, unsigned enabled_mask)
{
    return arm_slot(tid, slot, addr, len, true, enabled_mask);
}

unsigned dr_hits_of(pid_t tid, const siginfo_t *si)
{
    uint64_t cookie = si ? kbp_cookie(si) : 0;
    if ((cookie & KBP_TAG_MASK) == KBP_TAG_WATCH)
        return 1u << (cookie & (DR_SLOTS - 1));
    /* The kernel keeps a per-thread copy of DR6 that it resets at every
     * debug exception: it describes the last trap only. */
    errno = 0;
    long dr6 = ptrace(PTRACE_PEEKUSER, tid, (void *)dr_offset(6), NULL);
    if (errno)
        return 0;
    return (unsigned)dr6 & 0xf;
}
