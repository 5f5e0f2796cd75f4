/* The kernels' C entry points for a Python process (scripts/attn/side_by_side.py, through
 * ctypes): a shared library, libattn_kernel_shim.so, with a flat API of ints, floats, arrays
 * and opaque pointers, so that Python never mirrors attn_fwd_params or attn_bwd_params.
 *
 * One dense problem, as the harness builds its own (harness/gpu_problem.c, gpu_problem_bwd.c):
 *   dims[8]     dtype (0 fp16, 1 bf16), batch, heads, heads_k, seqlen_q, seqlen_k, head_dim,
 *               causal (0 or 1); head_dim_v = head_dim, no window, softcap or packed rows
 *   ptrs[9]     device pointers q, k, v, o, lse ([batch][heads][seqlen_q] float32), dout, dq,
 *               dk, dv (the last four NULL for a forward only)
 *   strides[24] batch, head and row strides in elements of q, k, v, o, dout, dq, dk, dv
 *
 *   attn_shim_abi_version()             ATTN_ABI_VERSION of this build
 *   attn_shim_find(name, plugin, err, n) the kernel (attn_find_kernel), or NULL and err
 *   attn_shim_problem_new(kernel, dims, scale, ptrs, strides, deterministic, err, n)
 *                                       the problem, its forward checked (attn_problem_check);
 *                                       NULL and err when malformed
 *   attn_shim_lacks(problem, bwd, buf, n) 0 when the kernel takes the forward (bwd 0) or the
 *                                       backward (bwd 1), else 1 with the reason in buf
 *   attn_shim_bwd_workspace(problem)    the backward's scratch bytes (attn_kernel.bwd_workspace)
 *   attn_shim_set_workspace(problem, ws, bytes, err, n) binds the scratch and checks the
 *                                       backward (attn_bwd_problem_check): 0, or 1 and err
 *   attn_shim_fwd(problem, stream)      the kernel's fwd on the cudaStream_t: its return value
 *   attn_shim_bwd(problem, stream)      its bwd (ATTN_SHIM_UNCHECKED before set_workspace)
 *   attn_shim_problem_free(problem)
 *   attn_shim_cudnn_library(path, n, version, why, n) the libcudnn the cudnn kernel loads (as
 *                                       attn_envcheck says it): 0, or 1 and why
 *
 * fwd and bwd call the kernel's entry point and nothing else, so that a timed call costs the
 * host what the harness's own call costs. The pointers are the caller's (torch tensors'
 * data_ptr); the kernel enqueues on the caller's stream (torch's current stream). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "attn_abi.h"
#include "cudnn_sdpa.h"
#include "harness.h"
#include "problem.h"
#include "registry.h"

#define SHIM_API __attribute__((visibility("default")))

enum { ATTN_SHIM_UNCHECKED = -1 }; /* bwd before its workspace was bound and checked */
enum { DIMS = 8, PTRS = 9, STRIDES = 24 };

typedef struct {
    const attn_kernel *k;
    attn_fwd_params fwd;
    attn_bwd_params bwd; /* bwd.fwd points at fwd: a problem is never copied */
    int bwd_checked;
} attn_shim_problem;

SHIM_API int attn_shim_abi_version(void) { return ATTN_ABI_VERSION; }

SHIM_API const attn_kernel *attn_shim_find(const char *name, const char *plugin, char *err, size_t errlen) {
    return attn_find_kernel(name, plugin && *plugin ? plugin : NULL, err, errlen);
}

/* The forward's fields from the flat arrays (attn_params_clear: the version-2 fields off). */
static void fill_fwd(attn_fwd_params *p, const int *dims, float scale, void *const *ptrs, const int64_t *st) {
    attn_params_clear(p, dims[2]);
    p->dtype = (attn_dtype)dims[0];
    p->batch = dims[1], p->heads_k = dims[3], p->seqlen_q = dims[4], p->seqlen_k = dims[5];
    p->head_dim = dims[6], p->head_dim_v = dims[6], p->causal = dims[7];
    p->softmax_scale = scale;
    p->q = ptrs[0], p->k = ptrs[1], p->v = ptrs[2], p->o = ptrs[3], p->lse = (float *)ptrs[4];
    p->q_batch_stride = st[0], p->q_head_stride = st[1], p->q_row_stride = st[2];
    p->k_batch_stride = st[3], p->k_head_stride = st[4], p->k_row_stride = st[5];
    p->v_batch_stride = st[6], p->v_head_stride = st[7], p->v_row_stride = st[8];
    p->o_batch_stride = st[9], p->o_head_stride = st[10], p->o_row_stride = st[11];
}

static void fill_bwd(attn_bwd_params *bp, void *const *ptrs, const int64_t *st, int deterministic) {
    bp->dout = ptrs[5], bp->dq = ptrs[6], bp->dk = ptrs[7], bp->dv = ptrs[8];
    bp->do_batch_stride = st[12], bp->do_head_stride = st[13], bp->do_row_stride = st[14];
    bp->dq_batch_stride = st[15], bp->dq_head_stride = st[16], bp->dq_row_stride = st[17];
    bp->dk_batch_stride = st[18], bp->dk_head_stride = st[19], bp->dk_row_stride = st[20];
    bp->dv_batch_stride = st[21], bp->dv_head_stride = st[22], bp->dv_row_stride = st[23];
    bp->deterministic = deterministic;
    bp->workspace = NULL, bp->workspace_bytes = 0;
}

SHIM_API attn_shim_problem *attn_shim_problem_new(const attn_kernel *k, const int *dims, float scale,
                                                  void *const *ptrs, const int64_t *strides, int deterministic,
                                                  char *err, size_t errlen) {
    if (!k || !dims || !ptrs || !strides) {
        snprintf(err, errlen, "kernel_shim: attn_shim_problem_new: %s is NULL",
                 !k ? "kernel" : !dims ? "dims" : !ptrs ? "ptrs" : "strides");
        return NULL;
    }
    attn_shim_problem *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "kernel_shim: out of host memory");
        return NULL;
    }
    x->k = k;
    fill_fwd(&x->fwd, dims, scale, ptrs, strides);
    fill_bwd(&x->bwd, ptrs, strides, deterministic);
    x->bwd.fwd = &x->fwd;
    char why[512];
    if (attn_problem_check(&x->fwd, NULL, why, sizeof why)) {
        snprintf(err, errlen, "kernel_shim: the problem dims[%d] ptrs[%d] strides[%d] is malformed: %s", DIMS,
                 PTRS, STRIDES, why);
        free(x);
        return NULL;
    }
    return x;
}

SHIM_API int attn_shim_lacks(const attn_shim_problem *x, int bwd, char *buf, size_t len) {
    const char *why = bwd ? attn_kernel_lacks_bwd(x->k, &x->bwd, buf, len) : attn_kernel_lacks(x->k, &x->fwd, buf, len);
    return why != NULL;
}

SHIM_API size_t attn_shim_bwd_workspace(const attn_shim_problem *x) {
    /* asked as the harness asks: the pointers set, no workspace yet */
    attn_bwd_params bp = x->bwd;
    bp.workspace = NULL, bp.workspace_bytes = 0;
    return x->k->bwd && x->k->bwd_workspace ? x->k->bwd_workspace(&bp) : 0;
}

SHIM_API int attn_shim_set_workspace(attn_shim_problem *x, void *workspace, size_t bytes, char *err,
                                     size_t errlen) {
    x->bwd.workspace = workspace, x->bwd.workspace_bytes = bytes;
    char why[512];
    x->bwd_checked = !attn_bwd_problem_check(&x->bwd, NULL, why, sizeof why);
    if (!x->bwd_checked) snprintf(err, errlen, "kernel_shim: the backward problem is malformed: %s", why);
    return !x->bwd_checked;
}

SHIM_API int attn_shim_fwd(const attn_shim_problem *x, cudaStream_t stream) { return x->k->fwd(&x->fwd, stream); }

SHIM_API int attn_shim_bwd(const attn_shim_problem *x, cudaStream_t stream) {
    return x->bwd_checked && x->k->bwd ? x->k->bwd(&x->bwd, stream) : ATTN_SHIM_UNCHECKED;
}

SHIM_API void attn_shim_problem_free(attn_shim_problem *x) { free(x); }

SHIM_API int attn_shim_cudnn_library(char *path, size_t pathlen, long *version, char *why, size_t whylen) {
    attn_cudnn_lib_info info;
    if (attn_cudnn_library_info(&info, why, whylen)) return 1;
    snprintf(path, pathlen, "%s", info.path[0] ? info.path : info.requested);
    *version = info.version;
    return 0;
}
