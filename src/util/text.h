/* Bounded string building for fixed-size report fields: text that does not
 * fit is cut, which is what a fixed field wants, without tripping
 * -Wformat-truncation at every call. */
#ifndef PYSCOPE_UTIL_TEXT_H
#define PYSCOPE_UTIL_TEXT_H

#include <stddef.h>

/* Copies src into out (size bytes, always terminated). */
void text_copy(char *out, size_t size, const char *src);
/* snprintf into out; output that does not fit is cut. */
__attribute__((format(printf, 3, 4)))
void text_format(char *out, size_t size, const char *fmt, ...);
/* Appends formatted text after what out already holds. */
__attribute__((format(printf, 3, 4)))
void text_append(char *out, size_t size, const char *fmt, ...);

#endif
