/* Read-only view of an ELF file on disk (an interpreter, libpython or an
 * extension module): symbols, sections, build-id and load addresses. */
#ifndef PYSCOPE_ELF_ELF_IMAGE_H
#define PYSCOPE_ELF_ELF_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_image;

/* Takes ownership of fd. Returns NULL when the file is not a 64-bit ELF. */
struct elf_image *elf_image_open_fd(int fd);
void elf_image_close(struct elf_image *img);

/* Looks a symbol up in .dynsym, then .symtab. Returns 0 and its unrelocated
 * value (and size, if wanted) or -1. */
int elf_image_symbol(struct elf_image *img, const char *name, uint64_t *value, uint64_t *size);
/* Looks a symbol up in .dynsym only: for exported API such as Py_Version,
 * where scanning a large .symtab would only cost time. */
int elf_image_dynamic_symbol(struct elf_image *img, const char *name, uint64_t *value,
                             uint64_t *size);
/* The function symbol (.symtab, then .dynsym) whose range covers the
 * unrelocated address vaddr: 0 and its name, or -1. */
int elf_image_function_at(struct elf_image *img, uint64_t vaddr, char *name, size_t size);
/* A section's unrelocated address and size. */
int elf_image_section(struct elf_image *img, const char *name, uint64_t *addr, uint64_t *size);
/* A section's bytes where libelf mapped the file, without a copy: NULL when
 * it has none in the file or they lie past its end. Valid until close. */
const void *elf_image_section_bytes(struct elf_image *img, const char *name, size_t *len);
/* Copies up to len bytes of the file contents at unrelocated address addr
 * (from a PT_LOAD segment's file bytes); returns bytes copied. */
size_t elf_image_read_vaddr(struct elf_image *img, uint64_t addr, void *buf, size_t len);

/* The page-aligned p_vaddr of the PT_LOAD segment that maps file offset 0:
 * subtracting it from where that segment is mapped gives the load bias. */
uint64_t elf_image_base_vaddr(struct elf_image *img);
bool elf_image_is_shared(struct elf_image *img);   /* ET_DYN (PIE or library) */
/* The GNU build-id as lowercase hex, or "" when there is none. */
const char *elf_image_build_id(struct elf_image *img);

#endif
