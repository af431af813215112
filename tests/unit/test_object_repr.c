/* Checks the pure parts of python/object_repr.c: int digit conversion (small,
 * multi-digit, huge and truncated) and Python-style float text. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "python/object_repr.h"
#include "unit.h"

static const char *int_text(const uint32_t *digits, size_t n, int negative, int max)
{
    static char out[2048];
    locals_int_digits_to_text(digits, n, negative, max, out, sizeof out);
    return out;
}

static const char *float_text(double v)
{
    static char out[64];
    locals_float_text(v, out, sizeof out);
    return out;
}

int main(void)
{
    uint32_t zero[1] = {0};
    CHECK_EQ_STR(int_text(zero, 0, 0, 100), "0");
    CHECK_EQ_STR(int_text(zero, 1, 0, 100), "0");
    uint32_t small[1] = {42};
    CHECK_EQ_STR(int_text(small, 1, 1, 100), "-42");
    /* 2**30 = digits {0, 1}; 2**60 - 1 = {2**30-1, 2**30-1}. */
    uint32_t two30[2] = {0, 1};
    CHECK_EQ_STR(int_text(two30, 2, 0, 100), "1073741824");
    uint32_t max60[2] = {0x3fffffff, 0x3fffffff};
    CHECK_EQ_STR(int_text(max60, 2, 0, 100), "1152921504606846975");
    /* 2**200: digit 6 holds 2**20 (200 = 6*30 + 20). */
    uint32_t p200[7] = {0, 0, 0, 0, 0, 0, 1u << 20};
    CHECK_EQ_STR(int_text(p200, 7, 0, 100),
                 "1606938044258990275541962092341162602522202993782792835301376");
    CHECK_EQ_STR(int_text(p200, 7, 0, 10), "1606938044...(61 digits)");
    /* Bits above 30 in a digit are not part of the value. */
    uint32_t dirty[1] = {0xc0000005u};
    CHECK_EQ_STR(int_text(dirty, 1, 0, 100), "5");
    uint32_t many[200];
    memset(many, 0, sizeof many);
    CHECK(strstr(int_text(many, 200, 0, 100), "200 30-bit digits") != NULL);

    CHECK_EQ_STR(float_text(1.0), "1.0");
    CHECK_EQ_STR(float_text(3.14), "3.14");
    CHECK_EQ_STR(float_text(0.1), "0.1");
    CHECK_EQ_STR(float_text(1e100), "1e+100");
    CHECK_EQ_STR(float_text(-2.5e-7), "-2.5e-07");
    CHECK_EQ_STR(float_text(1.0 / 3.0), "0.3333333333333333");
    CHECK_EQ_STR(float_text(INFINITY), "inf");
    CHECK_EQ_STR(float_text(-INFINITY), "-inf");
    CHECK_EQ_STR(float_text(NAN), "nan");
    CHECK_EQ_STR(float_text(123456789.0), "123456789.0");
    return unit_report("test_object_repr");
}
