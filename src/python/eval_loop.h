/* The interpreter loop's handlers of opcodes, for breakpoints that must see
 * every start of a frame where debug registers do not trap (watch). */
#ifndef PYSCOPE_PYTHON_EVAL_LOOP_H
#define PYSCOPE_PYTHON_EVAL_LOOP_H

#include <stdint.h>

#include "target/target.h"

/* The addresses where the interpreter loop (computed gotos) starts running
 * opcodes[0..n), found in the table of 256 handler addresses kept in the
 * data of binary (the file holding the runtime, as the target's maps name
 * it). 0, or -1 when no table, or more than one, fits. */
int py_opcode_handlers(struct target *t, const char *binary, const int *opcodes, int n,
                       uint64_t *out);

#endif
