/* Symbol look-up across a target's mapped ELF files, each placed at its
 * load bias from its lowest mapping (as in the unwinder), so executables,
 * PIE executables and shared libraries are all handled alike. */
#include "native/symbol_find.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "elf/elf_image.h"

static bool executable_map(const struct target_map *m)
{
    return m->path && m->path[0] == '/' && m->perms[2] == 'x' &&
           strncmp(m->path, "/dev/", 5) != 0 && strncmp(m->path, "/memfd:", 7) != 0;
}

int native_code_files(const struct target *t, const char **paths, int max)
{
    int n = 0;
    for (size_t i = 0; i < t->nmaps && n < max; i++) {
        if (!executable_map(&t->maps[i]))
            continue;
        bool seen = false;
        for (int k = 0; k < n && !seen; k++)
            seen = strcmp(paths[k], t->maps[i].path) == 0;
        if (!seen)
            paths[n++] = t->maps[i].path;
    }
    return n;
}

static bool in_executable_map_of(const struct target *t, const char *path, uint64_t addr)
{
    for (size_t i = 0; i < t->nmaps; i++) {
        const struct target_map *m = &t->maps[i];
        if (executable_map(m) && strcmp(m->path, path) == 0 && addr >= m->start && addr < m->end)
            return true;
    }
    return false;
}

static const struct target_map *lowest_map_of(const struct target *t, const char *path)
{
    const struct target_map *lowest = NULL;
    for (size_t i = 0; i < t->nmaps; i++) {
        const struct target_map *m = &t->maps[i];
        if (m->path && strcmp(m->path, path) == 0 && (!lowest || m->offset < lowest->offset))
            lowest = m;
    }
    return lowest;
}

static uint64_t load_bias(struct elf_image *img, const struct target_map *lowest)
{
    return elf_image_is_shared(img) ? lowest->start - lowest->offset - elf_image_base_vaddr(img) : 0;
}

static int search_file(struct target *t, const char *path, const char *name,
                       struct native_symbol *out)
{
    const struct target_map *lowest = lowest_map_of(t, path);
    if (!lowest)
        return 0;
    int fd = target_open_file(t, path);
    if (fd < 0)
        return 0;
    struct elf_image *img = elf_image_open_fd(fd);
    if (!img)
        return 0;
    uint64_t value = 0, size = 0;
    int found = 0;
    if (elf_image_symbol(img, name, &value, &size) == 0 && value != 0) {
        uint64_t addr = value + load_bias(img, lowest);
        if (in_executable_map_of(t, path, addr)) {
            out->addr = addr;
            out->size = size ? size : 1;
            snprintf(out->module, sizeof out->module, "%s", path);
            found = 1;
        }
    }
    elf_image_close(img);
    return found;
}

int native_find_symbol(struct target *t, const char *name, const char *const *skip, int n_skip,
                       struct native_symbol *out, int max)
{
    const char *files[512];
    int n_files = native_code_files(t, files, 512);
    int n = 0;
    for (int i = 0; i < n_files && n < max; i++) {
        bool skipped = false;
        for (int k = 0; k < n_skip && !skipped; k++)
            skipped = skip[k] && strcmp(skip[k], files[i]) == 0;
        if (!skipped)
            n += search_file(t, files[i], name, &out[n]);
    }
    return n;
}

int native_function_at(struct target *t, uint64_t addr, char *name, size_t name_size,
                       const char **module)
{
    const struct target_map *m = target_find_map(t, addr);
    if (!m || !executable_map(m) || !(addr >= m->start && addr < m->end))
        return -1;
    const struct target_map *lowest = lowest_map_of(t, m->path);
    int fd = lowest ? target_open_file(t, m->path) : -1;
    struct elf_image *img = fd >= 0 ? elf_image_open_fd(fd) : NULL;
    if (!img)
        return -1;
    int rc = elf_image_function_at(img, addr - load_bias(img, lowest), name, name_size);
    elf_image_close(img);
    if (module) {
        const char *slash = strrchr(m->path, '/');
        *module = slash ? slash + 1 : m->path;
    }
    return rc;
}
