/* A uprobe that stops the thread only when it matters: an eBPF program,
 * attached to each of the uprobe's perf events (PERF_EVENT_IOC_SET_BPF),
 * runs in the kernel at every hit, and the event (and so its SIGTRAP and
 * the ptrace stop) happens only when the program returns 1. The program
 * knows nothing of Python; the caller describes, with offsets, a chain of
 * pointers from the probe's registers (or a fixed address) to an object
 * (a frame), the key it holds (its code object), and the link to the next
 * object (the frame below). The program stops the thread when
 *   - the key is one of the watched keys and it is found again down the
 *     links (or the walk could not tell: too deep), or
 *   - waiting is on and {key, identity of the key} is not in the seen set,
 * and on any read that fails (a missed stop is worse than a slow one); and
 * always while the caller sets stop_all. */
#ifndef PYSCOPE_TARGET_UPROBE_FILTER_H
#define PYSCOPE_TARGET_UPROBE_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UFILTER_KEYS 4
#define UFILTER_MAX_STEPS 4
#define UFILTER_NONE (-1L)

struct ufilter_spec {
    /* Where the chain starts: a register of the thread at the probe (its
     * byte offset in the kernel's struct pt_regs), else the address of a
     * word in the process. */
    long from_reg;
    uint64_t from_addr;
    /* Then p = *(p + steps[i]) for each step (from an address, the first
     * step reads the word itself: steps[0] = 0). None may give 0. */
    int n_steps;
    long steps[UFILTER_MAX_STEPS];
    /* After step tid_step, p must hold the probed thread's id (as the
     * process's pid namespace numbers it, whose device and inode are
     * ns_dev and ns_ino) at tid_off, 8 bytes; else the thread stops. */
    int tid_step;
    long tid_off;
    uint64_t ns_dev, ns_ino;
    /* The object reached: its key (masked with key_mask) and its link. */
    long key_off;
    uint64_t key_mask;
    long link_off;
    bool check_keys;           /* stop on watched keys found again down the links */
    int walk_max;              /* how many links down (stop when deeper) */
    bool use_waiting;          /* stop on keys not in the seen set while waiting */
    /* The key's identity: the words at key + id_off[0] and id_off[1]
     * (UFILTER_NONE: 0), combined as ufilter_identity does. */
    long id_off[2];
};

struct ufilter {
    int state_fd;              /* array map of one struct ufilter_state */
    int seen_fd;               /* hash map {key, identity} -> u32 */
    unsigned seen_max;
    bool seen_full;
};

/* The one element of the state map; the program counts its runs and, by
 * why, the stops it let happen. */
struct ufilter_state {
    uint64_t keys[UFILTER_KEYS];   /* 0: unused */
    uint64_t waiting;
    uint64_t stop_all;             /* every hit stops (the caller needs them all for now) */
    uint64_t runs;
    uint64_t stops_all;            /* stopped for stop_all */
    uint64_t stops_again;          /* a watched key found again down the links */
    uint64_t stops_unseen;         /* waiting, and not in the seen set */
    uint64_t stops_undecided;      /* a read failed, or the links went deeper than walk_max */
};

/* Creates the maps: 0, or -1 with why set (the kernel's refusal). */
int ufilter_open(struct ufilter *f, unsigned seen_max, char *why, size_t why_size);
void ufilter_close(struct ufilter *f);
/* Assembles spec's program (into insns, up to max; the count returned, or
 * -1) with f's maps. Separate from the load for the unit tests. */
int ufilter_assemble(const struct ufilter *f, const struct ufilter_spec *spec, void *insns,
                     int max);
/* Assembles and loads: the program's descriptor, or -1 with why set. */
int ufilter_load(struct ufilter *f, const struct ufilter_spec *spec, char *why, size_t why_size);
/* Sets the watched keys and the flags (the counts are kept). */
int ufilter_set(struct ufilter *f, const uint64_t *keys, int n, bool waiting, bool stop_all);
/* Adds {key, identity} to the seen set; -1 when full (the key keeps
 * stopping threads). */
int ufilter_mark_seen(struct ufilter *f, uint64_t key, uint64_t identity);
/* The state, with the program's counts so far. */
int ufilter_counts(const struct ufilter *f, struct ufilter_state *out);
/* How the program combines the identity words: (a ^ (b << 1)) | 1. */
uint64_t ufilter_identity(uint64_t a, uint64_t b);
/* Attaches program prog to the perf event event_fd (a uprobe's). */
int ufilter_attach(int event_fd, int prog);

#endif
