/* The core-file target. The ELF headers and notes are parsed by hand with
 * every count and offset checked against the file's real size, because a core
 * may be truncated (a full disk) or not a core at all; the parser is fuzzed
 * (tests/fuzz). Memory that a segment does not carry in the file (kernel cores
 * leave out unmodified file-backed pages, gcore may drop whole read-only
 * mappings) is read from the mapped file on disk at the NT_FILE offset. */
#include "target/core.h"
#include "util/text.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "target/core_cache.h"
#include "target/process.h"
#include "util/clock.h"

#define MAX_SEGMENTS (1u << 20)
#define MAX_NOTES_BYTES (64u << 20)
#define MAX_THREADS 65536
#define MAX_FILES (1u << 20)
#define PRSTATUS_SIZE 336      /* struct elf_prstatus on x86-64 */
#define PRSTATUS_PID 32
#define PRSTATUS_CURSIG 12
#define PRSTATUS_REGS 112
#define PRPSINFO_SIZE 136
#define PRPSINFO_PID 24
#define PRPSINFO_FNAME 40
#define PRPSINFO_PSARGS 56
#define PRPSINFO_PSARGS_KEPT 79    /* ELF_PRARGSZ - 1 */
#define SIGINFO_SIZE 128
#define AT_ENTRY_TYPE 9

struct core_segment {
    uint64_t vaddr, memsz, filesz, offset;
    uint32_t flags;
};

struct core_file {
    uint64_t start, end, file_offset;
    char *path;                  /* as recorded in NT_FILE */
    int fd;                      /* -2: not tried yet, -1: could not be opened */
    char *resolved;              /* the path opened instead, when it differs */
};

struct core_target {
    struct target base;
    int fd;
    struct decompressed expanded;  /* a compressed core's contents (fd -1 otherwise) */
    const unsigned char *image;    /* expanded.image: the core in memory, or NULL */
    uint64_t file_size;
    struct core_segment *segs;
    size_t nsegs;
    struct core_file *files;     /* sorted by start */
    size_t nfiles;
    struct core_thread *threads;
    size_t nthreads;
    struct core_info info;
    char *exe_override;
    char *sysroot;               /* --sysroot: recorded paths are looked up below it only */
    char *debug_dir;             /* --debug-dir: files found by build-id below it */
    char **lib_paths;
    int n_lib_paths;
    FILE *warnings;
    char mismatch[512];          /* the first file whose build-id is not the core's */
};

static struct core_target *as_core(const struct target *t)
{
    return (struct core_target *)t;
}

static int pread_full(int fd, void *buf, size_t len, uint64_t offset)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

/* Reads the core file itself (or its expansion). */
static int core_pread(const struct core_target *c, void *buf, size_t len, uint64_t offset)
{
    if (c->expanded.lz4)
        return decompressed_read(&c->expanded, buf, len, offset);
    if (!c->image)
        return pread_full(c->fd, buf, len, offset);
    if (offset > c->file_size || len > c->file_size - offset)
        return -1;
    memcpy(buf, c->image + offset, len);
    return 0;
}

/* ---- reading memory ---- */

static const struct core_segment *segment_at(const struct core_target *c, uint64_t addr)
{
    size_t lo = 0, hi = c->nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct core_segment *s = &c->segs[mid];
        if (addr < s->vaddr)
            hi = mid;
        else if (addr - s->vaddr >= s->memsz)
            lo = mid + 1;
        else
            return s;
    }
    return NULL;
}

static struct core_file *file_at(const struct core_target *c, uint64_t addr)
{
    size_t lo = 0, hi = c->nfiles;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        struct core_file *f = &c->files[mid];
        if (addr < f->start)
            hi = mid;
        else if (addr >= f->end)
            lo = mid + 1;
        else
            return f;
    }
    return NULL;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads only what the core file itself holds for [addr, addr+len). */
static int read_core_bytes(const struct core_target *c, uint64_t addr, void *buf, size_t len)
{
    unsigned char *out = buf;
    while (len > 0) {
        const struct core_segment *s = segment_at(c, addr);
        if (!s)
            return -1;
        uint64_t in_seg = addr - s->vaddr;
        if (in_seg >= s->filesz)
            return -1;
        size_t n = len;
        if (n > s->filesz - in_seg)
            n = (size_t)(s->filesz - in_seg);
        if (s->offset + in_seg + n > c->file_size ||
            core_pread(c, out, n, s->offset + in_seg) != 0)
            return -1;
        out += n;
        addr += n;
        len -= n;
    }
    return 0;
}

static void hex_build_id(const unsigned char *id, size_t n, char *out, size_t outsize)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; i < n && 2 * i + 2 < outsize; i++) {
        out[k++] = hex[id[i] >> 4];
        out[k++] = hex[id[i] & 15];
    }
    out[k] = '\0';
}

/* The GNU build-id in a block of notes, as hex; 0 when found. */
static int build_id_in_notes(const unsigned char *notes, size_t size, char *out, size_t outsize)
{
    size_t pos = 0;
    while (pos + 12 <= size) {
        uint32_t namesz, descsz, type;
        memcpy(&namesz, notes + pos, 4);
        memcpy(&descsz, notes + pos + 4, 4);
        memcpy(&type, notes + pos + 8, 4);
        size_t name_at = pos + 12;
        size_t desc_at = name_at + (((size_t)namesz + 3) & ~(size_t)3);
        if (namesz > size || descsz > size || desc_at > size ||
            (((size_t)descsz + 3) & ~(size_t)3) > size - desc_at)
            return -1;
        if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(notes + name_at, "GNU", 4) == 0 &&
            descsz > 0 && descsz <= 64) {
            hex_build_id(notes + desc_at, descsz, out, outsize);
            return 0;
        }
        pos = desc_at + (((size_t)descsz + 3) & ~(size_t)3);
    }
    return -1;
}

/* The build-id of the ELF image whose headers are at addr, read through
 * reader (core memory or a file); 0 when found. */
static int build_id_from_headers(const unsigned char *page, size_t page_len,
                                 int (*read_at)(void *ctx, uint64_t off, void *buf, size_t len),
                                 void *ctx, char *out, size_t outsize)
{
    if (page_len < sizeof(Elf64_Ehdr) || memcmp(page, ELFMAG, SELFMAG) != 0 ||
        page[EI_CLASS] != ELFCLASS64)
        return -1;
    Elf64_Ehdr eh;
    memcpy(&eh, page, sizeof eh);
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 256 ||
        eh.e_phoff > page_len || (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > page_len - eh.e_phoff)
        return -1;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, page + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
        if (ph.p_type != PT_NOTE || ph.p_filesz == 0 || ph.p_filesz > 65536)
            continue;
        unsigned char *notes = malloc(ph.p_filesz);
        if (!notes)
            return -1;
        int rc = read_at(ctx, ph.p_offset, notes, ph.p_filesz) == 0
                     ? build_id_in_notes(notes, ph.p_filesz, out, outsize)
                     : -1;
        free(notes);
        if (rc == 0)
            return 0;
    }
    return -1;
}

struct core_mem_ctx {
    const struct core_target *c;
    uint64_t base;
};

static int read_core_at(void *vctx, uint64_t off, void *buf, size_t len)
{
    struct core_mem_ctx *ctx = vctx;
    return read_core_bytes(ctx->c, ctx->base + off, buf, len);
}

static int read_fd_at(void *vctx, uint64_t off, void *buf, size_t len)
{
    return pread_full(*(int *)vctx, buf, len, off);
}

/* The build-id of a mapped file as the core's copy of its first page
 * tells it; "" when the core does not hold it (or the file is no ELF). */
static void core_build_id(const struct core_target *c, const char *path, char *out,
                          size_t outsize)
{
    out[0] = '\0';
    for (size_t i = 0; i < c->nfiles; i++) {
        const struct core_file *f = &c->files[i];
        if (f->file_offset != 0 || strcmp(f->path, path) != 0)
            continue;
        unsigned char page[4096];
        size_t have = f->end - f->start < sizeof page ? (size_t)(f->end - f->start) : sizeof page;
        struct core_mem_ctx mctx = {c, f->start};
        if (read_core_bytes(c, f->start, page, have) != 0 ||
            build_id_from_headers(page, have, read_core_at, &mctx, out, outsize) != 0)
            out[0] = '\0';
        return;
    }
}

/* The file to read for a recorded path: --exe for the executable, then the
 * file of that build-id below --debug-dir (an exact match beats a name),
 * then a --lib-path directory holding a file of that name, then the path
 * below --sysroot, or the path itself without one. *used is set to the
 * path opened. */
static int resolve_path(const struct core_target *c, const char *recorded, const char *build_id,
                        char *used, size_t usedsize)
{
    if (c->exe_override && c->info.exe[0] &&
        (strcmp(recorded, c->info.exe) == 0 ||
         strcmp(base_name(recorded), base_name(c->info.exe)) == 0)) {
        snprintf(used, usedsize, "%s", c->exe_override);
        return open_regular(c->exe_override);
    }
    if (c->debug_dir && strlen(build_id) > 2 &&
        (size_t)snprintf(used, usedsize, "%s/.build-id/%.2s/%s", c->debug_dir, build_id,
                         build_id + 2) < usedsize) {
        int fd = open_regular(used);
        if (fd >= 0)
            return fd;
    }
    for (int i = 0; i < c->n_lib_paths; i++) {
        if ((size_t)snprintf(used, usedsize, "%s/%s", c->lib_paths[i], base_name(recorded)) >=
            usedsize)
            continue;
        int fd = open_regular(used);
        if (fd >= 0)
            return fd;
    }
    if ((size_t)snprintf(used, usedsize, "%s%s", c->sysroot ? c->sysroot : "", recorded) >=
        usedsize)
        return -1;
    return open_regular(used);
}

/* The options that could supply a file, for messages. */
static void supply_hint(const struct core_target *c, const char *build_id, char *out,
                        size_t outsize)
{
    if (build_id[0])
        snprintf(out, outsize, "supply it with --sysroot DIR (a copy of the root it was mapped "
                 "from%s%s) or --debug-dir DIR (as DIR/.build-id/%.2s/%s)",
                 c->sysroot ? "; now " : "", c->sysroot ? c->sysroot : "", build_id,
                 build_id + 2);
    else
        snprintf(out, outsize, "supply it with --sysroot DIR (a copy of the root it was mapped "
                 "from%s%s) or --lib-path DIR", c->sysroot ? "; now " : "",
                 c->sysroot ? c->sysroot : "");
}

/* Warns when the file on disk is not the one the process had mapped. */
static void check_build_id(struct core_target *c, const struct core_file *f, int fd,
                           const char *used, const char *in_core)
{
    if (!c->warnings || !in_core[0])
        return;
    char on_disk[129];
    unsigned char fpage[4096];
    ssize_t got = pread(fd, fpage, sizeof fpage, 0);
    char hint[512];
    supply_hint(c, in_core, hint, sizeof hint);
    if (got <= 0 ||
        build_id_from_headers(fpage, (size_t)got, read_fd_at, &fd, on_disk, sizeof on_disk) != 0) {
        fprintf(c->warnings, "pyscope: warning: %s has no build-id, the process's %s had %s; "
                "it may not be the same file (%s)\n", used, f->path, in_core, hint);
        return;
    }
    if (strcmp(in_core, on_disk) != 0) {
        fprintf(c->warnings, "pyscope: warning: %s is not the file the process had mapped as %s "
                "(build-id %s, the core says %s); what is read from it may be wrong: %s\n",
                used, f->path, on_disk, in_core, hint);
        if (!c->mismatch[0])
            text_format(c->mismatch, sizeof c->mismatch,
                     "%s does not match the core: its build-id is %s, the process's %s had %s",
                     used, on_disk, f->path, in_core);
    }
}

static int file_fd(struct core_target *c, struct core_file *f)
{
    if (f->fd != -2)
        return f->fd;
    /* All mappings of one file share a descriptor: open once per path. */
    for (size_t i = 0; i < c->nfiles; i++) {
        if (&c->files[i] != f && c->files[i].fd >= 0 && strcmp(c->files[i].path, f->path) == 0) {
            f->fd = dup(c->files[i].fd);
            return f->fd;
        }
    }
    char used[PATH_MAX], build_id[129];
    core_build_id(c, f->path, build_id, sizeof build_id);
    f->fd = resolve_path(c, f->path, build_id, used, sizeof used);
    if (f->fd >= 0 && strcmp(used, f->path) != 0)
        f->resolved = strdup(used);
    if (f->fd >= 0) {
        check_build_id(c, f, f->fd, used, build_id);
    } else {
        /* Remember the failure for every mapping of the same file. Only
         * files the core shows to be ELF images are worth a warning (not
         * deleted files, shared memory, memfds). */
        for (size_t i = 0; i < c->nfiles; i++)
            if (strcmp(c->files[i].path, f->path) == 0)
                c->files[i].fd = -1;
        if (c->warnings && build_id[0]) {
            char hint[512];
            supply_hint(c, build_id, hint, sizeof hint);
            fprintf(c->warnings, "pyscope: warning: %s (build-id %s), mapped by the process, is "
                    "not %s%s; %s\n", f->path, build_id, c->sysroot ? "under --sysroot " :
                    "on this machine", c->sysroot ? c->sysroot : "", hint);
        }
    }
    return f->fd;
}

static int core_read_raw(struct target *t, uint64_t addr, void *buf, size_t len)
{
    struct core_target *c = as_core(t);
    unsigned char *out = buf;
    while (len > 0) {
        size_t n = len;
        const struct core_segment *s = segment_at(c, addr);
        if (s && addr - s->vaddr < s->filesz) {
            uint64_t in_seg = addr - s->vaddr;
            if (n > s->filesz - in_seg)
                n = (size_t)(s->filesz - in_seg);
            if (s->offset + in_seg + n > c->file_size ||
                core_pread(c, out, n, s->offset + in_seg) != 0)
                return -1;
        } else {
            struct core_file *f = file_at(c, addr);
            if (!f)
                return -1;
            if (s && n > s->memsz - (addr - s->vaddr))
                n = (size_t)(s->memsz - (addr - s->vaddr));
            if (n > f->end - addr)
                n = (size_t)(f->end - addr);
            int fd = file_fd(c, f);
            if (fd < 0 || pread_full(fd, out, n, f->file_offset + (addr - f->start)) != 0)
                return -1;
        }
        out += n;
        addr += n;
        len -= n;
    }
    return 0;
}

/* ---- threads ---- */

static int core_list_threads(struct target *t, pid_t *tids, int max)
{
    struct core_target *c = as_core(t);
    int n = 0;
    for (size_t i = 0; i < c->nthreads && n < max; i++)
        tids[n++] = c->threads[i].tid;
    return n;
}

const struct core_thread *core_thread(const struct target *t, pid_t tid)
{
    const struct core_target *c = as_core(t);
    for (size_t i = 0; i < c->nthreads; i++)
        if (c->threads[i].tid == tid)
            return &c->threads[i];
    return NULL;
}

/* A thread stopped inside a syscall has the syscall number in orig_rax; one
 * stopped in user code (by an interrupt or a fault) has orig_rax -1. rax is
 * not looked at: the kernel may already have replaced the -ERESTART* code. */
static int core_thread_activity(struct target *t, pid_t tid, struct thread_activity *out)
{
    memset(out, 0, sizeof *out);
    out->syscall_nr = -1;
    const struct core_thread *th = core_thread(t, tid);
    if (!th)
        return -1;
    int64_t orig = (int64_t)th->regs[CORE_REG_ORIG_RAX];
    if (orig >= 0 && orig < 1024) {
        out->run_state = 'S';
        out->syscall_nr = orig;
        out->syscall_args[0] = th->regs[CORE_REG_RDI];
        out->syscall_args[1] = th->regs[CORE_REG_RSI];
        out->syscall_args[2] = th->regs[CORE_REG_RDX];
        out->syscall_args[3] = th->regs[CORE_REG_R10];
        out->syscall_args[4] = th->regs[CORE_REG_R8];
        out->syscall_args[5] = th->regs[CORE_REG_R9];
    } else {
        out->run_state = 'R';
        out->on_cpu = true;
    }
    return 0;
}

static int core_thread_comm(struct target *t, pid_t tid, char *out, size_t outsize)
{
    struct core_target *c = as_core(t);
    if (tid != c->info.pid || !c->info.fname[0])
        return -1;
    snprintf(out, outsize, "%s", c->info.fname);
    return 0;
}

static int core_open_file(const struct target *t, const char *path)
{
    struct core_target *c = as_core(t);
    for (size_t i = 0; i < c->nfiles; i++) {
        if (strcmp(c->files[i].path, path) == 0) {
            int fd = file_fd(c, &c->files[i]);
            return fd >= 0 ? dup(fd) : -1;
        }
    }
    char used[PATH_MAX], build_id[129];
    core_build_id(c, path, build_id, sizeof build_id);
    return resolve_path(c, path, build_id, used, sizeof used);
}

static void core_close(struct target *t)
{
    struct core_target *c = as_core(t);
    if (c->fd >= 0)
        close(c->fd);
    decompressed_free(&c->expanded);
    for (size_t i = 0; i < c->nfiles; i++) {
        if (c->files[i].fd >= 0)
            close(c->files[i].fd);
        free(c->files[i].path);
        free(c->files[i].resolved);
    }
    for (int i = 0; i < c->n_lib_paths; i++)
        free(c->lib_paths[i]);
    free(c->lib_paths);
    free(c->exe_override);
    free(c->sysroot);
    free(c->debug_dir);
    free(c->files);
    free(c->segs);
    free(c->threads);
    free(c);
}

static const struct target_ops core_ops = {
    .read_raw = core_read_raw,
    .close = core_close,
    .list_threads = core_list_threads,
    .thread_activity = core_thread_activity,
    .thread_comm = core_thread_comm,
    .open_file = core_open_file,
    .capabilities = TARGET_CAN_SAVED_REGISTERS,
};

const struct core_info *core_get_info(const struct target *t)
{
    return t && t->ops == &core_ops ? &as_core(t)->info : NULL;
}

size_t core_missing_files(const struct target *t, const char **paths, size_t max)
{
    const struct core_target *c = as_core(t);
    size_t n = 0;
    for (size_t i = 0; i < c->nfiles; i++) {
        if (c->files[i].fd != -1)
            continue;
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = c->files[k].fd == -1 && strcmp(c->files[k].path, c->files[i].path) == 0;
        if (seen)
            continue;
        if (n < max)
            paths[n] = c->files[i].path;
        n++;
    }
    return n;
}

void core_mapped_build_id(const struct target *t, const char *recorded, char *out,
                          size_t outsize)
{
    core_build_id(as_core(t), recorded, out, outsize);
}

const char *core_debug_dir(const struct target *t)
{
    return t && t->ops == &core_ops ? as_core(t)->debug_dir : NULL;
}

const char *core_resolved_path(const struct target *t, const char *recorded)
{
    const struct core_target *c = as_core(t);
    for (size_t i = 0; i < c->nfiles; i++)
        if (strcmp(c->files[i].path, recorded) == 0 && c->files[i].fd >= 0)
            return c->files[i].resolved ? c->files[i].resolved : c->files[i].path;
    return NULL;
}

/* ---- parsing ---- */

static int add_thread(struct core_target *c, const unsigned char *desc, size_t size)
{
    if (size < PRSTATUS_SIZE || c->nthreads >= MAX_THREADS)
        return 0;
    struct core_thread *grown = realloc(c->threads, (c->nthreads + 1) * sizeof *grown);
    if (!grown)
        return -1;
    c->threads = grown;
    struct core_thread *th = &c->threads[c->nthreads++];
    int32_t pid;
    int16_t cursig;
    memcpy(&pid, desc + PRSTATUS_PID, 4);
    memcpy(&cursig, desc + PRSTATUS_CURSIG, 2);
    th->tid = pid;
    th->cursig = cursig;
    memcpy(th->regs, desc + PRSTATUS_REGS, sizeof th->regs);
    return 0;
}

static int parse_nt_file(struct core_target *c, const unsigned char *desc, size_t size)
{
    if (size < 16 || c->files)
        return 0;
    uint64_t count, page_size;
    memcpy(&count, desc, 8);
    memcpy(&page_size, desc + 8, 8);
    if (count > MAX_FILES || count > (size - 16) / 24 || page_size == 0 ||
        page_size > (1u << 30))
        return 0;
    const char *names = (const char *)desc + 16 + count * 24;
    size_t names_left = size - 16 - (size_t)count * 24;
    c->files = calloc(count ? count : 1, sizeof *c->files);
    if (!c->files)
        return -1;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t e[3];
        memcpy(e, desc + 16 + i * 24, sizeof e);
        size_t len = strnlen(names, names_left);
        if (len == names_left)
            break;
        if (e[1] > e[0] && e[2] <= UINT64_MAX / page_size) {
            struct core_file *f = &c->files[c->nfiles];
            f->start = e[0];
            f->end = e[1];
            f->file_offset = e[2] * page_size;
            f->fd = -2;
            f->path = strdup(names);
            if (!f->path)
                return -1;
            c->nfiles++;
        }
        names += len + 1;
        names_left -= len + 1;
    }
    return 0;
}

static int parse_notes(struct core_target *c, const unsigned char *notes, size_t size,
                       uint64_t *at_entry)
{
    size_t pos = 0;
    while (pos + 12 <= size) {
        uint32_t namesz, descsz, type;
        memcpy(&namesz, notes + pos, 4);
        memcpy(&descsz, notes + pos + 4, 4);
        memcpy(&type, notes + pos + 8, 4);
        size_t name_at = pos + 12;
        if (namesz > size - name_at)
            break;
        size_t desc_at = name_at + (((size_t)namesz + 3) & ~(size_t)3);
        if (desc_at > size || descsz > size - desc_at)
            break;
        const unsigned char *desc = notes + desc_at;
        /* Only the kernel's "CORE" and "LINUX" notes mean what we read. */
        bool core_note = namesz >= 4 && (memcmp(notes + name_at, "CORE", 4) == 0 ||
                                         memcmp(notes + name_at, "LINUX", 5 <= namesz ? 5 : 4) == 0);
        if (core_note) {
            int rc = 0;
            if (type == NT_PRSTATUS)
                rc = add_thread(c, desc, descsz);
            else if (type == NT_PRPSINFO && descsz >= PRPSINFO_SIZE) {
                int32_t pid;
                memcpy(&pid, desc + PRPSINFO_PID, 4);
                c->info.pid = pid;
                memcpy(c->info.fname, desc + PRPSINFO_FNAME, 16);
                c->info.fname[16] = '\0';
                memcpy(c->info.psargs, desc + PRPSINFO_PSARGS, 80);
                c->info.psargs[80] = '\0';
                size_t len = strlen(c->info.psargs);
                /* The kernel keeps the first 79 bytes of the command line:
                 * one that long was probably cut, and is shown as cut. */
                bool cut = len == PRPSINFO_PSARGS_KEPT;
                while (len > 0 && c->info.psargs[len - 1] == ' ')
                    c->info.psargs[--len] = '\0';
                if (cut)
                    memcpy(c->info.psargs + len, "\u2026", sizeof "\u2026");
            } else if (type == NT_SIGINFO && descsz >= SIGINFO_SIZE && !c->info.signal.signo) {
                int32_t signo, code, sender;
                uint64_t addr;
                memcpy(&signo, desc, 4);
                memcpy(&code, desc + 8, 4);
                memcpy(&addr, desc + 16, 8);
                memcpy(&sender, desc + 16, 4);
                c->info.signal.signo = signo > 0 && signo < 65 ? signo : 0;
                c->info.signal.code = code;
                c->info.signal.addr = addr;
                c->info.signal.sender_pid = sender;
            } else if (type == NT_FILE) {
                rc = parse_nt_file(c, desc, descsz);
            } else if (type == NT_AUXV) {
                for (size_t k = 0; k + 16 <= descsz; k += 16) {
                    uint64_t a[2];
                    memcpy(a, desc + k, 16);
                    if (a[0] == AT_ENTRY_TYPE)
                        *at_entry = a[1];
                }
            }
            if (rc != 0)
                return -1;
        }
        pos = desc_at + (((size_t)descsz + 3) & ~(size_t)3);
    }
    return 0;
}

static int compare_segments(const void *a, const void *b)
{
    const struct core_segment *x = a, *y = b;
    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

static int compare_files(const void *a, const void *b)
{
    const struct core_file *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int compare_maps(const void *a, const void *b)
{
    const struct target_map *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static void perms_of(uint32_t flags, char *out)
{
    out[0] = (flags & PF_R) ? 'r' : '-';
    out[1] = (flags & PF_W) ? 'w' : '-';
    out[2] = (flags & PF_X) ? 'x' : '-';
    out[3] = 'p';
    out[4] = '\0';
}

/* t->maps: every NT_FILE mapping with its path, plus the segments no file
 * covers (heap, stacks, anonymous memory). */
static int build_maps(struct core_target *c)
{
    size_t cap = c->nfiles + c->nsegs;
    struct target_map *maps = calloc(cap ? cap : 1, sizeof *maps);
    if (!maps)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < c->nfiles; i++) {
        const struct core_file *f = &c->files[i];
        struct target_map *m = &maps[n];
        m->start = f->start;
        m->end = f->end;
        m->offset = f->file_offset;
        const struct core_segment *s = segment_at(c, f->start);
        perms_of(s ? s->flags : PF_R, m->perms);
        m->path = strdup(f->path);
        if (!m->path)
            goto fail;
        n++;
    }
    for (size_t i = 0; i < c->nsegs; i++) {
        const struct core_segment *s = &c->segs[i];
        if (s->memsz == 0 || file_at(c, s->vaddr))
            continue;
        struct target_map *m = &maps[n++];
        m->start = s->vaddr;
        m->end = s->vaddr + s->memsz;
        perms_of(s->flags, m->perms);
    }
    if (n)
        qsort(maps, n, sizeof *maps, compare_maps);
    c->base.maps = maps;
    c->base.nmaps = n;
    return 0;
fail:
    for (size_t i = 0; i < n; i++)
        free(maps[i].path);
    free(maps);
    return -1;
}

static struct target *fail_open(struct core_target *c, struct pyscope_error *err,
                                enum pyscope_status status, const char *fmt, const char *path,
                                const char *detail)
{
    error_set(err, status, fmt, path, detail);
    core_close(&c->base);
    return NULL;
}

/* The cache's file for an expansion, made only when one is kept, where
 * there is room for it. */
static int open_kept(void *ctx, uint64_t size)
{
    struct core_cache *cache = ctx;
    if (cache->dirfd < 0 && core_cache_open_dir(cache, true) != 0)
        return -1;
    int fd = core_cache_create(cache);
    if (fd >= 0 && core_cache_room(fd) <= size) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Replaces c->fd, a compressed core, with its expansion: the copy an
 * earlier look kept in the cache, or a new one (kept there when large).
 * st becomes the expansion's size. */
static int expand(struct core_target *c, const char *path, enum compression kind,
                  const struct core_options *opts, struct stat *st, struct pyscope_error *err)
{
    struct decompress_stats *stats = &c->info.expanded;
    struct core_cache cache;
    /* Not for a bounded expansion (the fuzzer's): what it keeps is cut short. */
    bool use_cache = opts && opts->cache && !opts->max_expanded && core_cache_init(&cache) == 0;
    double started = monotonic_ms();
    uint64_t size = 0;
    int cached = use_cache && core_cache_open_dir(&cache, false) == 0
                     ? core_cache_lookup(&cache, st, &size) : -1;
    if (cached >= 0) {
        close(c->fd);
        c->fd = cached;
        stats->in_bytes = (uint64_t)st->st_size;
        stats->out_bytes = size;
        stats->ms = monotonic_ms() - started;
        stats->cached = true;
        snprintf(stats->where, sizeof stats->where, "%s", cache.path);
        st->st_size = (off_t)size;
        core_cache_close(&cache);
        return 0;
    }
    struct decompress_keep keep = {.min_bytes = use_cache ? cache.min_bytes : 0,
                                   .open = open_kept, .ctx = &cache};
    int rc = decompress_core(c->fd, path, kind, opts ? opts->max_expanded : 0,
                             use_cache ? &keep : NULL, &c->expanded, stats, err);
    if (rc == 0 && c->expanded.kept && core_cache_publish(&cache, c->expanded.fd, st) == 0) {
        stats->kept = true;
        snprintf(stats->where, sizeof stats->where, "%s", cache.path);
    }
    if (use_cache)
        core_cache_close(&cache);
    if (rc != 0)
        return -1;
    close(c->fd);
    c->fd = c->expanded.fd;
    c->expanded.fd = -1;
    c->image = c->expanded.image;
    st->st_size = (off_t)c->expanded.size;
    return 0;
}

struct target *core_open(const char *path, const struct core_options *opts,
                         struct pyscope_error *err)
{
    struct core_target *c = calloc(1, sizeof *c);
    if (!c) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        return NULL;
    }
    c->base.ops = &core_ops;
    c->expanded.fd = -1;
    c->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (c->fd < 0)
        return fail_open(c, err, errno == ENOENT ? PYSCOPE_ERR_NO_PROCESS : PYSCOPE_ERR_OTHER,
                         "cannot open core file %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(c->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return fail_open(c, err, PYSCOPE_ERR_USAGE, "%s is not a regular file%s", path, "");
    unsigned char head[8];
    ssize_t got = pread(c->fd, head, sizeof head, 0);
    enum compression kind = got > 0 ? compression_detect(head, (size_t)got) : COMPRESSION_NONE;
    if (kind != COMPRESSION_NONE) {
        if (expand(c, path, kind, opts, &st, err) != 0) {
            core_close(&c->base);
            return NULL;
        }
        c->info.compression = kind;
    }
    c->file_size = (uint64_t)st.st_size;
    if (opts) {
        c->warnings = opts->warnings;
        if ((opts->exe && !(c->exe_override = strdup(opts->exe))) ||
            (opts->sysroot && !(c->sysroot = strdup(opts->sysroot))) ||
            (opts->debug_dir && !(c->debug_dir = strdup(opts->debug_dir))))
            return fail_open(c, err, PYSCOPE_ERR_OTHER, "%s%s: out of memory", path, "");
        /* "/" and "dir/" mean the same as "" and "dir": recorded paths start with '/'. */
        for (size_t n; c->sysroot && (n = strlen(c->sysroot)) > 0 && c->sysroot[n - 1] == '/';)
            c->sysroot[n - 1] = '\0';
        if (opts->n_lib_paths > 0) {
            c->lib_paths = calloc((size_t)opts->n_lib_paths, sizeof *c->lib_paths);
            if (!c->lib_paths)
                return fail_open(c, err, PYSCOPE_ERR_OTHER, "%s%s: out of memory", path, "");
            for (int i = 0; i < opts->n_lib_paths; i++)
                if ((c->lib_paths[c->n_lib_paths] = strdup(opts->lib_paths[i])))
                    c->n_lib_paths++;
        }
    }

    Elf64_Ehdr eh;
    if (c->file_size < sizeof eh || core_pread(c, &eh, sizeof eh, 0) != 0)
        return fail_open(c, err, PYSCOPE_ERR_USAGE,
                         "%s is not an ELF core file: it is too short (%s)", path,
                         c->file_size ? "truncated ELF header" : "empty file");
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 && c->info.compression)
        return fail_open(c, err, PYSCOPE_ERR_USAGE,
                         "%s is %s-compressed, but what it holds is not an ELF core file", path,
                         compression_name(c->info.compression));
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        return fail_open(c, err, PYSCOPE_ERR_USAGE,
                         "%s is not an ELF core file%s (no ELF magic, nor that of zstd, lz4, xz or "
                         "gzip)", path, "");
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64)
        return fail_open(c, err, PYSCOPE_ERR_USAGE,
                         "%s is not a 64-bit x86-64 core file%s", path, "");
    if (eh.e_type != ET_CORE)
        return fail_open(c, err, PYSCOPE_ERR_USAGE,
                         "%s is an ELF file but not a core file%s (pass a program with --exe, "
                         "a core with --core)", path, "");
    uint64_t phnum = eh.e_phnum;
    if (phnum == PN_XNUM) {
        /* More than 65534 segments: the real count is in section 0. */
        Elf64_Shdr sh0;
        if (eh.e_shoff == 0 || eh.e_shoff > c->file_size ||
            c->file_size - eh.e_shoff < sizeof sh0 ||
            core_pread(c, &sh0, sizeof sh0, eh.e_shoff) != 0)
            return fail_open(c, err, PYSCOPE_ERR_USAGE,
                             "%s is truncated: its segment count is missing%s", path, "");
        phnum = sh0.sh_info;
    }
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || phnum == 0 || phnum > MAX_SEGMENTS)
        return fail_open(c, err, PYSCOPE_ERR_USAGE,
                         "%s is not a usable core file: %s", path,
                         phnum == 0 ? "it has no program headers" : "bad program header table");
    if (eh.e_phoff > c->file_size || phnum * sizeof(Elf64_Phdr) > c->file_size - eh.e_phoff)
        return fail_open(c, err, PYSCOPE_ERR_USAGE,
                         "%s is truncated: its program headers run past the end of the file%s",
                         path, "");
    Elf64_Phdr *ph = malloc(phnum * sizeof *ph);
    c->segs = calloc(phnum, sizeof *c->segs);
    if (!ph || !c->segs || core_pread(c, ph, phnum * sizeof *ph, eh.e_phoff) != 0) {
        free(ph);
        return fail_open(c, err, PYSCOPE_ERR_OTHER, "cannot read %s: %s", path, strerror(errno));
    }
    uint64_t at_entry = 0;
    for (uint64_t i = 0; i < phnum; i++) {
        if (ph[i].p_type == PT_LOAD) {
            if (ph[i].p_memsz == 0 || ph[i].p_vaddr + ph[i].p_memsz < ph[i].p_vaddr)
                continue;
            struct core_segment *s = &c->segs[c->nsegs++];
            s->vaddr = ph[i].p_vaddr;
            s->memsz = ph[i].p_memsz;
            s->filesz = ph[i].p_filesz < ph[i].p_memsz ? ph[i].p_filesz : ph[i].p_memsz;
            s->offset = ph[i].p_offset;
            s->flags = ph[i].p_flags;
            /* A truncated core: keep what the file has, count the rest. */
            uint64_t present = s->offset >= c->file_size ? 0 : c->file_size - s->offset;
            if (s->filesz > present) {
                c->info.bytes_missing += s->filesz - present;
                s->filesz = present;
            }
        } else if (ph[i].p_type == PT_NOTE) {
            if (ph[i].p_offset > c->file_size || ph[i].p_filesz > c->file_size - ph[i].p_offset ||
                ph[i].p_filesz > MAX_NOTES_BYTES)
                continue;
            unsigned char *notes = malloc(ph[i].p_filesz ? ph[i].p_filesz : 1);
            if (!notes) {
                free(ph);
                return fail_open(c, err, PYSCOPE_ERR_OTHER, "%s%s: out of memory", path, "");
            }
            int rc = core_pread(c, notes, ph[i].p_filesz, ph[i].p_offset) == 0
                         ? parse_notes(c, notes, ph[i].p_filesz, &at_entry)
                         : 0;
            free(notes);
            if (rc != 0) {
                free(ph);
                return fail_open(c, err, PYSCOPE_ERR_OTHER, "%s%s: out of memory", path, "");
            }
        }
    }
    free(ph);
    if (c->nthreads == 0)
        return fail_open(c, err, PYSCOPE_ERR_USAGE,
                         "%s is not a process core file%s: it has no thread (NT_PRSTATUS) notes, "
                         "or they lie past the end of a truncated file", path, "");
    if (c->nsegs)
        qsort(c->segs, c->nsegs, sizeof *c->segs, compare_segments);
    if (c->nfiles)
        qsort(c->files, c->nfiles, sizeof *c->files, compare_files);
    if (!c->info.pid)
        c->info.pid = c->threads[0].tid;
    /* The kernel writes the thread that took the signal first. */
    for (size_t i = 0; i < c->nthreads && !c->info.signal_tid; i++)
        if (c->threads[i].cursig)
            c->info.signal_tid = c->threads[i].tid;
    if (!c->info.signal_tid && c->info.signal.signo)
        c->info.signal_tid = c->threads[0].tid;
    struct core_file *exe = at_entry ? file_at(c, at_entry) : NULL;
    if (!exe && c->nfiles)
        exe = &c->files[0];
    if (exe)
        snprintf(c->info.exe, sizeof c->info.exe, "%s", exe->path);
    c->info.threads = c->threads;
    c->info.n_threads = c->nthreads;
    if (build_maps(c) != 0)
        return fail_open(c, err, PYSCOPE_ERR_OTHER, "%s%s: out of memory", path, "");
    c->base.pid = c->info.pid;
    snprintf(c->base.comm, sizeof c->base.comm, "%s", c->info.fname);
    return &c->base;
}

const char *core_mismatch(const struct target *t)
{
    return as_core(t)->mismatch[0] ? as_core(t)->mismatch : NULL;
}
