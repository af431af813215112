/* ELF files through elfutils' libelf: symbol and section look-ups, segment
 * reads and build-ids. Every size taken from the file is checked against the
 * data libelf actually loaded, because the file may be truncated or hostile. */
#include "elf/elf_image.h"

#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct elf_image {
    int fd;
    Elf *elf;
    GElf_Ehdr ehdr;
    char build_id[2 * 64 + 1];
};

static int ensure_libelf(void)
{
    static int ready = 0;
    if (!ready) {
        if (elf_version(EV_CURRENT) == EV_NONE)
            return -1;
        ready = 1;
    }
    return 0;
}

static void load_build_id(struct elf_image *img)
{
    size_t nphdr;
    if (elf_getphdrnum(img->elf, &nphdr) != 0)
        return;
    for (size_t i = 0; i < nphdr && i < 4096; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(img->elf, (int)i, &ph) || ph.p_type != PT_NOTE)
            continue;
        Elf_Data *data = elf_getdata_rawchunk(img->elf, (int64_t)ph.p_offset, ph.p_filesz,
                                              ELF_T_NHDR);
        if (!data)
            continue;
        size_t offset = 0, name_off, desc_off;
        GElf_Nhdr nh;
        while (offset < data->d_size &&
               (offset = gelf_getnote(data, offset, &nh, &name_off, &desc_off)) > 0) {
            if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
                memcmp((char *)data->d_buf + name_off, "GNU", 4) != 0)
                continue;
            size_t n = nh.n_descsz < 64 ? nh.n_descsz : 64;
            const unsigned char *id = (const unsigned char *)data->d_buf + desc_off;
            for (size_t k = 0; k < n; k++) {
                static const char hex[] = "0123456789abcdef";
                img->build_id[2 * k] = hex[id[k] >> 4];
                img->build_id[2 * k + 1] = hex[id[k] & 15];
            }
            img->build_id[2 * n] = '\0';
            return;
        }
    }
}

struct elf_image *elf_image_open_fd(int fd)
{
    if (fd < 0 || ensure_libelf() != 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    struct elf_image *img = calloc(1, sizeof *img);
    if (!img) {
        close(fd);
        return NULL;
    }
    img->fd = fd;
    img->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!img->elf || elf_kind(img->elf) != ELF_K_ELF || gelf_getclass(img->elf) != ELFCLASS64 ||
        !gelf_getehdr(img->elf, &img->ehdr)) {
        elf_image_close(img);
        return NULL;
    }
    load_build_id(img);
    return img;
}

void elf_image_close(struct elf_image *img)
{
    if (!img)
        return;
    if (img->elf)
        elf_end(img->elf);
    close(img->fd);
    free(img);
}

/* Calls visit on every defined, named symbol of the tables of table_type
 * until it returns nonzero; returns that, or 0. */
static int each_symbol(struct elf_image *img, Elf64_Word table_type,
                       int (*visit)(void *ctx, const GElf_Sym *sym, const char *name), void *ctx)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(img->elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != table_type || sh.sh_entsize == 0)
            continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        if (!data)
            continue;
        size_t count = data->d_size / sh.sh_entsize;
        for (size_t i = 0; i < count; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
                sym.st_name == 0)
                continue;
            const char *sname = elf_strptr(img->elf, sh.sh_link, sym.st_name);
            int rc = sname ? visit(ctx, &sym, sname) : 0;
            if (rc)
                return rc;
        }
    }
    return 0;
}

struct by_name {
    const char *name;
    uint64_t *value, *size;
};

static int match_name(void *ctx, const GElf_Sym *sym, const char *name)
{
    struct by_name *q = ctx;
    if (strcmp(name, q->name) != 0)
        return 0;
    *q->value = sym->st_value;
    if (q->size)
        *q->size = sym->st_size;
    return 1;
}

static int symbol_in_table(struct elf_image *img, Elf64_Word table_type, const char *name,
                           uint64_t *value, uint64_t *size)
{
    struct by_name q = {name, value, size};
    return each_symbol(img, table_type, match_name, &q) ? 0 : -1;
}

int elf_image_symbol(struct elf_image *img, const char *name, uint64_t *value, uint64_t *size)
{
    if (symbol_in_table(img, SHT_DYNSYM, name, value, size) == 0)
        return 0;
    return symbol_in_table(img, SHT_SYMTAB, name, value, size);
}

struct by_address {
    uint64_t vaddr;
    char *name;
    size_t size;
};

static int match_function(void *ctx, const GElf_Sym *sym, const char *name)
{
    struct by_address *q = ctx;
    if ((GELF_ST_TYPE(sym->st_info) != STT_FUNC && GELF_ST_TYPE(sym->st_info) != STT_GNU_IFUNC) ||
        q->vaddr < sym->st_value || q->vaddr >= sym->st_value + (sym->st_size ? sym->st_size : 1))
        return 0;
    snprintf(q->name, q->size, "%s", name);
    return 1;
}

static int function_covering(struct elf_image *img, Elf64_Word table_type, uint64_t vaddr,
                             char *name, size_t size)
{
    struct by_address q = {vaddr, name, size};
    return each_symbol(img, table_type, match_function, &q) ? 0 : -1;
}

int elf_image_function_at(struct elf_image *img, uint64_t vaddr, char *name, size_t size)
{
    if (function_covering(img, SHT_SYMTAB, vaddr, name, size) == 0)
        return 0;
    return function_covering(img, SHT_DYNSYM, vaddr, name, size);
}

int elf_image_dynamic_symbol(struct elf_image *img, const char *name, uint64_t *value,
                             uint64_t *size)
{
    return symbol_in_table(img, SHT_DYNSYM, name, value, size);
}

/* The header of the first section called name: 0, or -1. */
static int find_section(struct elf_image *img, const char *name, GElf_Shdr *out)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(img->elf, &shstrndx) != 0)
        return -1;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(img->elf, scn)) != NULL) {
        if (!gelf_getshdr(scn, out))
            continue;
        const char *sname = elf_strptr(img->elf, shstrndx, out->sh_name);
        if (sname && strcmp(sname, name) == 0)
            return 0;
    }
    return -1;
}

int elf_image_section(struct elf_image *img, const char *name, uint64_t *addr, uint64_t *size)
{
    GElf_Shdr sh;
    if (find_section(img, name, &sh) != 0)
        return -1;
    *addr = sh.sh_addr;
    *size = sh.sh_size;
    return 0;
}

const void *elf_image_section_bytes(struct elf_image *img, const char *name, size_t *len)
{
    size_t file_size = 0;
    const char *file = elf_rawfile(img->elf, &file_size);
    GElf_Shdr sh;
    if (!file || find_section(img, name, &sh) != 0 || sh.sh_type == SHT_NOBITS ||
        sh.sh_offset > file_size || sh.sh_size > file_size - sh.sh_offset)
        return NULL;
    *len = (size_t)sh.sh_size;
    return file + sh.sh_offset;
}

size_t elf_image_read_vaddr(struct elf_image *img, uint64_t addr, void *buf, size_t len)
{
    size_t nphdr;
    if (elf_getphdrnum(img->elf, &nphdr) != 0)
        return 0;
    for (size_t i = 0; i < nphdr && i < 4096; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(img->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        if (addr < ph.p_vaddr || addr >= ph.p_vaddr + ph.p_filesz)
            continue;
        uint64_t in_seg = addr - ph.p_vaddr;
        size_t n = len;
        if (n > ph.p_filesz - in_seg)
            n = (size_t)(ph.p_filesz - in_seg);
        ssize_t got = pread(img->fd, buf, n, (off_t)(ph.p_offset + in_seg));
        return got > 0 ? (size_t)got : 0;
    }
    return 0;
}

uint64_t elf_image_base_vaddr(struct elf_image *img)
{
    size_t nphdr;
    if (elf_getphdrnum(img->elf, &nphdr) != 0)
        return 0;
    for (size_t i = 0; i < nphdr && i < 4096; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(img->elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
            /* vaddr and offset agree modulo the page size, so this is
             * where file offset 0 would sit before relocation. */
            return (ph.p_vaddr - ph.p_offset) & ~(uint64_t)4095;
        }
    }
    return 0;
}

bool elf_image_is_shared(struct elf_image *img)
{
    return img->ehdr.e_type == ET_DYN;
}

const char *elf_image_build_id(struct elf_image *img)
{
    return img->build_id;
}
