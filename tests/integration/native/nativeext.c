/* A C extension for the --native tests: pyscope_nativeext.call(f) calls f
 * from C, so a C frame sits between two Python frames; take_lock() and
 * wait_for_lock() block a thread in a C mutex with the GIL released, as a C
 * library waiting for a resource does (off-CPU). Built by the tests against
 * each interpreter's headers, at -O0 so the frames are not tail calls. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
/* Threads past the GIL's release in wait_for_lock: once a thread counts here,
 * the only futex it can block in is the mutex's, not the GIL's. */
static _Atomic int waiting;

__attribute__((noinline)) static PyObject *nativeext_call(PyObject *self, PyObject *callable)
{
    (void)self;
    PyObject *result = PyObject_CallObject(callable, NULL);
    __asm__ volatile("" ::: "memory");
    return result;
}

static PyObject *nativeext_take_lock(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pthread_mutex_lock(&held);
    Py_RETURN_NONE;
}

__attribute__((noinline)) static PyObject *nativeext_wait_for_lock(PyObject *self,
                                                                   PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_BEGIN_ALLOW_THREADS
    waiting++;
    pthread_mutex_lock(&held); /* wait-here */
    waiting--;
    pthread_mutex_unlock(&held);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *nativeext_waiters(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromLong(waiting);
}

static PyMethodDef methods[] = {
    {"call", nativeext_call, METH_O, "call f() from C"},
    {"take_lock", nativeext_take_lock, METH_NOARGS, "take the module's C mutex"},
    {"wait_for_lock", nativeext_wait_for_lock, METH_NOARGS,
     "wait for the module's C mutex, without the GIL"},
    {"waiters", nativeext_waiters, METH_NOARGS,
     "threads in wait_for_lock that have released the GIL"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyscope_nativeext", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_pyscope_nativeext(void)
{
    return PyModule_Create(&module);
}
