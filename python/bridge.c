/* The plugin of one Python kernel: an ABI plugin (attn_abi.h) that embeds CPython. The
 * configure step built it for one kernel (python/CMakeLists.txt): its name, declaration, spec
 * and Python come from attn_py_kernel.h, so that listing it (attn_list_plugin, the harness's
 * parent process) never starts Python. The interpreter starts at the first fwd, in the
 * process that runs the cases (a supervised child: a CUDA context, and Python's threads, do
 * not survive fork, so the parent stays free of both), imports the kernel's module and keeps
 * its runner (python/attn_bridge/runtime.py) for the life of the process. A kernel that
 * declares a backward (@fwd.backward) exports bwd, bwd_caps and, when it declares a
 * workspace, bwd_workspace: their calls go to the same runner. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdio.h>

#include "attn_abi.h"
#include "attn_py_kernel.h"

#define EXPORT __attribute__((visibility("default")))
enum { PY_ERROR = 3 }; /* the status of a kernel that could not run (attn_bridge.ATTN_PYTHON_ERROR) */

static PyObject *runner;   /* attn_bridge.load(spec, name), or NULL before the first call */
static int failed;         /* set once starting Python or importing the kernel failed */

/* sys.path gets the tree's python/ folder and the kernel module's root first */
static int prepend_paths(void) {
    static const char *const dirs[] = {ATTN_PY_PATHS};
    PyObject *path = PySys_GetObject("path"); /* borrowed */
    if (!path) return -1;
    for (int i = (int)(sizeof dirs / sizeof dirs[0]) - 1; i >= 0; i--) {
        if (!dirs[i][0]) continue;
        PyObject *s = PyUnicode_FromString(dirs[i]);
        int rc = s ? PyList_Insert(path, 0, s) : -1;
        Py_XDECREF(s);
        if (rc) return -1;
    }
    return 0;
}

/* Starts Python (unless the process has it already) as the interpreter the configure step
 * found, so that its site-packages (a virtual environment's) are the ones the kernel was
 * declared with. Extension modules (torch's) resolve Python's symbols globally, and this
 * library was loaded RTLD_LOCAL: libpython is made global first. */
static int start_python(void) {
    if (!dlopen(ATTN_PY_LIBPYTHON, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD))
        fprintf(stderr, "python kernel '%s': %s is not loaded globally (%s); extension modules may not import\n",
                ATTN_PY_NAME, ATTN_PY_LIBPYTHON, dlerror());
    if (Py_IsInitialized()) return 0;
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0; /* the harness's signals stay the harness's */
    config.parse_argv = 0;
    PyStatus st = PyConfig_SetBytesString(&config, &config.program_name, ATTN_PY_PROGRAM);
    if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) {
        fprintf(stderr, "python kernel '%s': starting Python (%s) failed: %s%s%s\n", ATTN_PY_NAME, ATTN_PY_PROGRAM,
                st.func ? st.func : "", st.func ? ": " : "", st.err_msg ? st.err_msg : "");
        return -1;
    }
    PyEval_SaveThread(); /* from here on every call takes the GIL itself */
    return 0;
}

/* The runner, with the GIL held; NULL (said once) when the kernel cannot be imported. */
static PyObject *get_runner(void) {
    if (runner || failed) return runner;
    PyObject *mod = NULL;
    if (prepend_paths() == 0 && (mod = PyImport_ImportModule("attn_bridge")))
        runner = PyObject_CallMethod(mod, "load", "ss", ATTN_PY_SPEC, ATTN_PY_NAME);
    if (!runner) {
        fprintf(stderr, "python kernel '%s': importing '%s' failed:\n", ATTN_PY_NAME, ATTN_PY_SPEC);
        PyErr_Print();
        failed = 1;
    }
    Py_XDECREF(mod);
    return runner;
}

/* attn_fwd_params as a dict, keyed by the ABI's field names (runtime.py reads them by name) */
static PyObject *fields(const attn_fwd_params *p) {
#define PTR(x) (unsigned long long)(uintptr_t)(x)
    return Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:K,s:K,s:K,s:K,s:K,"
        "s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,"
        "s:i,s:i,s:i,s:f,s:i,s:K,s:K,s:K,s:i,s:i,s:i,s:K,s:i,s:i}",
        "dtype", (int)p->dtype, "batch", p->batch, "heads", p->heads, "seqlen_q", p->seqlen_q, "seqlen_k",
        p->seqlen_k, "head_dim", p->head_dim, "causal", p->causal, "softmax_scale", (double)p->softmax_scale, "q",
        PTR(p->q), "k", PTR(p->k), "v", PTR(p->v), "o", PTR(p->o), "lse", PTR(p->lse), "q_batch_stride",
        (long long)p->q_batch_stride, "q_head_stride", (long long)p->q_head_stride, "q_row_stride",
        (long long)p->q_row_stride, "k_batch_stride", (long long)p->k_batch_stride, "k_head_stride",
        (long long)p->k_head_stride, "k_row_stride", (long long)p->k_row_stride, "v_batch_stride",
        (long long)p->v_batch_stride, "v_head_stride", (long long)p->v_head_stride, "v_row_stride",
        (long long)p->v_row_stride, "o_batch_stride", (long long)p->o_batch_stride, "o_head_stride",
        (long long)p->o_head_stride, "o_row_stride", (long long)p->o_row_stride, "heads_k", p->heads_k,
        "window_left", p->window_left, "window_right", p->window_right, "softcap", (double)p->softcap,
        "head_dim_v", p->head_dim_v, "cu_seqlens_q", PTR(p->cu_seqlens_q), "cu_seqlens_k", PTR(p->cu_seqlens_k),
        "block_table", PTR(p->block_table), "block_table_stride", p->block_table_stride, "page_size",
        p->page_size, "num_pages", p->num_pages, "seqused_k", PTR(p->seqused_k), "total_q", p->total_q,
        "total_k", p->total_k);
#undef PTR
}

/* Python started and the GIL taken (0), or the kernel cannot run (said once). */
static int enter(PyGILState_STATE *gil) {
    if (failed || (!runner && start_python())) {
        failed = 1;
        return -1;
    }
    *gil = PyGILState_Ensure();
    return 0;
}

/* runner.<method>(f, stream, device), its status; f: the fields (a new reference, or NULL) */
static int call_runner(const char *method, PyObject *(*make_fields)(const void *), const void *p,
                       cudaStream_t stream) {
    PyGILState_STATE gil;
    if (enter(&gil)) return PY_ERROR;
    int device = -1; /* -1: no CUDA device (a raw kernel on a machine without a GPU) */
    if (cudaGetDevice(&device) != cudaSuccess) device = -1, cudaGetLastError();
    int rc = PY_ERROR;
    PyObject *r = get_runner(), *f = r ? make_fields(p) : NULL, *out = NULL;
    if (f) out = PyObject_CallMethod(r, method, "OKi", f, (unsigned long long)(uintptr_t)stream, device);
    if (out && PyLong_Check(out)) rc = (int)PyLong_AsLong(out);
    if (r && !out) {
        fprintf(stderr, "python kernel '%s': the bridge failed:\n", ATTN_PY_NAME);
        PyErr_Print();
    }
    Py_XDECREF(out);
    Py_XDECREF(f);
    PyGILState_Release(gil);
    return rc;
}

static PyObject *any_fwd_fields(const void *p) { return fields(p); }

static int python_fwd(const attn_fwd_params *p, cudaStream_t stream) {
    return call_runner("__call__", any_fwd_fields, p, stream);
}

#if ATTN_PY_BWD
/* attn_bwd_params as a dict: the forward problem's fields and the backward's beside them */
static PyObject *bwd_fields(const attn_bwd_params *p) {
#define PTR(x) (unsigned long long)(uintptr_t)(x)
    PyObject *f = fields(p->fwd), *b = f ? Py_BuildValue(
        "{s:K,s:L,s:L,s:L,s:K,s:L,s:L,s:L,s:K,s:L,s:L,s:L,s:K,s:L,s:L,s:L,s:i,s:K,s:K}", "dout", PTR(p->dout),
        "do_batch_stride", (long long)p->do_batch_stride, "do_head_stride", (long long)p->do_head_stride,
        "do_row_stride", (long long)p->do_row_stride, "dq", PTR(p->dq), "dq_batch_stride",
        (long long)p->dq_batch_stride, "dq_head_stride", (long long)p->dq_head_stride, "dq_row_stride",
        (long long)p->dq_row_stride, "dk", PTR(p->dk), "dk_batch_stride", (long long)p->dk_batch_stride,
        "dk_head_stride", (long long)p->dk_head_stride, "dk_row_stride", (long long)p->dk_row_stride, "dv",
        PTR(p->dv), "dv_batch_stride", (long long)p->dv_batch_stride, "dv_head_stride",
        (long long)p->dv_head_stride, "dv_row_stride", (long long)p->dv_row_stride, "deterministic",
        p->deterministic, "workspace", PTR(p->workspace), "workspace_bytes",
        (unsigned long long)p->workspace_bytes) : NULL;
#undef PTR
    if (b && PyDict_Update(f, b)) Py_CLEAR(f);
    if (!b) Py_CLEAR(f);
    Py_XDECREF(b);
    return f;
}

static PyObject *any_bwd_fields(const void *p) { return bwd_fields(p); }

static int python_bwd(const attn_bwd_params *p, cudaStream_t stream) {
    return call_runner("bwd", any_bwd_fields, p, stream);
}
#endif

#if ATTN_PY_BWD_WORKSPACE
/* The declared workspace(p); 0 when it fails (said on stderr), and bwd then fails the case. */
static size_t python_bwd_workspace(const attn_bwd_params *p) {
    PyGILState_STATE gil;
    if (enter(&gil)) return 0;
    size_t bytes = 0;
    PyObject *r = get_runner(), *f = r ? bwd_fields(p) : NULL;
    PyObject *out = f ? PyObject_CallMethod(r, "workspace", "O", f) : NULL;
    if (out) bytes = PyLong_AsSize_t(out);
    if (r && (!out || PyErr_Occurred())) {
        fprintf(stderr, "python kernel '%s': the bridge failed:\n", ATTN_PY_NAME);
        PyErr_Print();
        bytes = 0;
    }
    Py_XDECREF(out);
    Py_XDECREF(f);
    PyGILState_Release(gil);
    return bytes;
}
#endif

static const int head_dims[] = {ATTN_PY_HEAD_DIMS 0};
static const int head_dim_pairs[] = {ATTN_PY_HEAD_DIM_PAIRS 0};
static const attn_kernel table[] = {{
    .name = ATTN_PY_NAME,
    .fwd = python_fwd,
    .caps = ATTN_PY_CAPS,
    .dtypes = ATTN_PY_DTYPES,
    .head_dims = head_dims[0] ? head_dims : NULL,
    .head_dim_pairs = head_dim_pairs[0] ? head_dim_pairs : NULL,
#if ATTN_PY_BWD /* a kernel that declares no backward has none */
    .bwd = python_bwd,
    .bwd_caps = ATTN_PY_BWD_CAPS,
#endif
#if ATTN_PY_BWD_WORKSPACE
    .bwd_workspace = python_bwd_workspace,
#endif
}};

EXPORT const attn_kernel *attn_plugin_kernels(int *count, int *abi_version) {
    *count = 1;
    *abi_version = ATTN_ABI_VERSION;
    return table;
}
