/* Reading Python objects out of a target: type checks by tp_name, strings,
 * ints, and look-ups in dicts and instance attributes. Every function returns
 * -1 or false rather than guessing when memory is unreadable or odd. */
#ifndef PYSCOPE_PYTHON_OBJECTS_H
#define PYSCOPE_PYTHON_OBJECTS_H

#include <stdbool.h>
#include <stdint.h>
#include "python/runtime.h"

#define PY_TYPE_CACHE_SLOTS 64

struct py_type_cache {
    uint64_t type[PY_TYPE_CACHE_SLOTS];
    char name[PY_TYPE_CACHE_SLOTS][48];
};

struct py_reader {
    struct py_runtime *rt;
    struct target *t;
    const struct py_layout *L;
    struct py_type_cache types;
};

void py_reader_init(struct py_reader *r, struct py_runtime *rt);

/* The object's type address and tp_name; -1 when unreadable. */
int py_type_of(struct py_reader *r, uint64_t obj, uint64_t *type, const char **name);
/* The tp_name of the type object at type (cached by address). */
int py_type_name(struct py_reader *r, uint64_t type, const char **name);
/* Is obj an instance of exactly the type named name (e.g. "code", "frame")? */
bool py_is_type(struct py_reader *r, uint64_t obj, const char *name);

/* A str object as UTF-8 (checked to be a str). */
int py_str(struct py_reader *r, uint64_t obj, char *out, size_t outsize);
/* A small int object (checked); -1 when not an int or too large. */
int py_int(struct py_reader *r, uint64_t obj, int64_t *out);
/* Where instances of type keep the member (a __slots__ entry, a C type's
 * PyMemberDef) called name, read from its member descriptor in the type's
 * or a base's dict: 0 and *offset, or -1. */
int py_member_offset(struct py_reader *r, uint64_t type, const char *name, int64_t *offset);


/* d[key] for a dict whose keys are str; 0 and *value, or -1 when missing or unreadable. */
int py_dict_get_str(struct py_reader *r, uint64_t dict, const char *key, uint64_t *value);
/* Calls fn for each (key, value) of a dict, at most limit entries; returns the count or -1. */
int py_dict_items(struct py_reader *r, uint64_t dict, int limit,
                  int (*fn)(void *ctx, uint64_t key, uint64_t value), void *ctx);
/* obj.name from the instance's __dict__, managed dict or inline values. */
int py_attr_get(struct py_reader *r, uint64_t obj, const char *name, uint64_t *value);
/* Calls fn for each instance attribute (key is a str object), at most limit;
 * returns the count, or -1 when the object has no readable attributes. */
int py_attr_items(struct py_reader *r, uint64_t obj, int limit,
                  int (*fn)(void *ctx, uint64_t key, uint64_t value), void *ctx);

#endif
