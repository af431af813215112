/* Expansion of compressed cores into memory or an unlinked temporary file.
 * The four decoders share one input reader and one output sink. They decode
 * into a small buffer that stays in cache; only its pages that are not all
 * zeros are copied out, so zero pages of the image (untouched stack and
 * heap) are never faulted in, nor written to the file. Decoding straight
 * into a fresh 1 GiB image cost half again the decoder's own time, in page
 * faults taken in the middle of the decoder's work (bench/bench_cores.py);
 * those faults, the copies and zstd's checksum are now taken on a second
 * thread behind the decoder instead (struct store_queue).
 * Nothing past the end of the ELF file's last segment is kept, so trailing
 * data or a crafted stream cannot fill memory or disk beyond what the core
 * needs. */
#include "target/decompress.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <isa-l/igzip_lib.h>
#include <limits.h>
#include <lz4frame.h>
#include <lzma.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>
#define ZSTD_STATIC_LINKING_ONLY  /* ZSTD_d_forceIgnoreChecksum */
#include <zstd.h>
#include <zstd_errors.h>

#include "target/lz4_index.h"
#include "util/clock.h"

#define IN_CHUNK (1u << 20)
/* The first chunk holds the program headers that say where the core ends;
 * later ones stay small enough to be decoded and scanned while in cache. */
#define FIRST_CHUNK (4u << 20)
#define OUT_CHUNK (256u << 10)
#define PAGE 4096u
/* Chunks decoded ahead of the store thread. */
#define STORE_SLOTS 8

enum compression compression_detect(const unsigned char *head, size_t n)
{
    static const unsigned char zstd[] = {0x28, 0xb5, 0x2f, 0xfd};
    static const unsigned char lz4[] = {0x04, 0x22, 0x4d, 0x18};
    static const unsigned char xz[] = {0xfd, '7', 'z', 'X', 'Z', 0x00};
    static const unsigned char gz[] = {0x1f, 0x8b};
    if (n >= sizeof zstd && memcmp(head, zstd, sizeof zstd) == 0)
        return COMPRESSION_ZSTD;
    if (n >= sizeof lz4 && memcmp(head, lz4, sizeof lz4) == 0)
        return COMPRESSION_LZ4;
    if (n >= sizeof xz && memcmp(head, xz, sizeof xz) == 0)
        return COMPRESSION_XZ;
    if (n >= sizeof gz && memcmp(head, gz, sizeof gz) == 0)
        return COMPRESSION_GZIP;
    return COMPRESSION_NONE;
}

const char *compression_name(enum compression kind)
{
    switch (kind) {
    case COMPRESSION_ZSTD: return "zstd";
    case COMPRESSION_LZ4: return "lz4";
    case COMPRESSION_XZ: return "xz";
    case COMPRESSION_GZIP: return "gzip";
    case COMPRESSION_NONE: break;
    }
    return "uncompressed";
}

struct source {
    int fd;
    unsigned char *buf;
    size_t pos, len;
    uint64_t consumed;      /* compressed bytes handed to the decoder before buf */
    unsigned char tail[4];  /* the last bytes before buf (a checksum may straddle) */
    bool eof;
    int error;              /* errno of a failed read */
    double read_ms;         /* spent in read() */
};

/* Refills buf when the decoder has taken all of it; false at the end. */
static bool source_refill(struct source *s)
{
    if (s->pos < s->len)
        return true;
    if (s->eof)
        return false;
    s->consumed += s->len;
    if (s->len >= sizeof s->tail) {
        memcpy(s->tail, s->buf + s->len - sizeof s->tail, sizeof s->tail);
    } else {
        memmove(s->tail, s->tail + s->len, sizeof s->tail - s->len);
        memcpy(s->tail + sizeof s->tail - s->len, s->buf, s->len);
    }
    s->pos = s->len = 0;
    for (;;) {
        double started = monotonic_ms();
        ssize_t n = read(s->fd, s->buf, IN_CHUNK);
        s->read_ms += monotonic_ms() - started;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            s->error = errno;
        if (n <= 0) {
            s->eof = true;
            return false;
        }
        s->len = (size_t)n;
        return true;
    }
}

static uint64_t memory_available(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return 0;
    char line[128];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (uint64_t)kb << 10;
}

/* An unlinked temporary file in $TMPDIR, or /tmp. */
static int make_temp(const char **where)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    *where = dir;
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    /* Filesystems without O_TMPFILE: a named file, unlinked at once. */
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/pyscope-core-XXXXXX", dir) >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0)
        unlink(path);
    return fd;
}

/* After the first chunk, storing (finding the non-zero pages, copying them
 * into the image or writing them to the file: the image's page faults, most
 * of the kernel's share of an expansion) runs on a thread of its own, one
 * to STORE_SLOTS chunks behind the decoder, so that on two cores a first
 * look costs the decoding's time rather than decoding's plus storing's. */
struct store_queue {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned char *bufs[STORE_SLOTS];
    struct { size_t len, hash_len; uint64_t off; } jobs[STORE_SLOTS];
    uint64_t posted, done;  /* chunks handed over, and stored */
    bool quit;
    int error;              /* errno of a failed write, after which nothing more is stored */
    double cpu_ms;          /* the thread's CPU time */
    struct sink *sink;
};

struct sink {
    int fd;
    unsigned char *buf;     /* where the decoders write (FIRST_CHUNK bytes) */
    size_t len;
    size_t chunk;           /* how much of buf a decoder may fill before a flush */
    uint64_t written;       /* file offset of buf[0] */
    uint64_t limit;         /* the core ends here (UINT64_MAX: not known) */
    uint64_t max_bytes;
    uint64_t dropped;       /* bytes decoded past limit */
    bool done;              /* far past limit: the rest of the stream is not read */
    int error;
    bool no_temp;           /* the temporary file could not be made */
    bool opened;            /* image or fd chosen (at the first flush) */
    const struct decompress_keep *keep;
    bool kept;              /* expanded into the file keep->open gave */
    double store_ms;        /* spent copying out and writing, or waiting for the store thread */
    struct store_queue *queue;  /* the store thread, once started */
    /* A zstd frame's content checksum, taken here (beside storing, on the
     * store thread) instead of in libzstd's decoder: XXH64 of the frame's
     * bytes up to hash_end, the first frame's end once known. */
    XXH64_state_t *hash;
    uint64_t hash_end;
    uint64_t hashed;        /* bytes of core hashed (by the thread that stores) */
    uint32_t hash_want;     /* the frame's own checksum, once hash_known */
    bool hash_known;
    unsigned char *image;   /* the core in anonymous memory, or NULL */
    size_t map_size;
    const char *where;      /* "memory" or the directory of the temporary file */
};

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bool page_is_zero(const unsigned char *p, size_t n)
{
    return p[0] == 0 && memcmp(p, p + 1, n - 1) == 0;
}

uint64_t core_image_end(const unsigned char *buf, size_t len)
{
    Elf64_Ehdr eh;
    if (len < sizeof eh)
        return UINT64_MAX;
    memcpy(&eh, buf, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == PN_XNUM ||
        eh.e_phoff > len || (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > len - eh.e_phoff)
        return UINT64_MAX;
    uint64_t end = eh.e_phoff + (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr);
    if (eh.e_shoff && eh.e_shnum) {
        uint64_t sh_end = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
        if (sh_end < eh.e_shoff)
            return UINT64_MAX;
        end = sh_end > end ? sh_end : end;
    }
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, buf + eh.e_phoff + i * sizeof ph, sizeof ph);
        uint64_t seg_end = ph.p_offset + ph.p_filesz;
        if (seg_end < ph.p_offset)
            return UINT64_MAX;
        end = seg_end > end ? seg_end : end;
    }
    return end;
}

/* 0, or the errno of a failed write. */
static int write_at(const struct sink *k, const unsigned char *p, size_t n, uint64_t off)
{
    if (k->image) {
        /* Faulting the run's pages in with one call takes a quarter less
         * system time than a fault per page (1.1 GiB: 0.72 s against 0.95
         * here); kernels before 5.14 refuse it and take the faults. */
        uint64_t first = off & ~(uint64_t)(PAGE - 1);
        madvise(k->image + first, (size_t)(off + n - first), MADV_POPULATE_WRITE);
        memcpy(k->image + off, p, n);   /* off + n <= limit <= map_size */
        return 0;
    }
    while (n > 0) {
        ssize_t w = pwrite(k->fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

/* Stores len bytes of buf at off, runs of non-zero pages only; 0 or an errno. */
static int store_chunk(const struct sink *k, const unsigned char *buf, size_t len, uint64_t off)
{
    size_t run_start = 0;
    bool in_run = false;
    for (size_t at = 0; at < len; at += PAGE) {
        size_t n = len - at < PAGE ? len - at : PAGE;
        bool zero = page_is_zero(buf + at, n);
        if (!zero && !in_run) {
            run_start = at;
            in_run = true;
        } else if (zero && in_run) {
            int rc = write_at(k, buf + run_start, at - run_start, off + run_start);
            if (rc)
                return rc;
            in_run = false;
        }
    }
    return in_run ? write_at(k, buf + run_start, len - run_start, off + run_start) : 0;
}

static void *store_main(void *arg)
{
    struct store_queue *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (q->done == q->posted && !q->quit)
            pthread_cond_wait(&q->cond, &q->lock);
        if (q->done == q->posted)
            break;
        unsigned slot = (unsigned)(q->done % STORE_SLOTS);
        int failed = q->error;
        pthread_mutex_unlock(&q->lock);
        int rc = failed ? 0 : store_chunk(q->sink, q->bufs[slot], q->jobs[slot].len,
                                          q->jobs[slot].off);
        if (q->jobs[slot].hash_len)
            XXH64_update(q->sink->hash, q->bufs[slot], q->jobs[slot].hash_len);
        pthread_mutex_lock(&q->lock);
        if (rc && !q->error)
            q->error = rc;
        q->done++;
        pthread_cond_broadcast(&q->cond);
    }
    q->cpu_ms = thread_cpu_ms();
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

/* Starts the store thread after the first chunk, the decoders' buffer
 * becoming its first slot; NULL (store inline) when it cannot. */
static struct store_queue *store_start(struct sink *k)
{
    struct store_queue *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->sink = k;
    q->bufs[0] = k->buf;
    for (unsigned i = 1; i < STORE_SLOTS; i++)
        if (!(q->bufs[i] = malloc(OUT_CHUNK)))
            goto fail;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
    if (pthread_create(&q->thread, NULL, store_main, q) == 0)
        return q;
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cond);
fail:
    for (unsigned i = 1; i < STORE_SLOTS; i++)
        free(q->bufs[i]);
    free(q);
    return NULL;
}

/* Hands k->buf over and gives the decoders the next free slot; -1 once a
 * store has failed (k->error set). */
static int store_post(struct sink *k, size_t len, size_t hash_len, uint64_t off)
{
    struct store_queue *q = k->queue;
    pthread_mutex_lock(&q->lock);
    unsigned slot = (unsigned)(q->posted % STORE_SLOTS);
    q->jobs[slot].len = len;
    q->jobs[slot].hash_len = hash_len;
    q->jobs[slot].off = off;
    q->posted++;
    pthread_cond_broadcast(&q->cond);
    while (q->posted - q->done >= STORE_SLOTS && !q->error)
        pthread_cond_wait(&q->cond, &q->lock);
    int error = q->error;
    pthread_mutex_unlock(&q->lock);
    k->buf = q->bufs[q->posted % STORE_SLOTS];
    if (error) {
        k->error = error;
        return -1;
    }
    return 0;
}

/* Waits for everything posted to be stored, ends the thread; -1 when a
 * store failed. k->buf is freed with the slots (the caller's is one of them). */
static int store_stop(struct sink *k, double *cpu_ms)
{
    struct store_queue *q = k->queue;
    if (!q)
        return 0;
    pthread_mutex_lock(&q->lock);
    q->quit = true;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->thread, NULL);
    *cpu_ms = q->cpu_ms;
    int error = q->error;
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cond);
    for (unsigned i = 0; i < STORE_SLOTS; i++)
        free(q->bufs[i]);
    free(q);
    k->queue = NULL;
    k->buf = NULL;
    if (error) {
        k->error = error;
        return -1;
    }
    return 0;
}

/* Writes out buf (runs of non-zero pages); -1 on a write error. */
static int sink_flush(struct sink *k)
{
    if (!k->opened) {
        k->opened = true;
        k->limit = core_image_end(k->buf, k->len);
        if (k->max_bytes && k->limit > k->max_bytes)
            k->limit = k->max_bytes;
        if (k->keep && k->limit != UINT64_MAX && k->limit >= k->keep->min_bytes &&
            (k->fd = k->keep->open(k->keep->ctx, k->limit)) >= 0) {
            k->kept = true;
            k->where = "the cache";
            goto opened;
        }
        /* Memory when the user set no TMPDIR and the core is known to take
         * at most half of what is available: writing a large file into a
         * busy disk's page cache stalled on writeback for many times the
         * decompression's own cost. Pages never written stay unallocated.
         * No MADV_HUGEPAGE: with pages copied out one by one, huge pages
         * (zeroed, and compacted for, at each fault) cost a 1.1 GiB
         * expansion 0.8 s more system time on a loaded machine. */
        const char *tmpdir = getenv("TMPDIR");
        if ((!tmpdir || !*tmpdir) && k->limit != UINT64_MAX && k->limit > 0 &&
            k->limit <= memory_available() / 2) {
            size_t size = (size_t)((k->limit + PAGE - 1) & ~(uint64_t)(PAGE - 1));
            void *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m != MAP_FAILED) {
                k->image = m;
                k->map_size = size;
                k->where = "memory";
                goto opened;
            }
        }
        k->fd = make_temp(&k->where);
        if (k->fd < 0) {
            k->error = errno;
            k->no_temp = true;
            return -1;
        }
    }
opened:;
    size_t len = k->len;
    if (k->written + len > k->limit) {
        len = (size_t)(k->limit - k->written);
        /* What follows the last segment is decoded and dropped, so that the
         * stream's own checksum at its end still tells a corrupt core; a
         * stream that goes on much longer is not worth reading. */
        k->dropped += k->len - len;
        k->done = k->dropped > DECOMPRESS_MAX_DROPPED;
    }
    uint64_t off = k->written;
    /* The checksum covers what the frame holds past the core's end too. */
    size_t hash_len = 0;
    if (k->hash && !k->done && k->hashed < k->hash_end) {
        hash_len = k->hash_end - k->hashed < k->len ? (size_t)(k->hash_end - k->hashed) : k->len;
        k->hashed += hash_len;
    }
    k->written += len;
    k->len = 0;
    k->chunk = OUT_CHUNK;
    if (k->queue)
        return len || hash_len ? store_post(k, len, hash_len, off) : 0;
    if (hash_len)
        XXH64_update(k->hash, k->buf, hash_len);
    int rc = store_chunk(k, k->buf, len, off);
    if (rc) {
        k->error = rc;
        return -1;
    }
    if (!k->done && len == FIRST_CHUNK)
        k->queue = store_start(k);  /* a long stream: store the rest alongside */
    return 0;
}

/* After a decoder produced into buf: flushes when full. */
static int sink_produced(struct sink *k, size_t n)
{
    k->len += n;
    if (k->len < k->chunk)
        return 0;
    double started = monotonic_ms();
    int rc = sink_flush(k);
    k->store_ms += monotonic_ms() - started;
    return rc;
}

enum outcome { OUT_OK, OUT_TRUNCATED, OUT_CORRUPT, OUT_IO, OUT_NOMEM };

struct run {
    struct source *src;
    struct sink *out;
    const char *detail;     /* the decoder's words for a corrupt stream */
};

/* The 4 compressed bytes that end at pos of the current buffer. */
static uint32_t source_last4(const struct source *s, size_t pos)
{
    unsigned char b[8];
    memcpy(b, s->tail, 4);
    size_t n = pos < 4 ? pos : 4;
    memcpy(b + 4, s->buf + pos - n, n);
    const unsigned char *p = b + 4 + n - 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static enum outcome run_zstd(struct run *r)
{
    struct source *s = r->src;
    struct sink *k = r->out;
    ZSTD_DStream *ds = ZSTD_createDStream();
    if (!ds)
        return OUT_NOMEM;
    /* Windows up to 128 MiB, the zstd tool's own limit (zstd --long uses
     * 128 MiB; systemd-coredump's default level far less): a corrupt or
     * hostile header must not make pyscope ask for gigabytes. */
    ZSTD_DCtx_setParameter(ds, ZSTD_d_windowLogMax, 27);
    /* The first frame's content checksum (5% of a first look in libzstd's
     * decoder) is taken beside storing when the frame has one (bit 2 of the
     * header's descriptor); later frames, rare, are checked by libzstd. */
    bool own_hash = false;
    static const unsigned char magic[] = {0x28, 0xb5, 0x2f, 0xfd};   /* not legacy, not skippable */
    if (source_refill(s) && s->len >= 5 && memcmp(s->buf, magic, sizeof magic) == 0 &&
        (s->buf[4] & 0x04) && (k->hash = XXH64_createState())) {
        XXH64_reset(k->hash, 0);
        k->hash_end = UINT64_MAX;
        own_hash = !ZSTD_isError(ZSTD_DCtx_setParameter(ds, ZSTD_d_forceIgnoreChecksum,
                                                         ZSTD_d_ignoreChecksum));
        if (!own_hash) {
            XXH64_freeState(k->hash);
            k->hash = NULL;
        }
    }
    enum outcome result = OUT_OK;
    size_t pending = 1;
    for (;;) {
        bool more = source_refill(s);
        if (!more && pending == 0)
            break;      /* the last frame ended with the input */
        ZSTD_inBuffer in = {s->buf, s->len, s->pos};
        ZSTD_outBuffer out = {k->buf + k->len, k->chunk - k->len, 0};
        pending = ZSTD_decompressStream(ds, &out, &in);
        s->pos = in.pos;
        if (ZSTD_isError(pending)) {
            k->len += out.pos;
            r->detail = ZSTD_getErrorName(pending);
            result = OUT_CORRUPT;
            break;
        }
        if (pending == 0 && own_hash) {
            /* The first frame ended: its checksum is its last 4 bytes. */
            own_hash = false;
            k->hash_end = k->written + k->len + out.pos;
            k->hash_want = source_last4(s, in.pos);
            k->hash_known = true;
            if (ZSTD_isError(ZSTD_DCtx_setParameter(ds, ZSTD_d_forceIgnoreChecksum,
                                                    ZSTD_d_validateChecksum))) {
                result = OUT_NOMEM;     /* later frames would go unchecked */
                break;
            }
        }
        if (sink_produced(k, out.pos) != 0) {
            result = OUT_IO;
            break;
        }
        if (k->done || (!more && out.pos == 0))
            break;
    }
    ZSTD_freeDStream(ds);
    if (result == OUT_OK && !k->done && pending != 0)
        result = OUT_TRUNCATED;
    return result;
}

static enum outcome run_lz4(struct run *r)
{
    struct source *s = r->src;
    struct sink *k = r->out;
    LZ4F_dctx *dctx;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
        return OUT_NOMEM;
    enum outcome result = OUT_OK;
    size_t hint = 1;
    for (;;) {
        bool more = source_refill(s);
        if (!more && hint == 0)
            break;
        size_t src_n = s->len - s->pos, dst_n = k->chunk - k->len;
        hint = LZ4F_decompress(dctx, k->buf + k->len, &dst_n, s->buf + s->pos, &src_n, NULL);
        if (LZ4F_isError(hint)) {
            k->len += dst_n;
            r->detail = strstr(LZ4F_getErrorName(hint), "hecksum")
                            ? "its checksum does not match the data"
                            : LZ4F_getErrorName(hint);
            result = OUT_CORRUPT;
            break;
        }
        s->pos += src_n;
        if (sink_produced(k, dst_n) != 0) {
            result = OUT_IO;
            break;
        }
        if (k->done || (!more && dst_n == 0))
            break;
    }
    LZ4F_freeDecompressionContext(dctx);
    if (result == OUT_OK && !k->done && hint != 0)
        result = OUT_TRUNCATED;
    return result;
}

static const char *lzma_words(lzma_ret ret)
{
    switch (ret) {
    case LZMA_FORMAT_ERROR: return "not in the .xz format";
    case LZMA_OPTIONS_ERROR: return "unsupported compression options";
    case LZMA_DATA_ERROR: return "compressed data is corrupt";
    case LZMA_MEMLIMIT_ERROR: return "needs too much memory";
    default: return "decoder error";
    }
}

static enum outcome run_xz(struct run *r)
{
    struct source *s = r->src;
    struct sink *k = r->out;
    lzma_stream z = LZMA_STREAM_INIT;
    /* xz -9 needs 65 MiB to decode; a header asking for more than 512 MiB
     * is corrupt or hostile, like zstd's large windows above. */
    if (lzma_stream_decoder(&z, (uint64_t)512 << 20, LZMA_CONCATENATED) != LZMA_OK)
        return OUT_NOMEM;
    enum outcome result = OUT_OK;
    for (;;) {
        bool more = source_refill(s);
        z.next_in = s->buf + s->pos;
        z.avail_in = s->len - s->pos;
        z.next_out = k->buf + k->len;
        z.avail_out = k->chunk - k->len;
        lzma_ret ret = lzma_code(&z, more ? LZMA_RUN : LZMA_FINISH);
        s->pos = s->len - z.avail_in;
        if (sink_produced(k, (size_t)(z.next_out - (k->buf + k->len))) != 0) {
            result = OUT_IO;
            break;
        }
        if (ret == LZMA_STREAM_END || k->done)
            break;
        if (ret == LZMA_BUF_ERROR || (ret == LZMA_OK && !more && z.avail_out != 0 &&
                                      z.avail_in == 0)) {
            result = OUT_TRUNCATED;
            break;
        }
        if (ret == LZMA_MEM_ERROR) {
            result = OUT_NOMEM;
            break;
        }
        if (ret != LZMA_OK) {
            r->detail = lzma_words(ret);
            /* With LZMA_FINISH a stream cut inside a block reads as corrupt. */
            result = !more && ret == LZMA_DATA_ERROR ? OUT_TRUNCATED : OUT_CORRUPT;
            break;
        }
    }
    lzma_end(&z);
    return result;
}

static const char *isal_words(int ret)
{
    switch (ret) {
    case ISAL_INVALID_BLOCK: return "invalid block type";
    case ISAL_INVALID_SYMBOL: return "invalid code";
    case ISAL_INVALID_LOOKBACK: return "invalid distance too far back";
    case ISAL_INVALID_WRAPPER: return "incorrect header";
    case ISAL_UNSUPPORTED_METHOD: return "unknown compression method";
    case ISAL_INCORRECT_CHECKSUM: return "its checksum does not match the data";
    case ISAL_NEED_DICT: return "needs a preset dictionary";
    default: return "corrupt deflate data";
    }
}

/* gzip through ISA-L's inflate: 1.0 s of CPU for a 1.1 GiB core where
 * zlib's took 2.5 (its header, trailer, CRC and length checked as zlib's). */
static enum outcome run_gzip(struct run *r)
{
    struct source *s = r->src;
    struct sink *k = r->out;
    struct inflate_state *z = malloc(sizeof *z);
    if (!z)
        return OUT_NOMEM;
    isal_inflate_init(z);
    z->crc_flag = ISAL_GZIP;
    enum outcome result = OUT_OK;
    for (;;) {
        bool more = source_refill(s);
        z->next_in = s->buf + s->pos;
        z->avail_in = (uint32_t)(s->len - s->pos);
        z->next_out = k->buf + k->len;
        z->avail_out = (uint32_t)(k->chunk - k->len);
        int ret = isal_inflate(z);
        s->pos = s->len - z->avail_in;
        size_t produced = (size_t)(z->next_out - (k->buf + k->len));
        if (ret == ISAL_DECOMP_OK && sink_produced(k, produced) != 0) {
            result = OUT_IO;
            break;
        }
        if (ret != ISAL_DECOMP_OK) {
            k->len += produced;
            r->detail = isal_words(ret);
            result = OUT_CORRUPT;
            break;
        }
        if (k->done)
            break;
        if (z->block_state == ISAL_BLOCK_FINISH) {
            /* gzip files may hold several members; anything else after the
             * first one (padding) is not ours to read. */
            if (!source_refill(s) || s->len - s->pos < 2 || s->buf[s->pos] != 0x1f ||
                s->buf[s->pos + 1] != 0x8b)
                break;
            isal_inflate_reset(z);
            z->crc_flag = ISAL_GZIP;
            continue;
        }
        if (!more && produced == 0) {
            result = OUT_TRUNCATED;
            break;
        }
    }
    free(z);
    return result;
}

/* An lz4 frame indexed for reading on demand, with a duplicate of fd. */
static enum lz4_index_status index_lz4(int fd, uint64_t max_bytes, struct decompressed *core,
                                       struct decompress_stats *stats,
                                       struct lz4_index_result *r)
{
    struct lz4_index *ix;
    int own = dup(fd);
    if (own < 0)
        return LZ4_INDEX_UNSUITED;
    enum lz4_index_status status = lz4_index_build(own, max_bytes, &ix, r);
    if (status != LZ4_INDEX_OK) {
        close(own);
        return status;
    }
    core->lz4 = ix;
    core->fd = own;
    core->size = r->size;
    if (stats) {
        stats->in_bytes = r->in_bytes;
        stats->out_bytes = r->size;
        stats->read_ms = r->read_ms;
        stats->on_demand = true;
        stats->blocks = r->blocks;
        snprintf(stats->where, sizeof stats->where, "memory, read on demand");
    }
    return LZ4_INDEX_OK;
}

int decompress_core(int fd, const char *name, enum compression kind, uint64_t max_bytes,
                    const struct decompress_keep *keep, struct decompressed *core,
                    struct decompress_stats *stats, struct pyscope_error *err)
{
    memset(core, 0, sizeof *core);
    core->fd = -1;
    double started = monotonic_ms();
    const char *format = compression_name(kind);
    struct source src = {.fd = fd};
    struct sink out = {.fd = -1, .limit = UINT64_MAX, .max_bytes = max_bytes, .where = "/tmp",
                       .keep = keep};
    struct run r = {&src, &out, NULL};
    enum outcome result = OUT_NOMEM;
    uint64_t at = 0, expanded = 0;
    double store_thread_ms = 0, cpu_started = thread_cpu_ms();
    if (kind == COMPRESSION_LZ4) {
        struct lz4_index_result ir;
        enum lz4_index_status status = index_lz4(fd, max_bytes, core, stats, &ir);
        if (status == LZ4_INDEX_OK) {
            if (stats)
                stats->ms = monotonic_ms() - started;
            return 0;
        }
        if (status != LZ4_INDEX_UNSUITED) {
            result = status == LZ4_INDEX_TRUNCATED ? OUT_TRUNCATED
                     : status == LZ4_INDEX_CORRUPT ? OUT_CORRUPT
                     : status == LZ4_INDEX_IO      ? OUT_IO
                                                   : OUT_NOMEM;
            r.detail = ir.detail;
            src.error = ir.error;
            expanded = ir.out_bytes;
            goto report;
        }
    }
    src.buf = malloc(IN_CHUNK);
    out.buf = malloc(FIRST_CHUNK);
    out.chunk = FIRST_CHUNK;
    if (src.buf && out.buf) {
        if (lseek(fd, 0, SEEK_SET) == 0)
            posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        switch (kind) {
        case COMPRESSION_ZSTD: result = run_zstd(&r); break;
        case COMPRESSION_LZ4: result = run_lz4(&r); break;
        case COMPRESSION_XZ: result = run_xz(&r); break;
        case COMPRESSION_GZIP: result = run_gzip(&r); break;
        case COMPRESSION_NONE: result = OUT_CORRUPT; r.detail = "not compressed"; break;
        }
        if (result == OUT_OK && !out.done && (out.len || !out.opened) && sink_flush(&out) != 0)
            result = OUT_IO;
        double waited = monotonic_ms();
        if (store_stop(&out, &store_thread_ms) != 0 && result == OUT_OK)
            result = OUT_IO;
        out.store_ms += monotonic_ms() - waited;
        if (result == OUT_OK && out.hash && out.hash_known && !out.done &&
            (out.hashed != out.hash_end || (uint32_t)XXH64_digest(out.hash) != out.hash_want)) {
            r.detail = ZSTD_getErrorString(ZSTD_error_checksum_wrong);
            result = OUT_CORRUPT;
        }
        if (result == OUT_OK && out.fd >= 0 && ftruncate(out.fd, (off_t)out.written) != 0) {
            out.error = errno;
            result = OUT_IO;
        }
    }
    at = src.consumed + src.pos;
    expanded = out.written + out.len;
    free(src.buf);
    free(out.buf);
    if (out.hash)
        XXH64_freeState(out.hash);
report:
    if (src.error && result != OUT_OK)
        result = OUT_IO, out.error = src.error;
    switch (result) {
    case OUT_OK:
        if (stats) {
            stats->in_bytes = at;
            stats->out_bytes = out.written;
            stats->ms = monotonic_ms() - started;
            stats->read_ms = src.read_ms;
            stats->store_ms = out.store_ms;
            stats->store_thread_cpu_ms = store_thread_ms;
            stats->cpu_ms = thread_cpu_ms() - cpu_started;
            snprintf(stats->where, sizeof stats->where, "%s", out.where);
        }
        core->fd = out.fd;
        core->kept = out.kept;
        core->image = out.image;
        core->map_size = out.map_size;
        core->size = out.written;
        return 0;
    case OUT_TRUNCATED:
        error_set(err, PYSCOPE_ERR_USAGE, "%s is a truncated %s file: its compressed data ends "
                  "after %llu bytes of core (cut short while copying or compressing?)", name,
                  format, (unsigned long long)expanded);
        break;
    case OUT_CORRUPT:
        error_set(err, PYSCOPE_ERR_USAGE, "%s is a corrupt %s file: %s (after %llu bytes of core)",
                  name, format, r.detail ? r.detail : "bad data", (unsigned long long)expanded);
        break;
    case OUT_IO:
        if (src.error)
            error_set(err, PYSCOPE_ERR_OTHER, "cannot read %s: %s", name, strerror(src.error));
        else
            error_set(err, PYSCOPE_ERR_OTHER, "cannot %s a temporary file in %s to expand the "
                      "%s-compressed core %s: %s (set TMPDIR to a directory with room)",
                      out.no_temp ? "create" : "write", out.where, format, name,
                      strerror(out.error));
        break;
    case OUT_NOMEM:
        error_set(err, PYSCOPE_ERR_OTHER, "cannot expand the %s-compressed core %s: out of memory",
                  format, name);
        break;
    }
    if (out.fd >= 0)
        close(out.fd);
    if (out.image)
        munmap(out.image, out.map_size);
    return -1;
}

int decompressed_read(const struct decompressed *core, void *buf, size_t len, uint64_t off)
{
    if (core->lz4)
        return lz4_index_read(core->lz4, buf, len, off);
    if (!core->image || off > core->size || len > core->size - off)
        return -1;
    memcpy(buf, core->image + off, len);
    return 0;
}

void decompressed_free(struct decompressed *core)
{
    lz4_index_free(core->lz4);
    if (core->fd >= 0)
        close(core->fd);
    if (core->image)
        munmap(core->image, core->map_size);
    memset(core, 0, sizeof *core);
    core->fd = -1;
}
