/* Breakpoints in a traced process (x86-64): software breakpoints (int3)
 * that are always removed again, stepping a thread over one, and the
 * hardware debug registers used as data watchpoints. */
#ifndef PYSCOPE_TARGET_BREAKPOINT_H
#define PYSCOPE_TARGET_BREAKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>
#include "target/tracer.h"
#include "util/error.h"

/* One x86-64 instruction that a function may start with and that pyscope
 * executes on the thread's behalf, so that a breakpoint never has to be
 * taken out while other threads run (see bp_step_over). */
enum insn_kind {
    INSN_UNKNOWN = 0,
    INSN_NOP,          /* nop, endbr64 */
    INSN_PUSH,         /* push r64 */
    INSN_MOV_RR,       /* mov r64, r64 / mov r32, r32 */
    INSN_SUB_RSP,      /* sub $imm, %rsp */
    INSN_LOAD_RIP,     /* mov disp(%rip), r32/r64 */
    INSN_LEA_RIP,      /* lea disp(%rip), r64 */
    INSN_XOR_SELF,     /* xor r, r (the same register) */
};

struct insn {
    enum insn_kind kind;
    int len;
    int dst, src;      /* register numbers as encoded: 0 rax .. 7 rdi, 8..15 r8..r15 */
    int64_t imm;       /* sub: the immediate; rip-relative forms: the displacement */
    bool wide;         /* 64-bit operand (REX.W); 32-bit forms zero the upper half */
};

/* Decodes the instruction at the start of code (n bytes available). */
void insn_decode(const uint8_t *code, size_t n, struct insn *out);
/* Applies a decoded instruction to regs. A push also stores 8 bytes:
 * *store is set, with the address and value to write. A load reads
 * through read_mem (ctx passed along); returns -1 when that fails. */
int insn_apply(const struct insn *in, struct user_regs_struct *regs, bool *store,
               uint64_t *store_addr, uint64_t *store_value,
               int (*read_mem)(void *ctx, uint64_t addr, void *buf, size_t len), void *ctx);

struct bp_thread_event {
    pid_t tid;
    int fd;
};

struct sw_breakpoint {
    uint64_t addr;
    uint8_t original[16];    /* the code at addr before the int3 went in */
    struct insn first;       /* original[0..] decoded */
    bool inserted;
    /* A uprobe instead of our int3 (bp_insert_uprobe): the kernel's, one
     * perf event per thread, gone when pyscope dies. The thread stops
     * after the first instruction, which the kernel has run. */
    bool uprobe;
    char *file;              /* the mapped file and offset of addr */
    uint64_t file_offset;
    struct bp_thread_event *events;
    int n_events, cap_events;
    /* An eBPF program (target/uprobe_filter.h) attached to each of the
     * uprobe's events, deciding in the kernel which hits stop the thread;
     * when filtered is false, every hit does. */
    bool filtered;
    int filter_prog;
    unsigned filter_refused;   /* events the kernel would not attach it to */
};

/* Memory of a traced process, written through /proc/PID/mem (which the
 * kernel lets a tracer write to read-only code pages). */
struct bp_memory {
    pid_t pid;
    int fd;
};

int bp_memory_open(struct bp_memory *m, pid_t pid, struct pyscope_error *err);
void bp_memory_close(struct bp_memory *m);

/* Reads the code at bp->addr and writes the int3. Refuses when there is
 * already an int3 (another debugger's breakpoint). */
int bp_insert(struct bp_memory *m, struct sw_breakpoint *bp, struct pyscope_error *err);
/* Puts the original byte back (a uprobe: closes its events); safe on a
 * breakpoint not inserted. */
int bp_remove(struct bp_memory *m, struct sw_breakpoint *bp);

/* The same breakpoint as a uprobe on each of tids[0..n), at file_offset of
 * file (the mapping of addr). -1 (nothing changed, errno set) when the
 * kernel refuses; the caller then writes an int3 with bp_insert. */
int bp_insert_uprobe(struct bp_memory *m, struct sw_breakpoint *bp, const char *file,
                     uint64_t file_offset, const pid_t *tids, int n);
/* A thread that started, or went away, while a uprobe is in. */
int bp_uprobe_add_thread(struct sw_breakpoint *bp, pid_t tid);
void bp_uprobe_drop_thread(struct sw_breakpoint *bp, pid_t tid);
/* Whether the thread's argument registers (rdi, rsi, rdx) are still the
 * caller's after instruction in runs (a uprobe stops the thread after it). */
bool insn_keeps_args(const struct insn *in);
/* Forgets the breakpoint without writing to the process (its image was
 * replaced by exec, which took uprobes and int3s with it). */
void bp_forget(struct sw_breakpoint *bp);

/* For a thread stopped by an int3 at bp->addr (rip is addr + 1): runs the
 * instruction at bp->addr and leaves the thread stopped after it, with the
 * int3 still (or again) in place. Known prologue instructions are emulated;
 * others are single-stepped with the int3 taken out for that one step,
 * during which another thread running through addr would not stop
 * (*window is set). A signal that arrives during the step is returned in
 * *pending_signal for the caller to deliver. */
int bp_step_over(struct tracer *tr, struct bp_memory *m, pid_t tid, struct sw_breakpoint *bp,
                 bool *window, int *pending_signal);
/* The same with the thread's registers already in hand (saves a read). */
int bp_step_over_regs(struct tracer *tr, struct bp_memory *m, pid_t tid, struct sw_breakpoint *bp,
                      struct user_regs_struct *regs, bool *window, int *pending_signal);

/* One PTRACE_SINGLESTEP of a stopped thread, waited for. A signal that
 * arrives instead is kept in *pending_signal and the step is retried. */
int bp_single_step(struct tracer *tr, pid_t tid, int *pending_signal);

/* ---- hardware watchpoints (debug registers DR0-DR3, per thread) ---- */

/* Perf-event watchpoints (kernel-owned: gone when pyscope dies) where the
 * kernel allows them, else the debug registers through ptrace (they stay
 * armed if pyscope is killed with SIGKILL). A perf watchpoint's trap
 * carries KBP_TAG_WATCH | slot as its cookie. */

#define DR_SLOTS 4

/* Whether any watchpoint had to be set through ptrace. */
bool dr_used_ptrace(void);
/* Forgets tid (gone): closes its perf events. */
void dr_forget(pid_t tid);
/* Forgets every thread (exec replaced the image and took the watchpoints). */
void dr_forget_all(void);
/* The slots a SIGTRAP reports: from its perf cookie, else DR6. */
unsigned dr_hits_of(pid_t tid, const siginfo_t *si);

/* Arms slot on thread tid: a trap after any write to the 4 bytes at addr
 * (4-aligned). enabled_mask gives every slot that must stay enabled,
 * including this one. The thread must be stopped. */
int dr_arm(pid_t tid, int slot, uint64_t addr, unsigned enabled_mask);
/* The same, but a trap after any read or write of the len (4 or 8) bytes
 * at addr (len-aligned). */
int dr_arm_access(pid_t tid, int slot, uint64_t addr, int len, unsigned enabled_mask);
/* Sets DR7 to enable exactly the slots in enabled_mask (0: none). */
int dr_enable(pid_t tid, unsigned enabled_mask);

#endif
