/* Stopping every thread of a process for an exact snapshot (dump --pause),
 * and always letting it go again. */
#ifndef PYSCOPE_TARGET_PAUSE_H
#define PYSCOPE_TARGET_PAUSE_H

#include <sys/types.h>
#include "util/error.h"

/* Seizes and interrupts every thread, including ones started meanwhile.
 * Installs the cleanup handlers, so that every terminating signal still
 * detaches (target/cleanup.h). */
int process_pause(pid_t pid, struct pyscope_error *err);
/* Detaches from every seized thread; safe to call twice. */
void process_resume(void);

#endif
