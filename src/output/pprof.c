/* The pprof format: a gzipped perftools.profiles.Profile (profile.proto in
 * github.com/google/pprof) with two values per sample (samples/count and
 * wall/nanoseconds), one location per profile frame, and thread, tid and state
 * labels. Top-level fields are encoded one at a time and streamed through
 * zlib, so the protobuf never sits whole in memory. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "output/profile_common.h"
#include "output/profile_writers.h"
#include "output/protobuf.h"
#include "util/idtable.h"

/* Field numbers of profile.proto. */
enum {
    PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3, PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5,
    PROFILE_STRING_TABLE = 6, PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS = 10,
    PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12, PROFILE_COMMENT = 13,
    VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2,
    SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3,
    LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3,
    LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3, LOCATION_LINE = 4,
    MAPPING_ID = 1, MAPPING_START = 2, MAPPING_LIMIT = 3, MAPPING_OFFSET = 4, MAPPING_FILENAME = 5,
    MAPPING_HAS_FUNCTIONS = 7, MAPPING_HAS_FILENAMES = 8, MAPPING_HAS_LINE_NUMBERS = 9,
    LINE_FUNCTION_ID = 1, LINE_LINE = 2,
    FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_FILENAME = 4,
};

struct gz_out {
    FILE *out;
    z_stream z;
    bool started, failed;
    unsigned char chunk[16384];
};

static int gz_start(struct gz_out *g, FILE *out)
{
    memset(g, 0, sizeof *g);
    g->out = out;
    /* 15 window bits + 16 asks zlib for a gzip header and trailer. */
    if (deflateInit2(&g->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    g->started = true;
    return 0;
}

static void gz_pump(struct gz_out *g, int flush)
{
    int rc;
    do {
        g->z.next_out = g->chunk;
        g->z.avail_out = sizeof g->chunk;
        rc = deflate(&g->z, flush);
        if (rc == Z_STREAM_ERROR) {
            g->failed = true;
            return;
        }
        size_t have = sizeof g->chunk - g->z.avail_out;
        if (have && fwrite(g->chunk, 1, have, g->out) != have) {
            g->failed = true;
            return;
        }
    } while (g->z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
}

/* Compresses the bytes of one encoded field and empties the buffer. */
static void gz_put(struct gz_out *g, struct pb_buf *b)
{
    if (b->failed)
        g->failed = true;
    if (g->failed || b->len == 0) {
        pb_reset(b);
        return;
    }
    g->z.next_in = b->data;
    g->z.avail_in = (uInt)b->len;
    gz_pump(g, Z_NO_FLUSH);
    pb_reset(b);
}

static int gz_finish(struct gz_out *g)
{
    if (!g->started)
        return -1;
    if (!g->failed)
        gz_pump(g, Z_FINISH);
    deflateEnd(&g->z);
    return g->failed ? -1 : 0;
}

/* The string table: index 0 must be "", every other string appears once. */
struct strtab {
    struct idtable index;
    char **items;
    size_t n, cap;
    bool failed;
};

struct str_key {
    const struct strtab *t;
    const char *s;
};

static bool str_equal(const void *ctx, uint32_t id)
{
    const struct str_key *k = ctx;
    return strcmp(k->t->items[id], k->s) == 0;
}

static int64_t str_id(struct strtab *t, const char *s)
{
    struct str_key key = {t, s};
    uint64_t h = idtable_hash(IDTABLE_HASH_SEED, s, strlen(s));
    uint32_t id = idtable_find(&t->index, h, str_equal, &key);
    if (id != IDTABLE_NONE)
        return id;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        char **grown = realloc(t->items, cap * sizeof *grown);
        if (!grown) {
            t->failed = true;
            return 0;
        }
        t->items = grown;
        t->cap = cap;
    }
    char *copy = strdup(s);
    if (!copy || idtable_insert(&t->index, h, (uint32_t)t->n) != 0) {
        free(copy);
        t->failed = true;
        return 0;
    }
    t->items[t->n] = copy;
    return (int64_t)t->n++;
}

static void strtab_free(struct strtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->items[i]);
    free(t->items);
    idtable_free(&t->index);
}

/* Functions are (name, file) pairs: the frames of one function at different
 * lines become different locations of the same function. */
struct function_row {
    int64_t name, file;
};

struct functab {
    struct idtable index;
    struct function_row *rows;
    size_t n, cap;
    bool failed;
};

struct func_key {
    const struct functab *t;
    struct function_row row;
};

static bool func_equal(const void *ctx, uint32_t id)
{
    const struct func_key *k = ctx;
    return k->t->rows[id].name == k->row.name && k->t->rows[id].file == k->row.file;
}

/* The function's id in the profile (1-based), 0 when out of memory. */
static uint64_t function_id(struct functab *t, int64_t name, int64_t file)
{
    struct func_key key = {t, {name, file}};
    uint64_t h = idtable_hash(IDTABLE_HASH_SEED, &key.row, sizeof key.row);
    uint32_t id = idtable_find(&t->index, h, func_equal, &key);
    if (id != IDTABLE_NONE)
        return (uint64_t)id + 1;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        struct function_row *grown = realloc(t->rows, cap * sizeof *grown);
        if (!grown) {
            t->failed = true;
            return 0;
        }
        t->rows = grown;
        t->cap = cap;
    }
    if (idtable_insert(&t->index, h, (uint32_t)t->n) != 0) {
        t->failed = true;
        return 0;
    }
    t->rows[t->n++] = key.row;
    return t->n;
}

struct pprof {
    const struct profile *p;
    const struct profile_write_options *o;
    struct gz_out gz;
    struct pb_buf field, inner, line;
    struct strtab strings;
    struct functab functions;
    bool several_pids;
    int64_t period;
};

static void write_value_type(struct pprof *w, uint32_t field, const char *type, const char *unit)
{
    pb_reset(&w->inner);
    pb_int64(&w->inner, VALUE_TYPE_TYPE, str_id(&w->strings, type));
    pb_int64(&w->inner, VALUE_TYPE_UNIT, str_id(&w->strings, unit));
    pb_message(&w->field, field, &w->inner);
    gz_put(&w->gz, &w->field);
}

static uint64_t thread_root_location(const struct profile *p, uint32_t thread)
{
    return p->n_frames + 1 + thread;
}

static uint64_t process_root_location(const struct profile *p, uint32_t thread)
{
    return p->n_frames + p->n_threads + 1 + thread;
}

static void add_label(struct pprof *w, const char *key, const char *str, int64_t num)
{
    pb_reset(&w->line);
    pb_int64(&w->line, LABEL_KEY, str_id(&w->strings, key));
    if (str)
        pb_int64(&w->line, LABEL_STR, str_id(&w->strings, str));
    else
        pb_int64(&w->line, LABEL_NUM, num);
    pb_message(&w->inner, SAMPLE_LABEL, &w->line);
}

static int write_samples(struct pprof *w)
{
    const struct profile *p = w->p;
    bool roots = w->o && w->o->thread_roots;
    uint64_t *locations = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < p->n_counts && !w->gz.failed; i++) {
        const struct profile_count *c = &p->counts[i];
        if (!profile_state_kept(w->o, (enum profile_state)c->state) || c->samples == 0 ||
            c->thread >= p->n_threads || c->stack >= p->n_stacks)
            continue;
        const struct profile_stack *stack = &p->stacks[c->stack];
        size_t need = (size_t)stack->depth + 2;
        if (need > cap) {
            uint64_t *grown = realloc(locations, need * sizeof *grown);
            if (!grown) {
                free(locations);
                return -1;
            }
            locations = grown;
            cap = need;
        }
        /* pprof wants the leaf first; profile stacks are outermost first. */
        size_t n = 0;
        for (uint32_t k = stack->depth; k-- > 0;)
            locations[n++] = (uint64_t)stack->frames[k] + 1;
        if (roots) {
            locations[n++] = thread_root_location(p, c->thread);
            if (w->several_pids)
                locations[n++] = process_root_location(p, c->thread);
        }
        const struct profile_thread *t = &p->threads[c->thread];
        int64_t values[2] = {(int64_t)c->samples, (int64_t)c->samples * w->period};

        pb_reset(&w->inner);
        pb_packed_uint64(&w->inner, SAMPLE_LOCATION_ID, locations, n);
        pb_packed_int64(&w->inner, SAMPLE_VALUE, values, 2);
        char name[THREAD_LABEL_MAX];
        if (strnlen(t->name, sizeof t->name))
            snprintf(name, sizeof name, "%.*s", (int)sizeof t->name, t->name);
        else
            thread_label(name, t);
        add_label(w, "thread", name, 0);
        add_label(w, "tid", NULL, t->tid);
        add_label(w, "state", profile_state_name((enum profile_state)c->state), 0);
        if (w->several_pids || (w->o && w->o->process_labels))
            add_label(w, "pid", NULL, t->pid);
        const struct profile_process *proc = w->o && w->o->process_labels
                                                 ? profile_process_of(p, t->pid)
                                                 : NULL;
        if (proc)
            add_label(w, "process", proc->command, 0);
        pb_message(&w->field, PROFILE_SAMPLE, &w->inner);
        gz_put(&w->gz, &w->field);
    }
    free(locations);
    return 0;
}

/* C frames (--native) sit in the ELF files they came from: one mapping
 * per file, already symbolized (pprof must not look the addresses up). */
static void write_mappings(struct pprof *w)
{
    const struct profile *p = w->p;
    for (size_t i = 0; i < p->n_mappings && !w->gz.failed; i++) {
        const struct profile_mapping *m = &p->mappings[i];
        int64_t file_id = str_id(&w->strings, m->path);
        pb_reset(&w->inner);
        pb_uint64(&w->inner, MAPPING_ID, (uint64_t)i + 1);
        pb_uint64(&w->inner, MAPPING_START, m->start);
        pb_uint64(&w->inner, MAPPING_LIMIT, m->limit);
        pb_uint64(&w->inner, MAPPING_OFFSET, m->offset);
        pb_int64(&w->inner, MAPPING_FILENAME, file_id);
        pb_uint64(&w->inner, MAPPING_HAS_FUNCTIONS, 1);
        pb_uint64(&w->inner, MAPPING_HAS_FILENAMES, 1);
        pb_uint64(&w->inner, MAPPING_HAS_LINE_NUMBERS, 1);
        pb_message(&w->field, PROFILE_MAPPING, &w->inner);
        gz_put(&w->gz, &w->field);
    }
}

static void write_location(struct pprof *w, uint64_t id, const char *function, const char *file,
                           int line, const struct profile_frame *native)
{
    /* Two statements: argument order is unspecified, string ids must not be. */
    int64_t name_id = str_id(&w->strings, function);
    int64_t file_id = str_id(&w->strings, file);
    uint64_t fid = function_id(&w->functions, name_id, file_id);
    pb_reset(&w->inner);
    pb_uint64(&w->inner, LOCATION_ID, id);
    if (native && native->mapping < w->p->n_mappings) {
        pb_uint64(&w->inner, LOCATION_MAPPING_ID, (uint64_t)native->mapping + 1);
        pb_uint64(&w->inner, LOCATION_ADDRESS, native->address);
    }
    pb_reset(&w->line);
    pb_uint64(&w->line, LINE_FUNCTION_ID, fid);
    pb_int64(&w->line, LINE_LINE, line > 0 ? line : 0);
    pb_message(&w->inner, LOCATION_LINE, &w->line);
    pb_message(&w->field, PROFILE_LOCATION, &w->inner);
    gz_put(&w->gz, &w->field);
}

static void write_locations(struct pprof *w)
{
    const struct profile *p = w->p;
    for (size_t i = 0; i < p->n_frames && !w->gz.failed; i++) {
        const struct profile_frame *f = &p->frames[i];
        char name[FRAME_NAME_MAX];
        write_location(w, (uint64_t)i + 1, frame_display_name(f, name), f->file, f->line,
                       f->native ? f : NULL);
    }
    if (!(w->o && w->o->thread_roots))
        return;
    for (uint32_t i = 0; i < p->n_threads && !w->gz.failed; i++) {
        char label[THREAD_LABEL_MAX];
        thread_label(label, &p->threads[i]);
        write_location(w, thread_root_location(p, i), label, "", 0, NULL);
        if (w->several_pids) {
            process_label(label, p->threads[i].pid);
            write_location(w, process_root_location(p, i), label, "", 0, NULL);
        }
    }
}

static void write_functions(struct pprof *w)
{
    for (size_t i = 0; i < w->functions.n && !w->gz.failed; i++) {
        const struct function_row *row = &w->functions.rows[i];
        pb_reset(&w->inner);
        pb_uint64(&w->inner, FUNCTION_ID, (uint64_t)i + 1);
        /* No system_name: pprof would take a name equal to it for a C++
         * symbol still to demangle and strip "<module>" and "<GC>" to "". */
        pb_int64(&w->inner, FUNCTION_NAME, row->name);
        pb_int64(&w->inner, FUNCTION_FILENAME, row->file);
        pb_message(&w->field, PROFILE_FUNCTION, &w->inner);
        gz_put(&w->gz, &w->field);
    }
}

int profile_write_pprof(FILE *out, const struct profile *p, const struct profile_write_options *o)
{
    struct pprof w = {.p = p, .o = o, .several_pids = profile_several_pids(p)};
    w.period = (int64_t)(profile_period_ns(p) + 0.5);
    pb_init(&w.field);
    pb_init(&w.inner);
    pb_init(&w.line);
    int rc = gz_start(&w.gz, out);
    if (rc == 0) {
        str_id(&w.strings, "");
        write_value_type(&w, PROFILE_SAMPLE_TYPE, "samples", "count");
        write_value_type(&w, PROFILE_SAMPLE_TYPE, "wall", "nanoseconds");
        char *comment = NULL;
        size_t command_len = strnlen(p->meta.command, sizeof p->meta.command);
        if (asprintf(&comment, "pyscope record of process %d%s%.*s", (int)p->meta.pid,
                     command_len ? ": " : "", (int)command_len, p->meta.command) < 0)
            comment = NULL;
        int64_t comment_id = comment ? str_id(&w.strings, comment) : 0;
        free(comment);

        rc = write_samples(&w);
        write_mappings(&w);
        write_locations(&w);
        write_functions(&w);
        for (size_t i = 0; i < w.strings.n; i++) {
            pb_string(&w.field, PROFILE_STRING_TABLE, w.strings.items[i]);
            gz_put(&w.gz, &w.field);
        }
        pb_int64(&w.field, PROFILE_TIME_NANOS, (int64_t)p->meta.start_unix_ns);
        pb_int64(&w.field, PROFILE_DURATION_NANOS, (int64_t)p->meta.duration_ns);
        gz_put(&w.gz, &w.field);
        /* Already in the string table: the first value type interned them. */
        write_value_type(&w, PROFILE_PERIOD_TYPE, "wall", "nanoseconds");
        pb_int64(&w.field, PROFILE_PERIOD, w.period);
        if (comment_id)
            pb_packed_int64(&w.field, PROFILE_COMMENT, &comment_id, 1);
        gz_put(&w.gz, &w.field);
        if (w.strings.failed || w.functions.failed)
            rc = -1;
    }
    if (gz_finish(&w.gz) != 0 || fflush(out) != 0 || ferror(out))
        rc = -1;
    strtab_free(&w.strings);
    free(w.functions.rows);
    idtable_free(&w.functions.index);
    pb_free(&w.field);
    pb_free(&w.inner);
    pb_free(&w.line);
    return rc == 0 ? 0 : -1;
}
