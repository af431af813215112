/* An lz4-compressed core read on demand: one pass decodes the frame (its
 * checksums verified) without keeping what it decodes, and remembers where
 * each block starts in the file and in the core; a read then decodes only
 * the blocks it touches. */
#ifndef PYSCOPE_TARGET_LZ4_INDEX_H
#define PYSCOPE_TARGET_LZ4_INDEX_H

#include <stddef.h>
#include <stdint.h>

enum lz4_index_status {
    LZ4_INDEX_OK,
    LZ4_INDEX_UNSUITED,     /* not one plain frame (several, skippable, huge index): stream it */
    LZ4_INDEX_TRUNCATED,
    LZ4_INDEX_CORRUPT,
    LZ4_INDEX_IO,
    LZ4_INDEX_NOMEM,
};

struct lz4_index_result {
    uint64_t in_bytes;      /* compressed bytes read */
    uint64_t out_bytes;     /* bytes decoded (for a truncated or corrupt file: before the fault) */
    uint64_t size;          /* bytes of core: nothing past the ELF file's last segment */
    size_t blocks;
    double read_ms;         /* of the pass: spent in pread */
    const char *detail;     /* the decoder's words for a corrupt frame */
    int error;              /* errno of a failed read */
};

struct lz4_index;

/* Indexes the lz4 frame on fd, which must stay open while the index is
 * used. limit: the core ends there at most (0: no limit). */
enum lz4_index_status lz4_index_build(int fd, uint64_t limit, struct lz4_index **out,
                                      struct lz4_index_result *result);
/* Reads len bytes of core at off; -1 when they are not there or the file
 * no longer decodes as it did. */
int lz4_index_read(struct lz4_index *ix, void *buf, size_t len, uint64_t off);
void lz4_index_free(struct lz4_index *ix);

#endif
