/* The prologue-instruction emulator that steps threads over breakpoints:
 * decoding of the instructions compilers put first in a function, their
 * effect on registers and memory, and sub's flags compared with what this
 * CPU computes for the same operands. */
#include <stdint.h>
#include <string.h>

#include "target/breakpoint.h"
#include "unit.h"

static struct insn decode(const uint8_t *bytes, size_t n)
{
    struct insn in;
    insn_decode(bytes, n, &in);
    return in;
}

static void test_decode(void)
{
    const uint8_t endbr[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x55};
    struct insn in = decode(endbr, sizeof endbr);
    CHECK_EQ_INT(in.kind, INSN_NOP);
    CHECK_EQ_INT(in.len, 4);

    const uint8_t push_rbp[] = {0x55};
    in = decode(push_rbp, 1);
    CHECK_EQ_INT(in.kind, INSN_PUSH);
    CHECK_EQ_INT(in.src, 5);
    CHECK_EQ_INT(in.len, 1);

    const uint8_t push_r15[] = {0x41, 0x57};
    in = decode(push_r15, 2);
    CHECK_EQ_INT(in.kind, INSN_PUSH);
    CHECK_EQ_INT(in.src, 15);
    CHECK_EQ_INT(in.len, 2);

    const uint8_t mov_rsp_rbp[] = {0x48, 0x89, 0xe5};     /* mov %rsp,%rbp */
    in = decode(mov_rsp_rbp, 3);
    CHECK_EQ_INT(in.kind, INSN_MOV_RR);
    CHECK_EQ_INT(in.src, 4);
    CHECK_EQ_INT(in.dst, 5);

    const uint8_t mov_rdi_rbx[] = {0x48, 0x89, 0xfb};     /* mov %rdi,%rbx */
    in = decode(mov_rdi_rbx, 3);
    CHECK_EQ_INT(in.src, 7);
    CHECK_EQ_INT(in.dst, 3);

    const uint8_t mov_r12_rdi[] = {0x49, 0x89, 0xfc};     /* mov %rdi,%r12 */
    in = decode(mov_r12_rdi, 3);
    CHECK_EQ_INT(in.kind, INSN_MOV_RR);
    CHECK_EQ_INT(in.src, 7);
    CHECK_EQ_INT(in.dst, 12);

    const uint8_t mov_8b[] = {0x4c, 0x8b, 0xc7};          /* mov %rdi,%r8 (8b form) */
    in = decode(mov_8b, 3);
    CHECK_EQ_INT(in.kind, INSN_MOV_RR);
    CHECK_EQ_INT(in.src, 7);
    CHECK_EQ_INT(in.dst, 8);

    const uint8_t sub8[] = {0x48, 0x83, 0xec, 0x18};
    in = decode(sub8, 4);
    CHECK_EQ_INT(in.kind, INSN_SUB_RSP);
    CHECK_EQ_INT(in.imm, 0x18);
    CHECK_EQ_INT(in.len, 4);

    const uint8_t sub32[] = {0x48, 0x81, 0xec, 0xa8, 0x01, 0x00, 0x00};
    in = decode(sub32, 7);
    CHECK_EQ_INT(in.kind, INSN_SUB_RSP);
    CHECK_EQ_INT(in.imm, 0x1a8);
    CHECK_EQ_INT(in.len, 7);

    const uint8_t load[] = {0x8b, 0x05, 0x06, 0x2f, 0x00, 0x00};   /* mov 0x2f06(%rip),%eax */
    in = decode(load, sizeof load);
    CHECK_EQ_INT(in.kind, INSN_LOAD_RIP);
    CHECK_EQ_INT(in.dst, 0);
    CHECK_EQ_INT(in.imm, 0x2f06);
    CHECK_EQ_INT(in.len, 6);
    CHECK(!in.wide);

    const uint8_t load64[] = {0x4c, 0x8b, 0x1d, 0xf0, 0xff, 0xff, 0xff};  /* mov -0x10(%rip),%r11 */
    in = decode(load64, sizeof load64);
    CHECK_EQ_INT(in.kind, INSN_LOAD_RIP);
    CHECK_EQ_INT(in.dst, 11);
    CHECK_EQ_INT(in.imm, -0x10);
    CHECK(in.wide);

    const uint8_t lea[] = {0x48, 0x8d, 0x3d, 0x00, 0x01, 0x00, 0x00};   /* lea 0x100(%rip),%rdi */
    in = decode(lea, sizeof lea);
    CHECK_EQ_INT(in.kind, INSN_LEA_RIP);
    CHECK_EQ_INT(in.dst, 7);
    CHECK_EQ_INT(in.len, 7);

    const uint8_t xor32[] = {0x31, 0xc0};                          /* xor %eax,%eax */
    in = decode(xor32, 2);
    CHECK_EQ_INT(in.kind, INSN_XOR_SELF);
    CHECK_EQ_INT(in.dst, 0);
    const uint8_t xor_r12[] = {0x45, 0x31, 0xe4};                  /* xor %r12d,%r12d */
    in = decode(xor_r12, 3);
    CHECK_EQ_INT(in.kind, INSN_XOR_SELF);
    CHECK_EQ_INT(in.dst, 12);
    const uint8_t xor_two[] = {0x31, 0xd8};                        /* xor %ebx,%eax: not self */
    CHECK_EQ_INT(decode(xor_two, 2).kind, INSN_UNKNOWN);

    const uint8_t mov32[] = {0x89, 0xf8};                          /* mov %edi,%eax */
    in = decode(mov32, 2);
    CHECK_EQ_INT(in.kind, INSN_MOV_RR);
    CHECK_EQ_INT(in.src, 7);
    CHECK_EQ_INT(in.dst, 0);
    CHECK(!in.wide);

    /* Not emulated: memory operands, calls, truncated input. */
    const uint8_t mov_mem[] = {0x48, 0x89, 0x07};         /* mov %rax,(%rdi) */
    CHECK_EQ_INT(decode(mov_mem, 3).kind, INSN_UNKNOWN);
    const uint8_t call[] = {0xe8, 0, 0, 0, 0};
    CHECK_EQ_INT(decode(call, 5).kind, INSN_UNKNOWN);
    CHECK_EQ_INT(decode(sub32, 5).kind, INSN_UNKNOWN);
    CHECK_EQ_INT(decode(endbr, 3).kind, INSN_UNKNOWN);
}

static int fake_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    const uint64_t *expect = ctx;
    if (addr != expect[0])
        return -1;
    memcpy(buf, &expect[1], len);
    return 0;
}

static void test_apply(void)
{
    struct user_regs_struct regs;
    memset(&regs, 0, sizeof regs);
    regs.rip = 0x1000;
    regs.rsp = 0x7ff0;
    regs.r15 = 0x1234;
    const uint8_t push_r15[] = {0x41, 0x57};
    struct insn in = decode(push_r15, 2);
    bool store;
    uint64_t addr, value;
    CHECK_EQ_INT(insn_apply(&in, &regs, &store, &addr, &value, NULL, NULL), 0);
    CHECK(store);
    CHECK_EQ_INT(addr, 0x7fe8);
    CHECK_EQ_INT(value, 0x1234);
    CHECK_EQ_INT(regs.rsp, 0x7fe8);
    CHECK_EQ_INT(regs.rip, 0x1002);

    const uint8_t push_rsp[] = {0x54};
    in = decode(push_rsp, 1);
    insn_apply(&in, &regs, &store, &addr, &value, NULL, NULL);
    CHECK_EQ_INT(value, 0x7fe8);          /* the value before the push */
    CHECK_EQ_INT(regs.rsp, 0x7fe0);

    const uint8_t mov_rsp_rbp[] = {0x48, 0x89, 0xe5};
    in = decode(mov_rsp_rbp, 3);
    insn_apply(&in, &regs, &store, &addr, &value, NULL, NULL);
    CHECK(!store);
    CHECK_EQ_INT(regs.rbp, 0x7fe0);
    CHECK_EQ_INT(regs.rip, 0x1006);

    /* 32-bit forms zero the upper half, as the CPU does. */
    regs.rdi = 0xffffffff12345678ull;
    regs.rax = 0xdeadbeefdeadbeefull;
    const uint8_t mov32[] = {0x89, 0xf8};
    in = decode(mov32, 2);
    insn_apply(&in, &regs, &store, &addr, &value, NULL, NULL);
    CHECK_EQ_INT(regs.rax, 0x12345678);

    /* A rip-relative load reads from the address after the instruction. */
    regs.rip = 0x1100;
    const uint8_t load[] = {0x8b, 0x05, 0x06, 0x2f, 0x00, 0x00};
    in = decode(load, sizeof load);
    uint64_t memory[2] = {0x1106 + 0x2f06, 0x1122334455667788ull};
    CHECK_EQ_INT(insn_apply(&in, &regs, &store, &addr, &value, fake_read, memory), 0);
    CHECK_EQ_INT(regs.rax, 0x55667788);
    CHECK_EQ_INT(regs.rip, 0x1106);
    memory[0] = 0;     /* unreadable: the emulator declines */
    regs.rip = 0x1100;
    CHECK_EQ_INT(insn_apply(&in, &regs, &store, &addr, &value, fake_read, memory), -1);

    regs.rip = 0x2000;
    const uint8_t lea[] = {0x48, 0x8d, 0x3d, 0x00, 0x01, 0x00, 0x00};
    in = decode(lea, sizeof lea);
    insn_apply(&in, &regs, &store, &addr, &value, NULL, NULL);
    CHECK_EQ_INT(regs.rdi, 0x2107);

    regs.eflags = 0x202 | 0x8d5;
    regs.r12 = 77;
    const uint8_t xor_r12[] = {0x45, 0x31, 0xe4};
    in = decode(xor_r12, 3);
    insn_apply(&in, &regs, &store, &addr, &value, NULL, NULL);
    CHECK_EQ_INT(regs.r12, 0);
    CHECK_EQ_INT(regs.eflags & 0x8d5, 0x44);       /* ZF and PF only */
    CHECK_EQ_INT(regs.eflags & 0x200, 0x200);
}

static unsigned long long native_sub_flags(uint64_t a, uint64_t b)
{
    unsigned long long flags;
    __asm__ volatile("sub %2, %1\n\tpushfq\n\tpop %0" : "=r"(flags), "+r"(a) : "r"(b) : "cc");
    return flags;
}

static void test_sub_flags(void)
{
    const unsigned long long mask = 0x8d5;    /* CF PF AF ZF SF OF */
    const uint64_t values[] = {0, 1, 0x18, 0x1a8, 0x7fffffffffffffffull, 0x8000000000000000ull,
                               0xffffffffffffffffull, 0x7ffc1234abcd0, 0x10, 0x0f, 0x100};
    const int32_t imms[] = {0, 1, 0x18, 0x1a8, -8, 0x10, 0x7fffffff, -0x80000000};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        for (size_t k = 0; k < sizeof imms / sizeof imms[0]; k++) {
            struct user_regs_struct regs;
            memset(&regs, 0, sizeof regs);
            regs.rsp = values[i];
            regs.eflags = 0x202;
            struct insn in = {.kind = INSN_SUB_RSP, .len = 7, .imm = imms[k]};
            bool store;
            uint64_t addr, value;
            insn_apply(&in, &regs, &store, &addr, &value, NULL, NULL);
            uint64_t b = (uint64_t)(int64_t)imms[k];
            CHECK_EQ_INT(regs.rsp, values[i] - b);
            CHECK_EQ_INT(regs.eflags & mask, native_sub_flags(values[i], b) & mask);
            CHECK_EQ_INT(regs.eflags & 0x200, 0x200);   /* other flags untouched */
        }
    }
}

int main(void)
{
    test_decode();
    test_apply();
    test_sub_flags();
    return unit_report("test_breakpoint");
}
