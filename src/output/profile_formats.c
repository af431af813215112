/* The table of profile output formats shared by record and run: a new writer
 * becomes available to both with one line here. */
#include "output/profile_formats.h"

#include <stdio.h>
#include <string.h>

static const struct profile_format formats[] = {
    {"flamegraph", "txt", profile_write_collapsed, false},
    {"collapsed", "txt", profile_write_collapsed, true},
    {"svg", "svg", profile_write_svg, false},
    {"speedscope", "speedscope.json", profile_write_speedscope, false},
    {"chrome", "trace.json", profile_write_chrome, false},
    {"pprof", "pb.gz", profile_write_pprof, false},
    {"json", "json", profile_write_json, false},
    {"html", "html", profile_write_html, false},
};

#define N_FORMATS (sizeof formats / sizeof formats[0])

const struct profile_format *profile_format_find(const char *name)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        if (strcmp(formats[i].name, name) == 0)
            return &formats[i];
    return NULL;
}

const struct profile_format *profile_format_for_path(const char *path)
{
    const struct profile_format *best = NULL;
    size_t len = strlen(path), best_len = 0;
    for (size_t i = 0; i < N_FORMATS; i++) {
        size_t ext = strlen(formats[i].extension);
        /* "x.speedscope.json" is speedscope's, not plain JSON: the longest wins. */
        if (formats[i].alias || ext + 1 > len || ext <= best_len || path[len - ext - 1] != '.' ||
            strcmp(path + len - ext, formats[i].extension) != 0)
            continue;
        best = &formats[i];
        best_len = ext;
    }
    return best;
}

const char *profile_format_names(void)
{
    static char names[256];
    if (names[0])
        return names;
    size_t used = 0;
    for (size_t i = 0; i < N_FORMATS; i++) {
        if (formats[i].alias)
            continue;
        int n = snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "",
                         formats[i].name);
        if (n < 0 || (size_t)n >= sizeof names - used)
            break;
        used += (size_t)n;
    }
    return names;
}
