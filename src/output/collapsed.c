/* The folded-stacks ("collapsed") format of flamegraph.pl and inferno: one
 * line per distinct stack, frames outermost first joined by ';', then a space
 * and the sample count. */
#include <stdlib.h>
#include <string.h>

#include "output/profile_common.h"
#include "output/profile_writers.h"

/* ';' separates frames and the line ends the stack, so neither may appear
 * inside a frame; other control bytes would only confuse the viewers. */
static void put_frame_text(FILE *out, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == ';')
            c = ',';
        else if (c == '\n' || c == '\r' || c == '\t')
            c = ' ';
        else if (c < 0x20 || c == 0x7f)
            c = '?';
        fputc(c, out);
    }
}

static int by_key(const void *a, const void *b)
{
    const struct folded_line *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static int by_samples_then_key(const void *a, const void *b)
{
    const struct folded_line *x = a, *y = b;
    if (x->samples != y->samples)
        return x->samples < y->samples ? 1 : -1;
    return by_key(a, b);
}

static void write_line(FILE *out, const struct profile *p, const struct folded_line *line,
                       bool several_pids)
{
    const char *sep = "";
    if (line->thread != UINT32_MAX) {
        const struct profile_thread *t = &p->threads[line->thread];
        char label[THREAD_LABEL_MAX];
        if (several_pids) {
            process_label(label, t->pid);
            put_frame_text(out, label);
            fputc(';', out);
        }
        thread_label(label, t);
        put_frame_text(out, label);
        sep = ";";
    }
    const struct profile_stack *stack = &p->stacks[line->stack];
    if (stack->depth == 0 && !*sep)
        fputs("<no Python frames>", out);
    for (uint32_t k = 0; k < stack->depth; k++) {
        fputs(sep, out);
        sep = ";";
        uint32_t id = stack->frames[k];
        char *label = id < p->n_frames ? frame_label(&p->frames[id]) : NULL;
        put_frame_text(out, label ? label : "?");
        free(label);
    }
    fprintf(out, " %llu\n", (unsigned long long)line->samples);
}

int profile_fold(const struct profile *p, const struct profile_write_options *o,
                 struct folded_line **lines_out, size_t *n_out)
{
    bool roots = o && o->thread_roots;
    struct folded_line *lines = malloc((p->n_counts ? p->n_counts : 1) * sizeof *lines);
    if (!lines)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < p->n_counts; i++) {
        const struct profile_count *c = &p->counts[i];
        if (!profile_state_kept(o, (enum profile_state)c->state) || c->samples == 0 ||
            c->thread >= p->n_threads || c->stack >= p->n_stacks)
            continue;
        lines[n++] = (struct folded_line){roots ? c->thread : UINT32_MAX, c->stack, c->samples};
    }

    /* One line per stack: states (and, without roots, threads) fold together. */
    qsort(lines, n, sizeof *lines, by_key);
    size_t merged = 0;
    for (size_t i = 0; i < n; i++) {
        if (merged && by_key(&lines[merged - 1], &lines[i]) == 0)
            lines[merged - 1].samples += lines[i].samples;
        else
            lines[merged++] = lines[i];
    }
    *lines_out = lines;
    *n_out = merged;
    return 0;
}

int profile_write_collapsed(FILE *out, const struct profile *p, const struct profile_write_options *o)
{
    struct folded_line *lines;
    size_t merged;
    if (profile_fold(p, o, &lines, &merged) != 0)
        return -1;
    /* Heaviest first, so that `head` shows what matters. */
    qsort(lines, merged, sizeof *lines, by_samples_then_key);

    bool several_pids = profile_several_pids(p);
    for (size_t i = 0; i < merged; i++)
        write_line(out, p, &lines[i], several_pids);
    free(lines);
    return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}
