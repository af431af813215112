/* Bounded string helpers; see text.h. */
#include "util/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void text_copy(char *out, size_t size, const char *src)
{
    if (size == 0)
        return;
    size_t len = src ? strlen(src) : 0;
    if (len >= size)
        len = size - 1;
    if (len)
        memcpy(out, src, len);
    out[len] = '\0';
}

void text_format(char *out, size_t size, const char *fmt, ...)
{
    if (size == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, size, fmt, ap);
    va_end(ap);
}

void text_append(char *out, size_t size, const char *fmt, ...)
{
    size_t used = strnlen(out, size);
    if (used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + used, size - used, fmt, ap);
    va_end(ap);
}
