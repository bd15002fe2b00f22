/* A C extension that crashes on purpose, for the post-mortem tests (test/core-dump.test.ts):
 * deref(address) reads an int at `address` — deref(0) dereferences NULL, and the process dies
 * of SIGSEGV in crash_deref, under its Python caller. VARIANT changes the code (and so the
 * build id) for the test of a core whose library differs from the one on disk. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#ifndef VARIANT
#define VARIANT 0
#endif

static PyObject *crash_deref(PyObject *self, PyObject *arg) {
    (void)self;
    volatile int *p = (volatile int *)(uintptr_t)PyLong_AsUnsignedLongLong(arg);
    return PyLong_FromLong(*p + VARIANT);
}

static PyMethodDef methods[] = {
    {"deref", crash_deref, METH_O, "read an int at an address (0: crash)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyunwind_crash", NULL, -1, methods};

PyMODINIT_FUNC PyInit_pyunwind_crash(void) { return PyModule_Create(&module); }
