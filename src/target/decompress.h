/* Compressed core files (zstd, lz4 frames, xz, gzip), recognised by their
 * magic bytes and expanded into an unlinked temporary file that the core
 * target then reads like any other core. */
#ifndef PYSCOPE_TARGET_DECOMPRESS_H
#define PYSCOPE_TARGET_DECOMPRESS_H

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
    char where[256];                /* "memory", or the directory of the temporary file */
};

/* Expands the compressed file open on fd (name: for messages) into an
 * unlinked temporary file and returns its descriptor: in $TMPDIR when set,
 * else in memory (memfd) when it fits in half the available memory, else
 * in /tmp. Returns -1 with err set to one line naming the file and what is
 * wrong with it (truncated, corrupt, no space). Pages of zeros become
 * holes. When the output is an ELF file, nothing past the end of its last
 * segment is kept; max_bytes (0: no limit) bounds it in any case. */
int decompress_to_temp(int fd, const char *name, enum compression kind, uint64_t max_bytes,
                       struct decompress_stats *stats, struct pyscope_error *err);

#endif
