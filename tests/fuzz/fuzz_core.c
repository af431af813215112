/* libFuzzer target: a mutated core file through everything `dump --core`
 * does with one: expansion of a compressed core (the corpus holds zstd, lz4,
 * xz and gzip seeds), parsing (core_open), memory reads, thread listing, runtime
 * discovery and the Python stack walk with locals. A crash, hang or leak
 * here is a bug; a rejected file is the expected outcome for most inputs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "python/collect.h"
#include "python/runtime.h"
#include "target/core.h"
#include "target/process.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-core", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    /* Recorded paths are looked up under an empty directory only, so the
     * fuzzer never reads the machine's files through NT_FILE. */
    const char *libs[] = {"/nonexistent-pyscope-fuzz"};
    struct core_options opts = {.exe = "/nonexistent-pyscope-fuzz/exe", .lib_paths = libs,
                                .n_lib_paths = 1, .warnings = NULL,
                                .max_expanded = 64u << 20};
    struct pyscope_error err = {0};
    struct target *t = core_open(path, &opts, &err);
    if (t) {
        target_cache_enable(t);
        pid_t tids[64];
        int n = target_list_threads(t, tids, 64);
        for (int i = 0; i < n; i++) {
            struct thread_activity a;
            target_thread_activity(t, tids[i], &a);
        }
        for (size_t i = 0; i < t->nmaps && i < 64; i++) {
            unsigned char buf[64];
            target_read(t, t->maps[i].start, buf, sizeof buf);
        }
        struct py_runtime rt;
        if (py_runtime_find(t, &rt, &err) == 0) {
            struct stack_report report = {0};
            struct collect_request req = {.paused = true, .locals = true};
            collect_report(t, &rt, &req, &report, &err);
            stack_report_free(&report);
        }
        target_close(t);
    }
    close(fd);
    return 0;
}
