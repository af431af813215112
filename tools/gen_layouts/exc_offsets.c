/* Prints the exception and traceback offsets that src/python/uncaught.c
 * keeps by hand, for the CPython whose headers this is compiled against:
 *   cc -DPy_BUILD_CORE -I<inc> -I<inc>/internal [-I<dir of pyconfig>] exc_offsets.c
 * Compare the output with offsets_for() and the TB_* constants there. */
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdio.h>

#if PY_MINOR_VERSION == 8
#include "pycore_pystate.h"
#else
#include "pycore_runtime.h"
#include "pycore_interp.h"
#endif
#if PY_MINOR_VERSION >= 11
#include "pycore_frame.h"
#endif

#define SHOW(label, value) printf("%-26s %ld\n", label, (long)(value))

int main(void)
{
    printf("CPython %s\n", PY_VERSION);
#if PY_MINOR_VERSION <= 11
    SHOW("tstate.curexc_type", offsetof(PyThreadState, curexc_type));
    SHOW("tstate.curexc_value", offsetof(PyThreadState, curexc_value));
    SHOW("tstate.curexc_traceback", offsetof(PyThreadState, curexc_traceback));
#else
    SHOW("tstate.current_exception", offsetof(PyThreadState, current_exception));
#endif
    SHOW("exception.args", offsetof(PyBaseExceptionObject, args));
    SHOW("exception.traceback", offsetof(PyBaseExceptionObject, traceback));
    SHOW("traceback.tb_next", offsetof(PyTracebackObject, tb_next));
    SHOW("traceback.tb_frame", offsetof(PyTracebackObject, tb_frame));
    SHOW("traceback.tb_lasti", offsetof(PyTracebackObject, tb_lasti));
    SHOW("traceback.tb_lineno", offsetof(PyTracebackObject, tb_lineno));
#if PY_MINOR_VERSION >= 11
    SHOW("frame.f_frame", offsetof(PyFrameObject, f_frame));
#endif
    return 0;
}
