/* A set of target addresses, for walks of linked lists in memory that
 * changes while it is read: a node seen twice means the list was torn
 * (a node freed and its memory reused while we followed it), not longer. */
#ifndef PYSCOPE_UTIL_ADDRSET_H
#define PYSCOPE_UTIL_ADDRSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct addrset {
    uint64_t *slots;
    size_t cap; /* a power of two, at least twice the most it holds */
    size_t n;
};

/* Room for max addresses; 0 on success. */
int addrset_init(struct addrset *s, size_t max);
/* Empties the set, keeping its memory. */
void addrset_clear(struct addrset *s);
/* Adds addr (not 0); false when it was there already or the set is full. */
bool addrset_add(struct addrset *s, uint64_t addr);
/* Is addr in the set? */
bool addrset_has(const struct addrset *s, uint64_t addr);
void addrset_free(struct addrset *s);

#endif
