/* Minimal assertion helpers shared by pyscope's C unit tests: failed checks
 * are reported with file:line and the test keeps going, so one run shows every
 * broken expectation. Include from exactly one translation unit per test. */
#ifndef PYSCOPE_TESTS_UNIT_H
#define PYSCOPE_TESTS_UNIT_H

#include <stdio.h>
#include <string.h>

/* Counters live in a function-local static so that including this header
 * never defines an unused variable (which -Werror would reject). */
static inline int *unit_counters(void)
{
    static int counters[2]; /* [0] passed, [1] failed */
    return counters;
}

static inline void unit_record(int ok, const char *file, int line, const char *what)
{
    if (ok) {
        unit_counters()[0]++;
    } else {
        unit_counters()[1]++;
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
    }
}

#define CHECK(cond) unit_record((cond) ? 1 : 0, __FILE__, __LINE__, #cond)

#define CHECK_EQ_INT(actual, expected)                                               \
    do {                                                                             \
        long long unit_a_ = (long long)(actual);                                     \
        long long unit_e_ = (long long)(expected);                                   \
        unit_record(unit_a_ == unit_e_, __FILE__, __LINE__, #actual " == " #expected); \
        if (unit_a_ != unit_e_)                                                      \
            fprintf(stderr, "    got %lld, expected %lld\n", unit_a_, unit_e_);      \
    } while (0)

#define CHECK_EQ_STR(actual, expected)                                               \
    do {                                                                             \
        const char *unit_a_ = (actual);                                              \
        const char *unit_e_ = (expected);                                            \
        int unit_ok_ = (unit_a_ == NULL || unit_e_ == NULL)                          \
                           ? unit_a_ == unit_e_                                      \
                           : strcmp(unit_a_, unit_e_) == 0;                          \
        unit_record(unit_ok_, __FILE__, __LINE__, #actual " == " #expected);         \
        if (!unit_ok_)                                                               \
            fprintf(stderr, "    got \"%s\", expected \"%s\"\n",                     \
                    unit_a_ ? unit_a_ : "(null)", unit_e_ ? unit_e_ : "(null)");     \
    } while (0)

/* Prints the one summary line the test runner greps for; the return value is
 * the process exit status. */
static inline int unit_report(const char *suite)
{
    printf("%s: %d passed, %d failed\n", suite, unit_counters()[0], unit_counters()[1]);
    return unit_counters()[1] == 0 ? 0 : 1;
}

#endif
