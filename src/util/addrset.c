/* Open addressing with linear probing: walks add a few thousand addresses
 * at most and are cleared for every walk. */
#include "util/addrset.h"

#include <stdlib.h>
#include <string.h>

int addrset_init(struct addrset *s, size_t max)
{
    size_t cap = 16;
    while (cap < max * 2)
        cap *= 2;
    s->slots = calloc(cap, sizeof *s->slots);
    s->cap = s->slots ? cap : 0;
    s->n = 0;
    return s->slots ? 0 : -1;
}

void addrset_clear(struct addrset *s)
{
    if (s->n && s->slots)
        memset(s->slots, 0, s->cap * sizeof *s->slots);
    s->n = 0;
}

/* Heap addresses differ in their middle bits; mixed so that nodes of one
 * size class do not share a probe run. */
static size_t first_slot(const struct addrset *s, uint64_t addr)
{
    return (size_t)((addr * 0x9e3779b97f4a7c15ull) >> 32) & (s->cap - 1);
}

bool addrset_has(const struct addrset *s, uint64_t addr)
{
    if (!s->slots || addr == 0)
        return false;
    for (size_t i = first_slot(s, addr);; i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i] == addr)
            return true;
        if (s->slots[i] == 0)
            return false;
    }
}

bool addrset_add(struct addrset *s, uint64_t addr)
{
    if (!s->slots || addr == 0 || s->n * 2 >= s->cap)
        return false;
    for (size_t i = first_slot(s, addr);; i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i] == addr)
            return false;
        if (s->slots[i] == 0) {
            s->slots[i] = addr;
            s->n++;
            return true;
        }
    }
}

void addrset_free(struct addrset *s)
{
    free(s->slots);
    memset(s, 0, sizeof *s);
}
