/* A small streaming JSON writer to a FILE*: it places commas and colons
 * itself, escapes strings (repairing invalid UTF-8), and can pretty-print.
 * Misuse (a value where a key is due, unbalanced ends, nesting deeper than
 * JSON_MAX_DEPTH) puts the writer in a failed state instead of emitting
 * invalid JSON; every later call is then a no-op returning -1. */
#ifndef PYSCOPE_OUTPUT_JSON_WRITER_H
#define PYSCOPE_OUTPUT_JSON_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 64

struct json_writer {
    FILE *out;
    int indent;             /* spaces per level; 0 writes compact JSON */
    int depth;              /* open containers */
    unsigned char open[JSON_MAX_DEPTH]; /* per container: kind and whether it has members */
    bool key_pending;       /* a key was written and its value is due */
    bool wrote_top_level;   /* a complete top-level value has been written */
    bool failed;
};

/* indent 0: {"a":[1,2]}; indent 2: the layout of Python's json.dumps(indent=2).
 * Several top-level values may be written; they are separated by newlines
 * (JSON Lines). */
void json_init(struct json_writer *w, FILE *out, int indent);

/* Each returns 0, or -1 once the writer has failed. */
int json_begin_object(struct json_writer *w);
int json_end_object(struct json_writer *w);
int json_begin_array(struct json_writer *w);
int json_end_array(struct json_writer *w);
int json_key(struct json_writer *w, const char *key);
/* NUL-terminated; NULL writes null. */
int json_string(struct json_writer *w, const char *s);
/* len bytes, which may include NULs (written as \u0000). */
int json_string_n(struct json_writer *w, const char *s, size_t len);
int json_int(struct json_writer *w, int64_t v);
int json_uint(struct json_writer *w, uint64_t v);
/* Shortest form that reads back exactly; NaN and infinities become null. */
int json_double(struct json_writer *w, double v);
int json_bool(struct json_writer *w, bool v);
int json_null(struct json_writer *w);

/* key + value in one call, for the common object member. */
int json_member_string(struct json_writer *w, const char *key, const char *s);
int json_member_int(struct json_writer *w, const char *key, int64_t v);
int json_member_uint(struct json_writer *w, const char *key, uint64_t v);
int json_member_bool(struct json_writer *w, const char *key, bool v);
int json_member_null(struct json_writer *w, const char *key);

/* 0 when every container is closed, nothing was misused and the stream
 * reported no error; flushes the stream. Writes a final newline after a
 * top-level value when pretty-printing. */
int json_finish(struct json_writer *w);

#endif
