/* The eBPF assembler and the bpf(2) calls (see bpf.h). Each instruction is
 * 8 bytes: opcode, the destination register in the low nibble and the
 * source register in the high nibble of the second byte, a 16-bit offset
 * and a 32-bit immediate; a 64-bit constant takes two. */
#include "target/bpf.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void bpfa_init(struct bpf_asm *a)
{
    a->n = 0;
    a->n_fix = 0;
    a->failed = false;
    for (int i = 0; i < BPFA_MAX_LABELS; i++)
        a->label_at[i] = -1;
}

static void emit(struct bpf_asm *a, uint8_t code, int dst, int src, int16_t off, int32_t imm)
{
    if (a->n >= BPFA_MAX_INSNS) {
        a->failed = true;
        return;
    }
    struct bpf_insn *in = &a->insns[a->n++];
    memset(in, 0, sizeof *in);
    in->code = code;
    in->dst_reg = (uint8_t)(dst & 0xf);
    in->src_reg = (uint8_t)(src & 0xf);
    in->off = off;
    in->imm = imm;
}

void bpfa_mov_reg(struct bpf_asm *a, int dst, int src)
{
    emit(a, BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0);
}

void bpfa_mov_imm(struct bpf_asm *a, int dst, int32_t imm)
{
    emit(a, BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm);
}

void bpfa_alu_imm(struct bpf_asm *a, int op, int dst, int32_t imm)
{
    emit(a, (uint8_t)(BPF_ALU64 | op | BPF_K), dst, 0, 0, imm);
}

void bpfa_alu_reg(struct bpf_asm *a, int op, int dst, int src)
{
    emit(a, (uint8_t)(BPF_ALU64 | op | BPF_X), dst, src, 0, 0);
}

void bpfa_ld_imm64(struct bpf_asm *a, int dst, uint64_t value)
{
    emit(a, BPF_LD | BPF_DW | BPF_IMM, dst, 0, 0, (int32_t)(uint32_t)value);
    emit(a, 0, 0, 0, 0, (int32_t)(uint32_t)(value >> 32));
}

void bpfa_ld_map_fd(struct bpf_asm *a, int dst, int fd)
{
    emit(a, BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, fd);
    emit(a, 0, 0, 0, 0, 0);
}

void bpfa_ldx(struct bpf_asm *a, int size, int dst, int src, int16_t off)
{
    emit(a, (uint8_t)(BPF_LDX | BPF_MEM | size), dst, src, off, 0);
}

void bpfa_stx(struct bpf_asm *a, int size, int dst, int16_t off, int src)
{
    emit(a, (uint8_t)(BPF_STX | BPF_MEM | size), dst, src, off, 0);
}

void bpfa_st_imm(struct bpf_asm *a, int size, int dst, int16_t off, int32_t imm)
{
    emit(a, (uint8_t)(BPF_ST | BPF_MEM | size), dst, 0, off, imm);
}

void bpfa_atomic_add64(struct bpf_asm *a, int dst, int16_t off, int src)
{
    emit(a, BPF_STX | BPF_ATOMIC | BPF_DW, dst, src, off, BPF_ADD);
}

void bpfa_call(struct bpf_asm *a, int helper)
{
    emit(a, BPF_JMP | BPF_CALL, 0, 0, 0, helper);
}

void bpfa_exit(struct bpf_asm *a)
{
    emit(a, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
}

static void jump(struct bpf_asm *a, uint8_t code, int dst, int src, int32_t imm, int label)
{
    if (label < 0 || label >= BPFA_MAX_LABELS || a->n_fix >= BPFA_MAX_FIXUPS) {
        a->failed = true;
        return;
    }
    a->fix[a->n_fix].insn = a->n;
    a->fix[a->n_fix].label = label;
    a->n_fix++;
    emit(a, code, dst, src, 0, imm);
}

void bpfa_jmp_imm(struct bpf_asm *a, int op, int dst, int32_t imm, int label)
{
    jump(a, (uint8_t)(BPF_JMP | op | BPF_K), dst, 0, imm, label);
}

void bpfa_jmp_reg(struct bpf_asm *a, int op, int dst, int src, int label)
{
    jump(a, (uint8_t)(BPF_JMP | op | BPF_X), dst, src, 0, label);
}

void bpfa_ja(struct bpf_asm *a, int label)
{
    jump(a, BPF_JMP | BPF_JA, 0, 0, 0, label);
}

void bpfa_label(struct bpf_asm *a, int label)
{
    if (label < 0 || label >= BPFA_MAX_LABELS || a->label_at[label] >= 0)
        a->failed = true;
    else
        a->label_at[label] = a->n;
}

int bpfa_finish(struct bpf_asm *a)
{
    for (int i = 0; i < a->n_fix && !a->failed; i++) {
        int at = a->label_at[a->fix[i].label];
        long off = (long)at - (a->fix[i].insn + 1);
        if (at < 0 || off < INT16_MIN || off > INT16_MAX)
            a->failed = true;
        else if (a->fix[i].insn < a->n)
            a->insns[a->fix[i].insn].off = (int16_t)off;
    }
    return a->failed ? -1 : 0;
}

/* ---- bpf(2) ---- */

static int sys_bpf(int cmd, union bpf_attr *attr)
{
    return (int)syscall(SYS_bpf, cmd, attr, sizeof *attr);
}

int bpf_map_create(enum bpf_map_type type, uint32_t key_size, uint32_t value_size,
                   uint32_t max_entries, const char *name)
{
    return bpf_map_create_flags(type, key_size, value_size, max_entries, 0, name);
}

int bpf_map_create_flags(enum bpf_map_type type, uint32_t key_size, uint32_t value_size,
                         uint32_t max_entries, uint32_t flags, const char *name)
{
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = type;
    attr.map_flags = flags;
    attr.key_size = key_size;
    attr.value_size = value_size;
    attr.max_entries = max_entries;
    /* A name shows in bpftool's list, where someone may wonder whose it is. */
    strncpy(attr.map_name, name, sizeof attr.map_name - 1);
    int fd = sys_bpf(BPF_MAP_CREATE, &attr);
    if (fd < 0 && errno == EINVAL) {
        /* Kernels before 4.15 know no names. */
        memset(attr.map_name, 0, sizeof attr.map_name);
        fd = sys_bpf(BPF_MAP_CREATE, &attr);
    }
    return fd;
}

int bpf_map_update(int fd, const void *key, const void *value, uint64_t flags)
{
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_fd = (uint32_t)fd;
    attr.key = (uint64_t)(uintptr_t)key;
    attr.value = (uint64_t)(uintptr_t)value;
    attr.flags = flags;
    return sys_bpf(BPF_MAP_UPDATE_ELEM, &attr);
}

int bpf_map_lookup(int fd, const void *key, void *value)
{
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_fd = (uint32_t)fd;
    attr.key = (uint64_t)(uintptr_t)key;
    attr.value = (uint64_t)(uintptr_t)value;
    return sys_bpf(BPF_MAP_LOOKUP_ELEM, &attr);
}

int bpf_map_delete(int fd, const void *key)
{
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_fd = (uint32_t)fd;
    attr.key = (uint64_t)(uintptr_t)key;
    return sys_bpf(BPF_MAP_DELETE_ELEM, &attr);
}

int bpf_raw_tracepoint_open(const char *name, int prog_fd)
{
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.raw_tracepoint.name = (uint64_t)(uintptr_t)name;
    attr.raw_tracepoint.prog_fd = (uint32_t)prog_fd;
    return sys_bpf(BPF_RAW_TRACEPOINT_OPEN, &attr);
}

int bpf_prog_load_kprobe(const struct bpf_insn *insns, int n, char *log, size_t log_size)
{
    return bpf_prog_load(BPF_PROG_TYPE_KPROBE, "pyscope_filter", insns, n, log, log_size);
}

int bpf_prog_load(enum bpf_prog_type type, const char *name, const struct bpf_insn *insns, int n,
                  char *log, size_t log_size)
{
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.prog_type = type;
    attr.insns = (uint64_t)(uintptr_t)insns;
    attr.insn_cnt = (uint32_t)n;
    /* The kernel offers bpf_probe_read_user only to programs that declare
     * a GPL-compatible licence. */
    attr.license = (uint64_t)(uintptr_t)"Dual MIT/GPL";
    strncpy(attr.prog_name, name, sizeof attr.prog_name - 1);
    int fd = sys_bpf(BPF_PROG_LOAD, &attr);
    if (fd < 0 && log && log_size > 1 && errno != EPERM) {
        int saved = errno;
        log[0] = 0;
        attr.log_buf = (uint64_t)(uintptr_t)log;
        attr.log_size = (uint32_t)log_size;
        attr.log_level = 1;
        fd = sys_bpf(BPF_PROG_LOAD, &attr);
        if (fd < 0)
            errno = saved;
    }
    return fd;
}
