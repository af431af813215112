/* Writers of why's report: the verdict, its findings and each thread's
 * wait as text, or as one JSON document (docs/json.md). */
#ifndef PYSCOPE_OUTPUT_WHY_WRITERS_H
#define PYSCOPE_OUTPUT_WHY_WRITERS_H

#include <stdbool.h>
#include <stdio.h>

#include "report/why_report.h"

void why_report_write_text(FILE *out, const struct why_report *why, bool color);
void why_report_write_json(FILE *out, const struct why_report *why);

#endif
