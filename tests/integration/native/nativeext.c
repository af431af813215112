/* A C extension for the --native tests: pyscope_nativeext.call(f) calls f
 * from C, so a C frame sits between two Python frames. Built by the tests
 * against each interpreter's headers, at -O0 so the frame is not a tail call. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

__attribute__((noinline)) static PyObject *nativeext_call(PyObject *self, PyObject *callable)
{
    (void)self;
    PyObject *result = PyObject_CallObject(callable, NULL);
    __asm__ volatile("" ::: "memory");
    return result;
}

static PyMethodDef methods[] = {
    {"call", nativeext_call, METH_O, "call f() from C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyscope_nativeext", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_pyscope_nativeext(void)
{
    return PyModule_Create(&module);
}
