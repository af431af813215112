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

/* The format whose extension ends path ("profile.svg": svg, "x.pb.gz":
 * pprof), the longest such; NULL when none does. Used when -o is given
 * without -f, so that py-spy's `-o profile.svg` gives an SVG. */
const struct profile_format *profile_format_for_path(const char *path);

/* "flamegraph, speedscope, ...": every format's name, aliases left out, for
 * usage texts and messages. */
const char *profile_format_names(void);

#endif
