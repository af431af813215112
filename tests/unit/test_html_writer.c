/* Checks the html writer on small profiles: one self-contained page, names
 * from the target that cannot end the data's <script>, and the exact frames,
 * prefix tree, counts, timeline bins and pruning. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/html_assets.h"
#include "output/profile_writers.h"
#include "profile/profile.h"
#include "unit.h"

#define NO_SYSCALL 0xffff
#define SYS_FUTEX 202
#define MS 1000000ull

static char *write_html(const struct profile *p, const struct profile_write_options *o)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK_EQ_INT(profile_write_html(f, p, o), 0);
    fclose(f);
    CHECK_EQ_INT(strlen(text), len);   /* no NUL inside */
    return text;
}

static size_t count(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *at = strstr(text, needle); at; at = strstr(at + 1, needle))
        n++;
    return n;
}

static bool contains(const char *text, const char *needle)
{
    return strstr(text, needle) != NULL;
}

/* The JSON between the data element's tags; the caller frees it. */
static char *data_of(const char *html)
{
    const char *open = "<script type=\"application/json\" id=\"pyscope-data\">";
    const char *from = strstr(html, open);
    CHECK(from != NULL);
    if (!from)
        return strdup("");
    from += strlen(open);
    const char *to = strstr(from, "</script>");
    CHECK(to != NULL);
    return to ? strndup(from, (size_t)(to - from)) : strdup("");
}

static void add_segment(struct profile *p, uint32_t thread, uint32_t stack, enum profile_state state,
                        uint16_t syscall, uint64_t start_ns, uint64_t end_ns)
{
    struct profile_segment seg = {thread, stack, (uint8_t)state, 0, syscall, start_ns, end_ns};
    CHECK_EQ_INT(profile_add_segment(p, &seg), 0);
}

/* n samples 10 ms apart from first_ms on. */
static void add_samples(struct profile *p, uint32_t thread, uint32_t stack, enum profile_state state,
                        int n, uint64_t first_ms)
{
    for (int i = 0; i < n; i++)
        CHECK_EQ_INT(profile_add_sample(p, thread, stack, state, false, (first_ms + 10 * (unsigned)i) * MS),
                     0);
}

/* A worker holding the GIL in work(), waiting for 5 ms in wait(), holding
 * again; main idle in futex from 10 ms on. 100 ms at 100 Hz: 10 ms bins. */
static void build(struct profile *p, bool with_timeline)
{
    CHECK_EQ_INT(profile_init(p), 0);
    uint32_t f_main = profile_frame_id(p, "main", "/srv/app.py", 10, false);
    uint32_t f_work = profile_frame_id(p, "work", "/srv/app.py", 20, false);
    uint32_t f_wait = profile_frame_id(p, "</script><script>alert(1)//", "https://evil.example/x.py", 3,
                                       false);
    uint32_t f_idle = profile_frame_id(p, "idle", "/srv/app.py", 30, false);
    uint32_t a[] = {f_main, f_work}, b[] = {f_main, f_wait}, c[] = {f_idle};
    uint32_t s_a = profile_stack_id(p, a, 2);
    uint32_t s_b = profile_stack_id(p, b, 2);
    uint32_t s_c = profile_stack_id(p, c, 1);
    uint32_t t_worker = profile_thread_id(p, 100, 101);
    uint32_t t_main = profile_thread_id(p, 100, 100);
    snprintf(p->threads[t_worker].name, sizeof p->threads[t_worker].name, "worker<1>");
    snprintf(p->threads[t_main].name, sizeof p->threads[t_main].name, "MainThread");
    add_samples(p, t_worker, s_a, PROFILE_HOLDING_GIL, 9, 0);
    add_samples(p, t_worker, s_b, PROFILE_WAITING_GIL, 1, 90);
    add_samples(p, t_main, s_c, PROFILE_IDLE, 9, 10);
    profile_add_hog(p, s_a, false);
    if (with_timeline) {
        add_segment(p, t_worker, s_a, PROFILE_HOLDING_GIL, NO_SYSCALL, 0, 30 * MS);
        add_segment(p, t_main, s_c, PROFILE_IDLE, SYS_FUTEX, 10 * MS, 100 * MS);
        add_segment(p, t_worker, s_b, PROFILE_WAITING_GIL, NO_SYSCALL, 30 * MS, 35 * MS);
        add_segment(p, t_worker, s_a, PROFILE_HOLDING_GIL, NO_SYSCALL, 35 * MS, 100 * MS);
    }
    p->meta.pid = 100;
    snprintf(p->meta.command, sizeof p->meta.command, "python3 /srv/app.py --url http://x");
    snprintf(p->meta.python_version, sizeof p->meta.python_version, "3.12.1");
    p->meta.duration_ns = 100 * MS;
    p->meta.rate_hz = 100;
    p->meta.passes = 10;
    p->meta.stacks_sampled = 20;
    p->meta.gil_busy_passes = 10;
}

static void test_self_contained(void)
{
    struct profile p;
    build(&p, true);
    char *html = write_html(&p, NULL);

    CHECK(strncmp(html, "<!DOCTYPE html>", 15) == 0);
    CHECK_EQ_INT(count(html, "</html>"), 1);
    /* The assets are inside, whole. */
    CHECK(contains(html, (const char *)html_asset_report_css));
    CHECK(contains(html, (const char *)html_asset_report_js));
    CHECK(html_asset_report_js_len > 1000 && html_asset_report_css_len > 100);
    CHECK(!contains(html, "@DATA@") && !contains(html, "/*@CSS@*/") && !contains(html, "/*@JS@*/"));
    /* Two script elements (the data, the code), neither loading anything. */
    CHECK_EQ_INT(count(html, "<script"), 2);
    CHECK_EQ_INT(count(html, "</script>"), 2);
    CHECK_EQ_INT(count(html, "<style>"), 1);
    CHECK(!contains(html, "src="));
    CHECK(!contains(html, "<link"));
    CHECK(!contains(html, "<iframe"));
    CHECK(!contains(html, "url("));
    CHECK(!contains(html, "@import"));
    CHECK(!contains(html, "http://"));
    CHECK(!contains(html, "https://"));
    CHECK(!contains(html, "//cdn"));
    /* The page refuses to fetch anything even if asked to. */
    CHECK(contains(html, "Content-Security-Policy\" content=\"default-src 'none';"));
    free(html);
    profile_free(&p);
}

static void test_data(void)
{
    struct profile p;
    build(&p, true);
    char *html = write_html(&p, NULL);
    char *data = data_of(html);

    /* Names from the target cannot close the element or open another. */
    CHECK(!contains(data, "<"));
    CHECK(contains(data, "\"\\u003c\\/script>\\u003cscript>alert(1)\\/\\/\""));
    CHECK(contains(data, "\"https:\\/\\/evil.example\\/x.py\""));
    CHECK(contains(data, "\"name\":\"worker\\u003c1>\""));
    CHECK(contains(data, "\"command\":\"python3 \\/srv\\/app.py --url http:\\/\\/x\""));

    const char *head = "{\"format\":\"pyscope-html\",\"format_version\":1,\"meta\":{";
    CHECK(strncmp(data, head, strlen(head)) == 0);
    CHECK(contains(data, "\"filters\":{\"idle\":false,\"gil_only\":false}"));
    CHECK(contains(data, "\"states\":[\"holding_gil\",\"waiting_gil\",\"running\",\"idle\",\"unknown\"]"));
    CHECK(contains(data, "\"strings\":[\"main\",\"\\/srv\\/app.py\",\"work\","));
    /* [function, file, line, synthetic] per frame */
    CHECK(contains(data, "\"frames\":[0,1,10,0,2,1,20,0,3,4,3,0,5,1,30,0]"));
    /* [parent, frame] per node: main, main>work, main>wait, idle */
    CHECK(contains(data, "\"nodes\":[-1,0,0,1,0,2,-1,3]"));
    /* [thread, node, state, samples] */
    CHECK(contains(data, "\"counts\":[0,1,0,9,0,2,1,1,1,3,3,9]"));
    /* 10 ms bins of 1000 units of 10 us. The worker: one cell of 3 whole
     * bins; bin 3 shared half and half; 6 whole bins. Main: after a gap of
     * one bin, 9 whole bins idle in futex. */
    CHECK(contains(data, "\"timeline\":{\"bin_ns\":10000000,\"unit_ns\":10000,\"bins\":10,"
                         "\"kinds\":[[0,0,null],[3,0,\"futex\"],[1,0,null]],"
                         "\"threads\":[[0,3,1,1,0,3000,0,1,2,1,0,500,2,2,500,0,6,1,1,0,6000],"
                         "[1,9,1,3,1,9000]]}}"));
    CHECK(contains(data, "\"gil_hogs\":[{\"stack\":0,\"samples\":1,"));

    free(data);
    free(html);
    profile_free(&p);
}

static void test_options(void)
{
    struct profile p;
    build(&p, true);
    struct profile_write_options o = {.include_idle = true, .gil_only = true};
    char *html = write_html(&p, &o);
    CHECK(contains(html, "\"filters\":{\"idle\":true,\"gil_only\":true}"));
    free(html);
    profile_free(&p);
}

/* Without a timeline each thread gets one cell over its lifetime holding its
 * exact counts, weighted by the period: the flame graph of a range still
 * shows what the thread did. */
static void test_no_timeline(void)
{
    struct profile p;
    build(&p, false);
    char *html = write_html(&p, NULL);
    char *data = data_of(html);
    CHECK(contains(data, "\"kinds\":[[0,0,null],[1,0,null],[3,0,null]],"
                         "\"threads\":[[0,10,2,1,0,9000,2,1,1000],[1,9,1,3,2,9000]]}}"));
    free(data);
    free(html);
    profile_free(&p);
}

/* A long, busy recording: bins grow with the recording so that the data
 * stays bounded, and every thread's time is still all there. */
static void test_long_recording(void)
{
    struct profile p;
    CHECK_EQ_INT(profile_init(&p), 0);
    uint32_t f[2] = {profile_frame_id(&p, "a", "x.py", 1, false), profile_frame_id(&p, "b", "x.py", 2, false)};
    uint32_t s0 = profile_stack_id(&p, f, 1), s1 = profile_stack_id(&p, f, 2);
    uint32_t t = profile_thread_id(&p, 1, 1);
    const uint64_t n = 200000;   /* 2000 s at 100 Hz, changing every sample */
    for (uint64_t i = 0; i < n; i++) {
        struct profile_segment seg = {t, i % 2 ? s1 : s0, (uint8_t)(i % 3 ? PROFILE_HOLDING_GIL : PROFILE_WAITING_GIL),
                                      0, NO_SYSCALL, i * 10 * MS, (i + 1) * 10 * MS};
        profile_add_segment(&p, &seg);
    }
    p.meta.duration_ns = n * 10 * MS;
    p.meta.rate_hz = 100;
    char *html = write_html(&p, NULL);
    CHECK(strlen(html) < 400000);
    char *data = data_of(html);
    /* 2000 s / 4000 bins, rounded up to whole units */
    CHECK(contains(data, "\"bin_ns\":500001000,\"unit_ns\":500001,\"bins\":4000,"));
    free(data);
    free(html);
    profile_free(&p);
}

/* More stack prefixes than the writer keeps: the rarest go, their samples
 * shown at the nearest kept caller, and the counts merge accordingly. */
static void test_pruning(void)
{
    struct profile p;
    CHECK_EQ_INT(profile_init(&p), 0);
    uint32_t t = profile_thread_id(&p, 1, 1);
    uint32_t outer[500], inner[500];
    char name[32];
    for (int i = 0; i < 500; i++) {
        snprintf(name, sizeof name, "outer%d", i);
        outer[i] = profile_frame_id(&p, name, "x.py", 1, false);
        snprintf(name, sizeof name, "inner%d", i);
        inner[i] = profile_frame_id(&p, name, "x.py", 2, false);
    }
    /* 500 x 500 two-frame stacks (250500 prefixes): one sample each, five
     * for those ending in inner0. */
    for (int i = 0; i < 500; i++) {
        for (int j = 0; j < 500; j++) {
            uint32_t frames[] = {outer[i], inner[j]};
            uint32_t s = profile_stack_id(&p, frames, 2);
            for (int k = 0; k < (j == 0 ? 5 : 1); k++)
                profile_add_sample(&p, t, s, PROFILE_HOLDING_GIL, false, 0);
        }
    }
    p.meta.duration_ns = 10 * MS;
    p.meta.rate_hz = 100;
    char *html = write_html(&p, NULL);
    char *data = data_of(html);
    /* Kept: the 500 outer prefixes (504 samples each) and the 500 ending in
     * inner0 (5 each); the ones with a single sample, tied at the cut, go. */
    CHECK(contains(data, "\"pruned\":{\"nodes\":249500,\"samples\":249500}"));
    /* outer0 (node 0) keeps 499 samples of its own; outer0>inner0 is node 1. */
    CHECK(contains(data, "\"counts\":[0,0,0,499,0,1,0,5,0,2,0,499,0,3,0,5,"));
    const char *nodes = strstr(data, "\"nodes\":[");
    CHECK(nodes != NULL);
    if (nodes) {
        size_t commas = 0;
        for (const char *c = nodes; *c && *c != ']'; c++)
            commas += *c == ',';
        CHECK_EQ_INT(commas + 1, 2 * 1000);
    }
    free(data);
    free(html);
    profile_free(&p);
}

int main(void)
{
    test_self_contained();
    test_data();
    test_options();
    test_no_timeline();
    test_long_recording();
    test_pruning();
    return unit_report("test_html_writer");
}
