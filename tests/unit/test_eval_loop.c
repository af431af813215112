/* Unit tests for python/eval_loop.c: the interpreter loop's table of opcode
 * handlers found among a binary's data, beside the runs of code addresses
 * a switch's jump table makes, and no guess when two tables fit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_target.h"
#include "python/eval_loop.h"
#include "unit.h"

#define BIN "/usr/bin/python3.x"
#define CODE 0x400000ull
#define DATA 0x900000ull

/* Gives the fake target's mapping at start the binary's name and perms. */
static void name_map(struct target *t, uint64_t start, const char *perms)
{
    for (size_t i = 0; i < t->nmaps; i++) {
        if (t->maps[i].start == start) {
            t->maps[i].path = strdup(BIN);
            memcpy(t->maps[i].perms, perms, 5);
        }
    }
}

/* 256 handlers: every fourth opcode unused (one label), the rest apart. */
static void fill_table(uint64_t *w, uint64_t base)
{
    for (int op = 0; op < 256; op++)
        w[op] = op % 4 == 1 ? base + 0x10 : base + 0x100 + (uint64_t)op * 0x40;
}

/* A switch over a byte: 256 addresses, few targets. */
static void fill_switch(uint64_t *w, uint64_t base)
{
    for (int i = 0; i < 256; i++)
        w[i] = base + (uint64_t)(i % 20) * 8;
}

static struct target *make(const uint64_t *data, size_t words)
{
    struct target *t = fake_target_new();
    static unsigned char code[0x40000];
    CHECK_EQ_INT(fake_target_map(t, CODE, code, sizeof code), 0);
    CHECK_EQ_INT(fake_target_map(t, DATA, data, words * 8), 0);
    name_map(t, CODE, "r-xp");
    name_map(t, DATA, "r--p");
    return t;
}

static void test_found_beside_other_runs(void)
{
    /* A stray pointer, a switch table, a gap, the table, a gap. */
    uint64_t *d = calloc(1024, 8);
    d[0] = CODE + 8;
    fill_switch(d + 10, CODE + 0x20000);
    fill_table(d + 300, CODE + 0x1000);
    struct target *t = make(d, 1024);
    int ops[2] = {151, 150};
    uint64_t out[2] = {0, 0};
    CHECK_EQ_INT(py_opcode_handlers(t, BIN, ops, 2, out), 0);
    CHECK(out[0] == CODE + 0x1000 + 0x100 + 151 * 0x40);
    CHECK(out[1] == CODE + 0x1000 + 0x100 + 150 * 0x40);
    /* An opcode whose entry is the unused label is no handler: not this table. */
    int unused[1] = {5};
    CHECK_EQ_INT(py_opcode_handlers(t, BIN, unused, 1, out), -1);
    /* Another file's mappings are not looked at. */
    CHECK_EQ_INT(py_opcode_handlers(t, "/usr/lib/libother.so", ops, 2, out), -1);
    fake_target_free(t);
    free(d);
}

static void test_two_side_by_side(void)
{
    /* 3.15 keeps a second table of 256 right beside: a run of 512 whose
     * first half has two targets only. */
    uint64_t *d = calloc(1024, 8);
    for (int i = 0; i < 256; i++)
        d[100 + i] = CODE + (i == 7 ? 0x80 : 0x40);
    fill_table(d + 356, CODE + 0x2000);
    struct target *t = make(d, 1024);
    int ops[1] = {128};
    uint64_t out[1] = {0};
    CHECK_EQ_INT(py_opcode_handlers(t, BIN, ops, 1, out), 0);
    CHECK(out[0] == CODE + 0x2000 + 0x100 + 128 * 0x40);
    fake_target_free(t);
    free(d);
}

static void test_no_guess(void)
{
    /* Two tables that both fit, apart: refused. */
    uint64_t *d = calloc(2048, 8);
    fill_table(d + 10, CODE + 0x1000);
    fill_table(d + 600, CODE + 0x9000);
    struct target *t = make(d, 2048);
    int ops[1] = {151};
    uint64_t out[1] = {0};
    CHECK_EQ_INT(py_opcode_handlers(t, BIN, ops, 1, out), -1);
    fake_target_free(t);
    /* A run of 300 code addresses is no table of 256, even if part of it
     * would pass for one. */
    memset(d, 0, 2048 * 8);
    fill_table(d + 10, CODE + 0x1000);
    for (int i = 266; i < 310; i++)
        d[i] = CODE + 0x30000;
    t = make(d, 2048);
    CHECK_EQ_INT(py_opcode_handlers(t, BIN, ops, 1, out), -1);
    /* Opcodes out of range are refused, not read past the table. */
    int bad[1] = {300};
    CHECK_EQ_INT(py_opcode_handlers(t, BIN, bad, 1, out), -1);
    fake_target_free(t);
    free(d);
}

int main(void)
{
    test_found_beside_other_runs();
    test_two_side_by_side();
    test_no_guess();
    return unit_report("test_eval_loop");
}
