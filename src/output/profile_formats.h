/* The profile output formats by the names users give on the command line
 * (-f), with the file extension each one's default output name takes. One
 * table for every command that writes a profile (record, run --record-last). */
#ifndef PYSCOPE_OUTPUT_PROFILE_FORMATS_H
#define PYSCOPE_OUTPUT_PROFILE_FORMATS_H

#include <stdbool.h>
#include <stdio.h>

#include "output/profile_writers.h"

struct profile_format {
    const char *name;
    const char *extension;
    int (*write)(FILE *out, const struct profile *p, const struct profile_write_options *o);
    bool alias;               /* another name for a format listed before it */
};

/* The format called name, or NULL. */
const struct profile_format *profile_format_find(const char *name);

/* "flamegraph, speedscope, ...": every format's name, aliases left out, for
 * usage texts and messages. */
const char *profile_format_names(void);

#endif
