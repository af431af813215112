/* why's report: the names of its verdicts, grades and liveness reasons, and
 * what it owns. */
#include "report/why_report.h"

#include <stdlib.h>

const char *why_verdict_name(enum why_verdict verdict)
{
    switch (verdict) {
    case WHY_NOT_HUNG: return "not_hung";
    case WHY_IDLE: return "idle";
    case WHY_UNCHECKED: return "unchecked";
    case WHY_DEADLOCK: return "deadlock";
    case WHY_GIL_BLOCKED: return "gil_held_while_blocked";
    case WHY_LOCK_NEVER_RELEASED: return "lock_never_released";
    case WHY_QUEUE_STARVED: return "queue_starved";
    case WHY_NEVER_NOTIFIED: return "never_notified";
    case WHY_NETWORK_WAIT: return "network_wait";
    case WHY_STOPPED: return "stopped";
    case WHY_GIL_HOG: return "gil_hog";
    case WHY_LOOP_BLOCKED: return "loop_blocked";
    }
    return "?";
}

const char *why_grade_name(enum why_grade grade)
{
    switch (grade) {
    case WHY_GRADE_CERTAIN: return "certain";
    case WHY_GRADE_PROBABLE: return "probable";
    case WHY_GRADE_NONE: break;
    }
    return NULL;
}

const char *why_live_text(enum why_live reason)
{
    switch (reason) {
    case WHY_LIVE_BLOCKED: return "blocked without timeout";
    case WHY_LIVE_CHANGED: return "moved between the snapshots";
    case WHY_LIVE_RUNS: return "runs or wants the GIL";
    case WHY_LIVE_OUTSIDE: return "waits for something outside the process";
    case WHY_LIVE_SIGNAL: return "main thread, and a signal with a Python handler can run code in it";
    case WHY_LIVE_UNTIED: return "its wait is not tied to an object pyscope can follow";
    case WHY_LIVE_SLEEPS: return "only sleeps";
    case WHY_LIVE_TIMEOUT: return "only waits or polls with a timeout";
    case WHY_LIVE_STOPPED: return "stopped";
    }
    return "?";
}

void why_report_free(struct why_report *why)
{
    free(why->threads);
    free(why->findings);
    why->threads = NULL;
    why->findings = NULL;
    why->n_findings = 0;
}
