/* Compressed-core expansion and systemd-coredump store names: formats told
 * by magic bytes, a zstd and a gzip stream expanded byte for byte (memory
 * and temporary file), lz4 frames (linked and independent blocks, raw
 * blocks, block checksums) read on demand in any order, the ELF end as the
 * limit, expansions stored on a second thread, truncated and corrupt
 * streams refused, and which file names the store parser accepts. */
#include <elf.h>
#include <lz4frame.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "target/coredump_store.h"
#include "target/decompress.h"
#include "unit.h"

static int memfd_with(const void *data, size_t n)
{
    int fd = memfd_create("unit", MFD_CLOEXEC);
    if (fd >= 0 && write(fd, data, n) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    return fd;
}

/* An ELF header with one PT_LOAD whose file bytes end at end, then
 * pattern bytes up to total (what follows end must not be kept). */
static unsigned char *fake_core(size_t end, size_t total)
{
    unsigned char *b = calloc(1, total);
    Elf64_Ehdr eh = {0};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_type = ET_CORE;
    eh.e_phoff = sizeof eh;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = 1;
    Elf64_Phdr ph = {.p_type = PT_LOAD, .p_offset = 8192, .p_filesz = end - 8192};
    memcpy(b, &eh, sizeof eh);
    memcpy(b + sizeof eh, &ph, sizeof ph);
    for (size_t i = 8192; i < total; i++)
        b[i] = (unsigned char)(i * 7 + i / 4096);
    return b;
}

static int expand(const void *data, size_t n, struct decompressed *out, struct pyscope_error *err)
{
    int fd = memfd_with(data, n);
    int rc = decompress_core(fd, "unit.core", compression_detect(data, n), 0, NULL, out, NULL, err);
    close(fd);
    return rc;
}

static void check_same(const struct decompressed *d, const unsigned char *want, size_t n)
{
    CHECK_EQ_INT(d->size, n);
    unsigned char *got = malloc(n);
    if (d->lz4)
        CHECK_EQ_INT(decompressed_read(d, got, n, 0), 0);
    else if (d->image)
        memcpy(got, d->image, n);
    else
        CHECK_EQ_INT(pread(d->fd, got, n, 0), n);
    CHECK(memcmp(got, want, n) == 0);
    free(got);
}

static void test_detect(void)
{
    static const unsigned char zst[] = {0x28, 0xb5, 0x2f, 0xfd, 0};
    static const unsigned char lz4[] = {0x04, 0x22, 0x4d, 0x18, 0};
    static const unsigned char xz[] = {0xfd, '7', 'z', 'X', 'Z', 0};
    static const unsigned char gz[] = {0x1f, 0x8b, 8};
    CHECK_EQ_INT(compression_detect(zst, sizeof zst), COMPRESSION_ZSTD);
    CHECK_EQ_INT(compression_detect(lz4, sizeof lz4), COMPRESSION_LZ4);
    CHECK_EQ_INT(compression_detect(xz, sizeof xz), COMPRESSION_XZ);
    CHECK_EQ_INT(compression_detect(gz, sizeof gz), COMPRESSION_GZIP);
    CHECK_EQ_INT(compression_detect((const unsigned char *)ELFMAG, SELFMAG), COMPRESSION_NONE);
    CHECK_EQ_INT(compression_detect(xz, 5), COMPRESSION_NONE);   /* too short to tell */
    CHECK_EQ_STR(compression_name(COMPRESSION_ZSTD), "zstd");
}

/* A zstd stream of a core of end bytes (then trailing data): expanded in
 * memory and in a file, refused cut or corrupt. Past the first chunk the
 * expansion is stored by a second thread, chunk by chunk; holes: pages of
 * zeros, alone and in runs, which are left out (as holes or untouched
 * memory) and must still read as zeros. */
static void zstd_round(size_t end, size_t total, bool holes)
{
    unsigned char *core = fake_core(end, total);
    for (size_t page = 3; holes && (page + 3) * 4096 < end; page += 7)
        memset(core + page * 4096, 0, page % 3 ? 4096 : 3 * 4096);
    size_t cap = ZSTD_compressBound(total);
    unsigned char *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, core, total, 3);
    CHECK(!ZSTD_isError(zn));
    struct decompressed d;
    struct pyscope_error err = {0};
    unsetenv("TMPDIR");
    CHECK_EQ_INT(expand(z, zn, &d, &err), 0);
    CHECK(d.image != NULL);          /* fits: in memory */
    check_same(&d, core, end);       /* nothing past the segment's end */
    decompressed_free(&d);
    setenv("TMPDIR", "/tmp", 1);
    CHECK_EQ_INT(expand(z, zn, &d, &err), 0);
    CHECK(d.image == NULL && d.fd >= 0);
    check_same(&d, core, end);
    decompressed_free(&d);
    unsetenv("TMPDIR");
    /* Cut in the middle, or only the frame's checksum. */
    CHECK_EQ_INT(expand(z, zn / 2, &d, &err), -1);
    CHECK(strstr(err.message, "unit.core is a truncated zstd file") != NULL);
    CHECK_EQ_INT(err.status, PYSCOPE_ERR_USAGE);
    CHECK_EQ_INT(expand(z, zn - 2, &d, &err), -1);
    CHECK(strstr(err.message, "truncated zstd") != NULL);
    z[zn / 2] ^= 0xff;
    z[zn / 2 + 1] ^= 0xff;
    CHECK_EQ_INT(expand(z, zn, &d, &err), -1);
    CHECK(strstr(err.message, "unit.core is a corrupt zstd file") != NULL);
    free(z);
    free(core);
}

/* The first frame's content checksum is taken beside the decoder, later
 * frames' by libzstd: a wrong one in either is told as corrupt. */
static void test_zstd_checksums(void)
{
    size_t end = (6u << 20) + 777, total = end + 5000;
    unsigned char *core = fake_core(end, total);
    size_t half = total / 2, cap = ZSTD_compressBound(total) + 64;
    unsigned char *z = malloc(cap);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    size_t n1 = ZSTD_compress2(cc, z, cap, core, half);
    CHECK(!ZSTD_isError(n1));
    size_t n2 = ZSTD_compress2(cc, z + n1, cap - n1, core + half, total - half);
    CHECK(!ZSTD_isError(n2));
    ZSTD_freeCCtx(cc);
    struct decompressed d;
    struct pyscope_error err = {0};
    CHECK_EQ_INT(expand(z, n1 + n2, &d, &err), 0);     /* two frames, one core */
    check_same(&d, core, end);
    decompressed_free(&d);
    for (int which = 0; which < 2; which++) {
        size_t at = which == 0 ? n1 - 1 : n1 + n2 - 1;
        z[at] ^= 0x40;
        CHECK_EQ_INT(expand(z, n1 + n2, &d, &err), -1);
        CHECK(strstr(err.message, "unit.core is a corrupt zstd file") != NULL);
        CHECK(strstr(err.message, "checksum") != NULL);
        z[at] ^= 0x40;
    }
    free(z);
    free(core);
}

static void test_zstd(void)
{
    zstd_round(3 << 20, (3 << 20) + 100000, false);
    zstd_round((24u << 20) + 12345, (24u << 20) + 300000, true);
    test_zstd_checksums();
}

/* The same for gzip (through ISA-L), and a corrupt member told by its CRC
 * or its codes. */
static void gzip_round(size_t end, size_t total, bool holes)
{
    unsigned char *core = fake_core(end, total);
    for (size_t page = 3; holes && (page + 3) * 4096 < end; page += 7)
        memset(core + page * 4096, 0, page % 3 ? 4096 : 3 * 4096);
    z_stream s = {0};
    CHECK_EQ_INT(deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&s, total);
    unsigned char *z = malloc(cap);
    s.next_in = core;
    s.avail_in = (uInt)total;
    s.next_out = z;
    s.avail_out = (uInt)cap;
    CHECK_EQ_INT(deflate(&s, Z_FINISH), Z_STREAM_END);
    size_t zn = cap - s.avail_out;
    deflateEnd(&s);
    struct decompressed d;
    struct pyscope_error err = {0};
    CHECK_EQ_INT(expand(z, zn, &d, &err), 0);
    check_same(&d, core, end);
    decompressed_free(&d);
    CHECK_EQ_INT(expand(z, zn - 4, &d, &err), -1);
    CHECK(strstr(err.message, "truncated gzip") != NULL);
    CHECK_EQ_INT(expand(z, zn * 3 / 4, &d, &err), -1);
    CHECK(strstr(err.message, "unit.core is a truncated gzip file") != NULL);
    z[zn * 3 / 4] ^= 0x55;
    z[zn * 3 / 4 + 7] ^= 0x55;
    z[zn * 3 / 4 + 19] ^= 0x55;
    CHECK_EQ_INT(expand(z, zn, &d, &err), -1);
    CHECK(strstr(err.message, "unit.core is a corrupt gzip file") != NULL);
    free(z);
    free(core);
}

static void test_gzip(void)
{
    gzip_round(200000, 200000, false);
    gzip_round((24u << 20) + 12345, (24u << 20) + 300000, true);
}

static unsigned char *lz4_frame(const unsigned char *core, size_t total, LZ4F_blockMode_t mode,
                                 bool block_checksum, size_t *zn)
{
    LZ4F_preferences_t prefs = {0};
    prefs.frameInfo.blockSizeID = LZ4F_max64KB;
    prefs.frameInfo.blockMode = mode;
    prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
    prefs.frameInfo.blockChecksumFlag = block_checksum ? LZ4F_blockChecksumEnabled
                                                       : LZ4F_noBlockChecksum;
    size_t cap = LZ4F_compressFrameBound(total, &prefs);
    unsigned char *z = malloc(cap);
    *zn = LZ4F_compressFrame(z, cap, core, total, &prefs);
    CHECK(!LZ4F_isError(*zn));
    return z;
}

static void test_lz4(void)
{
    /* 20 MiB in 64 KiB blocks: two of the kept histories of linked frames,
     * and a stretch of noise that is stored as raw blocks. */
    size_t end = 20 << 20, total = end + 100000;
    unsigned char *core = fake_core(end, total);
    unsigned seed = 12345;
    for (size_t i = 9 << 20; i < (9 << 20) + 300000; i++) {
        seed = seed * 1103515245u + 12345u;
        core[i] = (unsigned char)(seed >> 16);
    }
    unsigned char *buf = malloc(400000);
    for (int variant = 0; variant < 3; variant++) {
        size_t zn;
        unsigned char *z = lz4_frame(core, total, variant == 1 ? LZ4F_blockIndependent
                                                                : LZ4F_blockLinked,
                                     variant == 2, &zn);
        struct decompressed d;
        struct pyscope_error err = {0};
        CHECK_EQ_INT(expand(z, zn, &d, &err), 0);
        CHECK(d.lz4 != NULL && d.image == NULL);
        check_same(&d, core, end);
        /* Reads anywhere, in any order, across blocks and kept histories. */
        unsigned r = 777;
        for (int i = 0; i < 300; i++) {
            r = r * 1103515245u + 12345u;
            size_t len = 1 + (r >> 8) % 400000;
            r = r * 1103515245u + 12345u;
            size_t off = (size_t)(((uint64_t)r << 8) % (end - len));
            if (i % 3 == 0)
                off = end - len - (size_t)(r % 1000);
            CHECK_EQ_INT(decompressed_read(&d, buf, len, off), 0);
            CHECK(memcmp(buf, core + off, len) == 0);
        }
        CHECK_EQ_INT(decompressed_read(&d, buf, 10, end - 5), -1);
        decompressed_free(&d);
        CHECK_EQ_INT(expand(z, zn / 2, &d, &err), -1);
        CHECK(strstr(err.message, "unit.core is a truncated lz4 file") != NULL);
        CHECK_EQ_INT(expand(z, zn - 3, &d, &err), -1);
        CHECK(strstr(err.message, "truncated lz4") != NULL);
        unsigned char *bad = malloc(zn);
        memcpy(bad, z, zn);
        for (size_t i = zn / 3; i < zn / 3 + 64; i++)
            bad[i] ^= 0x5a;
        CHECK_EQ_INT(expand(bad, zn, &d, &err), -1);
        CHECK(strstr(err.message, "unit.core is a corrupt lz4 file") != NULL);
        /* The content's checksum, the frame's last 4 bytes, is checked. */
        memcpy(bad, z, zn);
        bad[zn - 1] ^= 0x01;
        CHECK_EQ_INT(expand(bad, zn, &d, &err), -1);
        CHECK(strstr(err.message, "unit.core is a corrupt lz4 file: its checksum does not match "
                                  "the data") != NULL);
        /* Two frames one after the other: streamed, not indexed. */
        unsigned char *two = realloc(bad, 2 * zn);
        memcpy(two, z, zn);
        memcpy(two + zn, z, zn);
        CHECK_EQ_INT(expand(two, 2 * zn, &d, &err), 0);
        CHECK(d.lz4 == NULL);
        check_same(&d, core, end);
        decompressed_free(&d);
        free(two);
        free(z);
    }
    free(buf);
    free(core);
}

static void test_store_names(void)
{
    struct coredump_entry e;
    CHECK(coredump_store_parse_name(
        "core.python3\\x2e12.1000.3f1c5e0a9b2d4c6e8f0a1b2c3d4e5f60.4242.1764583323000000.zst", &e));
    CHECK_EQ_STR(e.comm, "python3\\x2e12");
    CHECK_EQ_INT(e.uid, 1000);
    CHECK_EQ_INT(e.pid, 4242);
    CHECK(e.usec == 1764583323000000ull);
    CHECK(coredump_store_parse_name(
        "core.sleep.0.3f1c5e0a9b2d4c6e8f0a1b2c3d4e5f60.7.1764583323000000", &e));
    CHECK_EQ_INT(e.pid, 7);
    CHECK(!coredump_store_parse_name("core.7183", &e));
    CHECK(!coredump_store_parse_name("core.x.0.notaboothexid.7.1", &e));
    CHECK(!coredump_store_parse_name(
        "core.x.0.3f1c5e0a9b2d4c6e8f0a1b2c3d4e5f60.0.1764583323000000", &e));
    CHECK(!coredump_store_parse_name(
        "kore.x.0.3f1c5e0a9b2d4c6e8f0a1b2c3d4e5f60.7.1764583323000000", &e));
}

int main(void)
{
    test_detect();
    test_zstd();
    test_gzip();
    test_lz4();
    test_store_names();
    return unit_report("test_decompress");
}
