/* An in-memory stand-in for a live process: tests place byte images at
 * chosen addresses and hand the result to code that reads through
 * struct target, so decoders can be tested without a real process. */
#ifndef PYSCOPE_TESTS_FAKE_TARGET_H
#define PYSCOPE_TESTS_FAKE_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "target/target.h"

/* A target with no memory, no threads and no page cache (target_cache_enable
 * turns it on); raw reads are counted in t->stats as for a live target. Like
 * a core it declares no capabilities: one instant of memory and threads.
 * Reads go through src/target/target.c, so tests link it. */
struct target *fake_target_new(void);

/* Copies len bytes so they appear at [addr, addr+len). Regions may touch but
 * must not overlap. Also records a "rw-p" anonymous entry in t->maps so code
 * that looks at mappings sees the region. Returns 0, or -1 on overlap/OOM. */
int fake_target_map(struct target *t, uint64_t addr, const void *bytes, size_t len);

/* Gives the target a scattered read (ops->read_spans) that counts its calls
 * and the pieces asked for, as a live process has. */
void fake_target_enable_spans(struct target *t);
void fake_target_span_counts(struct target *t, size_t *calls, size_t *spans);
/* The addresses of the last scattered read's pieces, in the order read. */
size_t fake_target_last_pieces(struct target *t, uint64_t *addrs, size_t max);

struct thread_activity;
/* Adds kernel thread tid (or changes it): target_list_threads lists it and
 * target_thread_activity answers activity for it. Returns 0 or -1. */
int fake_target_set_thread(struct target *t, pid_t tid, const struct thread_activity *activity);

/* Same as target_close. */
void fake_target_free(struct target *t);

#endif
