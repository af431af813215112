/* Checks target/core.c on the synthetic seed core of tests/fuzz/corpus
 * (made by tests/fuzz/make_seeds.py): threads, registers, signal, command,
 * mapped files and memory; and the messages for files that are not cores. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "target/core.h"
#include "target/process.h"
#include "unit.h"

#define SEED "tests/fuzz/corpus/core/synthetic.core"

static int open_error(const char *path, char *message, size_t size)
{
    struct pyscope_error err = {0};
    struct target *t = core_open(path, NULL, &err);
    if (t) {
        target_close(t);
        return 0;
    }
    snprintf(message, size, "%s", err.message);
    return err.status;
}

int main(void)
{
    struct pyscope_error err = {0};
    const char *libs[] = {"/nonexistent"};
    struct core_options opts = {.exe = "/nonexistent/exe", .lib_paths = libs, .n_lib_paths = 1};
    struct target *t = core_open(SEED, &opts, &err);
    CHECK(t != NULL);
    if (t) {
        const struct core_info *info = core_get_info(t);
        CHECK_EQ_INT(info->pid, 4242);
        CHECK_EQ_STR(info->fname, "python");
        CHECK_EQ_STR(info->psargs, "python3 app.py");
        CHECK_EQ_STR(info->exe, "/usr/bin/python3.11");
        CHECK_EQ_INT(info->signal.signo, 11);
        CHECK_EQ_INT(info->signal.code, 1);
        CHECK_EQ_INT(info->signal_tid, 4242);
        CHECK_EQ_INT(info->n_threads, 1);
        const struct core_thread *th = core_thread(t, 4242);
        CHECK(th && th->regs[CORE_REG_RIP] == 0x401000);
        pid_t tids[4];
        CHECK_EQ_INT(target_list_threads(t, tids, 4), 1);
        struct thread_activity a;
        CHECK_EQ_INT(target_thread_activity(t, 4242, &a), 0);
        CHECK(a.on_cpu && a.syscall_nr == -1);
        unsigned char b[4];
        CHECK_EQ_INT(target_read(t, 0x7ffd0000e000 + 0x101, b, 3), 0);
        CHECK(b[0] == 1 && b[1] == 2 && b[2] == 3);
        /* Past the dumped bytes, in the same segment, with no file behind it. */
        CHECK(target_read(t, 0x7ffd0000f800, b, 4) != 0);
        /* File-backed, but the file is redirected to a directory that does not exist. */
        CHECK(target_read(t, 0x400000, b, 4) != 0);
        const char *missing[2];
        CHECK_EQ_INT(core_missing_files(t, missing, 2), 1);
        CHECK_EQ_STR(missing[0], "/usr/bin/python3.11");
        CHECK_EQ_INT(t->nmaps, 2);
        target_close(t);
    }
    char message[512];
    CHECK_EQ_INT(open_error("/nonexistent/core", message, sizeof message), PYSCOPE_ERR_NO_PROCESS);
    CHECK_EQ_INT(open_error("tests/fuzz/corpus/core/truncated.core", message, sizeof message),
                 PYSCOPE_ERR_USAGE);
    CHECK(strstr(message, "truncated") || strstr(message, "no thread"));
    CHECK_EQ_INT(open_error("Makefile", message, sizeof message), PYSCOPE_ERR_USAGE);
    CHECK(strstr(message, "not an ELF core file") != NULL);
    CHECK_EQ_INT(open_error("tests/fuzz/corpus/elf/small.so", message, sizeof message),
                 PYSCOPE_ERR_USAGE);
    CHECK(strstr(message, "not a core file") != NULL);
    return unit_report("test_core");
}
