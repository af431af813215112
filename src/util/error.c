/* Formatting and printing of user-facing errors. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>

void error_set(struct pyscope_error *err, enum pyscope_status status, const char *fmt, ...)
{
    if (!err)
        return;
    err->status = status;
    err->hint[0] = '\0';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

void error_hint(struct pyscope_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->hint, sizeof err->hint, fmt, ap);
    va_end(ap);
}

int error_report(const struct pyscope_error *err)
{
    fprintf(stderr, "pyscope: %s\n", err->message);
    if (err->hint[0])
        fprintf(stderr, "%s\n", err->hint);
    return err->status ? (int)err->status : PYSCOPE_ERR_OTHER;
}
