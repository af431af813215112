/* Writers of the asyncio task view: per loop, its tasks with their await
 * chains, then the tree of who awaits whom, cycles marked. */
#include "output/task_writers.h"

#include <math.h>
#include <stdlib.h>
#include "output/json_writer.h"
#include "report/stack_report.h"

/* Per task, whether another task awaits it: a tree starts at the others. */
static unsigned char *awaited_flags(const struct report_loop *loop)
{
    unsigned char *awaited = calloc(loop->n_tasks ? loop->n_tasks : 1, 1);
    if (!awaited)
        return NULL;
    for (size_t i = 0; i < loop->n_tasks; i++)
        for (size_t k = 0; k < loop->tasks[i].n_children; k++)
            if (loop->tasks[i].children[k] != i && loop->tasks[i].children[k] < loop->n_tasks)
                awaited[loop->tasks[i].children[k]] = 1;
    return awaited;
}

/* depth bounds the tree of a cycle, which has no root of its own. */
static void write_tree(FILE *out, const struct report_loop *loop, size_t index, int depth,
                       unsigned char *on_path)
{
    const struct report_task *t = &loop->tasks[index];
    fprintf(out, "      %*s%s\"%s\"", depth * 2, "", depth ? "└ " : "", t->name);
    if (on_path[index]) {
        fprintf(out, "  (cycle: awaits itself)\n");
        return;
    }
    fputc('\n', out);
    if (depth >= 64)
        return;
    on_path[index] = 1;
    for (size_t k = 0; k < t->n_children; k++)
        write_tree(out, loop, t->children[k], depth + 1, on_path);
    on_path[index] = 0;
}

/* The callback the loop is inside, and for how long (see report_loop). */
static void write_callback_text(FILE *out, const struct report_loop *loop)
{
    if (loop->step != LOOP_STEP_CALLBACK)
        return;
    const struct report_task *task = NULL;
    for (size_t i = 0; i < loop->n_tasks && !task; i++)
        if (loop->tasks[i].running)
            task = &loop->tasks[i];
    fprintf(out, "    in ");
    if (loop->callback_index)
        fprintf(out, "callback %ld of %ld of its iteration", loop->callback_index,
                loop->callback_count);
    else
        fprintf(out, "a callback");
    if (task)
        fprintf(out, ", a step of task \"%s\"", task->name);
    else if (loop->callback[0])
        fprintf(out, ", %s", loop->callback);
    if (loop->callback_s >= 0 && loop->callback_exact)
        fprintf(out, ": running for %.3f s\n", loop->callback_s);
    else if (loop->callback_s >= 0)
        fprintf(out, ": running for at most %.3f s (the loop left its selector then; the "
                "callbacks before it ran in that time too)\n", loop->callback_s);
    else if (!isnan(loop->left_selector))
        fprintf(out, ": the loop left its selector at %.3f s of its clock\n",
                loop->left_selector);
    else
        fputc('\n', out);
}

static void write_loop_text(FILE *out, const struct report_loop *loop, bool truncated)
{
    fprintf(out, "    asyncio loop 0x%llx: %zu task%s%s\n", (unsigned long long)loop->addr,
            loop->n_tasks + loop->n_hidden, loop->n_tasks + loop->n_hidden == 1 ? "" : "s",
            truncated ? " read, and more than the walk reads" : "");
    write_callback_text(out, loop);
    bool edges = false;
    for (size_t i = 0; i < loop->n_tasks; i++) {
        const struct report_task *t = &loop->tasks[i];
        fprintf(out, "      Task \"%s\" (0x%llx)%s%s", t->name, (unsigned long long)t->addr,
                t->running ? "  running" : "",
                t->state[0] == 'p' ? "" : t->state[0] == 'c' ? "  cancelled" : "  finished");
        if (t->awaits[0])
            fprintf(out, "  awaiting %s", t->awaits);
        if (t->orphan && t->wait_obj == t->awaits_addr)
            fprintf(out, "; nothing else refers to it, so it can never complete");
        else if (t->orphan)
            fprintf(out, "; nothing else refers to the %s (0x%llx), so it can never complete",
                    t->wait_obj_type, (unsigned long long)t->wait_obj);
        if (t->held_by)
            fprintf(out, "; %s", t->held_by);
        if (t->unretrieved[0])
            fprintf(out, "  with %s, never retrieved", t->unretrieved);
        fputc('\n', out);
        for (size_t k = 0; k < t->n_chain; k++) {
            const struct task_link *c = &t->chain[k];
            if (c->line >= 0)
                fprintf(out, "          %s (%s:%d)\n", c->function,
                        stack_report_short_path(c->file), c->line);
            else
                fprintf(out, "          %s (%s)\n", c->function, stack_report_short_path(c->file));
        }
        if (!t->chain_complete)
            fprintf(out, "          <await chain incomplete>\n");
        edges = edges || t->n_children;
    }
    if (loop->n_hidden)
        fprintf(out, "      ... and %zu more task%s not shown (--max-tasks)\n", loop->n_hidden,
                loop->n_hidden == 1 ? "" : "s");
    if (!edges)
        return;
    fprintf(out, "    task tree (awaiter above what it awaits):\n");
    unsigned char *on_path = calloc(loop->n_tasks ? loop->n_tasks : 1, 1);
    unsigned char *awaited = awaited_flags(loop);
    if (!on_path || !awaited) {
        free(on_path);
        free(awaited);
        return;
    }
    for (size_t i = 0; i < loop->n_tasks; i++)
        if (loop->tasks[i].n_children && !awaited[i])
            write_tree(out, loop, i, 0, on_path);
    for (size_t i = 0; i < loop->n_tasks; i++)
        if (loop->tasks[i].in_cycle) {
            /* A cycle has no root: start it at its first member. */
            if (awaited[i])
                write_tree(out, loop, i, 0, on_path);
            break;
        }
    free(on_path);
    free(awaited);
}

void task_report_write_thread_text(FILE *out, const struct report_tasks *tasks, pid_t tid)
{
    if (!tasks || !tid)
        return;
    for (size_t l = 0; l < tasks->n_loops; l++)
        if (tasks->loops[l].tid == tid)
            write_loop_text(out, &tasks->loops[l], tasks->truncated);
}

void task_report_write_rest_text(FILE *out, const struct report_tasks *tasks)
{
    if (!tasks)
        return;
    bool header = false;
    for (size_t l = 0; l < tasks->n_loops; l++) {
        if (tasks->loops[l].tid)
            continue;
        if (!header)
            fprintf(out, "\nasyncio loops no thread is running:\n");
        header = true;
        write_loop_text(out, &tasks->loops[l], tasks->truncated);
    }
    if (tasks->truncated)
        fprintf(out, "\nasyncio: more tasks than the walk reads (%zu): the rest were not read\n",
                tasks->walk_max);
    if (tasks->done_seen == TASKS_DONE_REACHABLE && !tasks->error[0])
        fprintf(out, "\nasyncio: this Python keeps finished tasks on no list: those shown were "
                "reached from __main__'s globals, the loops' handles and the frames of tasks "
                "and threads%s; others whose exception was never retrieved may exist\n",
                tasks->done_partial ? " (a bound cut that walk short)" : "");
    if (tasks->error[0])
        fprintf(out, "\nasyncio tasks: %s\n", tasks->error);
}

void task_report_write_json(struct json_writer *w, const struct report_tasks *tasks)
{
    json_key(w, "asyncio");
    if (!tasks) {
        json_null(w);
        return;
    }
    json_begin_object(w);
    json_member_string(w, "tasks", tasks->mode == TASKS_ALL ? "all" : "pending");
    json_member_bool(w, "truncated", tasks->truncated);
    json_member_uint(w, "walk_max", tasks->walk_max);
    /* "reachable": finished tasks are on no list (3.14+), only those a walk
     * from the roots met are shown */
    json_member_string(w, "finished_tasks",
                       tasks->done_seen == TASKS_DONE_REACHABLE ? "reachable" : "all");
    json_member_bool(w, "finished_tasks_walk_partial", tasks->done_partial);
    if (tasks->error[0])
        json_member_string(w, "error", tasks->error);
    else
        json_member_null(w, "error");
    if (tasks->offsets[0])
        json_member_string(w, "offsets", tasks->offsets);
    else
        json_member_null(w, "offsets");
    json_key(w, "loops");
    json_begin_array(w);
    for (size_t l = 0; l < tasks->n_loops; l++) {
        const struct report_loop *loop = &tasks->loops[l];
        json_begin_object(w);
        json_member_uint(w, "address", loop->addr);
        if (loop->tid)
            json_member_int(w, "tid", loop->tid);
        else
            json_member_null(w, "tid");
        json_member_uint(w, "tasks_not_shown", loop->n_hidden);
        static const char *const steps[] = {NULL, "selector", "callback", "other"};
        if (steps[loop->step])
            json_member_string(w, "in", steps[loop->step]);
        else
            json_member_null(w, "in");
        json_key(w, "callback");
        if (loop->step == LOOP_STEP_CALLBACK) {
            json_begin_object(w);
            if (loop->callback[0])
                json_member_string(w, "function", loop->callback);
            else
                json_member_null(w, "function");
            if (loop->callback_index) {
                json_member_int(w, "index", loop->callback_index);
                json_member_int(w, "of", loop->callback_count);
            } else {
                json_member_null(w, "index");
                json_member_null(w, "of");
            }
            json_key(w, "left_selector_at");
            json_double(w, loop->left_selector);       /* NAN: null */
            json_key(w, "running_s");
            json_double(w, loop->callback_s >= 0 ? loop->callback_s : NAN);
            json_member_bool(w, "exact", loop->callback_exact);
            json_end_object(w);
        } else {
            json_null(w);
        }
        json_key(w, "tasks");
        json_begin_array(w);
        for (size_t i = 0; i < loop->n_tasks; i++) {
            const struct report_task *t = &loop->tasks[i];
            json_begin_object(w);
            json_member_uint(w, "address", t->addr);
            json_member_string(w, "name", t->name);
            json_member_string(w, "state", t->state);
            json_member_bool(w, "running", t->running);
            json_key(w, "awaiting");
            if (t->awaits[0]) {
                json_begin_object(w);
                json_member_string(w, "description", t->awaits);
                json_member_uint(w, "address", t->awaits_addr);
                json_member_bool(w, "unreachable", t->orphan);
                json_key(w, "object");
                if (t->wait_obj) {
                    json_begin_object(w);
                    json_member_uint(w, "address", t->wait_obj);
                    json_member_string(w, "type", t->wait_obj_type);
                    json_end_object(w);
                } else {
                    json_null(w);
                }
                json_key(w, "held_by");
                if (t->held_by)
                    json_string(w, t->held_by);
                else
                    json_null(w);
                json_end_object(w);
            } else {
                json_null(w);
            }
            json_key(w, "chain");
            json_begin_array(w);
            for (size_t k = 0; k < t->n_chain; k++) {
                json_begin_object(w);
                json_member_string(w, "function", t->chain[k].function);
                json_member_string(w, "file", t->chain[k].file);
                json_member_int(w, "line", t->chain[k].line);
                json_member_string(w, "kind", t->chain[k].kind);
                json_end_object(w);
            }
            json_end_array(w);
            json_member_bool(w, "chain_complete", t->chain_complete);
            json_key(w, "awaits_tasks");
            json_begin_array(w);
            for (size_t k = 0; k < t->n_children; k++)
                json_uint(w, loop->tasks[t->children[k]].addr);
            json_end_array(w);
            json_member_bool(w, "in_cycle", t->in_cycle);
            if (t->unretrieved[0])
                json_member_string(w, "exception_never_retrieved", t->unretrieved);
            else
                json_member_null(w, "exception_never_retrieved");
            json_end_object(w);
        }
        json_end_array(w);
        json_end_object(w);
    }
    json_end_array(w);
    json_end_object(w);
}
