/* Writers of a stack report (dump, run's and watch's reports): text
 * (dump_text.c) and JSON (dump_json.c, docs/json.md). */
#ifndef PYSCOPE_OUTPUT_DUMP_WRITERS_H
#define PYSCOPE_OUTPUT_DUMP_WRITERS_H

#include <stdbool.h>
#include <stdio.h>

#include "report/stack_report.h"

void stack_report_write_text(FILE *out, const struct stack_report *report, bool color);
void stack_report_write_json(FILE *out, const struct stack_report *report);
/* indent 0: the whole report on one line (one report per line). */
void stack_report_write_json_indent(FILE *out, const struct stack_report *report, int indent);

#endif
