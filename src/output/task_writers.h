/* Writers of the asyncio task view: text under the loop's thread and for
 * the loops nobody runs, and the "asyncio" member of dump's JSON. */
#ifndef PYSCOPE_OUTPUT_TASK_WRITERS_H
#define PYSCOPE_OUTPUT_TASK_WRITERS_H

#include <stdio.h>
#include <sys/types.h>

#include "report/task_report.h"

struct json_writer;

/* The loops run by thread tid (text, indented under the thread). */
void task_report_write_thread_text(FILE *out, const struct report_tasks *tasks, pid_t tid);
/* Loops no live thread runs, and a note on what could not be read. */
void task_report_write_rest_text(FILE *out, const struct report_tasks *tasks);
void task_report_write_json(struct json_writer *w, const struct report_tasks *tasks);

#endif
