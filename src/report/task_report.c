/* What an asyncio task report owns. */
#include "report/task_report.h"

#include <stdlib.h>

void task_report_free(struct report_tasks *tasks)
{
    if (!tasks)
        return;
    for (size_t l = 0; l < tasks->n_loops; l++) {
        struct report_loop *loop = &tasks->loops[l];
        for (size_t i = 0; i < loop->n_tasks; i++) {
            struct report_task *t = &loop->tasks[i];
            for (size_t k = 0; k < t->n_chain; k++) {
                free(t->chain[k].function);
                free(t->chain[k].file);
            }
            free(t->chain);
            free(t->children);
            free(t->held_by);
        }
        free(loop->tasks);
    }
    free(tasks->loops);
    free(tasks);
}
