/* run_counter: how many times the scheduler has charged CPU time to any
 * thread of each watched thread group, counted in the kernel by a BPF
 * program on the sched_stat_runtime tracepoint into an array this process
 * maps: a look is a load from memory, no system call. */
#include "target/run_counter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "target/bpf.h"

static int slots_fd = -1, counts_fd = -1, prog_fd = -1, link_fd = -1;
static volatile uint64_t *counts; /* RUN_COUNTER_SLOTS, shared with the program */
static size_t counts_size;
/* Each slot's thread group (0: free). A group has one slot: a second
 * watch of it is refused, since the map can lead the program to only one. */
static pid_t owner[RUN_COUNTER_SLOTS];

enum { OUT };

/* r0 = the element of map fd whose key is the 32-bit r(key), stored at
 * fp+off; to OUT when there is none. */
static void lookup(struct bpf_asm *a, int fd, int key, int16_t off)
{
    bpfa_stx(a, BPF_W, BPF_REG_10, off, key);
    bpfa_ld_map_fd(a, BPF_REG_1, fd);
    bpfa_mov_reg(a, BPF_REG_2, BPF_REG_10);
    bpfa_alu_imm(a, BPF_ADD, BPF_REG_2, off);
    bpfa_call(a, BPF_FUNC_map_lookup_elem);
    bpfa_jmp_imm(a, BPF_JEQ, BPF_REG_0, 0, OUT);
}

/* For the thread running now (the tracepoint fires in its context at every
 * tick it runs through and when it is switched out, its exit included),
 * the count of its thread group's slot, if the group has one. A charge
 * made from another CPU's context (a wake-up updating a remote run queue)
 * counts for the waker instead: the charged thread is counted at its own
 * next tick or switch. */
static int assemble(struct bpf_asm *a)
{
    bpfa_init(a);
    bpfa_call(a, BPF_FUNC_get_current_pid_tgid);
    bpfa_alu_imm(a, BPF_RSH, BPF_REG_0, 32);
    lookup(a, slots_fd, BPF_REG_0, -4);
    bpfa_ldx(a, BPF_W, BPF_REG_1, BPF_REG_0, 0);
    lookup(a, counts_fd, BPF_REG_1, -8);
    bpfa_mov_imm(a, BPF_REG_1, 1);
    bpfa_atomic_add64(a, BPF_REG_0, 0, BPF_REG_1);
    bpfa_label(a, OUT);
    bpfa_mov_imm(a, BPF_REG_0, 0);
    bpfa_exit(a);
    return bpfa_finish(a);
}

int run_counter_start(char *why, size_t why_size)
{
    if (link_fd >= 0)
        return 0;
    slots_fd = bpf_map_create(BPF_MAP_TYPE_HASH, sizeof(uint32_t), sizeof(uint32_t),
                              RUN_COUNTER_SLOTS, "pyscope_slots");
    counts_fd = bpf_map_create_flags(BPF_MAP_TYPE_ARRAY, sizeof(uint32_t), sizeof(uint64_t),
                                     RUN_COUNTER_SLOTS, BPF_F_MMAPABLE, "pyscope_runs");
    if (slots_fd < 0 || counts_fd < 0) {
        snprintf(why, why_size, "BPF map: %s", strerror(errno));
        run_counter_stop();
        return -1;
    }
    long page = sysconf(_SC_PAGESIZE);
    counts_size = (RUN_COUNTER_SLOTS * sizeof(uint64_t) + (size_t)page - 1) / (size_t)page *
                  (size_t)page;
    void *m = mmap(NULL, counts_size, PROT_READ | PROT_WRITE, MAP_SHARED, counts_fd, 0);
    if (m == MAP_FAILED) {
        snprintf(why, why_size, "mapping the BPF array: %s", strerror(errno));
        run_counter_stop();
        return -1;
    }
    counts = m;
    struct bpf_asm *a = malloc(sizeof *a);
    char *log = malloc(4096);
    if (!a || !log || assemble(a) != 0) {
        snprintf(why, why_size, "BPF program: %s",
                 a && log ? "could not be assembled" : "out of memory");
        free(a);
        free(log);
        run_counter_stop();
        return -1;
    }
    log[0] = '\0';
    prog_fd = bpf_prog_load(BPF_PROG_TYPE_RAW_TRACEPOINT, "pyscope_runs", a->insns, a->n, log,
                            4096);
    if (prog_fd < 0)
        snprintf(why, why_size, "BPF program load: %s%s%.80s", strerror(errno),
                 log[0] ? ": " : "", log);
    free(a);
    free(log);
    if (prog_fd < 0) {
        run_counter_stop();
        return -1;
    }
    link_fd = bpf_raw_tracepoint_open("sched_stat_runtime", prog_fd);
    if (link_fd < 0) {
        snprintf(why, why_size, "attaching to sched_stat_runtime: %s", strerror(errno));
        run_counter_stop();
        return -1;
    }
    return 0;
}

bool run_counter_on(void)
{
    return link_fd >= 0;
}

int run_counter_watch(pid_t tgid)
{
    if (link_fd < 0 || tgid <= 0)
        return -1;
    uint32_t free_slot = RUN_COUNTER_SLOTS;
    for (uint32_t slot = 0; slot < RUN_COUNTER_SLOTS; slot++) {
        if (owner[slot] == tgid)
            return -1;
        if (!owner[slot] && free_slot == RUN_COUNTER_SLOTS)
            free_slot = slot;
    }
    if (free_slot == RUN_COUNTER_SLOTS)
        return -1;
    /* A program that found the slot's last owner a moment before it was
     * let go may still add to it: one look not still, no more. */
    counts[free_slot] = 0;
    uint32_t key = (uint32_t)tgid;
    if (bpf_map_update(slots_fd, &key, &free_slot, BPF_ANY) != 0)
        return -1;
    owner[free_slot] = tgid;
    return (int)free_slot;
}

uint64_t run_counter_count(int slot)
{
    if (!counts || slot < 0 || slot >= RUN_COUNTER_SLOTS)
        return 0;
    return __atomic_load_n(&counts[slot], __ATOMIC_RELAXED);
}

void run_counter_unwatch(pid_t tgid, int slot)
{
    if (slots_fd < 0 || tgid <= 0 || slot < 0 || slot >= RUN_COUNTER_SLOTS || owner[slot] != tgid)
        return;
    uint32_t key = (uint32_t)tgid;
    bpf_map_delete(slots_fd, &key);
    owner[slot] = 0;
}

void run_counter_stop(void)
{
    if (link_fd >= 0)
        close(link_fd);
    if (prog_fd >= 0)
        close(prog_fd);
    if (counts)
        munmap((void *)counts, counts_size);
    counts = NULL;
    if (counts_fd >= 0)
        close(counts_fd);
    if (slots_fd >= 0)
        close(slots_fd);
    link_fd = prog_fd = counts_fd = slots_fd = -1;
    memset(owner, 0, sizeof owner);
}
