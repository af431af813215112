/* Where the interpreter loop's code for an opcode starts: the table of
 * computed-goto targets (opcode_targets[256]) found in the memory of the
 * file that holds the runtime, symbols or not. */
#include "python/eval_loop.h"

#include <stdlib.h>
#include <string.h>

/* A table is 256 code addresses in a row. Builds keep it in .data or
 * .data.rel.ro, which are far smaller than this. */
#define MAX_SCAN_BYTES (64u << 20)
#define TABLE_LEN 256
/* Every unused opcode goes to one label (_unknown_opcode): 3.11 leaves
 * about 60 numbers unused, 3.15 about 20. The handlers are many (183 on
 * 3.11, 235 on 3.15), where a switch over a byte's values (a jump table of
 * 256 too, in the static non-PIE builds) has far fewer targets. */
#define MIN_UNKNOWN 8
#define MIN_DISTINCT 150
/* The loop is one function, even where the compiler splits it in two. */
#define MAX_SPAN (8u << 20)

static bool in_ranges(uint64_t v, const uint64_t (*r)[2], int n)
{
    for (int i = 0; i < n; i++)
        if (v >= r[i][0] && v < r[i][1])
            return true;
    return false;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether the 256 words at w look like the opcode table, whose entries at
 * the opcodes asked for are real handlers (not the unknown-opcode label). */
static bool looks_like_table(const uint64_t *w, const int *opcodes, int n)
{
    uint64_t sorted[TABLE_LEN];
    memcpy(sorted, w, sizeof sorted);
    qsort(sorted, TABLE_LEN, sizeof sorted[0], cmp_u64);
    if (sorted[TABLE_LEN - 1] - sorted[0] > MAX_SPAN)
        return false;
    int distinct = 1, best = 1, run = 1;
    uint64_t most = sorted[0];
    for (int i = 1; i < TABLE_LEN; i++) {
        if (sorted[i] == sorted[i - 1]) {
            run++;
        } else {
            distinct++;
            run = 1;
        }
        if (run > best) {
            best = run;
            most = sorted[i];
        }
    }
    if (best < MIN_UNKNOWN || distinct < MIN_DISTINCT)
        return false;
    for (int k = 0; k < n; k++)
        if (opcodes[k] < 0 || opcodes[k] >= TABLE_LEN || w[opcodes[k]] == most)
            return false;
    return true;
}

int py_opcode_handlers(struct target *t, const char *binary, const int *opcodes, int n,
                       uint64_t *out)
{
    if (!t || !binary || n <= 0)
        return -1;
    uint64_t (*code)[2] = calloc(t->nmaps ? t->nmaps : 1, sizeof *code);
    if (!code)
        return -1;
    int n_code = 0;
    for (size_t i = 0; i < t->nmaps; i++) {
        const struct target_map *m = &t->maps[i];
        if (m->path && strcmp(m->path, binary) == 0 && m->perms[2] == 'x') {
            code[n_code][0] = m->start;
            code[n_code][1] = m->end;
            n_code++;
        }
    }
    int found = 0;
    for (size_t i = 0; i < t->nmaps && n_code > 0 && found < 2; i++) {
        const struct target_map *m = &t->maps[i];
        if (!m->path || strcmp(m->path, binary) != 0 || m->perms[0] != 'r' ||
            m->perms[2] == 'x' || m->end <= m->start || m->end - m->start > MAX_SCAN_BYTES)
            continue;
        size_t len = (size_t)(m->end - m->start);
        uint64_t *words = malloc(len);
        if (!words)
            continue;
        if (t->ops->read_raw(t, m->start, words, len) != 0) {
            free(words);
            continue;
        }
        /* A table is a run of code addresses as long as itself, or two
         * tables side by side (3.15 keeps another next to it); seen on the
         * ten interpreters here: switch tables' runs are never a multiple
         * of 256 long. */
        size_t count = len / sizeof *words, run = 0;
        for (size_t k = 0; k <= count && found < 2; k++) {
            if (k < count && in_ranges(words[k], (const uint64_t(*)[2])code, n_code)) {
                run++;
                continue;
            }
            for (size_t at = k - run; run >= TABLE_LEN && run % TABLE_LEN == 0 && at < k;
                 at += TABLE_LEN) {
                if (!looks_like_table(&words[at], opcodes, n))
                    continue;
                found++;
                for (int j = 0; j < n; j++)
                    out[j] = words[at + (size_t)opcodes[j]];
            }
            run = 0;
        }
        free(words);
    }
    free(code);
    /* Two tables that both fit: no guess. */
    return found == 1 ? 0 : -1;
}
