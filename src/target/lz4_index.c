/* lz4 cores read on demand. Storing a 1 GiB expansion cost as much again as
 * decoding it (a page fault and a zeroed page for every 4 KiB), and a dump
 * reads a few hundred kilobytes of it. An lz4 frame is a chain of blocks,
 * each with its compressed size in front: one pass decodes them all through
 * LZ4F (so its block and content checksums are verified, and a corrupt or
 * truncated file is told as by streaming), keeping only where each block
 * lies and what it expands to. Independent blocks then decode alone; linked
 * ones need the 64 KiB that precede them, kept every 8 MiB of core, so a
 * read decodes at most 8 MiB past such a point. The frame's content checksum
 * (XXH32 of the whole core, half of the pass's time in liblz4) is taken on a
 * second thread, one block behind the decoder. */
#include "target/lz4_index.h"

#include <errno.h>
#include <lz4.h>
#include <lz4frame.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "target/decompress.h"
#include "util/clock.h"

#define HIST (64u << 10)                /* how far back a linked block may copy from */
#define CHECKPOINT_EVERY (8ull << 20)
#define MAX_BLOCKS (1u << 20)           /* more (tiny blocks): streamed instead */
#define HEAD_BYTES (4u << 20)           /* where the program headers are looked for */
#define SLOTS 4

struct block {
    uint64_t file_off;      /* of the block's data, after its size word */
    uint64_t core_off;
    uint32_t len;           /* what it decodes to (never 0: such blocks are left out) */
    uint32_t stored;        /* its compressed bytes */
    bool raw;               /* stored uncompressed */
};

struct slot {
    size_t block;
    unsigned char *data;
    uint64_t used;          /* 0: empty */
};

struct lz4_index {
    int fd;
    bool linked;
    size_t block_max;
    struct block *blocks;
    size_t nblocks;
    /* Linked frames: the HIST bytes before block cp_block[i] are hists[i]. */
    size_t *cp_block;
    unsigned char *hists;
    uint32_t *hist_len;
    size_t ncp;
    uint64_t size;
    unsigned char *src;
    struct slot slots[SLOTS];
    uint64_t clock;
    /* Linked frames: the block a forward decode would go on with, and the
     * history before it, so that reading block after block costs one each. */
    size_t cursor;
    unsigned char cursor_hist[HIST];
    size_t cursor_hist_len;
};

static void hist_push(unsigned char *hist, size_t *hlen, const unsigned char *p, size_t n)
{
    if (n >= HIST) {
        memcpy(hist, p + n - HIST, HIST);
        *hlen = HIST;
        return;
    }
    size_t keep = *hlen < HIST - n ? *hlen : HIST - n;
    memmove(hist, hist + *hlen - keep, keep);
    memcpy(hist + keep, p, n);
    *hlen = keep + n;
}

/* Bytes read (fewer at the end of the file), or -1. */
static ssize_t pread_some(int fd, void *buf, size_t n, uint64_t off, double *ms)
{
    double started = monotonic_ms();
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (unsigned char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    if (ms)
        *ms += monotonic_ms() - started;
    return (ssize_t)got;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static size_t block_max_of(LZ4F_blockSizeID_t id)
{
    switch (id) {
    case LZ4F_max256KB: return 256u << 10;
    case LZ4F_max1MB: return 1u << 20;
    case LZ4F_max4MB: return 4u << 20;
    default: return 64u << 10;
    }
}

void lz4_index_free(struct lz4_index *ix)
{
    if (!ix)
        return;
    free(ix->blocks);
    free(ix->cp_block);
    free(ix->hists);
    free(ix->hist_len);
    free(ix->src);
    for (int i = 0; i < SLOTS; i++)
        free(ix->slots[i].data);
    free(ix);
}

static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap * 2 : 256;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * size);
    if (!q)
        return false;
    *p = q;
    *cap = n;
    return true;
}

/* The content checksum's thread: it hashes one buffer while the decoder
 * fills the other. */
struct hasher {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    XXH32_state_t *state;
    const unsigned char *pending;   /* being hashed, or NULL */
    size_t pending_len;
    bool quit, running;
};

static void *hasher_main(void *arg)
{
    struct hasher *h = arg;
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (!h->pending && !h->quit)
            pthread_cond_wait(&h->cond, &h->lock);
        if (!h->pending)
            break;
        const unsigned char *p = h->pending;
        size_t n = h->pending_len;
        pthread_mutex_unlock(&h->lock);
        XXH32_update(h->state, p, n);
        pthread_mutex_lock(&h->lock);
        h->pending = NULL;
        pthread_cond_broadcast(&h->cond);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

static bool hasher_start(struct hasher *h)
{
    memset(h, 0, sizeof *h);
    if (!(h->state = XXH32_createState()))
        return false;
    XXH32_reset(h->state, 0);
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->cond, NULL);
    if (pthread_create(&h->thread, NULL, hasher_main, h) != 0) {
        pthread_mutex_destroy(&h->lock);
        pthread_cond_destroy(&h->cond);
        XXH32_freeState(h->state);
        return false;
    }
    h->running = true;
    return true;
}

/* Hands p over once the previous buffer is hashed (the decoder may then
 * reuse that one). */
static void hasher_post(struct hasher *h, const unsigned char *p, size_t n)
{
    pthread_mutex_lock(&h->lock);
    while (h->pending)
        pthread_cond_wait(&h->cond, &h->lock);
    h->pending = p;
    h->pending_len = n;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
}

/* Everything posted hashed; the digest. */
static uint32_t hasher_stop(struct hasher *h)
{
    pthread_mutex_lock(&h->lock);
    h->quit = true;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    uint32_t digest = XXH32_digest(h->state);
    XXH32_freeState(h->state);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->cond);
    h->running = false;
    return digest;
}

/* Feeds the decoder exactly n bytes; false with r->detail on an error. */
static bool feed(LZ4F_dctx *dctx, unsigned char *dst, size_t *dn, const unsigned char *p,
                 size_t n, size_t *hint, const LZ4F_decompressOptions_t *opts,
                 struct lz4_index_result *r)
{
    size_t sn = n;
    *hint = LZ4F_decompress(dctx, dst, dn, p, &sn, opts);
    if (LZ4F_isError(*hint)) {
        r->detail = strstr(LZ4F_getErrorName(*hint), "hecksum")
                        ? "its checksum does not match the data"
                        : LZ4F_getErrorName(*hint);
        return false;
    }
    return sn == n;
}

enum lz4_index_status lz4_index_build(int fd, uint64_t limit, struct lz4_index **out,
                                      struct lz4_index_result *r)
{
    memset(r, 0, sizeof *r);
    *out = NULL;
    struct lz4_index *ix = calloc(1, sizeof *ix);
    unsigned char *bufs[2] = {NULL, NULL}, *dst = NULL, *head = NULL, *hist = NULL;
    struct hasher hasher = {0};
    LZ4F_decompressOptions_t opts = {0};
    LZ4F_dctx *dctx = NULL;
    enum lz4_index_status status = LZ4_INDEX_NOMEM;
    size_t cap_blocks = 0, cap_cp = 0, cap_len = 0, cap_hists = 0;
    size_t head_len = 0, hist_len = 0;
    uint64_t pos = 0, total = 0, next_cp = CHECKPOINT_EVERY;
    uint64_t end = limit ? limit : UINT64_MAX;
    bool end_known = false, done = false;
    ssize_t got;
    if (!ix || LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
        goto out;
    ix->fd = fd;
    ix->cursor = SIZE_MAX;

    unsigned char hdr[LZ4F_HEADER_SIZE_MAX];
    got = pread_some(fd, hdr, sizeof hdr, 0, &r->read_ms);
    if (got < 0) {
        r->error = errno;
        status = LZ4_INDEX_IO;
        goto out;
    }
    status = LZ4_INDEX_TRUNCATED;
    if (got < LZ4F_MIN_SIZE_TO_KNOW_HEADER_LENGTH)
        goto out;
    size_t hsize = LZ4F_headerSize(hdr, (size_t)got);
    if (LZ4F_isError(hsize)) {
        r->detail = LZ4F_getErrorName(hsize);
        status = LZ4_INDEX_CORRUPT;
        goto out;
    }
    if (hsize > (size_t)got)
        goto out;
    LZ4F_frameInfo_t info;
    size_t consumed = hsize;
    size_t hint = LZ4F_getFrameInfo(dctx, &info, hdr, &consumed);
    if (LZ4F_isError(hint) || consumed != hsize) {
        r->detail = LZ4F_isError(hint) ? LZ4F_getErrorName(hint) : "bad frame header";
        status = LZ4_INDEX_CORRUPT;
        goto out;
    }
    ix->block_max = block_max_of(info.blockSizeID);
    ix->linked = info.blockMode == LZ4F_blockLinked;
    bool block_checksum = info.blockChecksumFlag == LZ4F_blockChecksumEnabled;
    bool content_checksum = info.contentChecksumFlag == LZ4F_contentChecksumEnabled;

    status = LZ4_INDEX_NOMEM;
    bufs[0] = malloc(ix->block_max);
    bufs[1] = malloc(ix->block_max);
    dst = bufs[0];
    ix->src = malloc(ix->block_max + 8);
    head = malloc(HEAD_BYTES);
    hist = malloc(HIST);
    if (!bufs[0] || !bufs[1] || !ix->src || !head || !hist)
        goto out;
    /* With block checksums too (rare), liblz4 checks them all itself. */
    if (content_checksum && !block_checksum && hasher_start(&hasher))
        opts.skipChecksums = 1;
    pos = hsize;
    for (;;) {
        unsigned char word[4];
        got = pread_some(fd, word, 4, pos, &r->read_ms);
        if (got < 0) {
            r->error = errno;
            status = LZ4_INDEX_IO;
            goto out;
        }
        size_t dn = ix->block_max;
        status = LZ4_INDEX_TRUNCATED;
        if (got < 4)
            goto out;
        status = LZ4_INDEX_CORRUPT;
        if (!feed(dctx, dst, &dn, word, 4, &hint, &opts, r))
            goto out;
        pos += 4;
        uint32_t w = le32(word);
        if (w == 0) {
            if (content_checksum) {
                got = pread_some(fd, word, 4, pos, &r->read_ms);
                status = got < 0 ? LZ4_INDEX_IO : LZ4_INDEX_TRUNCATED;
                r->error = got < 0 ? errno : 0;
                if (got < 4)
                    goto out;
                dn = ix->block_max;
                status = LZ4_INDEX_CORRUPT;
                if (!feed(dctx, dst, &dn, word, 4, &hint, &opts, r))
                    goto out;
                pos += 4;
                if (hasher.running && hasher_stop(&hasher) != le32(word)) {
                    r->detail = "its checksum does not match the data";
                    goto out;
                }
            }
            break;
        }
        uint32_t stored = w & 0x7fffffffu;
        size_t extent = stored + (block_checksum ? 4u : 0u);
        if (stored > ix->block_max) {
            r->detail = "a block larger than the frame allows";
            goto out;
        }
        got = pread_some(fd, ix->src, extent, pos, &r->read_ms);
        if (got < 0) {
            r->error = errno;
            status = LZ4_INDEX_IO;
            goto out;
        }
        status = LZ4_INDEX_TRUNCATED;
        if ((size_t)got < extent) {
            /* What the decoder makes of the part that is there. */
            dn = ix->block_max;
            feed(dctx, dst, &dn, ix->src, (size_t)got, &hint, &opts, r);
            goto out;
        }
        dn = ix->block_max;
        status = LZ4_INDEX_CORRUPT;
        if (!feed(dctx, dst, &dn, ix->src, extent, &hint, &opts, r))
            goto out;
        status = LZ4_INDEX_NOMEM;
        if (dn > 0) {
            if (ix->nblocks >= MAX_BLOCKS) {
                status = LZ4_INDEX_UNSUITED;
                goto out;
            }
            if (ix->linked && total >= next_cp) {
                if (!grow((void **)&ix->cp_block, &cap_cp, ix->ncp + 1, sizeof *ix->cp_block) ||
                    !grow((void **)&ix->hist_len, &cap_len, ix->ncp + 1, sizeof *ix->hist_len) ||
                    !grow((void **)&ix->hists, &cap_hists, ix->ncp + 1, HIST))
                    goto out;
                ix->cp_block[ix->ncp] = ix->nblocks;
                ix->hist_len[ix->ncp] = (uint32_t)hist_len;
                memcpy(ix->hists + ix->ncp * HIST, hist, hist_len);
                ix->ncp++;
                next_cp = total + CHECKPOINT_EVERY;
            }
            if (!grow((void **)&ix->blocks, &cap_blocks, ix->nblocks + 1, sizeof *ix->blocks))
                goto out;
            ix->blocks[ix->nblocks++] = (struct block){.file_off = pos, .core_off = total,
                                                       .len = (uint32_t)dn, .stored = stored,
                                                       .raw = (w >> 31) != 0};
            if (head_len < HEAD_BYTES) {
                size_t n = dn < HEAD_BYTES - head_len ? dn : HEAD_BYTES - head_len;
                memcpy(head + head_len, dst, n);
                head_len += n;
            }
            if (ix->linked)
                hist_push(hist, &hist_len, dst, dn);
            if (hasher.running) {
                hasher_post(&hasher, dst, dn);
                dst = dst == bufs[0] ? bufs[1] : bufs[0];
            }
            total += dn;
        }
        pos += extent;
        r->out_bytes = total;
        if (!end_known && head_len == HEAD_BYTES) {
            uint64_t e = core_image_end(head, head_len);
            end = e < end ? e : end;
            end_known = true;
        }
        /* Far past the core's end: the rest is not read (as when streaming). */
        if (end_known && total > end && total - end > DECOMPRESS_MAX_DROPPED) {
            done = true;
            break;
        }
    }
    if (!end_known) {
        uint64_t e = core_image_end(head, head_len);
        end = e < end ? e : end;
    }
    struct stat st;
    /* Another frame, or skippable data, after this one: streamed instead. */
    status = LZ4_INDEX_UNSUITED;
    if (!done && (fstat(fd, &st) != 0 || (uint64_t)st.st_size != pos))
        goto out;
    r->in_bytes = pos;
    r->out_bytes = total;
    r->size = total < end ? total : end;
    r->blocks = ix->nblocks;
    ix->size = r->size;
    status = LZ4_INDEX_OK;
    *out = ix;
    ix = NULL;
out:
    if (status != LZ4_INDEX_OK)
        r->in_bytes = pos;
    if (hasher.running)
        hasher_stop(&hasher);
    LZ4F_freeDecompressionContext(dctx);
    free(bufs[0]);
    free(bufs[1]);
    free(head);
    free(hist);
    lz4_index_free(ix);
    return status;
}

/* The block that holds core byte off (blocks are contiguous from 0). */
static size_t find_block(const struct lz4_index *ix, uint64_t off)
{
    size_t lo = 0, hi = ix->nblocks;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ix->blocks[mid].core_off <= off)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Decodes block b into dst (block_max bytes) after dict; false when it does
 * not decode to what it did when indexed (the file changed). */
static bool decode_block(struct lz4_index *ix, size_t b, unsigned char *dst,
                         const unsigned char *dict, size_t dict_len)
{
    const struct block *k = &ix->blocks[b];
    if (pread_some(ix->fd, ix->src, k->stored, k->file_off, NULL) != (ssize_t)k->stored)
        return false;
    if (k->raw) {
        if (k->stored != k->len)
            return false;
        memcpy(dst, ix->src, k->len);
        return true;
    }
    int n = dict_len ? LZ4_decompress_safe_usingDict((const char *)ix->src, (char *)dst,
                                                     (int)k->stored, (int)ix->block_max,
                                                     (const char *)dict, (int)dict_len)
                     : LZ4_decompress_safe((const char *)ix->src, (char *)dst, (int)k->stored,
                                           (int)ix->block_max);
    return n >= 0 && (uint32_t)n == k->len;
}

static const unsigned char *block_data(struct lz4_index *ix, size_t b)
{
    struct slot *victim = &ix->slots[0];
    for (int i = 0; i < SLOTS; i++) {
        struct slot *s = &ix->slots[i];
        if (s->used && s->block == b) {
            s->used = ++ix->clock;
            return s->data;
        }
        if (s->used < victim->used)
            victim = s;
    }
    if (!victim->data && !(victim->data = malloc(ix->block_max)))
        return NULL;
    victim->used = 0;
    if (!ix->linked) {
        if (!decode_block(ix, b, victim->data, NULL, 0))
            return NULL;
    } else {
        /* From the nearest kept history at or before b, or from where the
         * last forward decode stopped when that is nearer. */
        size_t lo = 0, hi = ix->ncp;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (ix->cp_block[mid] <= b)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t start = lo > 0 ? ix->cp_block[lo - 1] : 0;
        if (ix->cursor == SIZE_MAX || ix->cursor < start || ix->cursor > b) {
            ix->cursor_hist_len = lo > 0 ? ix->hist_len[lo - 1] : 0;
            if (lo > 0)
                memcpy(ix->cursor_hist, ix->hists + (lo - 1) * HIST, ix->cursor_hist_len);
            ix->cursor = start;
        }
        for (size_t i = ix->cursor; i <= b; i++) {
            if (!decode_block(ix, i, victim->data, ix->cursor_hist, ix->cursor_hist_len)) {
                ix->cursor = SIZE_MAX;
                return NULL;
            }
            hist_push(ix->cursor_hist, &ix->cursor_hist_len, victim->data, ix->blocks[i].len);
            ix->cursor = i + 1;
        }
    }
    victim->block = b;
    victim->used = ++ix->clock;
    return victim->data;
}

int lz4_index_read(struct lz4_index *ix, void *buf, size_t len, uint64_t off)
{
    if (off > ix->size || len > ix->size - off)
        return -1;
    unsigned char *out = buf;
    while (len > 0) {
        size_t b = find_block(ix, off);
        const struct block *k = &ix->blocks[b];
        const unsigned char *data = block_data(ix, b);
        if (!data)
            return -1;
        size_t in = (size_t)(off - k->core_off);
        size_t n = k->len - in < len ? k->len - in : len;
        memcpy(out, data + in, n);
        out += n;
        off += n;
        len -= n;
    }
    return 0;
}
