/* eBPF without a compiler: a small assembler for the instruction encodings
 * of the kernel's eBPF instruction set (Documentation/bpf/standardization),
 * with forward labels, and the bpf(2) calls that load a program and keep
 * its maps. Programs and maps live as long as their descriptors (and the
 * perf events they are attached to), so nothing outlives pyscope. */
#ifndef PYSCOPE_TARGET_BPF_H
#define PYSCOPE_TARGET_BPF_H

#include <linux/bpf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BPFA_MAX_INSNS 8192
#define BPFA_MAX_LABELS 16
#define BPFA_MAX_FIXUPS 2048

struct bpf_asm {
    struct bpf_insn insns[BPFA_MAX_INSNS];
    int n;
    int label_at[BPFA_MAX_LABELS];      /* instruction index, -1: not placed yet */
    struct { int insn, label; } fix[BPFA_MAX_FIXUPS];
    int n_fix;
    bool failed;                        /* too long, too many jumps, a jump too far */
};

void bpfa_init(struct bpf_asm *a);

/* dst = src, dst = imm (64-bit), dst op= imm / src (BPF_ADD, BPF_AND, ...). */
void bpfa_mov_reg(struct bpf_asm *a, int dst, int src);
void bpfa_mov_imm(struct bpf_asm *a, int dst, int32_t imm);
void bpfa_alu_imm(struct bpf_asm *a, int op, int dst, int32_t imm);
void bpfa_alu_reg(struct bpf_asm *a, int op, int dst, int src);
/* dst = a 64-bit constant (two instructions). */
void bpfa_ld_imm64(struct bpf_asm *a, int dst, uint64_t value);
/* dst = the map behind descriptor fd (two instructions). */
void bpfa_ld_map_fd(struct bpf_asm *a, int dst, int fd);
/* dst = *(size *)(src + off); size BPF_DW, BPF_W, BPF_H or BPF_B. */
void bpfa_ldx(struct bpf_asm *a, int size, int dst, int src, int16_t off);
/* *(size *)(dst + off) = src / imm. */
void bpfa_stx(struct bpf_asm *a, int size, int dst, int16_t off, int src);
void bpfa_st_imm(struct bpf_asm *a, int size, int dst, int16_t off, int32_t imm);
/* *(u64 *)(dst + off) += src, atomically. */
void bpfa_atomic_add64(struct bpf_asm *a, int dst, int16_t off, int src);
void bpfa_call(struct bpf_asm *a, int helper);
void bpfa_exit(struct bpf_asm *a);
/* if (dst op imm / src) goto label; op BPF_JEQ, BPF_JNE, ... */
void bpfa_jmp_imm(struct bpf_asm *a, int op, int dst, int32_t imm, int label);
void bpfa_jmp_reg(struct bpf_asm *a, int op, int dst, int src, int label);
void bpfa_ja(struct bpf_asm *a, int label);
/* The next instruction is label. */
void bpfa_label(struct bpf_asm *a, int label);
/* Resolves the jumps: 0, or -1 when a label was never placed or anything
 * above failed. */
int bpfa_finish(struct bpf_asm *a);

/* bpf(2). Each returns a descriptor (close-on-exec) or -1 with errno. */
int bpf_map_create(enum bpf_map_type type, uint32_t key_size, uint32_t value_size,
                   uint32_t max_entries, const char *name);
/* The same with map_flags (BPF_F_MMAPABLE: an array mmap() can share). */
int bpf_map_create_flags(enum bpf_map_type type, uint32_t key_size, uint32_t value_size,
                         uint32_t max_entries, uint32_t flags, const char *name);
int bpf_map_update(int fd, const void *key, const void *value, uint64_t flags);
int bpf_map_lookup(int fd, const void *key, void *value);
int bpf_map_delete(int fd, const void *key);
/* A program of the given type, named (up to 15 characters) for bpftool's
 * list. The verifier's log goes to log (log_size bytes) when the load
 * fails. */
int bpf_prog_load(enum bpf_prog_type type, const char *name, const struct bpf_insn *insns, int n,
                  char *log, size_t log_size);
/* A BPF_PROG_TYPE_KPROBE program (what a uprobe's perf event runs). */
int bpf_prog_load_kprobe(const struct bpf_insn *insns, int n, char *log, size_t log_size);
/* Attaches a BPF_PROG_TYPE_RAW_TRACEPOINT program to the kernel tracepoint
 * of that name; the attachment lasts as long as the descriptor returned. */
int bpf_raw_tracepoint_open(const char *name, int prog_fd);

#endif
