/* Compressed core files (zstd, lz4 frames, xz, gzip), recognised by their
 * magic bytes and expanded into memory or an unlinked temporary file that
 * the core target then reads like any other core. */
#ifndef PYSCOPE_TARGET_DECOMPRESS_H
#define PYSCOPE_TARGET_DECOMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

enum compression {
    COMPRESSION_NONE = 0,
    COMPRESSION_ZSTD,
    COMPRESSION_LZ4,
    COMPRESSION_XZ,
    COMPRESSION_GZIP,
};

/* What the first bytes of a file say it is (COMPRESSION_NONE: not one of
 * the four, e.g. a plain ELF core). */
enum compression compression_detect(const unsigned char *head, size_t n);
const char *compression_name(enum compression kind);

struct decompress_stats {
    uint64_t in_bytes, out_bytes;   /* compressed read, core bytes kept */
    double ms;                      /* wall time of the whole expansion */
    double read_ms, store_ms;       /* of it: reading the compressed file, and copying
                                       out or writing the expansion, or waiting for the
                                       store thread to (the rest: decoding) */
    double cpu_ms;                  /* CPU time of the thread that decoded */
    double store_thread_cpu_ms;     /* and of the thread that stored alongside (0: none) */
    char where[4352];               /* "memory", the directory of the temporary file, or
                                       the cache's file */
    bool cached;                    /* an earlier look's expansion, read from the cache */
    bool kept;                      /* this expansion was kept in the cache */
    bool on_demand;                 /* nothing stored: read block by block (lz4) */
    size_t blocks;                  /* of an on-demand frame */
};

struct lz4_index;

struct decompressed {
    struct lz4_index *lz4;          /* an lz4 frame read on demand (fd: the compressed file) */
    int fd;                         /* the temporary file (or keep's), or -1 */
    bool kept;                      /* expanded into the file keep->open gave */
    unsigned char *image;           /* or the core in anonymous memory (NULL) */
    size_t map_size;                /* of image */
    uint64_t size;                  /* bytes of core */
};

/* Where to expand a core of min_bytes or more instead (the cache): open
 * returns a new file for a core of size bytes, or -1 to go on as without.
 * The file becomes core->fd (core->kept), or is closed on failure. */
struct decompress_keep {
    uint64_t min_bytes;
    int (*open)(void *ctx, uint64_t size);
    void *ctx;
};

/* Expands the compressed file open on fd (name: for messages). A single lz4
 * frame is not expanded but indexed, and read on demand (target/lz4_index.h):
 * core->lz4, with core->fd a duplicate of fd. Other files: into
 * anonymous memory when TMPDIR is not set and the core fits in half the
 * available memory, else into an unlinked temporary file in $TMPDIR (or
 * /tmp). Returns 0, or -1 with err set to one line naming the file and what
 * is wrong with it (truncated, corrupt, no space). In a file, pages of
 * zeros are left as holes. When the output is an ELF file, nothing
 * past the end of its last segment is kept; max_bytes (0: no limit) bounds
 * it in any case. */
int decompress_core(int fd, const char *name, enum compression kind, uint64_t max_bytes,
                    const struct decompress_keep *keep, struct decompressed *core,
                    struct decompress_stats *stats, struct pyscope_error *err);
void decompressed_free(struct decompressed *core);
/* Reads len bytes of the expanded core at off (from image or the on-demand
 * frame; not from fd). */
int decompressed_read(const struct decompressed *core, void *buf, size_t len, uint64_t off);

/* Where an ELF core's last byte lies, from headers at the start of buf;
 * UINT64_MAX when they are not all in it. */
uint64_t core_image_end(const unsigned char *buf, size_t len);
/* Bytes decoded past the core's end before the rest of a stream is left
 * unread (its checksum unchecked). */
#define DECOMPRESS_MAX_DROPPED (256ull << 20)

#endif
