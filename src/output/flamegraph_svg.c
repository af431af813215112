/* An SVG flame graph, the file py-spy's `record -o profile.svg` and
 * flamegraph.pl give: callers at the bottom, each frame as wide as its share
 * of the kept samples, siblings in alphabetical order, every box titled with
 * its samples (a browser shows it on hover). Built in one pass over the
 * folded stacks sorted by their frames' labels. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "output/profile_common.h"
#include "output/profile_writers.h"

#define SVG_WIDTH 1200.0
#define SVG_PAD 10.0
#define BOX_HEIGHT 16.0
#define HEADER_HEIGHT 44.0
#define FOOTER_HEIGHT 12.0
#define LABEL_CHAR_PX 7.0      /* of 12 px Verdana, for fitting labels in boxes */
#define MIN_BOX_PX 0.1      /* narrower boxes are left out, as flamegraph.pl's minwidth */

struct label {
    const char *text;
    bool marker;            /* pyscope's own (<GC>, a thread or process root), not code */
};

struct path {
    const struct label **labels;   /* outermost first: process, thread, then the frames */
    uint32_t depth;
    uint64_t samples;
};

struct open_box {
    const struct label *label;
    uint64_t start;         /* samples to its left */
    uint64_t samples;
};

struct svg {
    FILE *out;
    uint64_t total;
    uint32_t max_depth;     /* boxes above the root */
    double height;
};

/* Copies s as XML character data: escaped, control bytes as spaces, invalid
 * UTF-8 as '?', at most max_chars characters (then ".."; 0: no limit). */
static void put_xml(FILE *out, const char *s, size_t max_chars)
{
    size_t chars = 0;
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s), total_chars = 0;
    for (size_t i = 0; i < len; i++)
        total_chars += (p[i] & 0xc0) != 0x80;
    bool cut = max_chars && total_chars > max_chars;
    size_t keep = cut ? max_chars - 2 : SIZE_MAX;
    for (size_t i = 0; i < len && chars < keep; chars++) {
        unsigned char c = p[i];
        size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                                : (c & 0xf8) == 0xf0 ? 4 : 0;
        bool valid = n > 0 && i + n <= len && !(n == 2 && c < 0xc2);
        for (size_t k = 1; valid && k < n; k++)
            valid = (p[i + k] & 0xc0) == 0x80;
        if (!valid) {
            fputc('?', out);
            i++;
            continue;
        }
        if (n > 1)
            fwrite(p + i, 1, n, out);
        else if (c == '&')
            fputs("&amp;", out);
        else if (c == '<')
            fputs("&lt;", out);
        else if (c == '>')
            fputs("&gt;", out);
        else if (c == '"')
            fputs("&quot;", out);
        else if (c < 0x20 || c == 0x7f)
            fputc(' ', out);
        else
            fputc(c, out);
        i += n;
    }
    if (cut)
        fputs("..", out);
}

/* A stable colour per label: warm for Python code, blue-green for C frames,
 * grey for pyscope's own markers and the thread and process roots. */
static void fill_for(const char *label, bool marker, char buf[32])
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)label; *p; p++)
        h = (h ^ *p) * 16777619u;
    unsigned a = h & 0xff, b = (h >> 8) & 0xff, c = (h >> 16) & 0xff;
    if (strncmp(label, "[C]", 3) == 0)
        snprintf(buf, 32, "rgb(%u,%u,%u)", 50 + a % 60, 165 + b % 55, 165 + c % 55);
    else if (marker)
        snprintf(buf, 32, "rgb(%u,%u,%u)", 180 + a % 40, 180 + a % 40, 190 + a % 40);
    else
        snprintf(buf, 32, "rgb(%u,%u,%u)", 205 + a % 50, b % 230, c % 55);
}

static void emit_box(struct svg *g, const char *label, bool marker, uint32_t depth, uint64_t start,
                     uint64_t samples)
{
    double scale = (SVG_WIDTH - 2 * SVG_PAD) / (double)g->total;
    double x = SVG_PAD + (double)start * scale, w = (double)samples * scale;
    if (w < MIN_BOX_PX)
        return;
    double y = g->height - FOOTER_HEIGHT - (double)(depth + 1) * BOX_HEIGHT;
    char fill[32];
    fill_for(label, marker, fill);
    fputs("<g><title>", g->out);
    put_xml(g->out, label, 0);
    fprintf(g->out, " (%llu sample%s, %.2f%%)</title>", (unsigned long long)samples,
            samples == 1 ? "" : "s", 100.0 * (double)samples / (double)g->total);
    fprintf(g->out, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"/>", x,
            y, w, BOX_HEIGHT - 1, fill);
    size_t fits = (size_t)((w - 6) / LABEL_CHAR_PX);
    if (fits >= 3) {
        fprintf(g->out, "<text x=\"%.2f\" y=\"%.1f\">", x + 3, y + BOX_HEIGHT - 4.5);
        put_xml(g->out, label, fits);
        fputs("</text>", g->out);
    }
    fputs("</g>\n", g->out);
}

static int by_labels(const void *a, const void *b)
{
    const struct path *x = a, *y = b;
    for (uint32_t k = 0; k < x->depth && k < y->depth; k++) {
        int c = strcmp(x->labels[k]->text, y->labels[k]->text);
        if (c)
            return c;
    }
    return x->depth < y->depth ? -1 : x->depth > y->depth;
}

/* The boxes, from the sorted paths: a box opens where its path first differs
 * from the previous one and is drawn once a path leaves it. */
static int draw(struct svg *g, const struct path *paths, size_t n)
{
    struct open_box *open = malloc((g->max_depth ? g->max_depth : 1) * sizeof *open);
    if (!open)
        return -1;
    uint32_t n_open = 0;
    uint64_t x = 0;
    for (size_t i = 0; i <= n; i++) {
        uint32_t common = 0;
        if (i < n)
            while (common < n_open && common < paths[i].depth &&
                   strcmp(open[common].label->text, paths[i].labels[common]->text) == 0)
                common++;
        while (n_open > common) {
            n_open--;
            emit_box(g, open[n_open].label->text, open[n_open].label->marker, n_open + 1,
                     open[n_open].start, open[n_open].samples);
        }
        if (i == n)
            break;
        for (uint32_t k = common; k < paths[i].depth; k++)
            open[n_open++] = (struct open_box){paths[i].labels[k], x, 0};
        for (uint32_t k = 0; k < n_open; k++)
            open[k].samples += paths[i].samples;
        x += paths[i].samples;
    }
    free(open);
    return 0;
}

static void header(struct svg *g, const struct profile *p)
{
    fprintf(g->out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
            "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
            "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n"
            "<style>text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}"
            "g rect{stroke:#fff;stroke-width:0.5}g:hover rect{stroke:#000}</style>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#f8f8f0\"/>\n"
            "<text x=\"%.0f\" y=\"22\" text-anchor=\"middle\" style=\"font-size:17px\">",
            SVG_WIDTH, g->height, SVG_WIDTH, g->height, SVG_WIDTH / 2);
    fputs("pyscope flame graph", g->out);
    if (p->meta.command[0]) {
        fputs(": ", g->out);
        put_xml(g->out, p->meta.command, 120);
    }
    fprintf(g->out, "</text>\n<text x=\"%.0f\" y=\"38\" text-anchor=\"middle\">", SVG_WIDTH / 2);
    fprintf(g->out, "%llu samples", (unsigned long long)g->total);
    if (p->meta.python_version[0]) {
        fputs(", CPython ", g->out);
        put_xml(g->out, p->meta.python_version, 40);
    }
    if (p->meta.rate_hz > 0)
        fprintf(g->out, ", %g Hz", p->meta.rate_hz);
    fputs("; hover over a frame for its samples</text>\n", g->out);
}

int profile_write_svg(FILE *out, const struct profile *p, const struct profile_write_options *o)
{
    struct folded_line *lines;
    size_t n;
    if (profile_fold(p, o, &lines, &n) != 0)
        return -1;
    int rc = -1;
    bool several_pids = profile_several_pids(p);
    static const struct label unknown = {"?", false}, no_frames = {"<no Python frames>", true};
    size_t n_frames = p->n_frames, n_threads = p->n_threads;
    struct label *frame_labels = calloc(n_frames ? n_frames : 1, sizeof *frame_labels);
    struct label *root_labels = calloc(n_threads ? 2 * n_threads : 1, sizeof *root_labels);
    char (*root_text)[THREAD_LABEL_MAX] = calloc(n_threads ? 2 * n_threads : 1, sizeof *root_text);
    struct path *paths = calloc(n ? n : 1, sizeof *paths);
    size_t pool_size = 0;
    for (size_t i = 0; i < n; i++)
        pool_size += p->stacks[lines[i].stack].depth + 2;
    const struct label **pool = malloc((pool_size ? pool_size : 1) * sizeof *pool);
    if (!frame_labels || !root_labels || !root_text || !paths || !pool)
        goto out;
    for (size_t i = 0; i < n_frames; i++) {
        char *text = frame_label(&p->frames[i]);
        if (!text)
            goto out;
        frame_labels[i] = (struct label){text, p->frames[i].synthetic};
    }
    /* Per thread: its label, then its process's. */
    for (size_t i = 0; i < n_threads; i++) {
        thread_label(root_text[2 * i], &p->threads[i]);
        process_label(root_text[2 * i + 1], p->threads[i].pid);
        root_labels[2 * i] = (struct label){root_text[2 * i], true};
        root_labels[2 * i + 1] = (struct label){root_text[2 * i + 1], true};
    }

    struct svg g = {out, 0, 0, 0};
    const struct label **next = pool;
    for (size_t i = 0; i < n; i++) {
        const struct profile_stack *stack = &p->stacks[lines[i].stack];
        struct path *path = &paths[i];
        path->labels = next;
        path->samples = lines[i].samples;
        if (lines[i].thread != UINT32_MAX) {
            if (several_pids)
                path->labels[path->depth++] = &root_labels[2 * lines[i].thread + 1];
            path->labels[path->depth++] = &root_labels[2 * lines[i].thread];
        }
        for (uint32_t k = 0; k < stack->depth; k++)
            path->labels[path->depth++] =
                stack->frames[k] < n_frames ? &frame_labels[stack->frames[k]] : &unknown;
        if (path->depth == 0)
            path->labels[path->depth++] = &no_frames;
        next += path->depth;
        g.total += path->samples;
        if (path->depth > g.max_depth)
            g.max_depth = path->depth;
    }
    qsort(paths, n, sizeof *paths, by_labels);
    g.height = HEADER_HEIGHT + (double)(g.max_depth + 1) * BOX_HEIGHT + FOOTER_HEIGHT;
    header(&g, p);
    if (g.total == 0)
        fprintf(out, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">no samples kept (see "
                     "--idle and --gil)</text>\n", SVG_WIDTH / 2, g.height - FOOTER_HEIGHT - 4);
    else if (draw(&g, paths, n) != 0)
        goto out;
    if (g.total)
        emit_box(&g, "all", true, 0, 0, g.total);
    fputs("</svg>\n", out);
    rc = fflush(out) == 0 && !ferror(out) ? 0 : -1;
out:
    for (size_t i = 0; frame_labels && i < n_frames; i++)
        free((char *)frame_labels[i].text);
    free(frame_labels);
    free(root_labels);
    free(root_text);
    free(paths);
    free(pool);
    free(lines);
    return rc;
}
