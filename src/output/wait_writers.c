/* The "waiting for" line of the text output and the "waiting_for" object
 * of --json (docs/json.md), shared by dump and why. */
#include "output/wait_writers.h"

#include <stdio.h>
#include <string.h>

#include "output/json_writer.h"
#include "report/stack_report.h"
#include "util/text.h"

static const struct report_thread *thread_at(const struct stack_report *report, int index)
{
    if (index < 0 || (size_t)index >= report->n_threads)
        return NULL;
    return &report->threads[index];
}

/* Seconds as people read them: "0.25 s", "12 s", "3600 s". */
static void append_seconds(char *out, size_t size, const char *before, double seconds)
{
    if (seconds < 10)
        text_append(out, size, "%s%.2f s", before, seconds);
    else
        text_append(out, size, "%s%.0f s", before, seconds);
}

static void append_timeout(char *out, size_t size, const struct report_wait *w)
{
    if (w->timeout == WAIT_TIMEOUT_NONE)
        text_append(out, size, ", no timeout");
    else if (w->timeout == WAIT_TIMEOUT_SET && w->timeout_seconds >= 0)
        append_seconds(out, size, ", timeout ", w->timeout_seconds);
    else if (w->timeout == WAIT_TIMEOUT_SET)
        text_append(out, size, ", with a timeout");
}

static void append_owner(char *out, size_t size, const struct stack_report *report,
                         const struct report_wait *w)
{
    const struct report_thread *owner = thread_at(report, w->owner);
    switch (w->owner_status) {
    case WAIT_OWNER_ALIVE:
        text_append(out, size, ", held by ");
        if (owner)
            stack_report_append_thread(out, size, owner);
        if (w->owner_source == WAIT_OWNER_SOURCE_WITH)
            text_append(out, size, " (inside a with block)");
        break;
    case WAIT_OWNER_GONE:
        text_append(out, size, ", held by thread ident 0x%llx, which no longer exists",
                    (unsigned long long)w->owner_ident);
        break;
    case WAIT_OWNER_UNKNOWN:
        text_append(out, size, ", locked, no live thread is known to hold it");
        break;
    case WAIT_OWNER_FREE:
        text_append(out, size, ", just released");
        break;
    case WAIT_OWNER_NOT_APPLICABLE:
        break;
    }
}

static void describe_socket(char *out, size_t size, const struct report_thread *th,
                            const struct report_wait *w)
{
    const struct wait_socket *s = &w->socket;
    text_append(out, size, "socket fd %d", s->fd);
    if (s->found) {
        text_append(out, size, " %s %s", s->protocol, s->local[0] ? s->local : "(unnamed)");
        if (s->remote[0])
            text_append(out, size, " -> %s", s->remote);
        text_append(out, size, " %s", s->state);
    }
    if (w->syscall)
        text_append(out, size, " (%s)", w->syscall);
    append_timeout(out, size, w);
    if (s->reference[0]) {
        text_append(out, size, "; %s", s->reference);
        if (s->reference_frame >= 0 && (size_t)s->reference_frame < th->n_frames)
            text_append(out, size, " in %s", th->frames[s->reference_frame].function);
    }
}

void wait_describe(const struct stack_report *report, const struct report_thread *th, char *out,
                   size_t size)
{
    const struct report_wait *w = th->wait;
    out[0] = '\0';
    if (!w)
        return;
    switch (w->kind) {
    case WAIT_NONE:
        break;
    case WAIT_GIL: {
        const struct report_thread *holder = thread_at(report, w->gil_holder);
        text_append(out, size, "the GIL");
        if (holder) {
            text_append(out, size, ", held by ");
            stack_report_append_thread(out, size, holder);
            if (holder->n_frames) {
                const char *file = holder->frames[0].file;
                const char *slash = strrchr(file, '/');
                text_append(out, size, " in %s (%s:%d)", holder->frames[0].function,
                            slash ? slash + 1 : file, holder->frames[0].line);
            }
        } else {
            text_append(out, size, " (free at this instant)");
        }
        break;
    }
    case WAIT_LOCK:
    case WAIT_NOTIFY:
    case WAIT_JOIN:
        text_append(out, size, "%s.%s on ", w->object_type, w->operation);
        if (w->reference[0]) {
            text_append(out, size, "%s (0x%llx", w->reference, (unsigned long long)w->object);
            if (w->reference_frame >= 0 && (size_t)w->reference_frame < th->n_frames)
                text_append(out, size, ", in %s", th->frames[w->reference_frame].function);
            text_append(out, size, ")");
        } else {
            text_append(out, size, "0x%llx", (unsigned long long)w->object);
        }
        if (w->kind == WAIT_LOCK)
            append_owner(out, size, report, w);
        if (w->kind == WAIT_JOIN) {
            const struct report_thread *target = thread_at(report, w->join_target);
            text_append(out, size, ", until ");
            if (target)
                stack_report_append_thread(out, size, target);
            else
                text_append(out, size, "thread ident 0x%llx", (unsigned long long)w->join_ident);
            text_append(out, size, " finishes");
        }
        if (w->queue_length >= 0)
            text_append(out, size, ", %lld item%s queued", (long long)w->queue_length,
                        w->queue_length == 1 ? "" : "s");
        append_timeout(out, size, w);
        if (w->waiters > 1)
            text_append(out, size, "; %d threads wait on it", w->waiters);
        break;
    case WAIT_SOCKET:
        describe_socket(out, size, th, w);
        break;
    case WAIT_SELECT:
        text_append(out, size, "%s on", w->syscall ? w->syscall : "select");
        if (w->total_fds < 0)
            text_append(out, size, " unknown fds");
        else if (w->total_fds == 0)
            text_append(out, size, " no fds");
        for (int i = 0; i < w->n_fds; i++)
            text_append(out, size, "%s fd %d (%s)", i ? "," : "", w->fds[i].fd, w->fds[i].what);
        if (w->total_fds > w->n_fds)
            text_append(out, size, " and %d more", w->total_fds - w->n_fds);
        append_timeout(out, size, w);
        break;
    case WAIT_SLEEP:
        text_append(out, size, "time.sleep");
        if (w->sleep_seconds >= 0 && w->sleep_upper_bound)
            append_seconds(out, size, " of at most ", w->sleep_seconds);
        else if (w->sleep_seconds >= 0)
            append_seconds(out, size, ", left: ", w->sleep_seconds);
        break;
    case WAIT_CHILD:
        if (w->child > 0 && w->child_command[0])
            text_append(out, size, "child process %d (%s) to exit", (int)w->child, w->child_command);
        else if (w->child > 0)
            text_append(out, size, "child process %d to exit", (int)w->child);
        else
            text_append(out, size, "any child process to exit");
        break;
    case WAIT_IO:
        if (w->io_target[0])
            text_append(out, size, "%s on fd %d (%s)", w->syscall ? w->syscall : "I/O", w->io_fd,
                        w->io_target);
        else
            text_append(out, size, "%s", w->syscall ? w->syscall : "I/O");
        if (w->uninterruptible)
            text_append(out, size, ", in uninterruptible sleep (D state)");
        break;
    case WAIT_FUTEX:
        text_append(out, size, "a native lock (futex) not tied to any Python lock pyscope could find");
        append_timeout(out, size, w);
        break;
    case WAIT_SYSCALL:
        text_append(out, size, "syscall %s", w->syscall ? w->syscall : "?");
        break;
    }
    if (w->n_owner_attrs) {
        text_append(out, size, "; %s:", w->owner_type);
        for (int k = 0; k < w->n_owner_attrs; k++)
            text_append(out, size, "%s %s=%s", k ? "," : "", w->owner_attr_names[k],
                        w->owner_attr_reprs[k]);
    }
    if (w->kind != WAIT_NONE && w->kind != WAIT_GIL && w->waited_ms >= 0) {
        text_append(out, size, "; waiting %s", w->waited_at_least ? "at least " : "");
        if (w->waited_ms < 1000)
            text_append(out, size, "%.0f ms", w->waited_ms);
        else
            text_append(out, size, "%.1f s", w->waited_ms / 1000);
    }
}

static void member_thread_ref(struct json_writer *jw, const char *key, const struct report_thread *th)
{
    json_key(jw, key);
    if (!th) {
        json_null(jw);
        return;
    }
    json_begin_object(jw);
    if (th->tid)
        json_member_int(jw, "tid", th->tid);
    else
        json_member_null(jw, "tid");
    json_member_uint(jw, "thread_id", th->thread_id);
    json_member_string(jw, "name", th->name[0] ? th->name : NULL);
    json_end_object(jw);
}

static void member_reference(struct json_writer *jw, const struct report_thread *th,
                             const char *reference, int frame)
{
    json_member_string(jw, "reference", reference[0] ? reference : NULL);
    if (reference[0] && frame >= 0 && (size_t)frame < th->n_frames) {
        json_member_string(jw, "reference_function", th->frames[frame].function);
        json_member_int(jw, "reference_frame", frame);
    } else {
        json_member_null(jw, "reference_function");
        json_member_null(jw, "reference_frame");
    }
}

static const char *owner_status_name(enum wait_owner_status status)
{
    switch (status) {
    case WAIT_OWNER_UNKNOWN: return "unknown";
    case WAIT_OWNER_ALIVE: return "alive";
    case WAIT_OWNER_GONE: return "gone";
    case WAIT_OWNER_FREE: return "free";
    case WAIT_OWNER_NOT_APPLICABLE: break;
    }
    return NULL;
}

static void write_sync(struct json_writer *jw, const struct stack_report *report,
                       const struct report_thread *th, const struct report_wait *w)
{
    bool sync = w->kind == WAIT_LOCK || w->kind == WAIT_NOTIFY || w->kind == WAIT_JOIN;
    json_key(jw, "object");
    if (sync && w->object) {
        json_begin_object(jw);
        json_member_string(jw, "type", w->object_type);
        json_member_uint(jw, "address", w->object);
        member_reference(jw, th, w->reference, w->reference_frame);
        json_end_object(jw);
    } else {
        json_null(jw);
    }
    json_member_string(jw, "operation", sync ? w->operation : NULL);
    json_key(jw, "lock");
    if (w->lock && (w->kind == WAIT_LOCK || w->kind == WAIT_NOTIFY || w->kind == WAIT_JOIN)) {
        json_begin_object(jw);
        json_member_uint(jw, "address", w->lock);
        json_member_string(jw, "type", w->lock_recursive ? "RLock" : "Lock");
        if (w->lock_locked < 0)
            json_member_null(jw, "locked");
        else
            json_member_bool(jw, "locked", w->lock_locked == 1);
        json_end_object(jw);
    } else {
        json_null(jw);
    }
    json_key(jw, "owner");
    if (w->kind == WAIT_LOCK && w->owner_status != WAIT_OWNER_NOT_APPLICABLE) {
        const struct report_thread *owner = thread_at(report, w->owner);
        json_begin_object(jw);
        json_member_string(jw, "status", owner_status_name(w->owner_status));
        json_member_string(jw, "source", w->owner_source == WAIT_OWNER_SOURCE_RECORDED ? "recorded"
                                         : w->owner_source == WAIT_OWNER_SOURCE_WITH   ? "with_block"
                                                                                       : NULL);
        if (owner && owner->tid)
            json_member_int(jw, "tid", owner->tid);
        else
            json_member_null(jw, "tid");
        if (w->owner_ident)
            json_member_uint(jw, "thread_id", w->owner_ident);
        else
            json_member_null(jw, "thread_id");
        json_member_string(jw, "name", owner && owner->name[0] ? owner->name : NULL);
        json_end_object(jw);
    } else {
        json_null(jw);
    }
    if (sync)
        json_member_int(jw, "waiters", w->waiters);
    else
        json_member_null(jw, "waiters");
    if (w->queue_length >= 0)
        json_member_int(jw, "queue_length", w->queue_length);
    else
        json_member_null(jw, "queue_length");
    member_thread_ref(jw, "join", w->kind == WAIT_JOIN ? thread_at(report, w->join_target) : NULL);
}

void wait_write_json(struct json_writer *jw, const struct stack_report *report,
                     const struct report_thread *th)
{
    const struct report_wait *w = th->wait;
    json_key(jw, "waiting_for");
    if (!w || w->kind == WAIT_NONE) {
        json_null(jw);
        return;
    }
    char text[1024];
    wait_describe(report, th, text, sizeof text);
    json_begin_object(jw);
    json_member_string(jw, "kind", wait_kind_name(w->kind));
    json_member_string(jw, "description", text);
    json_member_string(jw, "syscall", w->syscall);
    if (w->timeout == WAIT_TIMEOUT_UNKNOWN)
        json_member_null(jw, "forever");
    else
        json_member_bool(jw, "forever", w->timeout == WAIT_TIMEOUT_NONE);
    json_key(jw, "timeout_seconds");
    if (w->timeout == WAIT_TIMEOUT_SET && w->timeout_seconds >= 0)
        json_double(jw, w->timeout_seconds);
    else
        json_null(jw);
    json_key(jw, "waiting_seconds");
    if (w->kind != WAIT_GIL && w->waited_ms >= 0)
        json_double(jw, w->waited_ms / 1000);
    else
        json_null(jw);
    json_member_bool(jw, "waiting_at_least", w->waited_ms >= 0 && w->waited_at_least);
    json_key(jw, "owner_state");
    if (w->n_owner_attrs) {
        json_begin_object(jw);
        json_member_string(jw, "type", w->owner_type);
        json_member_uint(jw, "address", w->owner_object);
        json_key(jw, "attributes");
        json_begin_object(jw);
        for (int k = 0; k < w->n_owner_attrs; k++)
            json_member_string(jw, w->owner_attr_names[k], w->owner_attr_reprs[k]);
        json_end_object(jw);
        json_end_object(jw);
    } else {
        json_null(jw);
    }
    member_thread_ref(jw, "gil_holder", w->kind == WAIT_GIL ? thread_at(report, w->gil_holder) : NULL);
    write_sync(jw, report, th, w);

    json_key(jw, "socket");
    if (w->kind == WAIT_SOCKET) {
        const struct wait_socket *s = &w->socket;
        json_begin_object(jw);
        json_member_int(jw, "fd", s->fd);
        json_member_string(jw, "protocol", s->found ? s->protocol : NULL);
        json_member_string(jw, "local", s->found && s->local[0] ? s->local : NULL);
        json_member_string(jw, "remote", s->found && s->remote[0] ? s->remote : NULL);
        json_member_string(jw, "state", s->found ? s->state : NULL);
        if (s->found)
            json_member_uint(jw, "rx_queue", s->rx_queue);
        else
            json_member_null(jw, "rx_queue");
        bool tcp = s->found && strncmp(s->protocol, "tcp", 3) == 0 && s->remote[0];
        json_member_string(jw, "direction", !tcp ? NULL : s->accepted ? "incoming" : "outgoing");
        if (s->object)
            json_member_uint(jw, "object", s->object);
        else
            json_member_null(jw, "object");
        member_reference(jw, th, s->reference, s->reference_frame);
        json_end_object(jw);
    } else {
        json_null(jw);
    }
    json_key(jw, "fds");
    if (w->kind == WAIT_SELECT && w->total_fds >= 0) {
        json_begin_array(jw);
        for (int i = 0; i < w->n_fds; i++) {
            json_begin_object(jw);
            json_member_int(jw, "fd", w->fds[i].fd);
            json_member_string(jw, "description", w->fds[i].what);
            json_end_object(jw);
        }
        json_end_array(jw);
    } else {
        json_null(jw);
    }
    json_key(jw, "sleep_seconds");
    if (w->kind == WAIT_SLEEP && w->sleep_seconds >= 0)
        json_double(jw, w->sleep_seconds);
    else
        json_null(jw);
    json_key(jw, "child_pid");
    if (w->kind == WAIT_CHILD && w->child > 0)
        json_int(jw, w->child);
    else
        json_null(jw);
    json_key(jw, "io");
    if (w->kind == WAIT_IO) {
        json_begin_object(jw);
        if (w->io_fd >= 0)
            json_member_int(jw, "fd", w->io_fd);
        else
            json_member_null(jw, "fd");
        json_member_string(jw, "target", w->io_target[0] ? w->io_target : NULL);
        json_member_bool(jw, "uninterruptible", w->uninterruptible);
        json_end_object(jw);
    } else {
        json_null(jw);
    }
    json_end_object(jw);
}

void wait_stopped_describe(const struct stack_report *report, const struct report_thread *th,
                           char *out, size_t size)
{
    out[0] = '\0';
    if (!th->stopped)
        return;
    if (th->tracer) {
        text_format(out, size, "stopped by its tracer, process %d", (int)th->tracer);
        if (report->tracer == th->tracer && report->tracer_comm[0])
            text_append(out, size, " (%s)", report->tracer_comm);
    } else {
        text_format(out, size, "stopped by a signal (SIGSTOP, SIGTSTP, ...)");
    }
}

void wait_write_stopped_json(struct json_writer *w, const struct stack_report *report,
                             const struct report_thread *th)
{
    json_key(w, "stopped");
    if (!th->stopped) {
        json_null(w);
        return;
    }
    char resume[64];
    json_begin_object(w);
    json_member_string(w, "by", th->tracer ? "tracer" : "signal");
    if (th->tracer)
        json_member_int(w, "tracer_pid", th->tracer);
    else
        json_member_null(w, "tracer_pid");
    json_member_string(w, "tracer_command",
                       th->tracer && report->tracer == th->tracer && report->tracer_comm[0]
                           ? report->tracer_comm : NULL);
    if (th->tracer)
        text_format(resume, sizeof resume, "detach the debugger (process %d)", (int)th->tracer);
    else
        text_format(resume, sizeof resume, "kill -CONT %d", (int)report->pid);
    json_member_string(w, "resume", resume);
    json_end_object(w);
}
