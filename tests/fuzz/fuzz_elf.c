/* libFuzzer target: a mutated ELF file through the ELF reader pyscope uses
 * on interpreters and libraries (symbols, sections, build-id, reads by
 * address) and the core parser's view of the same bytes. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elf/elf_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    struct elf_image *img = elf_image_open_fd(fd);
    if (!img)
        return 0;
    uint64_t value, sz, addr;
    elf_image_symbol(img, "_PyRuntime", &value, &sz);
    elf_image_symbol(img, "Py_Version", &value, NULL);
    if (elf_image_section(img, ".rodata", &addr, &sz) == 0) {
        unsigned char buf[256];
        elf_image_read_vaddr(img, addr, buf, sizeof buf);
    }
    elf_image_section(img, ".PyRuntime", &addr, &sz);
    (void)elf_image_base_vaddr(img);
    (void)elf_image_is_shared(img);
    (void)strlen(elf_image_build_id(img));
    elf_image_close(img);
    return 0;
}
