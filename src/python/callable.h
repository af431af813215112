/* The C callable a Python frame stopped at a call is calling, read from its
 * value stack: builtin functions and methods, method descriptors, C types
 * and ctypes function pointers. */
#ifndef PYSCOPE_PYTHON_CALLABLE_H
#define PYSCOPE_PYTHON_CALLABLE_H

#include <stdbool.h>
#include <stddef.h>
#include "python/frames.h"
#include "python/frame_vars.h"
#include "python/objects.h"

#define PY_C_CALLABLE_MAX 192

/* 0 and the callable's name ("re.Pattern.match", "checksum_blocks
 * (libhog.so)") when f's current instruction calls a C callable that can
 * be told for certain; -1 otherwise. */
int py_frame_c_callable(struct py_reader *r, struct py_vars_cache *cache, const struct py_frame *f,
                        char *out, size_t size);

/* The parts, for samplers that cache them: the kind of call f's current
 * instruction makes (0 when it is no call; *oparg set otherwise), the C
 * callable it calls (0 when none can be told for certain), and its name. */
char py_frame_call_kind(struct py_reader *r, const struct py_frame *f, int *oparg);
/* *slot_addr (when not NULL) gets the address of the value-stack slot it
 * was found in: the stack's depth at an instruction is fixed by the compiler,
 * so that the same call site finds its callable in the same slot again. */
uint64_t py_frame_c_callable_find(struct py_reader *r, struct py_vars_cache *cache,
                                  const struct py_frame *f, char kind, int oparg,
                                  uint64_t *slot_addr);
/* 0; 1 when the name is only "unnamed ctypes function at 0x..." (a library
 * mapped since the target's maps were read would tell more); -1. */
int py_c_callable_name(struct py_reader *r, uint64_t obj, char *out, size_t size);
/* Whether obj lives as long as what defines it (a module's function, a
 * class's method descriptor, a static type, a ctypes function pointer), as
 * against a builtin bound to an instance, which a call through a stored or
 * passed bound method made moments ago and may free the next, letting
 * another bound method take its address. */
bool py_c_callable_lasting(struct py_reader *r, uint64_t obj);

#endif
