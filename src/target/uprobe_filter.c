/* The uprobe filter's maps and its program, assembled from a spec (see
 * uprobe_filter.h). Registers: r9 the state map's element (the counts),
 * r7 the object reached, r8 its key; the stack holds the word just read
 * (fp-8), the map keys and the thread's ids. */
#include "target/uprobe_filter.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "target/bpf.h"

enum { L_STOP, L_DROP, L_STATE, L_WATCHED, L_STOP_AGAIN, L_STOP_UNSEEN, L_EXIT_STOP, L_ALL };

#define R0 0
#define R1 1
#define R2 2
#define R3 3
#define R4 4
#define R6 6
#define R7 7
#define R8 8
#define R9 9
#define FP 10

#define OFF_STATE (offsetof(struct ufilter_state, keys))
#define OFF_WAITING ((int16_t)offsetof(struct ufilter_state, waiting))
#define OFF_STOP_ALL ((int16_t)offsetof(struct ufilter_state, stop_all))
#define OFF_STOPS_ALL ((int16_t)offsetof(struct ufilter_state, stops_all))
#define OFF_RUNS ((int16_t)offsetof(struct ufilter_state, runs))
#define OFF_AGAIN ((int16_t)offsetof(struct ufilter_state, stops_again))
#define OFF_UNSEEN ((int16_t)offsetof(struct ufilter_state, stops_unseen))
#define OFF_UNDECIDED ((int16_t)offsetof(struct ufilter_state, stops_undecided))

uint64_t ufilter_identity(uint64_t a, uint64_t b)
{
    return (a ^ (b << 1)) | 1;
}

int ufilter_open(struct ufilter *f, unsigned seen_max, char *why, size_t why_size)
{
    memset(f, 0, sizeof *f);
    f->seen_fd = -1;
    f->seen_max = seen_max;
    f->state_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, 4, sizeof(struct ufilter_state), 1,
                                 "pyscope_state");
    if (f->state_fd >= 0)
        f->seen_fd = bpf_map_create(BPF_MAP_TYPE_HASH, 16, 4, seen_max, "pyscope_seen");
    if (f->state_fd < 0 || f->seen_fd < 0) {
        snprintf(why, why_size, "bpf(BPF_MAP_CREATE): %s", strerror(errno));
        ufilter_close(f);
        return -1;
    }
    return 0;
}

void ufilter_close(struct ufilter *f)
{
    if (f->state_fd >= 0)
        close(f->state_fd);
    if (f->seen_fd >= 0)
        close(f->seen_fd);
    f->state_fd = f->seen_fd = -1;
}

/* dst = the word at (base + off) in the process; on failure, stop. */
static void read_word(struct bpf_asm *a, int dst, int base, long off)
{
    bpfa_mov_reg(a, R3, base);
    if (off)
        bpfa_alu_imm(a, BPF_ADD, R3, (int32_t)off);
    bpfa_mov_reg(a, R1, FP);
    bpfa_alu_imm(a, BPF_ADD, R1, -8);
    bpfa_mov_imm(a, R2, 8);
    bpfa_call(a, BPF_FUNC_probe_read_user);
    bpfa_jmp_imm(a, BPF_JNE, R0, 0, L_STOP);
    bpfa_ldx(a, BPF_DW, dst, FP, -8);
}

static void mask_key(struct bpf_asm *a, int reg, uint64_t mask)
{
    if (mask == UINT64_MAX)
        return;
    if ((int64_t)mask >= INT32_MIN && (int64_t)mask <= INT32_MAX) {
        bpfa_alu_imm(a, BPF_AND, reg, (int32_t)(int64_t)mask);
    } else {
        bpfa_ld_imm64(a, R4, mask);
        bpfa_alu_reg(a, BPF_AND, reg, R4);
    }
}

static bool offset_ok(long off)
{
    return off >= INT32_MIN / 2 && off <= INT32_MAX / 2;
}

static bool spec_ok(const struct ufilter_spec *spec)
{
    if (spec->n_steps < 0 || spec->n_steps > UFILTER_MAX_STEPS || spec->walk_max < 0 ||
        spec->walk_max > 256 || !offset_ok(spec->key_off) || spec->key_off < 0)
        return false;
    if (spec->from_reg >= 0 && (spec->from_reg > 8 * 32 || spec->from_reg % 8))
        return false;
    if (spec->from_reg < 0 && (spec->n_steps == 0 || !spec->from_addr))
        return false;
    for (int i = 0; i < spec->n_steps; i++)
        if (!offset_ok(spec->steps[i]))
            return false;
    if (spec->check_keys && (spec->link_off < 0 || !offset_ok(spec->link_off)))
        return false;
    if (spec->tid_step >= spec->n_steps || (spec->tid_step >= 0 && !offset_ok(spec->tid_off)))
        return false;
    for (int i = 0; i < 2; i++)
        if (spec->id_off[i] != UFILTER_NONE && !offset_ok(spec->id_off[i]))
            return false;
    return true;
}

int ufilter_assemble(const struct ufilter *f, const struct ufilter_spec *spec, void *insns,
                     int max)
{
    if (!spec_ok(spec))
        return -1;
    struct bpf_asm *a = malloc(sizeof *a);
    if (!a)
        return -1;
    bpfa_init(a);
    bpfa_mov_reg(a, R6, R1);
    /* The state, first: without it nothing can be told, nor counted. */
    bpfa_st_imm(a, BPF_W, FP, -16, 0);
    bpfa_ld_map_fd(a, R1, f->state_fd);
    bpfa_mov_reg(a, R2, FP);
    bpfa_alu_imm(a, BPF_ADD, R2, -16);
    bpfa_call(a, BPF_FUNC_map_lookup_elem);
    bpfa_jmp_imm(a, BPF_JNE, R0, 0, L_STATE);
    bpfa_mov_imm(a, R0, 1);
    bpfa_exit(a);
    bpfa_label(a, L_STATE);
    bpfa_mov_reg(a, R9, R0);
    bpfa_mov_imm(a, R1, 1);
    bpfa_atomic_add64(a, R9, OFF_RUNS, R1);
    bpfa_ldx(a, BPF_DW, R1, R9, OFF_STOP_ALL);
    bpfa_jmp_imm(a, BPF_JNE, R1, 0, L_ALL);
    /* The object. */
    if (spec->from_reg >= 0)
        bpfa_ldx(a, BPF_DW, R7, R6, (int16_t)spec->from_reg);
    else
        bpfa_ld_imm64(a, R7, spec->from_addr);
    for (int i = 0; i < spec->n_steps; i++) {
        read_word(a, R7, R7, spec->steps[i]);
        bpfa_jmp_imm(a, BPF_JEQ, R7, 0, L_STOP);
        if (i != spec->tid_step)
            continue;
        bpfa_ld_imm64(a, R1, spec->ns_dev);
        bpfa_ld_imm64(a, R2, spec->ns_ino);
        bpfa_mov_reg(a, R3, FP);
        bpfa_alu_imm(a, BPF_ADD, R3, -48);
        bpfa_mov_imm(a, R4, 8);
        bpfa_call(a, BPF_FUNC_get_ns_current_pid_tgid);
        bpfa_jmp_imm(a, BPF_JNE, R0, 0, L_STOP);
        read_word(a, R1, R7, spec->tid_off);
        bpfa_ldx(a, BPF_W, R2, FP, -48);          /* struct bpf_pidns_info.pid */
        bpfa_jmp_reg(a, BPF_JNE, R1, R2, L_STOP);
    }
    read_word(a, R8, R7, spec->key_off);
    mask_key(a, R8, spec->key_mask);
    bpfa_jmp_imm(a, BPF_JEQ, R8, 0, L_STOP);
    /* Watched? (an unused slot is 0, never a key) */
    if (spec->check_keys) {
        for (int k = 0; k < UFILTER_KEYS; k++) {
            bpfa_ldx(a, BPF_DW, R1, R9, (int16_t)(OFF_STATE + 8 * (size_t)k));
            bpfa_jmp_reg(a, BPF_JEQ, R1, R8, L_WATCHED);
        }
    }
    if (spec->use_waiting) {
        bpfa_ldx(a, BPF_DW, R1, R9, OFF_WAITING);
        bpfa_jmp_imm(a, BPF_JEQ, R1, 0, L_DROP);
        bpfa_st_imm(a, BPF_DW, FP, -24, 0);
        if (spec->id_off[0] != UFILTER_NONE) {
            read_word(a, R1, R8, spec->id_off[0]);
            bpfa_stx(a, BPF_DW, FP, -24, R1);
        }
        bpfa_mov_imm(a, R1, 0);
        if (spec->id_off[1] != UFILTER_NONE)
            read_word(a, R1, R8, spec->id_off[1]);
        bpfa_alu_imm(a, BPF_LSH, R1, 1);
        bpfa_ldx(a, BPF_DW, R2, FP, -24);
        bpfa_alu_reg(a, BPF_XOR, R2, R1);
        bpfa_alu_imm(a, BPF_OR, R2, 1);
        bpfa_stx(a, BPF_DW, FP, -32, R8);
        bpfa_stx(a, BPF_DW, FP, -24, R2);
        bpfa_ld_map_fd(a, R1, f->seen_fd);
        bpfa_mov_reg(a, R2, FP);
        bpfa_alu_imm(a, BPF_ADD, R2, -32);
        bpfa_call(a, BPF_FUNC_map_lookup_elem);
        bpfa_jmp_imm(a, BPF_JEQ, R0, 0, L_STOP_UNSEEN);
    }
    bpfa_ja(a, L_DROP);
    /* A watched key: stop only when it is found again down the links
     * (unrolled: any kernel's verifier takes it). The verifier refuses
     * code that cannot be reached, so this is there only when used. */
    if (spec->check_keys) {
        bpfa_label(a, L_WATCHED);
        read_word(a, R7, R7, spec->link_off);
        for (int i = 0; i < spec->walk_max; i++) {
            bpfa_jmp_imm(a, BPF_JEQ, R7, 0, L_DROP);
            read_word(a, R1, R7, spec->key_off);
            mask_key(a, R1, spec->key_mask);
            bpfa_jmp_reg(a, BPF_JEQ, R1, R8, L_STOP_AGAIN);
            read_word(a, R7, R7, spec->link_off);
        }
        bpfa_ja(a, L_STOP);        /* deeper than walk_max: cannot tell */
        bpfa_label(a, L_STOP_AGAIN);
        bpfa_mov_imm(a, R1, 1);
        bpfa_atomic_add64(a, R9, OFF_AGAIN, R1);
        bpfa_ja(a, L_EXIT_STOP);
    }
    if (spec->use_waiting) {
        bpfa_label(a, L_STOP_UNSEEN);
        bpfa_mov_imm(a, R1, 1);
        bpfa_atomic_add64(a, R9, OFF_UNSEEN, R1);
        bpfa_ja(a, L_EXIT_STOP);
    }
    bpfa_label(a, L_ALL);
    bpfa_mov_imm(a, R1, 1);
    bpfa_atomic_add64(a, R9, OFF_STOPS_ALL, R1);
    bpfa_ja(a, L_EXIT_STOP);
    bpfa_label(a, L_STOP);
    bpfa_mov_imm(a, R1, 1);
    bpfa_atomic_add64(a, R9, OFF_UNDECIDED, R1);
    bpfa_label(a, L_EXIT_STOP);
    bpfa_mov_imm(a, R0, 1);
    bpfa_exit(a);
    bpfa_label(a, L_DROP);
    bpfa_mov_imm(a, R0, 0);
    bpfa_exit(a);
    int n = -1;
    if (bpfa_finish(a) == 0 && a->n <= max) {
        memcpy(insns, a->insns, sizeof a->insns[0] * (size_t)a->n);
        n = a->n;
    }
    free(a);
    return n;
}

int ufilter_load(struct ufilter *f, const struct ufilter_spec *spec, char *why, size_t why_size)
{
    struct bpf_insn *insns = malloc(sizeof *insns * BPFA_MAX_INSNS);
    char *log = malloc(65536);
    int fd = -1;
    if (!insns || !log) {
        snprintf(why, why_size, "out of memory");
    } else {
        int n = ufilter_assemble(f, spec, insns, BPFA_MAX_INSNS);
        if (n < 0) {
            snprintf(why, why_size, "the filter program could not be assembled");
        } else {
            log[0] = 0;
            fd = bpf_prog_load_kprobe(insns, n, log, 65536);
            if (fd < 0) {
                /* The verifier says why on the line before its summary
                 * ("processed N insns ..."). */
                size_t len = strlen(log);
                while (len && log[len - 1] == '\n')
                    log[--len] = 0;
                char *last = strrchr(log, '\n');
                if (last && strncmp(last + 1, "processed ", 10) == 0) {
                    *last = 0;
                    last = strrchr(log, '\n');
                }
                snprintf(why, why_size, "bpf(BPF_PROG_LOAD): %s%s%s", strerror(errno),
                         log[0] ? ": " : "", log[0] ? (last ? last + 1 : log) : "");
            }
        }
    }
    free(insns);
    free(log);
    return fd;
}

int ufilter_set(struct ufilter *f, const uint64_t *keys, int n, bool waiting, bool stop_all)
{
    uint32_t zero = 0;
    struct ufilter_state st;
    if (bpf_map_lookup(f->state_fd, &zero, &st) != 0)
        memset(&st, 0, sizeof st);
    memset(st.keys, 0, sizeof st.keys);
    for (int i = 0; i < n && i < UFILTER_KEYS; i++)
        st.keys[i] = keys[i];
    st.waiting = waiting;
    st.stop_all = stop_all;
    /* The counts may move between the lookup and the update: a few runs
     * uncounted, in -v only. */
    return bpf_map_update(f->state_fd, &zero, &st, BPF_ANY);
}

int ufilter_mark_seen(struct ufilter *f, uint64_t key, uint64_t identity)
{
    if (f->seen_full)
        return -1;
    uint64_t k[2] = {key, identity};
    uint32_t one = 1;
    if (bpf_map_update(f->seen_fd, k, &one, BPF_ANY) != 0) {
        f->seen_full = errno == E2BIG;
        return -1;
    }
    return 0;
}

int ufilter_counts(const struct ufilter *f, struct ufilter_state *out)
{
    uint32_t zero = 0;
    return bpf_map_lookup(f->state_fd, &zero, out);
}

int ufilter_attach(int event_fd, int prog)
{
    return ioctl(event_fd, PERF_EVENT_IOC_SET_BPF, prog);
}
