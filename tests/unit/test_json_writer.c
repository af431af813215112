/* Checks the JSON writer's exact output (compact and indented), string
 * escaping and UTF-8 repair, number formatting, and that misuse fails
 * instead of producing invalid JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/json_writer.h"
#include "unit.h"

struct capture {
    char *text;
    size_t len;
    FILE *stream;
    struct json_writer w;
};

static void capture_start(struct capture *c, int indent)
{
    c->text = NULL;
    c->len = 0;
    c->stream = open_memstream(&c->text, &c->len);
    json_init(&c->w, c->stream, indent);
}

/* Finishes the writer, returns json_finish's result, leaves text in c. */
static int capture_end(struct capture *c)
{
    int rc = json_finish(&c->w);
    fclose(c->stream);
    return rc;
}

#define CHECK_OUTPUT(c, expected)                                   \
    do {                                                            \
        CHECK_EQ_INT(capture_end(c), 0);                            \
        CHECK_EQ_STR((c)->text, (expected));                        \
        free((c)->text);                                            \
    } while (0)

static void write_sample(struct json_writer *w)
{
    json_begin_object(w);
    json_member_int(w, "pid", 4242);
    json_member_string(w, "name", "worker");
    json_key(w, "threads");
    json_begin_array(w);
    json_begin_object(w);
    json_member_uint(w, "tid", 18446744073709551615ULL);
    json_member_bool(w, "holds_gil", true);
    json_member_null(w, "syscall");
    json_key(w, "frames");
    json_begin_array(w);
    json_end_array(w);
    json_end_object(w);
    json_int(w, -9223372036854775807LL - 1);
    json_end_array(w);
    json_key(w, "empty");
    json_begin_object(w);
    json_end_object(w);
    json_end_object(w);
}

static void test_layouts(void)
{
    struct capture c;
    capture_start(&c, 0);
    write_sample(&c.w);
    CHECK_OUTPUT(&c, "{\"pid\":4242,\"name\":\"worker\",\"threads\":[{\"tid\":18446744073709551615,"
                     "\"holds_gil\":true,\"syscall\":null,\"frames\":[]},"
                     "-9223372036854775808],\"empty\":{}}");

    /* The same layout as Python's json.dumps(..., indent=2), plus a newline. */
    capture_start(&c, 2);
    write_sample(&c.w);
    CHECK_OUTPUT(&c, "{\n"
                     "  \"pid\": 4242,\n"
                     "  \"name\": \"worker\",\n"
                     "  \"threads\": [\n"
                     "    {\n"
                     "      \"tid\": 18446744073709551615,\n"
                     "      \"holds_gil\": true,\n"
                     "      \"syscall\": null,\n"
                     "      \"frames\": []\n"
                     "    },\n"
                     "    -9223372036854775808\n"
                     "  ],\n"
                     "  \"empty\": {}\n"
                     "}\n");

    /* Several top-level values become JSON Lines. */
    capture_start(&c, 0);
    json_begin_array(&c.w);
    json_int(&c.w, 1);
    json_end_array(&c.w);
    json_int(&c.w, 2);
    json_string(&c.w, "x");
    CHECK_OUTPUT(&c, "[1]\n2\n\"x\"");

    capture_start(&c, 4);
    json_begin_array(&c.w);
    json_begin_array(&c.w);
    json_bool(&c.w, false);
    json_end_array(&c.w);
    json_end_array(&c.w);
    CHECK_OUTPUT(&c, "[\n    [\n        false\n    ]\n]\n");
}

static void check_string(const char *input, size_t len, const char *expected)
{
    struct capture c;
    capture_start(&c, 0);
    json_string_n(&c.w, input, len);
    CHECK_OUTPUT(&c, expected);
}

#define CHECK_STRING(literal, expected) check_string(literal, sizeof(literal) - 1, expected)

static void test_strings(void)
{
    CHECK_STRING("", "\"\"");
    CHECK_STRING("plain", "\"plain\"");
    CHECK_STRING("q\"b\\s/", "\"q\\\"b\\\\s/\"");
    CHECK_STRING("\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\"");
    CHECK_STRING("\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\"");
    CHECK_STRING("a\0b", "\"a\\u0000b\"");
    /* Valid UTF-8 passes through untouched, up to U+10FFFF. */
    CHECK_STRING("función 日本語 \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF",
                 "\"función 日本語 \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF\"");
    /* Each maximal ill-formed subsequence becomes one U+FFFD. */
    CHECK_STRING("a\x80z", "\"a\xEF\xBF\xBDz\"");             /* stray continuation */
    CHECK_STRING("\xC0\xAF", "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  /* overlong lead */
    CHECK_STRING("\xE0\x80\x80", "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""); /* overlong 3 */
    CHECK_STRING("\xED\xA0\x80", "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""); /* surrogate */
    CHECK_STRING("\xF4\x90\x80\x80", "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
    CHECK_STRING("\xE6\x97x", "\"\xEF\xBF\xBDx\"");            /* truncated 3-byte */
    CHECK_STRING("\xF0\x9F\x98", "\"\xEF\xBF\xBD\"");          /* truncated at end */
    CHECK_STRING("\xF5\xFF", "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  /* never-valid bytes */
    CHECK_STRING("\xE6\x97\"", "\"\xEF\xBF\xBD\\\"\"");         /* quote ends the sequence */

    struct capture c;
    capture_start(&c, 0);
    json_begin_array(&c.w);
    json_string(&c.w, NULL);
    json_string(&c.w, "k\xFF");
    json_end_array(&c.w);
    CHECK_OUTPUT(&c, "[null,\"k\xEF\xBF\xBD\"]");

    capture_start(&c, 0);
    json_begin_object(&c.w);
    json_member_int(&c.w, "ke\"y\n", 1);
    json_end_object(&c.w);
    CHECK_OUTPUT(&c, "{\"ke\\\"y\\n\":1}");
}

static void test_numbers(void)
{
    struct capture c;
    capture_start(&c, 0);
    json_begin_array(&c.w);
    json_double(&c.w, 0.1);
    json_double(&c.w, 1.0 / 3.0);
    json_double(&c.w, -2.5);
    json_double(&c.w, 1e300);
    json_double(&c.w, 5.0);
    json_double(&c.w, NAN);
    json_double(&c.w, INFINITY);
    json_double(&c.w, -INFINITY);
    json_int(&c.w, 0);
    json_uint(&c.w, 0);
    json_end_array(&c.w);
    CHECK_OUTPUT(&c, "[0.1,0.3333333333333333,-2.5,1e+300,5,null,null,null,0,0]");
}

static int misuse_result(void (*misuse)(struct json_writer *))
{
    struct capture c;
    capture_start(&c, 0);
    misuse(&c.w);
    int rc = capture_end(&c);
    free(c.text);
    return rc;
}

static void value_without_key(struct json_writer *w)
{
    json_begin_object(w);
    json_int(w, 1);
    json_end_object(w);
}

static void key_in_array(struct json_writer *w)
{
    json_begin_array(w);
    json_key(w, "k");
    json_end_array(w);
}

static void key_without_value(struct json_writer *w)
{
    json_begin_object(w);
    json_key(w, "k");
    json_end_object(w);
}

static void two_keys(struct json_writer *w)
{
    json_begin_object(w);
    json_key(w, "a");
    json_key(w, "b");
}

static void mismatched_end(struct json_writer *w)
{
    json_begin_object(w);
    json_end_array(w);
}

static void extra_end(struct json_writer *w)
{
    json_begin_array(w);
    json_end_array(w);
    json_end_array(w);
}

static void left_open(struct json_writer *w)
{
    json_begin_array(w);
    json_int(w, 1);
}

static void too_deep(struct json_writer *w)
{
    for (int i = 0; i <= JSON_MAX_DEPTH; i++)
        json_begin_array(w);
    for (int i = 0; i <= JSON_MAX_DEPTH; i++)
        json_end_array(w);
}

static void max_depth(struct json_writer *w)
{
    for (int i = 0; i < JSON_MAX_DEPTH; i++)
        json_begin_array(w);
    for (int i = 0; i < JSON_MAX_DEPTH; i++)
        json_end_array(w);
}

static void test_misuse(void)
{
    CHECK_EQ_INT(misuse_result(value_without_key), -1);
    CHECK_EQ_INT(misuse_result(key_in_array), -1);
    CHECK_EQ_INT(misuse_result(key_without_value), -1);
    CHECK_EQ_INT(misuse_result(two_keys), -1);
    CHECK_EQ_INT(misuse_result(mismatched_end), -1);
    CHECK_EQ_INT(misuse_result(extra_end), -1);
    CHECK_EQ_INT(misuse_result(left_open), -1);
    CHECK_EQ_INT(misuse_result(too_deep), -1);
    CHECK_EQ_INT(misuse_result(max_depth), 0);

    /* After a failure nothing more is written. */
    struct capture c;
    capture_start(&c, 0);
    json_begin_array(&c.w);
    CHECK_EQ_INT(json_key(&c.w, "k"), -1);
    CHECK_EQ_INT(json_int(&c.w, 1), -1);
    CHECK_EQ_INT(json_end_array(&c.w), -1);
    CHECK_EQ_INT(capture_end(&c), -1);
    CHECK_EQ_STR(c.text, "[");
    free(c.text);

    /* A stream that cannot take the output makes finish fail. */
    char tiny[4];
    FILE *f = fmemopen(tiny, sizeof(tiny), "w");
    setvbuf(f, NULL, _IONBF, 0);
    struct json_writer w;
    json_init(&w, f, 0);
    json_string(&w, "much too long for four bytes");
    CHECK_EQ_INT(json_finish(&w), -1);
    fclose(f);

    json_init(&w, NULL, 0);
    CHECK_EQ_INT(json_null(&w), -1);
    CHECK_EQ_INT(json_finish(&w), -1);
}

int main(void)
{
    test_layouts();
    test_strings();
    test_numbers();
    test_misuse();
    return unit_report("test_json_writer");
}
