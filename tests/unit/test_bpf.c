/* The eBPF assembler's encodings, checked against the bytes of the kernel's
 * instruction-set document, its labels; and the uprobe filter run for real
 * on a function of this test (a uprobe on itself, counting its own
 * SIGTRAPs) where the kernel lets it load BPF and open uprobes. */
#include <asm/ptrace.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "target/bpf.h"
#include "target/kernelbp.h"
#include "target/uprobe_filter.h"
#include "unit.h"

static void bytes_of(const struct bpf_insn *in, uint8_t out[8])
{
    memcpy(out, in, 8);
}

#define CHECK_INSN(in, ...)                                                           \
    do {                                                                              \
        const uint8_t want_[8] = {__VA_ARGS__};                                       \
        uint8_t got_[8];                                                              \
        bytes_of(in, got_);                                                           \
        CHECK(memcmp(got_, want_, 8) == 0);                                           \
        if (memcmp(got_, want_, 8) != 0)                                              \
            fprintf(stderr, "    got %02x %02x %02x %02x %02x %02x %02x %02x\n", got_[0], \
                    got_[1], got_[2], got_[3], got_[4], got_[5], got_[6], got_[7]);   \
    } while (0)

static void test_encodings(void)
{
    static struct bpf_asm a;
    bpfa_init(&a);
    bpfa_mov_reg(&a, 6, 1);                 /* r6 = r1 */
    bpfa_mov_imm(&a, 0, 1);                 /* r0 = 1 */
    bpfa_alu_imm(&a, BPF_ADD, 1, -8);       /* r1 += -8 */
    bpfa_alu_reg(&a, BPF_XOR, 2, 1);        /* r2 ^= r1 */
    bpfa_alu_imm(&a, BPF_AND, 8, -8);       /* r8 &= ~7 (sign-extended) */
    bpfa_ldx(&a, BPF_DW, 7, 6, 112);        /* r7 = *(u64 *)(r6 + 112) */
    bpfa_ldx(&a, BPF_W, 2, 10, -48);        /* r2 = *(u32 *)(r10 - 48) */
    bpfa_stx(&a, BPF_DW, 10, -32, 8);       /* *(u64 *)(r10 - 32) = r8 */
    bpfa_st_imm(&a, BPF_W, 10, -16, 0);     /* *(u32 *)(r10 - 16) = 0 */
    bpfa_atomic_add64(&a, 9, 48, 1);        /* lock *(u64 *)(r9 + 48) += r1 */
    bpfa_call(&a, BPF_FUNC_probe_read_user);
    bpfa_exit(&a);
    CHECK_EQ_INT(a.n, 12);
    CHECK_INSN(&a.insns[0], 0xbf, 0x16, 0, 0, 0, 0, 0, 0);
    CHECK_INSN(&a.insns[1], 0xb7, 0x00, 0, 0, 1, 0, 0, 0);
    CHECK_INSN(&a.insns[2], 0x07, 0x01, 0, 0, 0xf8, 0xff, 0xff, 0xff);
    CHECK_INSN(&a.insns[3], 0xaf, 0x12, 0, 0, 0, 0, 0, 0);
    CHECK_INSN(&a.insns[4], 0x57, 0x08, 0, 0, 0xf8, 0xff, 0xff, 0xff);
    CHECK_INSN(&a.insns[5], 0x79, 0x67, 0x70, 0x00, 0, 0, 0, 0);
    CHECK_INSN(&a.insns[6], 0x61, 0xa2, 0xd0, 0xff, 0, 0, 0, 0);
    CHECK_INSN(&a.insns[7], 0x7b, 0x8a, 0xe0, 0xff, 0, 0, 0, 0);
    CHECK_INSN(&a.insns[8], 0x62, 0x0a, 0xf0, 0xff, 0, 0, 0, 0);
    CHECK_INSN(&a.insns[9], 0xdb, 0x19, 0x30, 0x00, 0, 0, 0, 0);
    CHECK_INSN(&a.insns[10], 0x85, 0x00, 0, 0, 112, 0, 0, 0);
    CHECK_INSN(&a.insns[11], 0x95, 0x00, 0, 0, 0, 0, 0, 0);
    CHECK_EQ_INT(bpfa_finish(&a), 0);

    /* A 64-bit constant and a map: two instructions each. */
    bpfa_init(&a);
    bpfa_ld_imm64(&a, 3, 0x1122334455667788ull);
    bpfa_ld_map_fd(&a, 1, 5);
    CHECK_EQ_INT(a.n, 4);
    CHECK_INSN(&a.insns[0], 0x18, 0x03, 0, 0, 0x88, 0x77, 0x66, 0x55);
    CHECK_INSN(&a.insns[1], 0x00, 0x00, 0, 0, 0x44, 0x33, 0x22, 0x11);
    CHECK_INSN(&a.insns[2], 0x18, 0x11, 0, 0, 5, 0, 0, 0);
    CHECK_INSN(&a.insns[3], 0x00, 0x00, 0, 0, 0, 0, 0, 0);
}

static void test_labels(void)
{
    static struct bpf_asm a;
    bpfa_init(&a);
    bpfa_jmp_imm(&a, BPF_JEQ, 0, 0, 1);     /* forward over 2 */
    bpfa_label(&a, 0);
    bpfa_mov_imm(&a, 0, 0);
    bpfa_jmp_reg(&a, BPF_JNE, 1, 8, 0);     /* backward to the mov */
    bpfa_label(&a, 1);
    bpfa_ja(&a, 1);                         /* to itself: offset -1 */
    CHECK_EQ_INT(bpfa_finish(&a), 0);
    CHECK_INSN(&a.insns[0], 0x15, 0x00, 2, 0, 0, 0, 0, 0);
    CHECK_INSN(&a.insns[2], 0x5d, 0x81, 0xfe, 0xff, 0, 0, 0, 0);
    CHECK_INSN(&a.insns[3], 0x05, 0x00, 0xff, 0xff, 0, 0, 0, 0);

    /* A label never placed, or placed twice, fails the program. */
    bpfa_init(&a);
    bpfa_ja(&a, 2);
    CHECK_EQ_INT(bpfa_finish(&a), -1);
    bpfa_init(&a);
    bpfa_label(&a, 3);
    bpfa_label(&a, 3);
    CHECK_EQ_INT(bpfa_finish(&a), -1);
    bpfa_init(&a);
    bpfa_ja(&a, BPFA_MAX_LABELS);
    CHECK_EQ_INT(bpfa_finish(&a), -1);
}

/* ---- the filter, live ---- */

/* A chain like a thread's frames: each node has its key (the address of a
 * "code" object, tagged in its low bits) and the node below; a code's two
 * words are its identity. */
struct code {
    uint64_t id_a, id_b;
};

struct node {
    struct node *below;
    uint64_t key;
};

static volatile sig_atomic_t traps;

static void on_trap(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (kbp_cookie(si) == 0x77)
        traps++;
}

__attribute__((noipa)) int probed(struct node *n)
{
    __asm__ volatile("" ::: "memory");
    return n != NULL;
}

static long file_offset_of(const void *addr)
{
    FILE *fp = fopen("/proc/self/maps", "r");
    char line[512];
    long found = -1;
    while (fp && fgets(line, sizeof line, fp)) {
        unsigned long lo, hi, off;
        if (sscanf(line, "%lx-%lx %*s %lx", &lo, &hi, &off) == 3 &&
            (unsigned long)addr >= lo && (unsigned long)addr < hi)
            found = (long)((unsigned long)addr - lo + off);
    }
    if (fp)
        fclose(fp);
    return found;
}

static int calls_trapped(struct node *n, int times)
{
    int before = traps;
    for (int i = 0; i < times; i++)
        probed(n);
    return traps - before;
}

static void test_filter_live(void)
{
    struct ufilter f;
    char why[512] = "";
    if (ufilter_open(&f, 64, why, sizeof why) != 0) {
        printf("test_bpf: filter not run live (%s)\n", why);
        return;
    }
    struct stat ns;
    CHECK(stat("/proc/self/ns/pid", &ns) == 0);
    struct ufilter_spec spec = {
        .from_reg = offsetof(struct pt_regs, rdi),
        .tid_step = -1,
        .key_off = offsetof(struct node, key),
        .key_mask = ~(uint64_t)7,
        .link_off = offsetof(struct node, below),
        .check_keys = true,
        .walk_max = 8,
        .use_waiting = true,
        .id_off = {UFILTER_NONE, UFILTER_NONE},
    };
    spec.id_off[0] = offsetof(struct code, id_a);
    spec.id_off[1] = offsetof(struct code, id_b);
    int prog = ufilter_load(&f, &spec, why, sizeof why);
    long off = file_offset_of((const void *)probed);
    int ev = prog >= 0 && off >= 0 ? kbp_uprobe_open(0, "/proc/self/exe", (uint64_t)off, 0x77)
                                   : -1;
    if (prog < 0 || ev < 0) {
        printf("test_bpf: filter not run live (%s)\n", prog < 0 ? why : strerror(errno));
        if (prog >= 0)
            close(prog);
        ufilter_close(&f);
        return;
    }
    struct sigaction sa = {.sa_sigaction = on_trap, .sa_flags = SA_SIGINFO};
    struct sigaction old;
    sigaction(SIGTRAP, &sa, &old);
    CHECK_EQ_INT(ufilter_attach(ev, prog), 0);

    static struct code c1 = {1, 2}, c2 = {3, 4}, c3 = {5, 6}, c4[12];
    uint64_t k1 = (uint64_t)(uintptr_t)&c1, k2 = (uint64_t)(uintptr_t)&c2,
             k3 = (uint64_t)(uintptr_t)&c3;
    struct node bottom = {NULL, k1};
    struct node mid = {&bottom, k2 | 3};
    struct node top_same = {&mid, k1 | 1};   /* k1 again, further down */
    struct node top_other = {&mid, k3};
    uint64_t watched[2] = {k1, k3};

    CHECK_EQ_INT(ufilter_set(&f, watched, 2, false, false), 0);
    CHECK_EQ_INT(calls_trapped(&top_same, 10), 10);     /* watched, and below: re-entry */
    CHECK_EQ_INT(calls_trapped(&top_other, 10), 0);     /* watched, not below */
    CHECK_EQ_INT(calls_trapped(&mid, 10), 0);           /* not watched, not waiting */
    CHECK_EQ_INT(calls_trapped(&bottom, 10), 0);        /* watched, nothing below */

    /* Waiting: a key not seen stops until it is marked seen with its
     * identity; the same key with another identity (an object reborn at
     * that address) stops again. */
    CHECK_EQ_INT(ufilter_set(&f, watched, 2, true, false), 0);
    CHECK_EQ_INT(calls_trapped(&mid, 3), 3);
    CHECK_EQ_INT(ufilter_mark_seen(&f, k2, ufilter_identity(3, 4)), 0);
    CHECK_EQ_INT(calls_trapped(&mid, 3), 0);
    c2.id_b = 9;
    CHECK_EQ_INT(calls_trapped(&mid, 3), 3);

    /* A link that cannot be read stops (fail open), and so does a walk
     * deeper than walk_max. */
    struct node broken = {(struct node *)16, k3};
    CHECK_EQ_INT(ufilter_set(&f, watched, 2, false, false), 0);
    CHECK_EQ_INT(calls_trapped(&broken, 2), 2);
    struct node deep[12];
    for (int i = 0; i < 12; i++)
        deep[i] = (struct node){i ? &deep[i - 1] : NULL, (uint64_t)(uintptr_t)&c4[i]};
    uint64_t top_key = deep[11].key;
    CHECK_EQ_INT(ufilter_set(&f, &top_key, 1, false, false), 0);
    CHECK_EQ_INT(calls_trapped(&deep[11], 2), 2);
    CHECK_EQ_INT(calls_trapped(&deep[3], 2), 0);

    /* stop_all: every hit stops, whatever the key. */
    CHECK_EQ_INT(ufilter_set(&f, NULL, 0, false, true), 0);
    CHECK_EQ_INT(calls_trapped(&mid, 2), 2);
    CHECK_EQ_INT(ufilter_set(&f, NULL, 0, false, false), 0);
    CHECK_EQ_INT(calls_trapped(&mid, 2), 0);

    struct ufilter_state st;
    CHECK_EQ_INT(ufilter_counts(&f, &st), 0);
    CHECK_EQ_INT(st.runs, 10 + 10 + 10 + 10 + 3 + 3 + 3 + 2 + 2 + 2 + 2 + 2);
    CHECK_EQ_INT(st.stops_all, 2);
    CHECK_EQ_INT(st.stops_again, 10);
    CHECK_EQ_INT(st.stops_unseen, 3 + 3);
    CHECK_EQ_INT(st.stops_undecided, 2 + 2);
    CHECK_EQ_INT(st.stops_again + st.stops_unseen + st.stops_undecided + st.stops_all, traps);
    kbp_close(ev);
    close(prog);

    /* From a fixed address, as a thread state is reached: the word there
     * points to a "state" naming the thread that runs and its top node;
     * another thread's state stops (the filter cannot tell). */
    static struct { struct node *top; uint64_t tid; } state;
    static void *current = &state;
    struct ufilter_spec from_addr = spec;
    from_addr.from_reg = -1;
    from_addr.from_addr = (uint64_t)(uintptr_t)&current;
    from_addr.n_steps = 2;
    from_addr.steps[0] = 0;
    from_addr.steps[1] = 0;                  /* state.top */
    from_addr.tid_step = 0;
    from_addr.tid_off = 8;
    from_addr.ns_dev = (uint64_t)ns.st_dev;
    from_addr.ns_ino = (uint64_t)ns.st_ino;
    from_addr.use_waiting = false;
    prog = ufilter_load(&f, &from_addr, why, sizeof why);
    CHECK(prog >= 0);
    if (prog < 0)
        fprintf(stderr, "    %s\n", why);
    ev = kbp_uprobe_open(0, "/proc/self/exe", (uint64_t)off, 0x77);
    CHECK(ev >= 0 && ufilter_attach(ev, prog) == 0);
    CHECK_EQ_INT(ufilter_set(&f, watched, 2, false, false), 0);
    state.tid = (uint64_t)gettid();
    state.top = &top_other;
    CHECK_EQ_INT(calls_trapped(NULL, 5), 0);
    state.top = &top_same;
    CHECK_EQ_INT(calls_trapped(NULL, 5), 5);
    state.top = &top_other;
    state.tid = (uint64_t)gettid() + 1;
    CHECK_EQ_INT(calls_trapped(NULL, 5), 5);
    kbp_close(ev);
    close(prog);

    /* Without the watched keys' walk, and without waiting: the verifier
     * takes what is left (no unreachable code). */
    struct ufilter_spec bare = spec;
    bare.check_keys = false;
    prog = ufilter_load(&f, &bare, why, sizeof why);
    CHECK(prog >= 0);
    if (prog >= 0)
        close(prog);
    bare.use_waiting = false;
    prog = ufilter_load(&f, &bare, why, sizeof why);
    CHECK(prog >= 0);
    if (prog >= 0)
        close(prog);
    ufilter_close(&f);
    sigaction(SIGTRAP, &old, NULL);
}

int main(void)
{
    test_encodings();
    test_labels();
    test_filter_live();
    return unit_report("bpf");
}
