/* A C extension for native-frame tests: crunch(n) spends its time in two static functions of its
 * own (crunch → mix_outer → mix_inner). Built by the tests with -fomit-frame-pointer, so that
 * nothing but the unwind tables (CFI) can find its callers. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static __attribute__((noinline)) uint64_t mix_inner(uint64_t x, long rounds) {
    /* enough live values that the compiler takes rbp as a register of its own */
    uint64_t a = x, b = x ^ 0x9e3779b97f4a7c15ULL, c = x * 31, d = x + 7, e = ~x, f = x >> 3;
    for (long i = 0; i < rounds; i++) {
        a += b ^ (c << 7);
        b ^= c + (d >> 3);
        c = (c * 0x5851f42d4c957f2dULL) + d;
        d ^= e + a;
        e += f ^ (a >> 11);
        f = (f << 5) ^ b ^ (uint64_t)i;
    }
    return a ^ b ^ c ^ d ^ e ^ f;
}

static __attribute__((noinline)) uint64_t mix_outer(uint64_t x, long n) {
    uint64_t acc = x;
    for (long k = 0; k < n; k++) acc = mix_inner(acc + (uint64_t)k, 1000);
    return acc;
}

static PyObject *cwork_crunch(PyObject *self, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n < 0 && PyErr_Occurred()) return NULL;
    uint64_t r;
    Py_BEGIN_ALLOW_THREADS
    r = mix_outer(12345, n);
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLongLong(r);
}

static PyMethodDef methods[] = {
    {"crunch", cwork_crunch, METH_O, "n thousand rounds of mixing, in C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cwork", NULL, -1, methods};

PyMODINIT_FUNC PyInit_cwork(void) { return PyModule_Create(&module); }
