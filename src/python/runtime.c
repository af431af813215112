/* Interpreter discovery. _PyRuntime is found through .dynsym/.symtab of the
 * interpreter or libpython (every supported build exports it), else through
 * the .PyRuntime section; the version comes from _Py_DebugOffsets, Py_Version,
 * or the file name plus the PY_VERSION string in .rodata. The target's binary
 * is never executed. */
#include "python/runtime.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elf/elf_image.h"
#include "target/process.h"
#include "python/debug_offsets.h"

void py_version_format(unsigned version_hex, char *out, size_t outsize)
{
    unsigned major = (version_hex >> 24) & 0xff, minor = (version_hex >> 16) & 0xff;
    unsigned micro = (version_hex >> 8) & 0xff, level = (version_hex >> 4) & 0xf;
    unsigned serial = version_hex & 0xf;
    const char *tag = level == 0xa ? "a" : level == 0xb ? "b" : level == 0xc ? "rc" : "";
    if (tag[0])
        snprintf(out, outsize, "%u.%u.%u%s%u", major, minor, micro, tag, serial);
    else
        snprintf(out, outsize, "%u.%u.%u", major, minor, micro);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* "libpython3.11.so.1.0" or "python3.11" -> 3, 11. */
static bool version_from_file_name(const char *path, unsigned *major, unsigned *minor)
{
    const char *name = base_name(path);
    if (strncmp(name, "lib", 3) == 0)
        name += 3;
    if (strncmp(name, "python", 6) != 0)
        return false;
    name += 6;
    if (!isdigit((unsigned char)name[0]) || name[1] != '.' || !isdigit((unsigned char)name[2]))
        return false;
    *major = (unsigned)(name[0] - '0');
    *minor = (unsigned)strtoul(name + 2, NULL, 10);
    return true;
}

static bool looks_like_python_file(const char *path)
{
    unsigned major, minor;
    return version_from_file_name(path, &major, &minor) ||
           strncmp(base_name(path), "python", 6) == 0 ||
           strncmp(base_name(path), "libpython", 9) == 0;
}

/* PY_VERSION ("3.9.18") is a NUL-terminated literal in .rodata; find the one
 * for the minor version we already know. The compiler may store it as the
 * tail of a longer string (".../Python-3.9.18"), so a match may follow any
 * character that cannot be part of a version number. A standalone literal
 * wins over a tail. */
static unsigned version_from_rodata(struct elf_image *img, unsigned major, unsigned minor)
{
    /* Scanned where libelf mapped the file: copying 0.6 MB of .rodata out
     * cost a 3.8-3.10 dump about 1.5 ms. */
    size_t got = 0;
    const char *data = elf_image_section_bytes(img, ".rodata", &got);
    if (!data || got == 0 || got > (64u << 20))
        return 0;
    char prefix[16];
    int plen = snprintf(prefix, sizeof prefix, "%u.%u.", major, minor);
    unsigned found = 0;
    bool found_standalone = false;
    for (size_t i = 0; i + (size_t)plen < got && !found_standalone; i++) {
        const char *hit = memmem(data + i, got - i, prefix, (size_t)plen);
        if (!hit)
            break;
        i = (size_t)(hit - data);
        char before = i > 0 ? data[i - 1] : '\0';
        if (isdigit((unsigned char)before) || before == '.')
            continue;
        /* The rest of the literal, NUL-terminated, within the section. */
        char tail[24];
        size_t room = got - i - (size_t)plen;
        size_t n = room < sizeof tail - 1 ? room : sizeof tail - 1;
        memcpy(tail, data + i + plen, n);
        tail[n] = '\0';
        const char *p = tail;
        char *end;
        unsigned long micro = strtoul(p, &end, 10);
        if (end == p || micro > 255)
            continue;
        unsigned level = 0xf, serial = 0;
        if (*end == 'a' || *end == 'b' || (end[0] == 'r' && end[1] == 'c')) {
            level = *end == 'a' ? 0xa : *end == 'b' ? 0xb : 0xc;
            end += level == 0xc ? 2 : 1;
            serial = (unsigned)strtoul(end, &end, 10) & 0xf;
        }
        if (*end == '+')
            end++;
        if (*end != '\0')
            continue;
        if (found && before != '\0')
            continue;
        found = (major << 24) | (minor << 16) | ((unsigned)micro << 8) | (level << 4) | serial;
        found_standalone = before == '\0';
    }
    return found;
}

/* The load bias of a mapped file: where its lowest mapping sits minus where
 * the ELF file says that offset belongs. */
static bool load_bias(const struct target *t, const char *path, struct elf_image *img,
                      uint64_t *bias)
{
    const struct target_map *lowest = NULL;
    for (size_t i = 0; i < t->nmaps; i++) {
        const struct target_map *m = &t->maps[i];
        if (m->path && strcmp(m->path, path) == 0 && (!lowest || m->offset < lowest->offset))
            lowest = m;
    }
    if (!lowest)
        return false;
    *bias = lowest->start - lowest->offset - elf_image_base_vaddr(img);
    return true;
}

struct candidate_result {
    bool has_runtime;
    uint64_t runtime_addr;
    uint64_t bias;
    unsigned version_hex;       /* from the file alone (Py_Version is const data) */
    unsigned major, minor;      /* from the file name, 0 if unknown */
    unsigned rodata_version;
};

static void inspect_candidate(struct target *t, const char *path, struct candidate_result *res)
{
    memset(res, 0, sizeof *res);
    version_from_file_name(path, &res->major, &res->minor);
    struct elf_image *img = elf_image_open_fd(target_open_file(t, path));
    if (!img)
        return;
    uint64_t bias = 0;
    if (!load_bias(t, path, img, &bias))
        bias = 0;
    uint64_t value, size;
    if (elf_image_symbol(img, "_PyRuntime", &value, &size) == 0 ||
        elf_image_section(img, ".PyRuntime", &value, &size) == 0) {
        res->has_runtime = true;
        res->runtime_addr = value + bias;
        res->bias = bias;
    }
    uint64_t pyver_addr;
    uint32_t pyver = 0;
    if (elf_image_dynamic_symbol(img, "Py_Version", &pyver_addr, NULL) == 0 &&
        elf_image_read_vaddr(img, pyver_addr, &pyver, sizeof pyver) == sizeof pyver)
        res->version_hex = pyver;
    if (!res->version_hex && res->major)
        res->rodata_version = version_from_rodata(img, res->major, res->minor);
    elf_image_close(img);
}

static bool seen_before(const struct target *t, size_t index)
{
    for (size_t i = 0; i < index; i++)
        if (t->maps[i].path && strcmp(t->maps[i].path, t->maps[index].path) == 0)
            return true;
    return false;
}

static void unsupported(struct pyscope_error *err, unsigned version_hex, unsigned major,
                        unsigned minor, const char *why)
{
    char v[32];
    if (version_hex)
        py_version_format(version_hex, v, sizeof v);
    else
        snprintf(v, sizeof v, "%u.%u", major, minor);
    error_set(err, PYSCOPE_ERR_UNSUPPORTED, "unsupported Python version %s%s%s", v,
              why ? ": " : "", why ? why : "");
    error_hint(err, "pyscope reads CPython 3.8 to 3.15 (default, non-free-threaded builds).");
}

static int find_once(struct target *t, struct py_runtime *rt, struct pyscope_error *err);

int py_runtime_find(struct target *t, struct py_runtime *rt, struct pyscope_error *err)
{
    /* A live process whose maps grow while we look is still being loaded
     * (libc mapped before libpython): what it is not yet says nothing. */
    struct pyscope_error local = {0};
    if (!err)
        err = &local;
    for (int tries = 0;; tries++) {
        int rc = find_once(t, rt, err);
        /* "Unsupported" means a file named like Python without a runtime:
         * right after exec that is the program before its libpython is
         * mapped, and under load the loader can sit for longer than one
         * nap without mapping anything (seen: "unsupported Python version
         * 3.13" from pyenv's 3.13 on a loaded CI run). It is looked at for
         * up to 0.3 s; a process that is not Python at all is not kept. */
        bool unsupported = err->status == PYSCOPE_ERR_UNSUPPORTED;
        if (rc == 0 || !target_can(t, TARGET_CAN_CHANGE) || tries >= (unsupported ? 30 : 10) ||
            (err->status != PYSCOPE_ERR_NOT_PYTHON && !unsupported))
            return rc;
        size_t before = t->nmaps;
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
        if (target_refresh_maps(t) != 0 || (t->nmaps == before && !unsupported))
            return rc;
    }
}

int py_runtime_find_now(struct target *t, struct py_runtime *rt, struct pyscope_error *err)
{
    struct pyscope_error local = {0};
    return find_once(t, rt, err ? err : &local);
}

static int find_once(struct target *t, struct py_runtime *rt, struct pyscope_error *err)
{
    memset(rt, 0, sizeof *rt);
    rt->target = t;
    /* libpython first: with a shared build the executable has no runtime. */
    int best = -1;
    struct candidate_result best_res = {0};
    unsigned named_major = 0, named_minor = 0, named_version = 0;
    for (int pass = 0; pass < 2 && best < 0; pass++) {
        for (size_t i = 0; i < t->nmaps; i++) {
            const char *path = t->maps[i].path;
            if (!path || seen_before(t, i))
                continue;
            bool is_lib = strncmp(base_name(path), "libpython", 9) == 0;
            if (pass == 0 ? !is_lib : (is_lib || t->maps[i].offset != 0))
                continue;
            /* Second pass: every other mapped ELF, which catches static
             * interpreters under any name (uwsgi, embedded apps). */
            struct candidate_result res;
            inspect_candidate(t, path, &res);
            if (!res.has_runtime) {
                if (res.major && looks_like_python_file(path) && !named_major) {
                    named_major = res.major;
                    named_minor = res.minor;
                    named_version = res.version_hex ? res.version_hex : res.rodata_version;
                }
                continue;
            }
            best = (int)i;
            best_res = res;
            break;
        }
    }
    if (best < 0) {
        if (named_major)
            unsupported(err, named_version, named_major, named_minor,
                        named_major < 3 || named_minor < 7 ? "it has no _PyRuntime" : NULL);
        else
            error_set(err, PYSCOPE_ERR_NOT_PYTHON, "process %d (%s) is not a Python process",
                      (int)t->pid, t->comm[0] ? t->comm : "?");
        return -1;
    }
    snprintf(rt->binary, sizeof rt->binary, "%s", t->maps[best].path);
    rt->runtime_addr = best_res.runtime_addr;

    unsigned char block[PY_DEBUG_OFFSETS_READ_SIZE];
    unsigned do_version = 0;
    if (target_read(t, rt->runtime_addr, block, sizeof block) == 0)
        do_version = py_debug_offsets_version(block, sizeof block);
    else if (target_read(t, rt->runtime_addr, block, 64) != 0) {
        error_set(err, PYSCOPE_ERR_OTHER, "cannot read _PyRuntime at 0x%llx in %s",
                  (unsigned long long)rt->runtime_addr, rt->binary);
        return -1;
    }

    unsigned version = do_version ? do_version
                       : best_res.version_hex ? best_res.version_hex
                                              : best_res.rodata_version;
    if (!version && best_res.major)
        version = (best_res.major << 24) | (best_res.minor << 16);
    if (!version) {
        error_set(err, PYSCOPE_ERR_UNSUPPORTED,
                  "cannot tell which Python version %s is (no Py_Version, no _Py_DebugOffsets, "
                  "no version in its name)",
                  rt->binary);
        return -1;
    }
    rt->version_hex = version;
    if ((version & 0xffff00) == 0 && best_res.major)
        snprintf(rt->version, sizeof rt->version, "%u.%u", best_res.major, best_res.minor);
    else
        py_version_format(version, rt->version, sizeof rt->version);

    unsigned major = version >> 24, minor = (version >> 16) & 0xff;
    if (major != 3 || minor < 8) {
        unsupported(err, (version & 0xffff00) ? version : 0, major, minor, NULL);
        return -1;
    }
    if (do_version) {
        char why[256];
        if (py_debug_offsets_decode(block, sizeof block, &rt->layout, why, sizeof why) != 0) {
            unsupported(err, version, major, minor, why);
            return -1;
        }
    } else {
        /* With the patch level unknown, any table of that minor version fits. */
        unsigned lookup = (version & 0xffff) ? version : version | 0xf0;
        const struct py_layout *table = py_layout_for_version(lookup);
        if (!table || minor >= 13) {
            unsupported(err, version, major, minor,
                        minor >= 13 ? "its _PyRuntime has no _Py_DebugOffsets" : NULL);
            return -1;
        }
        rt->layout = *table;
    }
    rt->binary_bias = best_res.bias;
    return 0;
}

/* An interpreter is believable when its first thread points back at it. */
static bool interpreter_plausible(struct py_runtime *rt, uint64_t interp)
{
    const struct py_layout *L = &rt->layout;
    uint64_t head;
    if (interp == 0 || target_read_u64(rt->target, interp + (uint64_t)L->interp_threads_head,
                                       &head) != 0)
        return false;
    if (head == 0)
        return true;
    uint64_t back;
    return target_read_u64(rt->target, head + (uint64_t)L->tstate_interp, &back) == 0 &&
           back == interp;
}

uint64_t py_runtime_first_interpreter(struct py_runtime *rt)
{
    uint64_t interp;
    if (target_read_u64(rt->target, rt->runtime_addr + (uint64_t)rt->layout.runtime_interpreters_head,
                        &interp) != 0)
        return 0;
    return interpreter_plausible(rt, interp) ? interp : 0;
}
