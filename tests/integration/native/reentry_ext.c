/* The pool's append written in C, as an extension module (pyscope_reentry)
 * built against each interpreter's headers by the watch tests:
 * pyscope_pool_append allocates a set, which may start the collector (at
 * once up to 3.11), then inserts through the pool's Python method, where
 * 3.12+ run a pending collection; a finalizer can so re-enter the C
 * function on the same thread. Built at -O0 -g so frames are exact. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

__attribute__((noinline)) PyObject *pyscope_pool_append(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *pool, *size;
    if (!PyArg_ParseTuple(args, "OO", &pool, &size))
        return NULL;
    PyObject *seen = PySet_New(NULL);
    if (!seen)
        return NULL;
    PyObject *result = PyObject_CallMethod(pool, "insert_sorted", "O", size);
    Py_DECREF(seen);
    __asm__ volatile("" ::: "memory");
    return result;
}

static PyMethodDef methods[] = {
    {"append", pyscope_pool_append, METH_VARARGS, "append(pool, size)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pyscope_reentry", NULL, -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_pyscope_reentry(void)
{
    return PyModule_Create(&module);
}
