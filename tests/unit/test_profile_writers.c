/* Checks the profile writers on small profiles built through the profile
 * API: exact collapsed, summary, JSON and speedscope text, the state and
 * thread options, B/E nesting of the chrome timeline, and the pprof protobuf
 * byte for byte after gunzipping it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "output/profile_writers.h"
#include "output/protobuf.h"
#include "profile/profile.h"
#include "unit.h"

typedef int (*writer_fn)(FILE *, const struct profile *, const struct profile_write_options *);

/* Runs a writer into memory; the caller frees the text. */
static char *capture(writer_fn writer, const struct profile *p, const struct profile_write_options *o,
                     size_t *len_out)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc = writer(f, p, o);
    fclose(f);
    CHECK_EQ_INT(rc, 0);
    if (len_out)
        *len_out = len;
    return text;
}

static int summary_writer(FILE *f, const struct profile *p, const struct profile_write_options *o)
{
    (void)o;
    return profile_write_summary(f, p);
}

#define CHECK_WRITES(writer, p, o, expected)                    \
    do {                                                        \
        char *text_ = capture(writer, p, o, NULL);              \
        CHECK_EQ_STR(text_, expected);                          \
        free(text_);                                            \
    } while (0)

/* Frames, stacks and threads of the shared fixture. */
struct fixture {
    struct profile p;
    uint32_t f_main, f_work, f_work21, f_wait, f_gc, f_bad;
    uint32_t s_work, s_wait, s_gc, s_empty, s_bad, s_work21;
    uint32_t t_main, t_worker;
};

static uint32_t stack2(struct profile *p, uint32_t a, uint32_t b)
{
    uint32_t frames[] = {a, b};
    return profile_stack_id(p, frames, 2);
}

static void add_samples(struct profile *p, uint32_t thread, uint32_t stack, enum profile_state state,
                        bool gc, int n)
{
    for (int i = 0; i < n; i++)
        CHECK_EQ_INT(profile_add_sample(p, thread, stack, state, gc, 1000u * (unsigned)i), 0);
}

/* A main thread idle in a wait, a worker (whose name has a ';') holding,
 * waiting, collecting and running native code. */
static void fixture_init(struct fixture *x)
{
    struct profile *p = &x->p;
    CHECK_EQ_INT(profile_init(p), 0);
    x->f_main = profile_frame_id(p, "main", "app.py", 10, false);
    x->f_work = profile_frame_id(p, "work", "app.py", 20, false);
    x->f_wait = profile_frame_id(p, "wait", "lib.py", -1, false);
    x->f_gc = profile_frame_id(p, "<GC>", "", -1, true);
    x->f_bad = profile_frame_id(p, "bad;name\nx", "a;b.py", 3, false);
    x->f_work21 = profile_frame_id(p, "work", "app.py", 21, false);

    x->s_work = stack2(p, x->f_main, x->f_work);
    x->s_wait = stack2(p, x->f_main, x->f_wait);
    uint32_t gc_frames[] = {x->f_main, x->f_work, x->f_gc};
    x->s_gc = profile_stack_id(p, gc_frames, 3);
    x->s_empty = profile_stack_id(p, NULL, 0);
    x->s_bad = stack2(p, x->f_main, x->f_bad);
    x->s_work21 = stack2(p, x->f_main, x->f_work21);

    x->t_main = profile_thread_id(p, 100, 100);
    x->t_worker = profile_thread_id(p, 100, 101);
    snprintf(p->threads[x->t_main].name, sizeof p->threads[x->t_main].name, "MainThread");
    snprintf(p->threads[x->t_worker].name, sizeof p->threads[x->t_worker].name, "worker;1");

    add_samples(p, x->t_main, x->s_wait, PROFILE_IDLE, false, 3);
    add_samples(p, x->t_worker, x->s_work, PROFILE_HOLDING_GIL, false, 4);
    add_samples(p, x->t_worker, x->s_work, PROFILE_WAITING_GIL, false, 2);
    add_samples(p, x->t_worker, x->s_gc, PROFILE_HOLDING_GIL, true, 1);
    add_samples(p, x->t_worker, x->s_empty, PROFILE_RUNNING, false, 1);
    add_samples(p, x->t_worker, x->s_bad, PROFILE_RUNNING, false, 1);

    for (int i = 0; i < 3; i++)
        profile_add_hog(p, x->s_work, false);
    profile_add_hog(p, x->s_gc, true);
    profile_add_hog(p, x->s_bad, true);
    profile_add_hog(p, x->s_bad, true);
    profile_add_hog(p, x->s_bad, false);

    p->meta.pid = 100;
    snprintf(p->meta.command, sizeof p->meta.command, "python3 app.py");
    snprintf(p->meta.python_version, sizeof p->meta.python_version, "3.12.1");
    p->meta.start_unix_ns = 1700000000000000000ull;
    p->meta.duration_ns = 100000000;
    p->meta.rate_hz = 100;
    p->meta.passes = 10;
    p->meta.passes_failed = 0;
    p->meta.stacks_sampled = 20;
    p->meta.stacks_torn = 1;
    p->meta.gil_busy_passes = 7;
    p->meta.gc_passes = 1;
    p->meta.gc_collections = 1;
}

static void add_segment(struct profile *p, uint32_t thread, uint32_t stack, enum profile_state state,
                        bool gc, uint16_t syscall, uint64_t start_us, uint64_t end_us)
{
    struct profile_segment seg = {thread, stack, (uint8_t)state, gc, syscall, start_us * 1000,
                                  end_us * 1000};
    CHECK_EQ_INT(profile_add_segment(p, &seg), 0);
}

#define NO_SYSCALL 0xffff
#define SYS_FUTEX 202

/* The worker's stack moves to another line of work(), collects, blocks in
 * futex, vanishes for 1 ms, then waits for the GIL; main blocks throughout. */
static void fixture_timeline(struct fixture *x)
{
    struct profile *p = &x->p;
    add_segment(p, x->t_main, x->s_wait, PROFILE_IDLE, false, SYS_FUTEX, 0, 6000);
    add_segment(p, x->t_worker, x->s_work, PROFILE_HOLDING_GIL, false, NO_SYSCALL, 0, 1000);
    add_segment(p, x->t_worker, x->s_work21, PROFILE_HOLDING_GIL, false, NO_SYSCALL, 1000, 2000);
    add_segment(p, x->t_worker, x->s_gc, PROFILE_HOLDING_GIL, true, NO_SYSCALL, 2000, 3000);
    add_segment(p, x->t_worker, x->s_wait, PROFILE_IDLE, false, SYS_FUTEX, 3000, 4000);
    add_segment(p, x->t_worker, x->s_work, PROFILE_WAITING_GIL, false, NO_SYSCALL, 5000, 6000);
}

static void test_collapsed(void)
{
    struct fixture x;
    fixture_init(&x);
    /* Default: idle samples dropped, states and threads folded together,
     * heaviest first; ';' and newlines never reach a frame's text. */
    CHECK_WRITES(profile_write_collapsed, &x.p, NULL,
                 "main (app.py:10);work (app.py:20) 6\n"
                 "main (app.py:10);work (app.py:20);<GC> 1\n"
                 "<no Python frames> 1\n"
                 "main (app.py:10);bad,name x (a,b.py:3) 1\n");

    struct profile_write_options idle = {.include_idle = true};
    CHECK_WRITES(profile_write_collapsed, &x.p, &idle,
                 "main (app.py:10);work (app.py:20) 6\n"
                 "main (app.py:10);wait (lib.py) 3\n"
                 "main (app.py:10);work (app.py:20);<GC> 1\n"
                 "<no Python frames> 1\n"
                 "main (app.py:10);bad,name x (a,b.py:3) 1\n");

    /* --gil keeps only samples holding the GIL, even with --idle. */
    struct profile_write_options gil = {.gil_only = true, .include_idle = true};
    CHECK_WRITES(profile_write_collapsed, &x.p, &gil,
                 "main (app.py:10);work (app.py:20) 4\n"
                 "main (app.py:10);work (app.py:20);<GC> 1\n");

    struct profile_write_options roots = {.thread_roots = true, .include_idle = true};
    CHECK_WRITES(profile_write_collapsed, &x.p, &roots,
                 "thread 101 \"worker,1\";main (app.py:10);work (app.py:20) 6\n"
                 "thread 100 \"MainThread\";main (app.py:10);wait (lib.py) 3\n"
                 "thread 101 \"worker,1\";main (app.py:10);work (app.py:20);<GC> 1\n"
                 "thread 101 \"worker,1\" 1\n"
                 "thread 101 \"worker,1\";main (app.py:10);bad,name x (a,b.py:3) 1\n");

    /* With several processes each thread sits under its process; the same
     * stack in two threads stays two lines. */
    uint32_t other = profile_thread_id(&x.p, 200, 201);
    add_samples(&x.p, other, x.s_work, PROFILE_RUNNING, false, 2);
    struct profile_write_options gil_roots = {.thread_roots = true, .gil_only = true};
    CHECK_WRITES(profile_write_collapsed, &x.p, &gil_roots,
                 "process 100;thread 101 \"worker,1\";main (app.py:10);work (app.py:20) 4\n"
                 "process 100;thread 101 \"worker,1\";main (app.py:10);work (app.py:20);<GC> 1\n");
    CHECK_WRITES(profile_write_collapsed, &x.p, &roots,
                 "process 100;thread 101 \"worker,1\";main (app.py:10);work (app.py:20) 6\n"
                 "process 100;thread 100 \"MainThread\";main (app.py:10);wait (lib.py) 3\n"
                 "process 200;thread 201;main (app.py:10);work (app.py:20) 2\n"
                 "process 100;thread 101 \"worker,1\";main (app.py:10);work (app.py:20);<GC> 1\n"
                 "process 100;thread 101 \"worker,1\" 1\n"
                 "process 100;thread 101 \"worker,1\";main (app.py:10);bad,name x (a,b.py:3) 1\n");
    profile_free(&x.p);

    /* An empty profile writes nothing at all. */
    struct profile empty;
    CHECK_EQ_INT(profile_init(&empty), 0);
    CHECK_WRITES(profile_write_collapsed, &empty, NULL, "");
    profile_free(&empty);
}

static void test_summary(void)
{
    struct fixture x;
    fixture_init(&x);
    /* Percentages of each thread's own samples; hogs ranked by samples, ties
     * by stack; the marker when native samples are the majority. */
    CHECK_WRITES(summary_writer, &x.p, NULL,
                 "Recorded process 100 for 0.10 s: python3 app.py (CPython 3.12.1)\n"
                 "Sampling: 10 passes at 100.0 Hz (requested 100 Hz), 20 stacks read, "
                 "1 torn (5.0%), 0 incomplete passes (0.0%)\n"
                 "\n"
                 "Thread                    Samples   Holding   Waiting   Running      Idle        GC\n"
                 "thread 100 \"MainThread\"         3      0.0%      0.0%      0.0%    100.0%      0.0%\n"
                 "thread 101 \"worker;1\"           9     55.6%     22.2%     22.2%      0.0%     11.1%\n"
                 "\n"
                 "GIL utilisation: 70.0% of passes had a thread holding the GIL\n"
                 "GC: collecting in 10.0% of passes, 1 collection seen\n"
                 "\n"
                 "GIL hogs (stacks that held the GIL while other threads waited for it):\n"
                 "  1. 3 samples (30.0% of passes)\n"
                 "       work (app.py:20)\n"
                 "       main (app.py:10)\n"
                 "  2. 3 samples (30.0% of passes)  [native call keeps the GIL]\n"
                 "       bad;name?x (a;b.py:3)\n"
                 "       main (app.py:10)\n"
                 "  3. 1 sample (10.0% of passes)  [native call keeps the GIL]\n"
                 "       <GC>\n"
                 "       work (app.py:20)\n"
                 "       main (app.py:10)\n"
                 "\n"
                 "Loop blocked: no episode (no asyncio loop thread stayed 100 ms or longer "
                 "outside its selector)\n");

    /* Only the top ten hogs are listed, innermost three frames each; an
     * unknown state gets its column; the rate comes from passes/duration. */
    uint32_t deep[5];
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof name, "d%d", i);
        deep[i] = profile_frame_id(&x.p, name, "deep.py", i + 1, false);
    }
    for (uint32_t depth = 1; depth <= 5; depth++) {
        uint32_t stack = profile_stack_id(&x.p, deep, depth);
        for (uint32_t k = 0; k < 10 + depth; k++)
            profile_add_hog(&x.p, stack, false);
    }
    for (int i = 0; i < 5; i++) {
        uint32_t stack = profile_stack_id(&x.p, &deep[i], 1);
        if (i > 0)
            profile_add_hog(&x.p, stack, i % 2);
    }
    add_samples(&x.p, x.t_main, x.s_wait, PROFILE_UNKNOWN, false, 1);
    x.p.meta.rate_hz = 0;
    x.p.meta.passes = 100;
    x.p.meta.passes_failed = 1;
    x.p.meta.duration_ns = 250000000;
    x.p.meta.gc_collections = 0;
    char *text = capture(summary_writer, &x.p, NULL, NULL);
    CHECK(strstr(text, "Sampling: 100 passes at 400.0 Hz (as fast as possible), 20 stacks read, "
                       "1 torn (5.0%), 1 incomplete pass (1.0%)\n") != NULL);
    CHECK(strstr(text, "     Idle        GC   Unknown\n") != NULL);
    CHECK(strstr(text, "     75.0%      0.0%     25.0%\n") != NULL);
    CHECK(strstr(text, "0 collections seen") != NULL);
    CHECK(strstr(text, "  1. 15 samples (15.0% of passes)\n"
                       "       d4 (deep.py:5)\n"
                       "       d3 (deep.py:4)\n"
                       "       d2 (deep.py:3)\n"
                       "       ... 2 outer frames\n"
                       "  2. 14 samples") != NULL);
    CHECK(strstr(text, "       ... 1 outer frame\n") != NULL);
    CHECK(strstr(text, "  9. 1 sample (1.0% of passes)  [native call keeps the GIL]\n"
                       "       d1 (deep.py:2)\n"
                       " 10. 1 sample (1.0% of passes)\n"
                       "       d2 (deep.py:3)\n"
                       "     (2 more stacks)\n") != NULL);
    free(text);
    profile_free(&x.p);

    /* Nothing recorded: no division by zero, and it says so. */
    struct profile empty;
    CHECK_EQ_INT(profile_init(&empty), 0);
    CHECK_WRITES(summary_writer, &empty, NULL,
                 "Recorded process 0 for 0.00 s\n"
                 "Sampling: 0 passes at 0.0 Hz (as fast as possible), 0 stacks read, "
                 "0 torn (0.0%), 0 incomplete passes (0.0%)\n"
                 "\n"
                 "Thread   Samples   Holding   Waiting   Running      Idle        GC\n"
                 "(no thread was sampled)\n"
                 "\n"
                 "GIL utilisation: 0.0% of passes had a thread holding the GIL\n"
                 "GC: collecting in 0.0% of passes, 0 collections seen\n"
                 "\n"
                 "GIL hogs: none (no thread held the GIL while another waited for it)\n"
                 "\n"
                 "Loop blocked: no episode (no asyncio loop thread stayed 100 ms or longer "
                 "outside its selector)\n");
    profile_free(&empty);
}

/* Everything before "profiles", the same in every fixture file. */
#define SPEEDSCOPE_HEAD                                                               \
    "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","            \
    "\"exporter\":\"pyscope@0.1.0\","                                                 \
    "\"name\":\"pyscope record of process 100: python3 app.py\","                     \
    "\"activeProfileIndex\":%d,\"shared\":{\"frames\":[{\"name\":\"main\","           \
    "\"file\":\"app.py\",\"line\":10},{\"name\":\"work\","                            \
    "\"file\":\"app.py\",\"line\":20},{\"name\":\"wait\","                            \
    "\"file\":\"lib.py\"},{\"name\":\"<GC>\"},{\"name\":\"bad;name\\nx\","            \
    "\"file\":\"a;b.py\",\"line\":3},{\"name\":\"work\","                             \
    "\"file\":\"app.py\",\"line\":21}]},"

static void check_speedscope(const struct profile *p, const struct profile_write_options *o,
                             int active, const char *profiles)
{
    char expected[4096];
    snprintf(expected, sizeof expected, SPEEDSCOPE_HEAD "%s\n", active, profiles);
    CHECK_WRITES(profile_write_speedscope, p, o, expected);
}

static void test_speedscope(void)
{
    struct fixture x;
    fixture_init(&x);
    /* Without a timeline: the aggregated counts, weighted in samples, one
     * stretch per stack; threads with nothing left are no profile. */
    check_speedscope(&x.p, NULL, 0,
                     "\"profiles\":[{\"type\":\"sampled\","
                     "\"name\":\"thread 101 \\\"worker;1\\\"\",\"unit\":\"none\","
                     "\"startValue\":0,\"endValue\":9,\"samples\":[[0,1],[0,1,3],[],[0,4]],"
                     "\"weights\":[6,1,1,1]}]}");

    /* From the timeline: time order, weights in seconds, the idle stretch and
     * the gap left out of the weights but not of the profile's span. */
    fixture_timeline(&x);
    check_speedscope(&x.p, NULL, 0,
                     "\"profiles\":[{\"type\":\"sampled\","
                     "\"name\":\"thread 101 \\\"worker;1\\\"\",\"unit\":\"seconds\","
                     "\"startValue\":0,\"endValue\":0.006,\"samples\":[[0,1],[0,5],[0,1,3],"
                     "[0,1]],\"weights\":[0.001,0.001,0.001,0.001]}]}");

    /* --idle brings the main thread back, and it has the most weight. */
    struct profile_write_options idle = {.include_idle = true};
    check_speedscope(&x.p, &idle, 0,
                     "\"profiles\":[{\"type\":\"sampled\","
                     "\"name\":\"thread 100 \\\"MainThread\\\"\",\"unit\":\"seconds\","
                     "\"startValue\":0,\"endValue\":0.006,\"samples\":[[0,2]],"
                     "\"weights\":[0.006]},{\"type\":\"sampled\","
                     "\"name\":\"thread 101 \\\"worker;1\\\"\",\"unit\":\"seconds\","
                     "\"startValue\":0,\"endValue\":0.006,\"samples\":[[0,1],[0,5],[0,1,3],"
                     "[0,2],[0,1]],\"weights\":[0.001,0.001,0.001,0.001,0.001]}]}");

    /* A busier second thread is the one speedscope opens on. */
    uint32_t busy = profile_thread_id(&x.p, 100, 102);
    add_segment(&x.p, busy, x.s_bad, PROFILE_RUNNING, false, NO_SYSCALL, 0, 7000);
    struct profile_write_options gil = {.gil_only = true};
    char *text = capture(profile_write_speedscope, &x.p, &gil, NULL);
    CHECK(strstr(text, "\"activeProfileIndex\":0,") != NULL);
    CHECK(strstr(text, "\"samples\":[[0,1],[0,5],[0,1,3]],\"weights\":[0.001,0.001,0.001]}]}\n") != NULL);
    free(text);
    text = capture(profile_write_speedscope, &x.p, NULL, NULL);
    CHECK(strstr(text, "\"activeProfileIndex\":1,") != NULL);
    CHECK(strstr(text, "{\"type\":\"sampled\",\"name\":\"thread 102\",\"unit\":\"seconds\","
                       "\"startValue\":0,\"endValue\":0.007,\"samples\":[[0,4]],"
                       "\"weights\":[0.007]}]}\n") != NULL);
    free(text);
    profile_free(&x.p);
}

/* Walks the events of a chrome trace written by pyscope (one compact line)
 * and checks per track that B/E pairs balance, E never comes first and time
 * never goes back. Returns the number of B events. */
struct nesting_track {
    long tid;
    int depth;
    double last_ts;
};

static int check_nesting(const char *text)
{
    struct nesting_track tracks[8];
    int n_tracks = 0, begins = 0;
    for (const char *e = strstr(text, "{\"ph\":\""); e; e = strstr(e + 1, "{\"ph\":\"")) {
        char ph;
        long pid, tid;
        double ts;
        if (sscanf(e, "{\"ph\":\"%c\",\"pid\":%ld,\"tid\":%ld,\"ts\":%lf", &ph, &pid, &tid, &ts) != 4)
            continue;   /* metadata events carry no ts */
        int t = 0;
        while (t < n_tracks && tracks[t].tid != tid)
            t++;
        if (t == n_tracks) {
            if (n_tracks == 8) {
                CHECK(!"too many tracks for check_nesting");
                return -1;
            }
            tracks[n_tracks++] = (struct nesting_track){tid, 0, ts};
        }
        CHECK(ts >= tracks[t].last_ts);
        tracks[t].last_ts = ts;
        if (ph == 'B') {
            tracks[t].depth++;
            begins++;
        } else if (ph == 'E') {
            CHECK(tracks[t].depth > 0);
            tracks[t].depth--;
        }
    }
    for (int t = 0; t < n_tracks; t++)
        CHECK_EQ_INT(tracks[t].depth, 0);
    return begins;
}

#define CHROME_M(tid, what, args) \
    "{\"ph\":\"M\",\"pid\":100,\"tid\":" tid ",\"name\":\"" what "\",\"args\":{" args "}},"
#define CHROME_B(ts, name, file, line)                                                   \
    "{\"ph\":\"B\",\"pid\":100,\"tid\":101,\"ts\":" ts ",\"name\":\"" name "\","         \
    "\"cat\":\"python\",\"args\":{\"file\":\"" file "\",\"line\":" line "}},"
#define CHROME_E(ts) "{\"ph\":\"E\",\"pid\":100,\"tid\":101,\"ts\":" ts "},"
#define CHROME_X(tid, ts, dur, name, args)                                                \
    "{\"ph\":\"X\",\"pid\":100,\"tid\":" tid ",\"ts\":" ts ",\"dur\":" dur ",\"name\":\"" \
    name "\",\"cat\":\"gil\",\"args\":{" args "}}"

static void test_chrome(void)
{
    struct fixture x;
    fixture_init(&x);
    fixture_timeline(&x);
    /* Shared outer frames stay open across segments, also when only the
     * line of work() changes; an idle stretch (dropped by default) and a gap
     * show no stack; consecutive segments in one GIL state are one slice;
     * the GIL track of tid T is tid T + 2^30. */
    char *text = capture(profile_write_chrome, &x.p, NULL, NULL);
    const char *events =
        "{\"traceEvents\":["
        CHROME_M("0", "process_name", "\"name\":\"python3 app.py\"")
        CHROME_M("100", "thread_name", "\"name\":\"MainThread\"")
        CHROME_M("100", "thread_sort_index", "\"sort_index\":0")
        CHROME_M("1073741924", "thread_name", "\"name\":\"MainThread GIL\"")
        CHROME_M("1073741924", "thread_sort_index", "\"sort_index\":1")
        CHROME_M("101", "thread_name", "\"name\":\"worker;1\"")
        CHROME_M("101", "thread_sort_index", "\"sort_index\":2")
        CHROME_M("1073741925", "thread_name", "\"name\":\"worker;1 GIL\"")
        CHROME_M("1073741925", "thread_sort_index", "\"sort_index\":3")
        CHROME_B("0", "main", "app.py", "10")
        CHROME_B("0", "work", "app.py", "20")
        CHROME_B("2000", "<GC>", "", "null")
        CHROME_X("1073741925", "0", "2000", "holding_gil", "\"state\":\"holding_gil\",\"gc\":false") ","
        CHROME_E("3000") CHROME_E("3000") CHROME_E("3000")
        CHROME_X("1073741925", "2000", "1000", "GC", "\"state\":\"holding_gil\",\"gc\":true") ","
        CHROME_B("5000", "main", "app.py", "10")
        CHROME_B("5000", "work", "app.py", "20")
        CHROME_X("1073741925", "3000", "1000", "idle (futex)",
                 "\"state\":\"idle\",\"gc\":false,\"syscall\":\"futex\"") ","
        CHROME_X("1073741924", "0", "6000", "idle (futex)",
                 "\"state\":\"idle\",\"gc\":false,\"syscall\":\"futex\"") ","
        CHROME_E("6000") CHROME_E("6000")
        CHROME_X("1073741925", "5000", "1000", "waiting_gil", "\"state\":\"waiting_gil\",\"gc\":false")
        "],\"displayTimeUnit\":\"ms\",\"viztracer_metadata\":{\"overflow\":false},"
        "\"pyscope\":{\"meta\":{\"pyscope_version\":\"0.1.0\",\"pid\":100,";
    CHECK(strncmp(text, events, strlen(events)) == 0);
    CHECK(strstr(text, "\"summary\":{\"threads\":[{\"thread\":0,") != NULL);
    CHECK(strstr(text, "\"name\":\"worker;1\",\"samples\":9,\"holding_gil_pct\":55.56,"
                       "\"waiting_gil_pct\":22.22,\"running_pct\":22.22,\"idle_pct\":0,"
                       "\"unknown_pct\":0,\"gc_pct\":11.11}],\"gil_utilisation_pct\":70,") != NULL);
    CHECK(strstr(text, "\"gil_hogs\":[{\"stack\":0,\"samples\":3,\"native_samples\":0,"
                       "\"native_call_keeps_gil\":false,\"passes_pct\":30,"
                       "\"frames\":[\"work (app.py:20)\",\"main (app.py:10)\"]},") != NULL);
    CHECK(strcmp(text + strlen(text) - 4, "}}}\n") == 0);
    CHECK_EQ_INT(check_nesting(text), 5);
    free(text);

    /* --idle: main() stays open while work() gives way to wait(); the gap
     * closes everything at its start. */
    struct profile_write_options idle = {.include_idle = true};
    text = capture(profile_write_chrome, &x.p, &idle, NULL);
    CHECK(strstr(text, CHROME_E("3000") CHROME_E("3000") CHROME_B("3000", "wait", "lib.py", "null")
                       CHROME_X("1073741925", "2000", "1000", "GC", "\"state\":\"holding_gil\","
                                "\"gc\":true") ","
                       CHROME_E("4000") CHROME_E("4000")
                       CHROME_B("5000", "main", "app.py", "10")) != NULL);
    CHECK_EQ_INT(check_nesting(text), 8);
    free(text);

    /* Overlapping segments start where the previous one ended; bad ids and
     * reversed times are survived. */
    uint32_t odd = profile_thread_id(&x.p, 100, 103);
    add_segment(&x.p, odd, x.s_work, PROFILE_RUNNING, false, NO_SYSCALL, 0, 100);
    add_segment(&x.p, odd, x.s_bad, PROFILE_RUNNING, false, NO_SYSCALL, 50, 150);
    add_segment(&x.p, odd, 999, PROFILE_RUNNING, false, NO_SYSCALL, 150, 200);
    add_segment(&x.p, 999, x.s_bad, PROFILE_RUNNING, false, NO_SYSCALL, 150, 200);
    add_segment(&x.p, odd, x.s_gc, PROFILE_UNKNOWN, false, NO_SYSCALL, 150, 120);
    text = capture(profile_write_chrome, &x.p, NULL, NULL);
    CHECK(strstr(text, "{\"ph\":\"B\",\"pid\":100,\"tid\":103,\"ts\":100,\"name\":\"bad;name\\nx\"") != NULL);
    CHECK(strstr(text, "{\"ph\":\"X\",\"pid\":100,\"tid\":1073741927,\"ts\":150,\"dur\":0,"
                       "\"name\":\"unknown\"") != NULL);
    CHECK_EQ_INT(check_nesting(text), 10);
    free(text);
    profile_free(&x.p);
}

static bool bytes_equal(const uint8_t *actual, size_t actual_len, const uint8_t *expected,
                        size_t expected_len)
{
    if (actual_len == expected_len && memcmp(actual, expected, expected_len) == 0)
        return true;
    fprintf(stderr, "    got %zu bytes:", actual_len);
    for (size_t i = 0; i < actual_len; i++)
        fprintf(stderr, " %02x", actual[i]);
    fprintf(stderr, "\n    expected %zu bytes:", expected_len);
    for (size_t i = 0; i < expected_len; i++)
        fprintf(stderr, " %02x", expected[i]);
    fputc('\n', stderr);
    return false;
}

#define CHECK_BYTES(buf, ...)                                                     \
    do {                                                                          \
        static const uint8_t expected_[] = {__VA_ARGS__};                         \
        CHECK(bytes_equal((buf)->data, (buf)->len, expected_, sizeof expected_)); \
        pb_reset(buf);                                                            \
    } while (0)

static void test_protobuf(void)
{
    struct pb_buf b, inner;
    pb_init(&b);
    pb_init(&inner);
    /* Zero is the proto3 default and is left out. */
    pb_uint64(&b, 1, 0);
    CHECK_EQ_INT(b.len, 0);
    pb_uint64(&b, 1, 1);
    CHECK_BYTES(&b, 0x08, 0x01);
    pb_uint64(&b, 2, 127);
    CHECK_BYTES(&b, 0x10, 0x7f);
    pb_uint64(&b, 2, 128);
    CHECK_BYTES(&b, 0x10, 0x80, 0x01);
    pb_uint64(&b, 3, 300);
    CHECK_BYTES(&b, 0x18, 0xac, 0x02);
    pb_uint64(&b, 1, UINT64_MAX);
    CHECK_BYTES(&b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
    /* Negative int64 is its 64-bit two's complement: always ten bytes. */
    pb_int64(&b, 1, -1);
    CHECK_BYTES(&b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
    /* Field numbers from 16 on take a two-byte tag. */
    pb_uint64(&b, 16, 1);
    CHECK_BYTES(&b, 0x80, 0x01, 0x01);
    pb_string(&b, 6, "");
    pb_string(&b, 6, "ab");
    CHECK_BYTES(&b, 0x32, 0x00, 0x32, 0x02, 'a', 'b');
    uint64_t ids[] = {1, 300, 0};
    pb_packed_uint64(&b, 1, ids, 3);
    pb_packed_uint64(&b, 1, ids, 0);
    CHECK_BYTES(&b, 0x0a, 0x04, 0x01, 0xac, 0x02, 0x00);
    int64_t values[] = {-1, 2};
    pb_packed_int64(&b, 2, values, 2);
    CHECK_BYTES(&b, 0x12, 0x0b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02);
    pb_uint64(&inner, 1, 5);
    pb_message(&b, 3, &inner);
    CHECK_BYTES(&b, 0x1a, 0x02, 0x08, 0x05);
    CHECK_EQ_INT(pb_varint_size(0), 1);
    CHECK_EQ_INT(pb_varint_size(127), 1);
    CHECK_EQ_INT(pb_varint_size(128), 2);
    CHECK_EQ_INT(pb_varint_size(UINT64_MAX), 10);

    /* A long string makes the buffer grow. */
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    pb_string(&b, 1, big);
    CHECK_EQ_INT(b.len, 1 + 2 + 999);
    CHECK(b.data[1] == 0xe7 && b.data[2] == 0x07 && b.data[3] == 'x' && b.data[1001] == 'x');
    CHECK(!b.failed);
    pb_free(&b);
    pb_free(&inner);
}

/* Gunzips data; the caller frees *out. */
static int gunzip(const uint8_t *data, size_t len, uint8_t **out, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return -1;
    size_t cap = 4096;
    *out = malloc(cap);
    *out_len = 0;
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)len;
    int rc;
    do {
        if (*out_len == cap) {
            cap *= 2;
            *out = realloc(*out, cap);
        }
        z.next_out = *out + *out_len;
        z.avail_out = (uInt)(cap - *out_len);
        rc = inflate(&z, Z_NO_FLUSH);
        *out_len = cap - z.avail_out;
    } while (rc == Z_OK);
    inflateEnd(&z);
    return rc == Z_STREAM_END && z.avail_in == 0 ? 0 : -1;
}

static void test_pprof(void)
{
    /* One thread, one frame, two samples: small enough to encode by hand. */
    struct profile p;
    CHECK_EQ_INT(profile_init(&p), 0);
    uint32_t f = profile_frame_id(&p, "f", "a.py", 3, false);
    uint32_t stack = profile_stack_id(&p, &f, 1);
    uint32_t t = profile_thread_id(&p, 7, 7);
    snprintf(p.threads[t].name, sizeof p.threads[t].name, "t");
    add_samples(&p, t, stack, PROFILE_HOLDING_GIL, false, 2);
    add_samples(&p, t, stack, PROFILE_IDLE, false, 1);   /* dropped by default */
    p.meta.pid = 7;
    p.meta.rate_hz = 100;

    size_t gz_len;
    uint8_t *gz = (uint8_t *)capture(profile_write_pprof, &p, NULL, &gz_len);
    CHECK(gz_len > 10 && gz[0] == 0x1f && gz[1] == 0x8b);
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    CHECK_EQ_INT(gunzip(gz, gz_len, &raw, &raw_len), 0);
    static const uint8_t expected[] = {
        /* sample_type (1): {type "samples", unit "count"}, {"wall", "nanoseconds"} */
        0x0a, 0x04, 0x08, 0x01, 0x10, 0x02,
        0x0a, 0x04, 0x08, 0x03, 0x10, 0x04,
        /* sample (2): location_id [1] packed, value [2, 2 x 10^7] packed,
         * labels thread="t", tid=7, state="holding_gil" */
        0x12, 0x1c,
        0x0a, 0x01, 0x01,
        0x12, 0x05, 0x02, 0x80, 0xda, 0xc4, 0x09,
        0x1a, 0x04, 0x08, 0x06, 0x10, 0x07,
        0x1a, 0x04, 0x08, 0x08, 0x18, 0x07,
        0x1a, 0x04, 0x08, 0x09, 0x10, 0x0a,
        /* location (4): id 1, line {function_id 1, line 3} */
        0x22, 0x08, 0x08, 0x01, 0x22, 0x04, 0x08, 0x01, 0x10, 0x03,
        /* function (5): id 1, name "f", filename "a.py"; no system_name */
        0x2a, 0x06, 0x08, 0x01, 0x10, 0x0b, 0x20, 0x0c,
        /* string_table (6), index 0 must be "" */
        0x32, 0x00,
        0x32, 0x07, 's', 'a', 'm', 'p', 'l', 'e', 's',
        0x32, 0x05, 'c', 'o', 'u', 'n', 't',
        0x32, 0x04, 'w', 'a', 'l', 'l',
        0x32, 0x0b, 'n', 'a', 'n', 'o', 's', 'e', 'c', 'o', 'n', 'd', 's',
        0x32, 0x1b, 'p', 'y', 's', 'c', 'o', 'p', 'e', ' ', 'r', 'e', 'c', 'o', 'r', 'd', ' ',
        'o', 'f', ' ', 'p', 'r', 'o', 'c', 'e', 's', 's', ' ', '7',
        0x32, 0x06, 't', 'h', 'r', 'e', 'a', 'd',
        0x32, 0x01, 't',
        0x32, 0x03, 't', 'i', 'd',
        0x32, 0x05, 's', 't', 'a', 't', 'e',
        0x32, 0x0b, 'h', 'o', 'l', 'd', 'i', 'n', 'g', '_', 'g', 'i', 'l',
        0x32, 0x01, 'f',
        0x32, 0x04, 'a', '.', 'p', 'y',
        /* time_nanos (9) and duration_nanos (10) are 0: left out.
         * period_type (11) {"wall", "nanoseconds"}, period (12) 10^7 */
        0x5a, 0x04, 0x08, 0x03, 0x10, 0x04,
        0x60, 0x80, 0xad, 0xe2, 0x04,
        /* comment (13): [5] packed */
        0x6a, 0x01, 0x05,
    };
    CHECK(bytes_equal(raw, raw_len, expected, sizeof expected));
    free(raw);
    free(gz);

    /* --threads --idle: the thread is the outermost location (id 2) of both
     * samples, and a function of its own. */
    struct profile_write_options roots = {.thread_roots = true, .include_idle = true};
    gz = (uint8_t *)capture(profile_write_pprof, &p, &roots, &gz_len);
    CHECK_EQ_INT(gunzip(gz, gz_len, &raw, &raw_len), 0);
    static const uint8_t first_sample[] = {0x12, 0x1d, 0x0a, 0x02, 0x01, 0x02};
    static const uint8_t second_sample[] = {0x12, 0x1d, 0x0a, 0x02, 0x01, 0x02, 0x12, 0x05,
                                            0x01, 0x80, 0xad, 0xe2, 0x04};
    static const uint8_t root_location[] = {0x22, 0x06, 0x08, 0x02, 0x22, 0x02, 0x08, 0x02};
    CHECK(raw_len > 40 && memcmp(raw + 12, first_sample, sizeof first_sample) == 0);
    CHECK(memmem(raw, raw_len, second_sample, sizeof second_sample) != NULL);
    CHECK(memmem(raw, raw_len, root_location, sizeof root_location) != NULL);
    CHECK(memmem(raw, raw_len, "\x32\x0f" "thread 7 \"t\"", 14) == NULL);
    CHECK(memmem(raw, raw_len, "\x32\x0c" "thread 7 \"t\"", 14) != NULL);
    free(raw);
    free(gz);

    /* With the rate "as fast as possible" the period is the mean interval. */
    p.meta.rate_hz = 0;
    p.meta.passes = 4;
    p.meta.duration_ns = 1000;
    gz = (uint8_t *)capture(profile_write_pprof, &p, NULL, &gz_len);
    CHECK_EQ_INT(gunzip(gz, gz_len, &raw, &raw_len), 0);
    static const uint8_t period[] = {0x50, 0xe8, 0x07, 0x5a, 0x04, 0x08, 0x03, 0x10, 0x04,
                                     0x60, 0xfa, 0x01};
    CHECK(memmem(raw, raw_len, period, sizeof period) != NULL);
    free(raw);
    free(gz);

    /* An output that fails is reported. */
    char tiny[8];
    FILE *full = fmemopen(tiny, sizeof tiny, "w");
    setvbuf(full, NULL, _IONBF, 0);
    CHECK_EQ_INT(profile_write_pprof(full, &p, NULL), -1);
    fclose(full);
    profile_free(&p);
}

static void test_json(void)
{
    struct profile p;
    CHECK_EQ_INT(profile_init(&p), 0);
    uint32_t frames[2] = {profile_frame_id(&p, "main", "a.py", 1, false),
                          profile_frame_id(&p, "<GC>", "", -1, true)};
    uint32_t s_main = profile_stack_id(&p, frames, 1);
    uint32_t s_gc = profile_stack_id(&p, frames, 2);
    uint32_t t = profile_thread_id(&p, 7, 8);
    snprintf(p.threads[t].name, sizeof p.threads[t].name, "w\"1");
    add_samples(&p, t, s_main, PROFILE_HOLDING_GIL, false, 2);
    add_samples(&p, t, s_gc, PROFILE_HOLDING_GIL, true, 1);
    add_samples(&p, t, s_main, PROFILE_IDLE, false, 1);
    profile_add_hog(&p, s_main, false);
    add_segment(&p, t, s_main, PROFILE_HOLDING_GIL, false, NO_SYSCALL, 0, 20);
    add_segment(&p, t, s_gc, PROFILE_HOLDING_GIL, true, NO_SYSCALL, 20, 30);
    add_segment(&p, t, s_main, PROFILE_IDLE, false, SYS_FUTEX, 30, 40);
    add_segment(&p, t, s_main, PROFILE_IDLE, false, 4000, 40, 50);
    p.meta.pid = 7;
    snprintf(p.meta.command, sizeof p.meta.command, "python3 -c 'x'");
    snprintf(p.meta.python_version, sizeof p.meta.python_version, "3.11.7");
    p.meta.start_unix_ns = 1700000000000000000ull;
    p.meta.duration_ns = 50000;
    p.meta.rate_hz = 0;
    p.meta.passes = 5;
    p.meta.stacks_sampled = 5;
    p.meta.gil_busy_passes = 3;
    p.meta.gc_passes = 1;
    p.meta.gc_collections = 1;
    /* Samples heaviest first and filtered; the timeline whole, with the
     * syscall of idle stretches by name, or by number when unknown. */
    CHECK_WRITES(profile_write_json, &p, NULL,
                 "{\"format\":\"pyscope-record\",\"format_version\":1,"
                 "\"meta\":{\"pyscope_version\":\"0.1.0\",\"pid\":7,\"command\":\"python3 -c 'x'\","
                 "\"python_version\":\"3.11.7\",\"start_unix_ns\":1700000000000000000,"
                 "\"duration_ns\":50000,\"rate_hz\":0,\"period_ns\":10000,\"passes\":5,"
                 "\"passes_failed\":0,\"stacks_sampled\":5,\"stacks_torn\":0,\"gil_busy_passes\":3,"
                 "\"gc_passes\":1,\"gc_collections\":1},"
                 "\"filters\":{\"idle\":false,\"gil_only\":false},"
                 "\"frames\":[{\"function\":\"main\",\"file\":\"a.py\",\"line\":1,\"synthetic\":false},"
                 "{\"function\":\"<GC>\",\"file\":\"\",\"line\":null,\"synthetic\":true}],"
                 "\"stacks\":[[0],[0,1]],"
                 "\"threads\":[{\"pid\":7,\"tid\":8,\"name\":\"w\\\"1\",\"samples\":4,"
                 "\"state_samples\":{\"holding_gil\":3,\"waiting_gil\":0,\"running\":0,\"idle\":1,"
                 "\"unknown\":0},\"gc_samples\":1,"
                 "\"state_pct\":{\"holding_gil\":75,\"waiting_gil\":0,\"running\":0,\"idle\":25,"
                 "\"unknown\":0},\"first_ns\":0,\"last_ns\":0}],"
                 "\"samples\":[[0,0,\"holding_gil\",2],[0,1,\"holding_gil\",1]],"
                 "\"timeline\":[[0,0,\"holding_gil\",false,0,20000,null],"
                 "[0,1,\"holding_gil\",true,20000,30000,null],"
                 "[0,0,\"idle\",false,30000,40000,\"futex\"],[0,0,\"idle\",false,40000,50000,4000]],"
                 "\"summary\":{\"threads\":[{\"thread\":0,\"pid\":7,\"tid\":8,\"name\":\"w\\\"1\","
                 "\"samples\":4,\"holding_gil_pct\":75,\"waiting_gil_pct\":0,\"running_pct\":0,"
                 "\"idle_pct\":25,\"unknown_pct\":0,\"gc_pct\":25}],\"gil_utilisation_pct\":60,"
                 "\"gc\":{\"passes_pct\":20,\"collections\":1,\"triggers\":[]},"
                 "\"sampling\":{\"passes\":5,\"duration_ns\":50000,\"rate_hz_requested\":0,"
                 "\"rate_hz_achieved\":100000,\"mean_interval_ns\":10000,\"passes_failed\":0,"
                 "\"stacks_sampled\":5,\"stacks_torn\":0},"
                 "\"gil_hogs\":[{\"stack\":0,\"samples\":1,\"native_samples\":0,"
                 "\"native_call_keeps_gil\":false,\"passes_pct\":20,\"frames\":[\"main (a.py:1)\"]}],"
                 "\"gil_hog_stacks\":1,"
                 "\"loop_blocked\":{\"threshold_ms\":100,\"episodes\":0,\"longest_ns\":0,\"longest\":[]},"
                 "\"processes\":[]}}\n");

    struct profile_write_options idle = {.include_idle = true};
    char *text = capture(profile_write_json, &p, &idle, NULL);
    CHECK(strstr(text, "\"filters\":{\"idle\":true,\"gil_only\":false},") != NULL);
    CHECK(strstr(text, "\"samples\":[[0,0,\"holding_gil\",2],[0,1,\"holding_gil\",1],"
                       "[0,0,\"idle\",1]],") != NULL);
    free(text);
    struct profile_write_options gil = {.gil_only = true, .include_idle = true};
    add_samples(&p, t, s_main, PROFILE_WAITING_GIL, false, 5);
    text = capture(profile_write_json, &p, &gil, NULL);
    CHECK(strstr(text, "\"samples\":[[0,0,\"holding_gil\",2],[0,1,\"holding_gil\",1]],") != NULL);
    free(text);
    text = capture(profile_write_json, &p, NULL, NULL);
    CHECK(strstr(text, "\"samples\":[[0,0,\"waiting_gil\",5],[0,0,\"holding_gil\",2],"
                       "[0,1,\"holding_gil\",1]],") != NULL);
    free(text);
    profile_free(&p);

    /* An empty profile is still a complete document. */
    struct profile empty;
    CHECK_EQ_INT(profile_init(&empty), 0);
    text = capture(profile_write_json, &empty, NULL, NULL);
    CHECK(strstr(text, "\"frames\":[],\"stacks\":[],\"threads\":[],\"samples\":[],\"timeline\":[],"
                       "\"summary\":{\"threads\":[],\"gil_utilisation_pct\":0,") != NULL);
    free(text);
    profile_free(&empty);
}

/* Occurrences of needle in text. */
static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void test_svg(void)
{
    struct fixture x;
    fixture_init(&x);
    /* Idle dropped: 9 samples; main above all of them but the empty stack;
     * work (both states folded) and its collector; the ';' and newline of
     * the odd frame kept as text, escaped as XML; boxes sorted by label, so
     * bad;name comes first, at the left. */
    char *text = capture(profile_write_svg, &x.p, NULL, NULL);
    CHECK(strncmp(text, "<?xml version=\"1.0\" encoding=\"UTF-8\"", 36) == 0);
    CHECK_EQ_INT(count_of(text, "<g>"), 6);
    CHECK(strstr(text, "<title>all (9 samples, 100.00%)</title><rect x=\"10.00\" y=\"") != NULL);
    CHECK(strstr(text, "<title>main (app.py:10) (8 samples, 88.89%)</title>") != NULL);
    CHECK(strstr(text, "<title>work (app.py:20) (7 samples, 77.78%)</title>") != NULL);
    CHECK(strstr(text, "<title>&lt;GC&gt; (1 sample, 11.11%)</title>") != NULL);
    CHECK(strstr(text, "<title>&lt;no Python frames&gt; (1 sample, 11.11%)</title>") != NULL);
    CHECK(strstr(text, "<title>bad;name x (a;b.py:3) (1 sample, 11.11%)</title><rect x=\"141.11\"")
          != NULL);
    /* 1180 px for 9 samples: main is 8/9 of it, after <no Python frames>'s
     * 1/9 ('<' sorts before 'm'). */
    CHECK(strstr(text, "(8 samples, 88.89%)</title><rect x=\"141.11\" y=\"") != NULL);
    CHECK(strstr(text, "width=\"1048.89\"") != NULL);
    CHECK(strstr(text, "</svg>\n") != NULL);
    free(text);

    /* --idle --threads: a root per thread, main's wait under MainThread. */
    struct profile_write_options roots = {.include_idle = true, .thread_roots = true};
    text = capture(profile_write_svg, &x.p, &roots, NULL);
    CHECK(strstr(text, "<title>all (12 samples, 100.00%)</title>") != NULL);
    CHECK(strstr(text, "<title>thread 100 &quot;MainThread&quot; (3 samples, 25.00%)</title>") !=
          NULL);
    CHECK(strstr(text, "<title>wait (lib.py) (3 samples, 25.00%)</title>") != NULL);
    free(text);
    profile_free(&x.p);

    /* Nothing kept: a whole document that says so. */
    struct profile empty;
    CHECK_EQ_INT(profile_init(&empty), 0);
    text = capture(profile_write_svg, &empty, NULL, NULL);
    CHECK(strstr(text, "no samples kept") != NULL && strstr(text, "</svg>\n") != NULL);
    CHECK_EQ_INT(count_of(text, "<g>"), 0);
    free(text);
    profile_free(&empty);
}

int main(void)
{
    test_collapsed();
    test_svg();
    test_summary();
    test_speedscope();
    test_chrome();
    test_protobuf();
    test_pprof();
    test_json();
    return unit_report("test_profile_writers");
}
