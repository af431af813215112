/* The core writer. Layout: ELF header, program headers (one PT_NOTE, one
 * PT_LOAD per mapping), the notes, then each segment's bytes page-aligned.
 * Pages that cannot be read (guard pages, I/O mappings) are written as zeros
 * so that every offset stays valid. */
#include "target/core_write.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/procfs.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <unistd.h>

#include "target/process.h"
#include "util/outfile.h"

#define PAGE 4096u
#define CHUNK (1u << 20)

struct buf {
    unsigned char *data;
    size_t len, cap;
};

static int buf_put(struct buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *grown = realloc(b->data, cap);
        if (!grown)
            return -1;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

static int put_note(struct buf *b, const char *name, uint32_t type, const void *desc, size_t size)
{
    static const unsigned char zeros[4] = {0};
    uint32_t hdr[3] = {(uint32_t)strlen(name) + 1, (uint32_t)size, type};
    size_t namesz = hdr[0];
    if (buf_put(b, hdr, sizeof hdr) || buf_put(b, name, namesz) ||
        buf_put(b, zeros, (4 - namesz % 4) % 4) || buf_put(b, desc, size) ||
        buf_put(b, zeros, (4 - size % 4) % 4))
        return -1;
    return 0;
}

static bool skip_map(const struct target_map *m)
{
    return m->perms[0] != 'r' || (m->path == NULL && m->end - m->start > (64ull << 30));
}

/* Bytes of a mapping to put in the core: all of it, or only the first page
 * of a read-only file mapping that starts an ELF file. */
static uint64_t dump_size(struct target *t, const struct target_map *m)
{
    if (m->perms[1] == 'w' || !m->path || m->path[0] != '/')
        return m->end - m->start;
    if (m->offset != 0)
        return 0;
    unsigned char magic[4];
    if (target_read(t, m->start, magic, 4) == 0 && memcmp(magic, ELFMAG, SELFMAG) == 0)
        return PAGE;
    return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int build_notes(struct target *t, const pid_t *tids, int n_tids, const siginfo_t *info,
                       struct buf *notes)
{
    /* prpsinfo */
    struct elf_prpsinfo ps;
    memset(&ps, 0, sizeof ps);
    ps.pr_pid = t->pid;
    /* Both fields are truncated copies, as the kernel writes them. */
    memcpy(ps.pr_fname, t->comm, strnlen(t->comm, sizeof ps.pr_fname - 1));
    char cmd[1024];
    if (process_cmdline(t->pid, cmd, sizeof cmd) == 0)
        memcpy(ps.pr_psargs, cmd, strnlen(cmd, sizeof ps.pr_psargs - 1));
    if (put_note(notes, "CORE", NT_PRPSINFO, &ps, sizeof ps))
        return -1;
    for (int i = 0; i < n_tids; i++) {
        struct elf_prstatus st;
        memset(&st, 0, sizeof st);
        st.pr_pid = tids[i];
        if (i == 0 && info)
            st.pr_cursig = (short)info->si_signo;
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, tids[i], NULL, &regs) != 0)
            memset(&regs, 0, sizeof regs);
        memcpy(&st.pr_reg, &regs, sizeof st.pr_reg < sizeof regs ? sizeof st.pr_reg : sizeof regs);
        if (put_note(notes, "CORE", NT_PRSTATUS, &st, sizeof st))
            return -1;
        if (i == 0 && info && put_note(notes, "CORE", NT_SIGINFO, info, sizeof *info))
            return -1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/auxv", (int)t->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        unsigned char auxv[4096];
        ssize_t n = read(fd, auxv, sizeof auxv);
        close(fd);
        if (n > 0 && put_note(notes, "CORE", NT_AUXV, auxv, (size_t)n))
            return -1;
    }
    /* NT_FILE: count, page size, (start, end, page offset)..., then names. */
    struct buf files = {0}, names = {0};
    uint64_t count = 0, page = PAGE;
    int rc = 0;
    for (size_t i = 0; i < t->nmaps && rc == 0; i++) {
        const struct target_map *m = &t->maps[i];
        if (!m->path || m->path[0] != '/')
            continue;
        uint64_t e[3] = {m->start, m->end, m->offset / PAGE};
        rc = buf_put(&files, e, sizeof e) || buf_put(&names, m->path, strlen(m->path) + 1);
        count++;
    }
    struct buf desc = {0};
    if (rc == 0)
        rc = buf_put(&desc, &count, 8) || buf_put(&desc, &page, 8) ||
             buf_put(&desc, files.data, files.len) || buf_put(&desc, names.data, names.len) ||
             put_note(notes, "CORE", NT_FILE, desc.data, desc.len);
    free(files.data);
    free(names.data);
    free(desc.data);
    return rc;
}

int core_write(struct target *t, const pid_t *tids, int n_tids, const siginfo_t *info,
               const char *path, struct pyscope_error *err)
{
    struct buf notes = {0};
    Elf64_Phdr *ph = calloc(t->nmaps + 1, sizeof *ph);
    unsigned char *chunk = malloc(CHUNK);
    int fd = -1, rc = -1;
    struct outfile file;
    if (!ph || !chunk || build_notes(t, tids, n_tids, info, &notes) != 0) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory while writing %s", path);
        goto out;
    }
    size_t nph = 1;
    for (size_t i = 0; i < t->nmaps; i++)
        if (!skip_map(&t->maps[i]))
            nph++;
    uint64_t offset = sizeof(Elf64_Ehdr) + nph * sizeof(Elf64_Phdr);
    ph[0].p_type = PT_NOTE;
    ph[0].p_offset = offset;
    ph[0].p_filesz = notes.len;
    ph[0].p_align = 4;
    offset = (offset + notes.len + PAGE - 1) & ~(uint64_t)(PAGE - 1);
    size_t k = 1;
    for (size_t i = 0; i < t->nmaps; i++) {
        const struct target_map *m = &t->maps[i];
        if (skip_map(m))
            continue;
        Elf64_Phdr *p = &ph[k++];
        p->p_type = PT_LOAD;
        p->p_vaddr = m->start;
        p->p_memsz = m->end - m->start;
        p->p_filesz = dump_size(t, m);
        p->p_offset = offset;
        p->p_flags = (m->perms[0] == 'r' ? PF_R : 0) | (m->perms[1] == 'w' ? PF_W : 0) |
                     (m->perms[2] == 'x' ? PF_X : 0);
        p->p_align = PAGE;
        offset += p->p_filesz;
    }
    Elf64_Ehdr eh;
    memset(&eh, 0, sizeof eh);
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_CORE;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof eh;
    eh.e_ehsize = sizeof eh;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = nph < PN_XNUM ? (uint16_t)nph : PN_XNUM;
    if (nph >= PN_XNUM) {
        error_set(err, PYSCOPE_ERR_OTHER, "too many mappings (%zu) to write a core", nph);
        goto out;
    }
    /* Cores hold the program's memory: readable by their owner only. */
    if (outfile_open(&file, path, OUTFILE_REPLACE, 0600, err) != 0)
        goto out;
    fd = file.fd;
    if (write_all(fd, &eh, sizeof eh) || write_all(fd, ph, nph * sizeof *ph) ||
        write_all(fd, notes.data, notes.len))
        goto write_failed;
    for (size_t i = 1; i < nph; i++) {
        if (ph[i].p_filesz == 0)
            continue;
        if (lseek(fd, (off_t)ph[i].p_offset, SEEK_SET) < 0)
            goto write_failed;
        for (uint64_t done = 0; done < ph[i].p_filesz;) {
            size_t n = ph[i].p_filesz - done < CHUNK ? (size_t)(ph[i].p_filesz - done) : CHUNK;
            if (t->ops->read_raw(t, ph[i].p_vaddr + done, chunk, n) != 0) {
                /* Page by page, zeros where a page is unreadable. */
                for (size_t off = 0; off < n; off += PAGE) {
                    size_t len = n - off < PAGE ? n - off : PAGE;
                    if (t->ops->read_raw(t, ph[i].p_vaddr + done + off, chunk + off, len) != 0)
                        memset(chunk + off, 0, len);
                }
            }
            if (write_all(fd, chunk, n))
                goto write_failed;
            done += n;
        }
    }
    rc = outfile_close(&file, err);
    goto out;
write_failed:
    error_set(err, PYSCOPE_ERR_OTHER, "cannot write %s: %s", path, strerror(errno));
    outfile_discard(&file);
out:
    free(notes.data);
    free(ph);
    free(chunk);
    return rc;
}
