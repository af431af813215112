/* The live-process target. Memory comes from process_vm_readv, with
 * /proc/PID/mem as the fallback for kernels without cross-memory attach;
 * thread facts come from /proc. Nothing is ever written to the target. */
#include "target/process.h"

#include <ctype.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/text.h"

struct process_target {
    struct target base;
    /* The thread whose view of the address space is read: the leader, or,
     * once the main thread has called pthread_exit (the leader is then a
     * zombie while the others run), one of the live threads. */
    pid_t reader;
    int mem_fd;              /* /proc/READER/mem, opened lazily on ENOSYS */
    bool use_mem_fd;
    /* The leader's stat file, kept open for the exec check once it has been
     * asked for: a pread of it costs a fraction of finding, opening and
     * closing it (the agent asks about every process every second). */
    int stat_fd;
    /* A process in a pid namespace of its own (a container) knows its
     * threads by other numbers than our /proc does: the pairs from each
     * thread's NSpid line, read again (at most every NS_TIDS_EVERY_MS) when
     * a number is not among them. */
    bool own_pid_ns;
    struct ns_tid {
        pid_t own, host;
    } *ns_tids;
    int n_ns_tids;
    double ns_tids_read_ms;
};

#define NS_TIDS_EVERY_MS 100.0

static bool switch_reader(struct process_target *p);

static int read_raw_once(struct process_target *p, uint64_t addr, void *buf, size_t len)
{
    if (!p->use_mem_fd) {
        struct iovec local = {buf, len};
        struct iovec remote = {(void *)(uintptr_t)addr, len};
        ssize_t n = process_vm_readv(p->reader, &local, 1, &remote, 1, 0);
        if (n == (ssize_t)len)
            return 0;
        if (n >= 0 || errno != ENOSYS)
            return -1;
        p->use_mem_fd = true;
    }
    if (p->mem_fd < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/mem", (int)p->reader);
        p->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (p->mem_fd < 0)
            return -1;
    }
    ssize_t n = pread(p->mem_fd, buf, len, (off_t)addr);
    return n == (ssize_t)len ? 0 : -1;
}

static int process_read_raw(struct target *t, uint64_t addr, void *buf, size_t len)
{
    struct process_target *p = (struct process_target *)t;
    if (read_raw_once(p, addr, buf, len) == 0)
        return 0;
    /* The thread read through exited; the others share its memory. */
    if (errno == ESRCH && switch_reader(p))
        return read_raw_once(p, addr, buf, len);
    return -1;
}

/* process_vm_readv stops at the first remote iovec it cannot read and
 * reports the bytes before it; the rest are retried after skipping the
 * failed span, so one bad address costs one extra call, not all of them. */
static size_t process_read_spans(struct target *t, struct target_span *spans, size_t n)
{
    struct process_target *p = (struct process_target *)t;
    enum { BATCH = 512 };
    struct iovec local[BATCH], remote[BATCH];
    size_t ok = 0, i = 0;
    while (i < n) {
        if (p->use_mem_fd) {
            spans[i].ok = process_read_raw(t, spans[i].addr, spans[i].buf, spans[i].len) == 0;
            ok += spans[i].ok;
            i++;
            continue;
        }
        size_t k = 0;
        for (; k < BATCH && i + k < n; k++) {
            local[k].iov_base = spans[i + k].buf;
            local[k].iov_len = spans[i + k].len;
            remote[k].iov_base = (void *)(uintptr_t)spans[i + k].addr;
            remote[k].iov_len = spans[i + k].len;
        }
        ssize_t got = process_vm_readv(p->reader, local, k, remote, k, 0);
        if (got < 0) {
            if (errno == ENOSYS) {
                p->use_mem_fd = true;
                continue;
            }
            if (errno == ESRCH && switch_reader(p))
                continue;
            i++; /* the first span is unreadable */
            continue;
        }
        size_t left = (size_t)got, done = 0;
        while (done < k && left >= spans[i + done].len) {
            spans[i + done].ok = true;
            left -= spans[i + done].len;
            done++;
            ok++;
        }
        /* Span i+done was cut short or unreadable: skip it. */
        i += done < k ? done + 1 : done;
    }
    return ok;
}

static void process_close(struct target *t)
{
    struct process_target *p = (struct process_target *)t;
    if (p->mem_fd >= 0)
        close(p->mem_fd);
    if (p->stat_fd >= 0)
        close(p->stat_fd);
    free(p->ns_tids);
    free(p);
}

/* The rest of the interface: what /proc says of the process and its threads. */
static int op_list_threads(struct target *t, pid_t *tids, int max)
{
    return process_list_tids(t->pid, tids, max);
}

static int op_thread_activity(struct target *t, pid_t tid, struct thread_activity *out)
{
    return process_thread_activity(t->pid, tid, out);
}

static int op_thread_comm(struct target *t, pid_t tid, char *out, size_t outsize)
{
    return process_thread_comm(t->pid, tid, out, outsize);
}

/* Mapped files are opened below /proc/PID/root, so that a process in a
 * container shows its own files; the path as it is when that fails. */
static int op_open_file(const struct target *t, const char *path)
{
    char full[4096];
    if (t->root[0]) {
        if ((size_t)snprintf(full, sizeof full, "%s%s", t->root, path) >= sizeof full) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(full, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            return fd;
    }
    return open(path, O_RDONLY | O_CLOEXEC);
}

static bool status_field(const char *path, const char *name, char *out, size_t outsize);

int process_own_tid(pid_t pid, pid_t tid, pid_t *own, bool *nested)
{
    char path[96], field[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    if (!status_field(path, "NSpid:", field, sizeof field))
        return -1;
    char *p = field, *end;
    int fields = 0;
    long last = 0;
    for (long v; fields < 64 && (v = strtol(p, &end, 10), end != p); p = end) {
        last = v;
        fields++;
    }
    if (fields == 0 || last <= 0)
        return -1;
    *own = (pid_t)last;
    *nested = fields > 1;
    return 0;
}

static void read_ns_tids(struct process_target *p)
{
    pid_t tids[PROCESS_MAX_THREADS];
    int n = process_list_tids(p->base.pid, tids, PROCESS_MAX_THREADS);
    p->ns_tids_read_ms = monotonic_ms();
    if (n <= 0)
        return;
    struct ns_tid *pairs = realloc(p->ns_tids, (size_t)n * sizeof *pairs);
    if (!pairs)
        return;
    p->ns_tids = pairs;
    p->n_ns_tids = 0;
    for (int i = 0; i < n; i++) {
        bool nested;
        pid_t own;
        if (process_own_tid(p->base.pid, tids[i], &own, &nested) == 0)
            pairs[p->n_ns_tids++] = (struct ns_tid){own, tids[i]};
    }
}

/* Looks tid up on the side given (own numbers, or ours); 0 when unknown. */
static pid_t ns_tid_lookup(struct process_target *p, pid_t tid, bool from_own)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < p->n_ns_tids; i++)
            if ((from_own ? p->ns_tids[i].own : p->ns_tids[i].host) == tid)
                return from_own ? p->ns_tids[i].host : p->ns_tids[i].own;
        if (pass == 0 && monotonic_ms() - p->ns_tids_read_ms < NS_TIDS_EVERY_MS)
            break;
        if (pass == 0)
            read_ns_tids(p);
    }
    return 0;
}

static pid_t op_host_tid(struct target *t, pid_t own_tid)
{
    struct process_target *p = (struct process_target *)t;
    return p->own_pid_ns ? ns_tid_lookup(p, own_tid, true) : own_tid;
}

static pid_t op_own_tid(struct target *t, pid_t host_tid)
{
    struct process_target *p = (struct process_target *)t;
    return p->own_pid_ns ? ns_tid_lookup(p, host_tid, false) : host_tid;
}

static bool op_gone(struct target *t)
{
    return process_gone(t->pid);
}

static bool op_gone_soon(struct target *t)
{
    return process_gone_soon(t->pid);
}

static bool stat_alive(const char *buf);
static uint64_t image_id_of_stat(const char *buf);

static uint64_t op_image_id(struct target *t)
{
    struct process_target *p = (struct process_target *)t;
    if (p->stat_fd < 0) {
        char path[96];
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)t->pid, (int)t->pid);
        p->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    char buf[1024];
    ssize_t n = p->stat_fd >= 0 ? pread(p->stat_fd, buf, sizeof buf - 1, 0) : -1;
    if (n > 0 && (size_t)n < sizeof buf - 1) {
        buf[n] = '\0';
        /* (A leader gone zombie has no memory to describe: the long way.) */
        if (stat_alive(buf))
            return image_id_of_stat(buf);
    } else if (p->stat_fd >= 0) {
        close(p->stat_fd);
        p->stat_fd = -1;
    }
    return process_image_id(t->pid);
}

static int op_thread_activity_open(struct target *t, pid_t tid)
{
    return process_thread_syscall_fd(t->pid, tid);
}

static int op_thread_activity_read(struct target *t, int handle, struct thread_activity *out)
{
    (void)t;
    return process_thread_activity_fd(handle, out);
}

static int op_thread_stopped(struct target *t, pid_t tid, char *state, pid_t *tracer)
{
    return process_thread_stopped(t->pid, tid, state, tracer);
}

static int op_thread_cpu_ns(struct target *t, pid_t tid, uint64_t *ns)
{
    return process_thread_cpu_ns(t->pid, tid, ns);
}

static int op_caught_signals(struct target *t, uint64_t *mask)
{
    return process_caught_signals(t->pid, mask);
}

static int op_cmdline(struct target *t, char *out, size_t outsize)
{
    return process_cmdline(t->pid, out, outsize);
}

static int op_exe(struct target *t, char *out, size_t outsize)
{
    return process_exe(t->pid, out, outsize);
}

static int op_peer_comm(struct target *t, pid_t pid, char *out, size_t outsize)
{
    (void)t;
    return process_thread_comm(pid, pid, out, outsize);
}

static const struct target_ops process_ops = {
    .read_raw = process_read_raw,
    .read_spans = process_read_spans,
    .close = process_close,
    .list_threads = op_list_threads,
    .thread_activity = op_thread_activity,
    .thread_comm = op_thread_comm,
    .open_file = op_open_file,
    .refresh_maps = process_read_maps,
    .gone = op_gone,
    .gone_soon = op_gone_soon,
    .image_id = op_image_id,
    .thread_activity_open = op_thread_activity_open,
    .thread_activity_read = op_thread_activity_read,
    .thread_stopped = op_thread_stopped,
    .thread_cpu_ns = op_thread_cpu_ns,
    .caught_signals = op_caught_signals,
    .cmdline = op_cmdline,
    .exe = op_exe,
    .peer_comm = op_peer_comm,
    .host_tid = op_host_tid,
    .own_tid = op_own_tid,
    .capabilities = TARGET_CAN_CHANGE | TARGET_CAN_PROC | TARGET_CAN_PEERS | TARGET_CAN_CLOCK,
};

static int read_small_file(const char *path, char *out, size_t outsize, size_t *len_out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t used = 0;
    while (used + 1 < outsize) {
        ssize_t n = read(fd, out + used, outsize - 1 - used);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    out[used] = '\0';
    if (len_out)
        *len_out = used;
    return 0;
}

/* PF_EXITING and PF_KTHREAD in the flags of /proc/PID/stat
 * (include/linux/sched.h). */
#define TASK_EXITING_FLAG 0x00000004u
#define KERNEL_THREAD_FLAG 0x00200000u

/* A process that is gone is reported as exiting. */
static unsigned task_flags(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_small_file(path, buf, sizeof buf, NULL) != 0)
        return TASK_EXITING_FLAG;
    const char *close_paren = strrchr(buf, ')');
    unsigned flags = 0;
    /* state ppid pgrp session tty_nr tpgid flags */
    if (!close_paren || sscanf(close_paren + 1, " %*c %*d %*d %*d %*d %*d %u", &flags) != 1)
        return TASK_EXITING_FLAG;
    return flags;
}

/* Whether a thread is alive and not on its way out: not a zombie, and
 * without PF_EXITING (a process in exit_group is gone, whichever of its
 * threads has not finished exiting yet). */
static char task_state_letter(pid_t pid, pid_t tid)
{
    char path[96], buf[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    if (read_small_file(path, buf, sizeof buf, NULL) != 0)
        return 0;
    const char *close_paren = strrchr(buf, ')');
    return close_paren && close_paren[1] == ' ' ? close_paren[2] : 0;
}

/* Whether a stat file's text shows its task alive and not exiting (not a
 * zombie, no PF_EXITING): task_alive's test, and the exec check's. */
static bool stat_alive(const char *buf)
{
    const char *close_paren = strrchr(buf, ')');
    char state = 0;
    unsigned flags = 0;
    if (!close_paren ||
        sscanf(close_paren + 1, " %c %*d %*d %*d %*d %*d %u", &state, &flags) != 2)
        return false;
    return state != 'Z' && state != 'X' && !(flags & TASK_EXITING_FLAG);
}

static bool task_alive(pid_t pid, pid_t tid)
{
    char path[96], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    return read_small_file(path, buf, sizeof buf, NULL) == 0 && stat_alive(buf);
}

pid_t process_reader_tid(pid_t pid)
{
    if (task_alive(pid, pid))
        return pid;
    pid_t tids[256];
    int n = process_list_tids(pid, tids, (int)(sizeof tids / sizeof tids[0]));
    for (int i = 0; i < n; i++)
        if (tids[i] != pid && task_alive(pid, tids[i]))
            return tids[i];
    return 0;
}

static bool switch_reader(struct process_target *p)
{
    pid_t next = process_reader_tid(p->base.pid);
    if (next == 0 || next == p->reader)
        return false;
    p->reader = next;
    if (p->mem_fd >= 0)
        close(p->mem_fd);
    p->mem_fd = -1;
    snprintf(p->base.root, sizeof p->base.root, "/proc/%d/root", (int)next);
    return true;
}

bool process_alive(pid_t pid)
{
    return process_reader_tid(pid) != 0;
}

bool process_gone(pid_t pid)
{
    pid_t reader = process_reader_tid(pid);
    if (reader == 0)
        return true;
    /* Between exit() and becoming a zombie the address space is already
     * gone while /proc/PID/stat still says the process runs; in the middle
     * of an exec it is briefly empty too, but the process is not exiting. */
    char path[64], buf[64];
    size_t len = 0;
    snprintf(path, sizeof path, "/proc/%d/maps", (int)reader);
    return read_small_file(path, buf, sizeof buf, &len) == 0 && len == 0 &&
           (task_flags(reader) & TASK_EXITING_FLAG);
}

bool process_gone_soon(pid_t pid)
{
    for (int i = 0; i < 5; i++) {
        if (process_gone(pid))
            return true;
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

static int compare_maps(const void *a, const void *b)
{
    const struct target_map *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

int process_read_maps(struct target *t)
{
    const struct process_target *p = (const struct process_target *)t;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)p->reader);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t cap = 0, n = 0;
    struct target_map *maps = NULL;
    char *line = NULL;
    size_t linecap = 0;
    int rc = 0;
    while (getline(&line, &linecap, f) > 0) {
        struct target_map m = {0};
        char perms[8] = "";
        unsigned long long start, end, offset, inode;
        int consumed = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*x:%*x %llu %n", &start, &end, perms, &offset,
                   &inode, &consumed) < 5)
            continue;
        m.start = start;
        m.end = end;
        m.offset = offset;
        m.inode = inode;
        memcpy(m.perms, perms, 4);
        m.perms[4] = '\0';
        char *name = line + consumed;
        name[strcspn(name, "\n")] = '\0';
        if (name[0] == '/') {
            /* A deleted file still names its old path; keep the path and let
             * the ELF reader try it. */
            char *deleted = strstr(name, " (deleted)");
            if (deleted)
                *deleted = '\0';
            m.path = strdup(name);
            if (!m.path) {
                rc = -1;
                break;
            }
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 256;
            struct target_map *grown = realloc(maps, ncap * sizeof *grown);
            if (!grown) {
                free(m.path);
                rc = -1;
                break;
            }
            maps = grown;
            cap = ncap;
        }
        maps[n++] = m;
    }
    free(line);
    fclose(f);
    if (rc != 0 || n == 0) {
        for (size_t i = 0; i < n; i++)
            free(maps[i].path);
        free(maps);
        /* An exiting process has already dropped its address space. */
        if (n == 0 && rc == 0)
            errno = ESRCH;
        return -1;
    }
    qsort(maps, n, sizeof *maps, compare_maps);
    for (size_t i = 0; i < t->nmaps; i++)
        free(t->maps[i].path);
    free(t->maps);
    t->maps = maps;
    t->nmaps = n;
    return 0;
}

/* A "Uid:" or "CapEff:" line of a /proc status file. */
static bool status_field(const char *path, const char *name, char *out, size_t outsize)
{
    char buf[4096];
    if (read_small_file(path, buf, sizeof buf, NULL) != 0)
        return false;
    const char *line = strstr(buf, name);
    if (!line)
        return false;
    line += strlen(name);
    line += strspn(line, " \t");
    size_t n = strcspn(line, "\n");
    snprintf(out, outsize, "%.*s", (int)n, line);
    return true;
}

#define CAP_SYS_PTRACE_BIT 19

/* Names what the kernel's ptrace access check (ptrace_may_access) most
 * likely refused on, from what /proc shows, and only what applies here. */
static void set_permission_error(pid_t pid, struct pyscope_error *err)
{
    error_set(err, PYSCOPE_ERR_PERMISSION, "permission denied reading the memory of process %d",
              (int)pid);
    char path[64], field[128], why[1024] = "";
    uid_t me = geteuid();
    bool have_cap = false;
    if (status_field("/proc/self/status", "CapEff:", field, sizeof field))
        have_cap = (strtoull(field, NULL, 16) >> CAP_SYS_PTRACE_BIT) & 1;
    long target_uid = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (status_field(path, "Uid:", field, sizeof field))
        target_uid = strtol(field, NULL, 10);
    /* A process that is not dumpable (setuid, or prctl(PR_SET_DUMPABLE, 0))
     * has its /proc files owned by root, whoever runs it. */
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    bool not_dumpable = stat(path, &st) == 0 && st.st_uid == 0 && target_uid > 0;
    if (target_uid >= 0 && (uid_t)target_uid != me)
        text_append(why, sizeof why, "  - it runs as uid %ld, pyscope as uid %ld\n", target_uid,
                    (long)me);
    if (not_dumpable)
        text_append(why, sizeof why,
                    "  - it is not dumpable (a setuid program, or prctl(PR_SET_DUMPABLE, 0)):\n"
                    "    only CAP_SYS_PTRACE may read it\n");
    char scope[16];
    if (read_small_file("/proc/sys/kernel/yama/ptrace_scope", scope, sizeof scope, NULL) == 0) {
        scope[strcspn(scope, "\n")] = '\0';
        if (strcmp(scope, "0") != 0)
            text_append(why, sizeof why,
                        "  - kernel.yama.ptrace_scope is %s: %s\n", scope,
                        strcmp(scope, "1") == 0 ? "only a parent may read its child, even as the "
                                                  "same user (lower it with: sudo sysctl "
                                                  "kernel.yama.ptrace_scope=0)"
                        : strcmp(scope, "2") == 0 ? "only CAP_SYS_PTRACE may read other processes"
                                                  : "no process may read another");
    }
    if (!have_cap)
        text_append(why, sizeof why, "  - pyscope %s CAP_SYS_PTRACE\n",
                    me == 0 ? "runs as root but without" : "does not have");
    if (!why[0])
        text_append(why, sizeof why, "  - pyscope has CAP_SYS_PTRACE; a security module "
                                     "(AppArmor, SELinux, seccomp) may deny it\n");
    char fix[512] = "";
    if (!have_cap && me != 0)
        text_append(fix, sizeof fix, "run pyscope as root, or give it CAP_SYS_PTRACE:\n"
                                     "      sudo setcap cap_sys_ptrace+ep $(command -v pyscope)\n");
    else if (!have_cap)
        text_append(fix, sizeof fix,
                    "root here lacks the capability: in a container, add it (docker run "
                    "--cap-add SYS_PTRACE,\n      or capabilities: add: [SYS_PTRACE] in a "
                    "Kubernetes securityContext)\n");
    error_hint(err,
               "pyscope needs the access a debugger needs (ptrace) to the target; in the way here:\n"
               "%s%s%s",
               why, fix[0] ? "To fix: " : "", fix);
    size_t n = strlen(err->hint);
    if (n && err->hint[n - 1] == '\n')
        err->hint[n - 1] = '\0';
}

static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Whether the program names a dynamic loader (PT_INTERP): then the
 * kernel maps that loader right after the program's own segments, inside
 * execve, and a maps listing read in between shows the program alone. */
static bool exe_wants_loader(pid_t reader)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)reader);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    Elf64_Ehdr eh;
    bool wants = false;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh &&
        memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
        eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0 && eh.e_phnum < 256) {
        for (unsigned i = 0; i < eh.e_phnum && !wants; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph)
                break;
            wants = ph.p_type == PT_INTERP;
        }
    }
    close(fd);
    return wants;
}

/* Right after exec only the program and the dynamic loader are mapped; the
 * loader then maps the libraries (libpython among them). Read then, a
 * shared-library Python looks like an executable without a runtime, and
 * earlier still, with nothing mapped, like no Python at all. */
static bool loader_at_work(const struct target *t, pid_t reader)
{
    /* The thread in a system call made from the loader's code. */
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/syscall", (int)reader);
    if (read_small_file(path, buf, sizeof buf, NULL) == 0 && buf[0] != 'r') {
        const char *last = strrchr(buf, ' ');
        uint64_t pc = last ? strtoull(last + 1, NULL, 16) : 0;
        const struct target_map *m = pc ? target_find_map(t, pc) : NULL;
        if (m && m->path && strncmp(base_of(m->path), "ld-", 3) == 0 &&
            strncmp(base_of(m->path), "ld-musl", 7) != 0)
            return true;
    }
    /* Inside execve the new program's name and executable are set before
     * its segments are mapped. */
    char exe[PATH_MAX];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)reader);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    bool exe_mapped = n <= 0;
    if (n > 0) {
        exe[n] = '\0';
        char *deleted = strstr(exe, " (deleted)");
        if (deleted)
            *deleted = '\0';
    }
    bool loader = false, libc = false;
    for (size_t i = 0; i < t->nmaps; i++) {
        const char *path = t->maps[i].path;
        if (!path)
            continue;
        exe_mapped |= n > 0 && strcmp(path, exe) == 0;
        const char *name = base_of(path);
        loader |= strncmp(name, "ld-", 3) == 0;
        /* musl's loader is its libc. */
        libc |= strncmp(name, "libc.so", 7) == 0 || strncmp(name, "libc-", 5) == 0 ||
                strncmp(name, "ld-musl", 7) == 0;
    }
    if (exe_mapped && !loader && !libc && exe_wants_loader(reader))
        return true;               /* still inside execve */
    return !exe_mapped || (loader && !libc);
}

/* How long a process that is exec'ing or starting up is waited for. */
#define STARTUP_WAIT_TRIES 100
#define STARTUP_WAIT_NS 10000000L

struct target *process_open(pid_t pid, struct pyscope_error *err)
{
    if (pid <= 0) {
        error_set(err, PYSCOPE_ERR_USAGE, "invalid process id %d", (int)pid);
        return NULL;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    struct stat st;
    pid_t reader = 0;
    /* A process in the middle of an exec can briefly fail its stat read. */
    for (int tries = 0; tries < 10 && !reader && stat(path, &st) == 0; tries++) {
        reader = process_reader_tid(pid);
        if (!reader) {
            struct timespec ts = {0, STARTUP_WAIT_NS / 2};
            nanosleep(&ts, NULL);
        }
    }
    if (reader == 0) {
        error_set(err, PYSCOPE_ERR_NO_PROCESS, "no such process %d", (int)pid);
        return NULL;
    }
    struct process_target *p = calloc(1, sizeof *p);
    if (!p) {
        error_set(err, PYSCOPE_ERR_OTHER, "out of memory");
        return NULL;
    }
    p->base.ops = &process_ops;
    p->base.pid = pid;
    p->reader = reader;
    p->mem_fd = -1;
    p->stat_fd = -1;
    snprintf(p->base.root, sizeof p->base.root, "/proc/%d/root", (int)reader);
    pid_t own_pid;
    if (process_own_tid(pid, reader, &own_pid, &p->own_pid_ns) == 0 && p->own_pid_ns)
        read_ns_tids(p);
    process_thread_comm(pid, pid, p->base.comm, sizeof p->base.comm);
    if (task_flags(pid) & KERNEL_THREAD_FLAG) {
        error_set(err, PYSCOPE_ERR_NOT_PYTHON,
                  "process %d (%s) is a kernel thread, not a Python process", (int)pid,
                  p->base.comm[0] ? p->base.comm : "?");
        target_close(&p->base);
        return NULL;
    }

    /* The maps file and a one-word read both need ptrace access: check now
     * so the user gets the permission explanation, not "not Python". */
    /* In the middle of an exec the maps are briefly empty, then hold only
     * the program and the loader: both are waited out. */
    int rc = -1, saved = 0;
    bool changing = false;
    for (int tries = 0; tries < STARTUP_WAIT_TRIES; tries++) {
        rc = process_read_maps(&p->base);
        /* ENOENT: the thread read through was reaped in the meantime. Under
         * exit_group the others follow, but may not be marked exiting yet. */
        if (rc != 0 && (errno == ESRCH || errno == ENOENT) && switch_reader(p))
            rc = process_read_maps(&p->base);
        saved = errno;
        if (rc != 0 && saved == ENOENT)
            saved = ESRCH;
        changing = rc == 0 ? loader_at_work(&p->base, p->reader) : saved == ESRCH && process_alive(pid);
        /* Stopped there on purpose (watch and run start programs stopped at
         * their exec): waiting would not change a thing. */
        char state = task_state_letter(pid, p->reader);
        if (changing && rc == 0 && (state == 't' || state == 'T'))
            changing = false;
        if (!changing)
            break;
        struct timespec ts = {0, STARTUP_WAIT_NS};
        nanosleep(&ts, NULL);
    }
    if (rc != 0 && !changing) {
        /* An earlier try may have read maps before the process went. */
        target_close(&p->base);
        if (saved == EACCES || saved == EPERM)
            set_permission_error(pid, err);
        else if (saved == ESRCH || !process_alive(pid))
            error_set(err, PYSCOPE_ERR_EXITED, "process %d exited during the dump", (int)pid);
        else
            error_set(err, PYSCOPE_ERR_OTHER, "cannot read /proc/%d/maps: %s", (int)pid,
                      strerror(saved));
        return NULL;
    }
    if (changing) {
        target_close(&p->base);
        error_set(err, PYSCOPE_ERR_OTHER,
                  "process %d is starting up: it has exec'd and its libraries are not loaded "
                  "yet; try again",
                  (int)pid);
        return NULL;
    }
    unsigned char probe[8];
    uint64_t probe_addr = p->base.maps[0].start;
    if (process_read_raw(&p->base, probe_addr, probe, sizeof probe) != 0 &&
        (errno == EPERM || errno == EACCES)) {
        target_close(&p->base);
        set_permission_error(pid, err);
        return NULL;
    }
    return &p->base;
}

int process_list_tids(pid_t pid, pid_t *tids, int max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        tids[n++] = (pid_t)atoi(e->d_name);
    }
    closedir(d);
    return n;
}

static int process_thread_run_state(pid_t pid, pid_t tid, struct thread_activity *out)
{
    char path[96], buf[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    if (read_small_file(path, buf, sizeof buf, NULL) != 0)
        return -1;
    /* The comm field may contain spaces and parentheses: the state follows
     * the last ')'. */
    const char *close_paren = strrchr(buf, ')');
    if (close_paren && close_paren[1] == ' ')
        out->run_state = close_paren[2];
    out->on_cpu = out->run_state == 'R';
    return out->run_state ? 0 : -1;
}

/* Parses the contents of /proc/PID/task/TID/syscall: "running", "-1 sp pc"
 * when stopped outside a syscall, or "nr arg1 ... arg6 sp pc". */
static void parse_syscall_file(const char *buf, struct thread_activity *out)
{
    if (strncmp(buf, "running", 7) == 0) {
        out->on_cpu = true;
        out->run_state = 'R';
        return;
    }
    char *end;
    long nr = strtol(buf, &end, 10);
    if (end == buf)
        return;
    if (nr < 0) {
        /* "-1 0x0 0x0": no user context at all, a thread that has exited
         * (a zombie main thread after pthread_exit). */
        unsigned long long sp = strtoull(end, &end, 16), pc = strtoull(end, NULL, 16);
        if (sp == 0 && pc == 0) {
            out->run_state = 'Z';
            return;
        }
        /* Stopped outside a syscall (e.g. by --pause while on CPU). */
        out->on_cpu = true;
        return;
    }
    out->syscall_nr = nr;
    out->run_state = 'S';
    const char *cursor = end;
    for (int i = 0; i < 6; i++) {
        unsigned long long v = strtoull(cursor, &end, 16);
        if (end == cursor)
            break;
        out->syscall_args[i] = v;
        cursor = end;
    }
}

int process_thread_activity(pid_t pid, pid_t tid, struct thread_activity *out)
{
    char path[96], buf[512];
    memset(out, 0, sizeof *out);
    out->syscall_nr = -1;
    /* The syscall file alone answers almost every time; stat is read only
     * when it cannot (one open per thread matters with hundreds of them). */
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return process_thread_run_state(pid, tid, out);
    /* The kernel writes the whole line in one read: no second read to see
     * the end (a dump does this for every thread). */
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return process_thread_run_state(pid, tid, out);
    buf[n] = '\0';
    parse_syscall_file(buf, out);
    return 0;
}

int process_thread_syscall_fd(pid_t pid, pid_t tid)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    return open(path, O_RDONLY | O_CLOEXEC);
}

int process_thread_activity_fd(int fd, struct thread_activity *out)
{
    char buf[256];
    memset(out, 0, sizeof *out);
    out->syscall_nr = -1;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    parse_syscall_file(buf, out);
    return 0;
}

int process_thread_cpu_ns(pid_t pid, pid_t tid, uint64_t *ns)
{
    char path[96], buf[128];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
    if (read_small_file(path, buf, sizeof buf, NULL) != 0)
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (end == buf || errno)
        return -1;
    *ns = v;
    return 0;
}

int process_thread_voluntary_switches(pid_t pid, pid_t tid, uint64_t *count)
{
    char path[96], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    if (read_small_file(path, buf, sizeof buf, NULL) != 0)
        return -1;
    const char *line = strstr(buf, "\nvoluntary_ctxt_switches:");
    if (!line)
        return -1;
    line += strlen("\nvoluntary_ctxt_switches:");
    char *end;
    errno = 0;
    unsigned long long v = strtoull(line, &end, 10);
    if (end == line || errno)
        return -1;
    *count = v;
    return 0;
}

int process_caught_signals(pid_t pid, uint64_t *mask)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (read_small_file(path, buf, sizeof buf, NULL) != 0)
        return -1;
    const char *line = strstr(buf, "\nSigCgt:");
    if (!line)
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(line + 8, &end, 16);
    if (end == line + 8 || errno)
        return -1;
    *mask = v;
    return 0;
}

int process_thread_comm(pid_t pid, pid_t tid, char *out, size_t outsize)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)pid, (int)tid);
    if (read_small_file(path, out, outsize, NULL) != 0)
        return -1;
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

int process_cmdline(pid_t pid, char *out, size_t outsize)
{
    char path[64];
    size_t len = 0;
    /* A zombie leader has no memory left to show its command line. */
    pid_t reader = process_reader_tid(pid);
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)(reader ? reader : pid));
    if (read_small_file(path, out, outsize, &len) != 0)
        return -1;
    while (len > 0 && out[len - 1] == '\0')
        len--;
    for (size_t i = 0; i < len; i++)
        if (out[i] == '\0')
            out[i] = ' ';
    out[len] = '\0';
    return 0;
}

int process_exe(pid_t pid, char *out, size_t outsize)
{
    char path[64];
    pid_t reader = process_reader_tid(pid);
    snprintf(path, sizeof path, "/proc/%d/exe", (int)(reader ? reader : pid));
    ssize_t n = readlink(path, out, outsize - 1);
    if (n < 0)
        return -1;
    out[n] = '\0';
    char *deleted = strstr(out, " (deleted)");
    if (deleted)
        *deleted = '\0';
    return 0;
}

int process_thread_stopped(pid_t pid, pid_t tid, char *state, pid_t *tracer)
{
    char path[96], buf[2048];
    *state = 0;
    *tracer = 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    if (read_small_file(path, buf, sizeof buf, NULL) != 0)
        return -1;
    const char *s = strstr(buf, "\nState:");
    const char *tp = strstr(buf, "\nTracerPid:");
    if (!s || !tp)
        return -1;
    s += strlen("\nState:");
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s == 'T' || *s == 't')
        *state = *s;
    *tracer = (pid_t)strtol(tp + strlen("\nTracerPid:"), NULL, 10);
    return 0;
}

/* The leader's own stat file (its task's: the process's sums over every
 * thread), unless it has exited (a zombie leader has no memory to
 * describe): then that of a live thread. One file in the usual case, as
 * this is the agent's exec check. */
uint64_t process_image_id(pid_t pid)
{
    char path[96], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)pid);
    if (read_small_file(path, buf, sizeof buf, NULL) != 0)
        return 0;
    if (!stat_alive(buf)) {
        pid_t reader = process_reader_tid(pid);
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)reader);
        if (!reader || read_small_file(path, buf, sizeof buf, NULL) != 0)
            return 0;
    }
    return image_id_of_stat(buf);
}

static uint64_t image_id_of_stat(const char *buf)
{
    const char *p = strrchr(buf, ')');
    /* Fields 26-28: startcode, endcode, startstack, after "pid (comm)". */
    for (int field = 2; p && field < 26; field++)
        p = strchr(p + 1, ' ');
    unsigned long long v[3];
    for (int i = 0; i < 3; i++) {
        char *end;
        if (!p || p[0] != ' ' || p[1] < '0' || p[1] > '9')
            return 0;
        errno = 0;
        v[i] = strtoull(p + 1, &end, 10);
        if (errno)
            return 0;
        p = end;
    }
    return (v[0] * 0x9e3779b97f4a7c15ull) ^ (v[1] << 1) ^ v[2];
}

void process_raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == rl.rlim_max)
        return;
    /* The kernel refuses more than fs.nr_open, whatever the hard limit says. */
    rlim_t want = rl.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_max;
    rl.rlim_cur = want;
    setrlimit(RLIMIT_NOFILE, &rl);
}

