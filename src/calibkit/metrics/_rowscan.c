/* The scan over rows of float32 logits in one fused pass per row: the row maximum m, then
 * s = sum_k exp(z_k - m) and, if asked, sq = sum_k exp(z_k - m)^2 and
 * ed = sum_k exp(z_k - m) (z_k - m), each summed in float64; and whether every value is
 * finite, so that validated input need not be read a second time to check it.
 *
 * calibkit.metrics._scan has the same quantities in PyTorch; this kernel is the fast path
 * for contiguous float32 logits on the CPU (docs/performance.md). PyTorch's scan needs four
 * passes over each chunk (max, subtract, exp, sum), each a parallel operation; here a row
 * is read once from memory and once more from the L1 cache, and rows are split between
 * Python threads, with the GIL released, by calibkit.metrics._scan.
 *
 * d = z - m and exp(d) are computed in float32, as PyTorch's scan does for float32 logits:
 * exp by Cody-Waite range reduction, d = n ln2 + r with |r| <= ln2/2, and a degree-6
 * polynomial for exp(r), the classic single-precision scheme (within 2 ulps; tested against
 * float64 in tests/metrics/test_native_scan.py). exp(0) is exactly 1, so the maximum contributes exactly
 * 1 to s and s - 1 keeps its float64 precision for confident rows. Terms with d < -87
 * (below float32's normal range) count as 0.
 *
 * Each row is processed alone, in vectors of W values and a tail read with a masked load, so
 * a row's result does not depend on its position in the batch or on the split between
 * threads. The work per row is the two passes and a few log2(W)-step reductions across
 * lanes, so short rows (K = 10) cost about 12 ns each.
 *
 * The kernel (_rowscan_kernel.h) is compiled twice, for AVX-512 (W = 16) and AVX2 with FMA
 * (W = 8), and the module picks the widest one the CPU runs when it is imported. Elsewhere
 * (another architecture, an x86 CPU without AVX2) instructions() is None and calibkit uses
 * its PyTorch scan. Results of the two kernels may differ in the last bits (summation order).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
/* the kernels' helpers are always inlined: the ABI of a vector argument never applies */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef int (*kernel)(const float *, Py_ssize_t, Py_ssize_t, double *, double *, double *,
                      double *);

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h> /* masked loads of a row's last values */

#define W 16
#define TARGET "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma"
#define NAME scan_avx512
#include "_rowscan_kernel.h"
#undef W
#undef TARGET
#undef NAME
#define W 8
#define TARGET "avx2,fma"
#define NAME scan_avx2
#include "_rowscan_kernel.h"
#undef W
#undef TARGET
#undef NAME

static int supports_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
}

static int supports_avx2(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* the kernel called `name` ("avx512", "avx2"), or with name NULL the widest this CPU runs,
 * with *name set to it; NULL where the CPU cannot run it */
static kernel choose(const char **name) {
    __builtin_cpu_init();
    int any = *name == NULL;
    if ((any || strcmp(*name, "avx512") == 0) && supports_avx512()) {
        *name = "avx512";
        return scan_avx512;
    }
    if ((any || strcmp(*name, "avx2") == 0) && supports_avx2()) {
        *name = "avx2";
        return scan_avx2;
    }
    return NULL;
}
#else
static kernel choose(const char **name) {
    (void)name;
    return NULL;
}
#endif

static kernel widest = NULL; /* the widest kernel this CPU runs, chosen at import */
static const char *isa = NULL;

static int get(PyObject *obj, Py_buffer *view, int writable, const char *format, int ndim,
               const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    if (view->ndim != ndim || strcmp(view->format, format) != 0) {
        PyErr_Format(PyExc_ValueError, "%s: expected a %d-D array of format '%s', got %d-D '%s'",
                     name, ndim, format, view->ndim, view->format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"logits", "top", "s", "sq", "ed", "instructions", NULL};
    PyObject *objs[5] = {NULL, NULL, NULL, Py_None, Py_None};
    const char *wanted = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|OOz:scan", keywords, &objs[0], &objs[1],
                                     &objs[2], &objs[3], &objs[4], &wanted))
        return NULL;
    kernel run = widest;
    if (wanted != NULL && (run = choose(&wanted)) == NULL) {
        PyErr_Format(PyExc_ValueError, "instructions: %s is not a kernel this CPU runs", wanted);
        return NULL;
    }
    static const char *names[5] = {"logits", "top", "s", "sq", "ed"};
    Py_buffer views[5];
    int held = 0;
    PyObject *result = NULL;
    int full = objs[3] != Py_None;
    if (full != (objs[4] != Py_None)) {
        PyErr_SetString(PyExc_ValueError, "sq and ed: give both or neither");
        return NULL;
    }
    for (; held < (full ? 5 : 3); held++)
        if (get(objs[held], &views[held], held > 0, held ? "d" : "f", held ? 1 : 2,
                names[held]) < 0)
            goto done;
    Py_ssize_t n = views[0].shape[0], k = views[0].shape[1];
    if (k < 1) {
        PyErr_SetString(PyExc_ValueError, "logits: no columns");
        goto done;
    }
    for (int b = 1; b < held; b++)
        if (views[b].shape[0] != n) {
            PyErr_Format(PyExc_ValueError, "%s: expected %zd rows, got %zd", names[b], n,
                         views[b].shape[0]);
            goto done;
        }
    if (run == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this CPU has neither AVX-512 nor AVX2 with FMA");
        goto done;
    }
    int finite;
    Py_BEGIN_ALLOW_THREADS;
    finite = run(views[0].buf, n, k, views[1].buf, views[2].buf, full ? views[3].buf : NULL,
                 full ? views[4].buf : NULL);
    Py_END_ALLOW_THREADS;
    result = PyBool_FromLong(finite);
done:
    for (int b = 0; b < held; b++)
        PyBuffer_Release(&views[b]);
    return result;
}

static PyObject *instructions(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    if (isa == NULL)
        Py_RETURN_NONE;
    return PyUnicode_FromString(isa);
}

static PyMethodDef methods[] = {
    {"instructions", instructions, METH_NOARGS,
     "instructions(): the instruction set of the kernel in use ('avx512' or 'avx2'), or None "
     "where this CPU has neither (then scan raises)."},
    {"scan", (PyCFunction)(void (*)(void))scan, METH_VARARGS | METH_KEYWORDS,
     "scan(logits, top, s, sq=None, ed=None, instructions=None) -> bool: per-row maximum and "
     "exp sums of float32 logits (N, K) into float64 arrays (N,), with the widest kernel or "
     "the one named; False where a value is NaN or infinite. See calibkit.metrics._scan."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_rowscan",
    .m_doc = "The fused row scan of float32 logits.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__rowscan(void) {
    widest = choose(&isa);
    return PyModule_Create(&module);
}
