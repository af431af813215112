/* Which signals have a Python-level handler in a target: read from the
 * signal module's handler table (Handlers[] in signalmodule.c up to 3.11,
 * _PyRuntime.signals.handlers from 3.12). Only such a handler can run
 * Python code when the signal arrives. */
#ifndef PYSCOPE_PYTHON_SIGNAL_HANDLERS_H
#define PYSCOPE_PYTHON_SIGNAL_HANDLERS_H

#include <stdbool.h>
#include <stdint.h>
#include "python/runtime.h"

struct py_signal_handlers {
    bool known;                 /* the table was found and read */
    uint64_t python;            /* bit n-1: signal n has a Python callable as handler
                                   (SIGINT's default_int_handler excluded: it only raises;
                                   so is asyncio.run's, which cancels the main task) */
    char source[96];            /* where the table was read, or why it could not be */
};

/* Fills out; never fails (out->known says whether the table was read). */
void py_signal_handlers_read(struct py_runtime *rt, struct py_signal_handlers *out);

#endif
