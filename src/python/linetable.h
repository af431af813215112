/* Source line lookup from a code object's line table, for every table format
 * CPython 3.8-3.15 uses. Pure functions over bytes already copied out of the
 * target; no I/O. */
#ifndef PYSCOPE_PYTHON_LINETABLE_H
#define PYSCOPE_PYTHON_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

#include "python/layout.h"

/* Each decoder returns the source line of the instruction starting
 * byte_offset bytes into the code object's bytecode, or -1 when that
 * instruction has no line, lies past the table, or the table is malformed.
 * A negative byte_offset (a frame that has not started executing) yields
 * firstlineno, as the interpreter itself reports for such frames.
 * Reads never go past table[len-1]; table may be NULL when len is 0. */

/* 3.8-3.9 co_lnotab; byte_offset is the frame's f_lasti. */
int py_line_for_offset_lnotab(const uint8_t *table, size_t len, int firstlineno, int byte_offset);

/* 3.10 co_linetable (PEP 626); byte_offset is f_lasti * 2. */
int py_line_for_offset_linetable310(const uint8_t *table, size_t len, int firstlineno,
                                    int byte_offset);

/* 3.11+ location table; byte_offset is instr_ptr (prev_instr on 3.11/3.12)
 * minus the address of the first code unit. */
int py_line_for_offset_locations(const uint8_t *table, size_t len, int firstlineno,
                                 int byte_offset);

/* Picks the decoder for kind; an unknown kind yields -1. */
int py_line_for_offset(enum py_linetable_kind kind, const uint8_t *table, size_t len,
                       int firstlineno, int byte_offset);

#endif
