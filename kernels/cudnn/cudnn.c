/* cudnn: cuDNN's fused attention forward and backward as a kernel under test, through the
 * same code as the benchmarks' cuDNN baseline (baselines/cudnn_sdpa.h). See NOTES.md.
 *
 * fwd looks the problem up in a cache of plans keyed on everything a plan depends on (the
 * device, dtype, batch, heads, heads_k, both lengths, both head dims, causal, the window,
 * softcap, the twelve strides, LSE or not, which of cu_seqlens_q/k, block_table, seqused_k
 * are given, and the page pool's page_size, num_pages, block_table_stride; never a device
 * pointer: cuDNN reads the per-sequence arrays at run time). The first call for a problem
 * builds and autotunes the plan on the caller's buffers (allocation and synchronization are
 * allowed there; not inside a CUDA graph capture); every later call only enqueues on its
 * stream: the plan binds the call's pointers and scale, a helper kernel turns cu_seqlens
 * into cuDNN's lengths and ragged offsets, cuDNN executes, and the rows that see no key are
 * zero-filled (O) and set to -inf (LSE) by async memset/copy nodes or a helper kernel, which
 * also lays a packed LSE out as [heads][total_q]. Calls from several host threads at once
 * take turns on the host (one lock over fwd, bwd and bwd_workspace: the caches, the handles
 * and a run, which sets its handle's stream and then executes, are shared; the contract check
 * 'threads'); their GPU work still overlaps. Calls on two streams at once are right and
 * independent: a plan's runs write its workspace, lengths and statistics buffers, so a run on
 * another stream while the plan's last run may be in flight takes buffers of its own from a
 * pool (baselines/cudnn_run.c; the contract check 'concurrent' found runs overlapping on
 * shared buffers, then 'threads' found the event that ordered them tying the caller's streams
 * together). A problem with
 * window_right 0, no left bound and no causal flag is taken as causal (attn_abi.h: the same
 * problem).
 *
 * $ATTN_CUDNN_KERNEL_CACHE=1 makes plans dynamic-shape graphs on the handle's kernel cache
 * where cuDNN takes them, so that a problem of a topology seen before binds the kernel compiled
 * for it instead of compiling another (off by default: NOTES.md, "Kernel cache"). Each plan's line on
 * stderr says what its build cost (operation graph, heuristics, execution plan finalize) and
 * whether it uses the cache.
 *
 * Returns ATTN_UNSUPPORTED (with the reason on stderr, once per problem) where cuDNN cannot
 * do the case: no library, a GPU before sm_80, a head dim or a stride that is not a multiple
 * of 8 elements, a pointer (block_table and seqused_k included) not 16-byte aligned, a
 * combination cudnn-frontend knows to be broken in this cuDNN, or a graph cuDNN refuses (the
 * LSE as an output included). Other failures return 2 with the reason on stderr.
 *
 * bwd alike, with its own cache (the forward's key, the gradients' twelve strides, the
 * deterministic flag): bwd_workspace builds the plan with no buffers (the pointers are not
 * set yet) and answers its workspace (cuDNN's, the fp32 dQ accumulator, the dO.O row sums:
 * attn_cudnn_bwd_plan_workspace), enough for any engine config; the first bwd call chooses
 * the engine (autotuned on the call's buffers and workspace, or the heuristics' first inside
 * a capture or with ATTN_CUDNN_AUTOTUNE=0); every call then only enqueues, in the harness's
 * workspace. Deterministic (ATTN_BWD_DETERMINISTIC): cudnn-frontend's deterministic graph,
 * on Hopper only (elsewhere ATTN_UNSUPPORTED). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "attn_abi.h"
#include "cudnn_sdpa.h"

enum { CUDNN_KERNEL_ERROR = 2 };

#define SAY(...) (fprintf(stderr, "kernel cudnn: " __VA_ARGS__), fputc('\n', stderr))

/* Everything a plan depends on; all int64 so that memcmp compares it (no padding). The
 * device arrays (cu_seqlens, block_table, seqused_k) are bound per call and read by cuDNN
 * (or the plan's helper kernel) on the GPU: only whether each is given matters; the page
 * pool's shape does (cuDNN's K/V containers are [num_pages, heads_k, page_size, d]). */
typedef struct {
    int64_t device, dtype, batch, heads, seqlen_q, seqlen_k, head_dim, causal, has_lse;
    int64_t strides[12];
    int64_t heads_k, head_dim_v, window_left, window_right, softcap_bits;
    int64_t varlen_q, varlen_k, paged, seqused, page_size, num_pages, block_table_stride;
} problem_key;

typedef struct plan_entry {
    problem_key key;
    attn_cudnn_plan *plan; /* NULL: cuDNN refused this problem (said once) */
    struct plan_entry *next;
} plan_entry;

typedef struct device_entry { /* one cuDNN handle per device (a handle is bound to one) */
    int device, major;        /* major: compute capability */
    attn_cudnn *cudnn;        /* NULL: cuDNN not available here (said once) */
    struct device_entry *next;
} device_entry;

static plan_entry *plans;
static device_entry *devices;

static problem_key key_of(const attn_fwd_params *p, int device) {
    problem_key k;
    memset(&k, 0, sizeof k);
    k.device = device, k.dtype = p->dtype, k.batch = p->batch, k.heads = p->heads;
    k.seqlen_q = p->seqlen_q, k.seqlen_k = p->seqlen_k, k.head_dim = p->head_dim;
    k.causal = p->causal != 0, k.has_lse = p->lse != NULL;
    const int64_t s[12] = {p->q_batch_stride, p->q_head_stride, p->q_row_stride, p->k_batch_stride,
                           p->k_head_stride,  p->k_row_stride,  p->v_batch_stride, p->v_head_stride,
                           p->v_row_stride,   p->o_batch_stride, p->o_head_stride, p->o_row_stride};
    memcpy(k.strides, s, sizeof s);
    /* the ABI's off values resolved, so that equal problems share a plan */
    k.heads_k = p->heads_k > 0 ? p->heads_k : p->heads;
    k.head_dim_v = p->head_dim_v > 0 ? p->head_dim_v : p->head_dim;
    k.window_left = p->window_left < 0 ? -1 : p->window_left;
    k.window_right = p->causal ? 0 : p->window_right < 0 ? -1 : p->window_right;
    const float cap = p->softcap > 0 ? p->softcap : 0.0f;
    uint32_t bits;
    memcpy(&bits, &cap, sizeof bits);
    k.softcap_bits = bits;
    k.varlen_q = p->cu_seqlens_q != NULL, k.varlen_k = p->cu_seqlens_k != NULL;
    k.paged = p->block_table != NULL, k.seqused = p->seqused_k != NULL;
    if (k.paged) k.page_size = p->page_size, k.num_pages = p->num_pages, k.block_table_stride = p->block_table_stride;
    return k;
}

/* "b=2 h=8 hk=2 sq=17 sk=239 d=128 dv=128 causal window 16:0 softcap 30 varlen_q paged(p16) seqused_k LSE" */
static const char *describe(const attn_fwd_params *p, char *buf, size_t len) {
    const problem_key k = key_of(p, 0);
    int n = snprintf(buf, len, "b=%d h=%d hk=%lld sq=%d sk=%d d=%d dv=%lld %s", p->batch, p->heads,
                     (long long)k.heads_k, p->seqlen_q, p->seqlen_k, p->head_dim, (long long)k.head_dim_v,
                     p->causal ? "causal" : "full");
#define MORE(...) (n >= 0 && (size_t)n < len ? (void)(n += snprintf(buf + n, len - (size_t)n, __VA_ARGS__)) : (void)0)
    if (k.window_left >= 0 || (k.window_right >= 0 && !p->causal))
        MORE(" window %lld:%lld", (long long)k.window_left, (long long)k.window_right);
    if (p->softcap > 0) MORE(" softcap %g", (double)p->softcap);
    if (k.varlen_q) MORE(" varlen_q");
    if (k.varlen_k) MORE(" varlen_k");
    if (k.paged) MORE(" paged(p%d)", p->page_size);
    if (k.seqused) MORE(" seqused_k");
    if (p->lse) MORE(" LSE");
#undef MORE
    return buf;
}

/* The cases cuDNN's fused attention does not take, or where its tensors (declared 16-byte
 * aligned) would be wrong, by the problem's shape and strides: NULL when none applies, else
 * the reason. */
static const char *shape_precheck(const attn_fwd_params *p, char *buf, size_t len) {
    if (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16) return "dtype is neither fp16 nor bf16";
    if (p->batch < 1 || p->heads < 1 || p->seqlen_q < 1 || p->seqlen_k < 1 || p->head_dim < 1)
        return "an empty problem";
    const problem_key k = key_of(p, 0);
    if (k.heads_k < 1 || p->heads % k.heads_k) return "heads is not a multiple of heads_k";
    if (p->head_dim % 8 || k.head_dim_v % 8) {
        snprintf(buf, len, "head_dim %d or head_dim_v %lld is not a multiple of 8 (cuDNN's fused attention needs "
                 "16-byte rows)", p->head_dim, (long long)k.head_dim_v);
        return buf;
    }
    if (k.paged && (p->page_size < 1 || p->num_pages < 1 || p->block_table_stride < 1))
        return "page_size, num_pages or block_table_stride < 1";
    /* batch strides the layout does not use (rows packed by cu_seqlens) are not checked */
    const int unused[12] = {[0] = (int)k.varlen_q, [9] = (int)k.varlen_q, [3] = k.varlen_k && !k.paged,
                            [6] = k.varlen_k && !k.paged};
    static const char *const names[12] = {"q_batch", "q_head", "q_row", "k_batch", "k_head", "k_row",
                                          "v_batch", "v_head", "v_row", "o_batch", "o_head", "o_row"};
    for (int i = 0; i < 12; i++)
        if (!unused[i] && (k.strides[i] < 1 || k.strides[i] % 8)) {
            snprintf(buf, len, "%s_stride %lld is not a positive multiple of 8 elements (16 bytes)", names[i],
                     (long long)k.strides[i]);
            return buf;
        }
    return NULL;
}

/* shape_precheck, then the pointers (cuDNN's tensors are declared 16-byte aligned) */
static const char *precheck(const attn_fwd_params *p, char *buf, size_t len) {
    const char *no = shape_precheck(p, buf, len);
    if (no) return no;
    /* block_table and seqused_k are bound to cuDNN tensors as they are */
    const void *ptrs[7] = {p->q, p->k, p->v, p->o, p->lse, p->block_table, p->seqused_k};
    static const char *const pnames[7] = {"q", "k", "v", "o", "lse", "block_table", "seqused_k"};
    for (int i = 0; i < 7; i++)
        if ((i < 4 && !ptrs[i]) || ((uintptr_t)ptrs[i] & 15u)) {
            snprintf(buf, len, "%s (%p) is %s", pnames[i], ptrs[i], ptrs[i] ? "not 16-byte aligned" : "NULL");
            return buf;
        }
    return NULL;
}

/* This device's cuDNN (opened on first use); NULL when it is not available (said once). */
static device_entry *device_cudnn(int device) {
    for (device_entry *d = devices; d; d = d->next)
        if (d->device == device) return d;
    device_entry *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->device = device;
    if (cudaDeviceGetAttribute(&d->major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) d->major = 0;
    char why[2048];
    if (d->major < 8)
        SAY("not supported on GPU %d: cuDNN's fused attention needs sm_80 or newer (compute capability %d.x)", device,
            d->major);
    else if (attn_cudnn_open(&d->cudnn, why, sizeof why)) {
        d->cudnn = NULL;
        SAY("not supported: cuDNN is not available: %s", why);
    } else {
        attn_cudnn_lib_info lib;
        attn_cudnn_get_library(d->cudnn, &lib);
        SAY("cuDNN %ld from %s (%s), GPU %d", lib.version, lib.path[0] ? lib.path : lib.requested, lib.chosen_by,
            device);
    }
    d->next = devices;
    devices = d;
    return d;
}

/* The plan options every plan of this kernel starts from: the kernel cache off unless
 * $ATTN_CUDNN_KERNEL_CACHE=1 (NOTES.md, "Kernel cache": the system cuDNN 9.14 refuses it for
 * every SDPA graph, and with 9.19 its plans are not yet checked). 0, or -1 with the reason
 * said. */
static int base_opts(attn_cudnn_plan_opts *o) {
    char why[256];
    *o = attn_cudnn_plan_opts_default();
    if (attn_cudnn_kernel_cache_env(&o->kernel_cache, why, sizeof why)) {
        SAY("%s", why);
        return -1;
    }
    if (o->kernel_cache < 0) o->kernel_cache = 0;
    return 0;
}

/* "built in 0.31 s (operation graph 0.001 s, heuristics 0.002 s, 1 execution plan finalized
 * 0.30 s); kernel cache: used" */
static const char *plan_cost(const attn_cudnn_plan_info *info, char *buf, size_t len) {
    snprintf(buf, len, "built in %.3f s (operation graph %.3f s, heuristics %.3f s, %d execution plan%s finalized %.3f s)"
             "; kernel cache: %s", info->build_s, info->opgraph_s, info->heuristics_s, info->finalizes,
             info->finalizes == 1 ? "" : "s", info->finalize_s, info->kernel_cache_note);
    return buf;
}

/* The plan of p's problem, built (and autotuned) on first use: ATTN_OK with *out;
 * ATTN_UNSUPPORTED (*out NULL); or CUDNN_KERNEL_ERROR. */
static int plan_for(const attn_fwd_params *p, cudaStream_t stream, int device, attn_cudnn_plan **out) {
    *out = NULL;
    const problem_key key = key_of(p, device);
    for (plan_entry *e = plans; e; e = e->next)
        if (!memcmp(&e->key, &key, sizeof key)) {
            *out = e->plan;
            return e->plan ? ATTN_OK : ATTN_UNSUPPORTED;
        }
    device_entry *d = device_cudnn(device);
    if (!d) {
        SAY("out of host memory");
        return CUDNN_KERNEL_ERROR;
    }
    if (!d->cudnn) return ATTN_UNSUPPORTED;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    char what[512];
    describe(p, what, sizeof what);
    if (cudaStreamIsCapturing(stream, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone) {
        SAY("the first call for this problem (%s) is inside a CUDA graph capture; "
            "it builds and tunes a cuDNN plan (allocation, synchronization): call fwd once before capturing",
            what);
        return CUDNN_KERNEL_ERROR;
    }
    attn_cudnn_plan_opts o;
    if (base_opts(&o)) return CUDNN_KERNEL_ERROR;
    plan_entry *e = calloc(1, sizeof *e);
    if (!e) {
        SAY("out of host memory");
        return CUDNN_KERNEL_ERROR;
    }
    o.want_lse = p->lse != NULL;
    /* rows that see no key (causal, seqlen_q > seqlen_k): cuDNN's bottom-right graph leaves
     * them undefined, so Q and O are sliced to the last seqlen_k rows and those rows are
     * written by the plan (O zeros, LSE -inf), as attn_abi.h defines them */
    if (p->causal && p->seqlen_q > p->seqlen_k) o.sq_gt_sk = "slice";
    char why[8192];
    int rc = attn_cudnn_plan_create_ex(d->cudnn, p, &o, stream, &e->plan, why, sizeof why);
    if (rc != 0 && rc != ATTN_UNSUPPORTED) {
        SAY("building the cuDNN plan failed (%s): %s", what, why);
        free(e);
        return CUDNN_KERNEL_ERROR;
    }
    if (rc == ATTN_UNSUPPORTED) {
        SAY("not supported by cuDNN (%s): %s", what, why);
        e->plan = NULL;
    } else {
        attn_cudnn_plan_info info;
        char cost[512];
        attn_cudnn_plan_get_info(e->plan, &info);
        SAY("plan for %s: %s, engine %s (%d of %d configs built, %s), %s%s%s", what, info.kind, info.engine,
            info.configs_built, info.configs_tried, info.tuned ? "the fastest kept" : "the first kept",
            plan_cost(&info, cost, sizeof cost), why[0] ? "; " : "", why);
    }
    e->key = key;
    e->next = plans;
    plans = e;
    *out = e->plan;
    return e->plan ? ATTN_OK : ATTN_UNSUPPORTED;
}

/* window_right 0 and no left bound, without the causal flag, is causal (attn_abi.h): one
 * form, so that it takes the causal path's handling of rows that see no key (seqlen_q >
 * seqlen_k); with a left bound the padded plan writes those rows itself */
static attn_fwd_params normalized(const attn_fwd_params *in) {
    attn_fwd_params n = *in;
    if (!n.causal && n.window_right == 0 && n.window_left < 0) n.causal = 1;
    return n;
}

static int fwd_locked(const attn_fwd_params *in, cudaStream_t stream) {
    if (!in) return CUDNN_KERNEL_ERROR;
    attn_fwd_params n = normalized(in);
    const attn_fwd_params *p = &n;
    char buf[256];
    const char *no = precheck(p, buf, sizeof buf);
    if (no) {
        static int said; /* a reason per call would flood the log: the first few */
        if (said++ < 4) SAY("not supported: %s", no);
        return ATTN_UNSUPPORTED;
    }
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        SAY("cudaGetDevice failed");
        return CUDNN_KERNEL_ERROR;
    }
    attn_cudnn_plan *plan = NULL;
    int rc = plan_for(p, stream, device, &plan);
    if (rc != ATTN_OK) return rc;
    char why[2048];
    if (attn_cudnn_plan_run(plan, p, stream, why, sizeof why)) {
        SAY("%s", why);
        return CUDNN_KERNEL_ERROR;
    }
    return ATTN_OK;
}

/* ---- the backward ----------------------------------------------------------------------- */

/* Everything a backward plan depends on: the forward problem's key (the LSE always given),
 * the gradients' twelve strides and the deterministic flag. All int64 (memcmp compares it). */
typedef struct {
    problem_key fwd;
    int64_t strides[12];
    int64_t deterministic;
} bwd_key;

typedef struct bwd_entry {
    bwd_key key;
    attn_cudnn_plan *plan; /* NULL: cuDNN refused this problem (said once) */
    int chosen;            /* its engine chosen (tuned, or the first kept) */
    struct bwd_entry *next;
} bwd_entry;

static bwd_entry *bwd_plans;

static bwd_key bwd_key_of(const attn_bwd_params *p, int device) {
    bwd_key k;
    memset(&k, 0, sizeof k);
    k.fwd = key_of(p->fwd, device);
    k.fwd.has_lse = 0; /* bwd always has it; bwd_workspace is asked before pointers are set */
    const int64_t s[12] = {p->do_batch_stride, p->do_head_stride, p->do_row_stride, p->dq_batch_stride,
                           p->dq_head_stride,  p->dq_row_stride,  p->dk_batch_stride, p->dk_head_stride,
                           p->dk_row_stride,   p->dv_batch_stride, p->dv_head_stride, p->dv_row_stride};
    memcpy(k.strides, s, sizeof s);
    k.deterministic = p->deterministic != 0;
    return k;
}

/* As precheck, for the backward's eight tensors; with_pointers 0: the shape and strides only
 * (bwd_workspace: the pointers are not set yet). */
static const char *bwd_precheck(const attn_bwd_params *p, int with_pointers, char *buf, size_t len) {
    const attn_fwd_params *f = p->fwd;
    const char *no = shape_precheck(f, buf, len);
    if (no) return no;
    if (f->block_table) return "paged K/V has no backward";
    const bwd_key k = bwd_key_of(p, 0);
    /* batch strides the layout does not use (rows packed by cu_seqlens) are not checked */
    const int unused[12] = {[0] = f->cu_seqlens_q != NULL, [3] = f->cu_seqlens_q != NULL,
                            [6] = f->cu_seqlens_k != NULL, [9] = f->cu_seqlens_k != NULL};
    static const char *const names[12] = {"do_batch", "do_head", "do_row", "dq_batch", "dq_head", "dq_row",
                                          "dk_batch", "dk_head", "dk_row", "dv_batch", "dv_head", "dv_row"};
    for (int i = 0; i < 12; i++)
        if (!unused[i] && (k.strides[i] < 1 || k.strides[i] % 8)) {
            snprintf(buf, len, "%s_stride %lld is not a positive multiple of 8 elements (16 bytes)", names[i],
                     (long long)k.strides[i]);
            return buf;
        }
    if (!with_pointers) return NULL;
    const void *ptrs[10] = {f->q, f->k, f->v, f->o, f->lse, p->dout, p->dq, p->dk, p->dv, f->seqused_k};
    static const char *const pnames[10] = {"q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv", "seqused_k"};
    for (int i = 0; i < 10; i++)
        if ((i < 9 && !ptrs[i]) || ((uintptr_t)ptrs[i] & 15u)) {
            snprintf(buf, len, "%s (%p) is %s", pnames[i], ptrs[i], ptrs[i] ? "not 16-byte aligned" : "NULL");
            return buf;
        }
    return NULL;
}

/* The backward plan of p's problem, built on first use with no buffers (its engine is chosen
 * at the first bwd call: bwd_choose): ATTN_OK with *out; ATTN_UNSUPPORTED (*out NULL); or
 * CUDNN_KERNEL_ERROR. */
static int bwd_plan_for(const attn_bwd_params *p, cudaStream_t stream, int device, bwd_entry **out) {
    *out = NULL;
    const bwd_key key = bwd_key_of(p, device);
    for (bwd_entry *e = bwd_plans; e; e = e->next)
        if (!memcmp(&e->key, &key, sizeof key)) {
            *out = e;
            return e->plan ? ATTN_OK : ATTN_UNSUPPORTED;
        }
    attn_cudnn_plan_opts o;
    if (base_opts(&o)) return CUDNN_KERNEL_ERROR;
    device_entry *d = device_cudnn(device);
    bwd_entry *e = d ? calloc(1, sizeof *e) : NULL;
    if (!e) {
        SAY("out of host memory");
        return CUDNN_KERNEL_ERROR;
    }
    char what[512], why[8192];
    describe(p->fwd, what, sizeof what);
    snprintf(what + strlen(what), sizeof what - strlen(what), " backward%s", p->deterministic ? " deterministic" : "");
    o.external_workspace = 1; /* the harness's workspace (bwd_workspace), tuned at the first bwd */
    int rc = d->cudnn ? attn_cudnn_bwd_plan_create_ex(d->cudnn, p, &o, stream, &e->plan, why, sizeof why)
                      : ATTN_UNSUPPORTED;
    if (rc != 0 && rc != ATTN_UNSUPPORTED) {
        SAY("building the cuDNN backward plan failed (%s): %s", what, why);
        free(e);
        return CUDNN_KERNEL_ERROR;
    }
    if (rc == ATTN_UNSUPPORTED && d->cudnn) SAY("not supported by cuDNN (%s): %s", what, why);
    if (rc == ATTN_UNSUPPORTED) e->plan = NULL;
    else {
        attn_cudnn_plan_info info;
        char cost[512];
        attn_cudnn_plan_get_info(e->plan, &info);
        SAY("backward plan for %s: %s, %zu workspace bytes, %s%s%s", what, info.kind,
            attn_cudnn_bwd_plan_workspace(e->plan), plan_cost(&info, cost, sizeof cost), why[0] ? "; " : "", why);
    }
    e->key = key;
    e->next = bwd_plans;
    bwd_plans = e;
    *out = e;
    return e->plan ? ATTN_OK : ATTN_UNSUPPORTED;
}

/* The first bwd call for a plan chooses its engine: autotuned on the call's buffers and
 * workspace (as fwd's first call: synchronizes), or, inside a CUDA graph capture or with
 * $ATTN_CUDNN_AUTOTUNE=0, the heuristics' first. ATTN_OK, ATTN_UNSUPPORTED (no config ran)
 * or CUDNN_KERNEL_ERROR. */
static int bwd_choose(bwd_entry *e, const attn_bwd_params *p, cudaStream_t stream) {
    if (e->chosen) return ATTN_OK;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const int capturing = cudaStreamIsCapturing(stream, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone;
    char why[4096];
    int rc = attn_cudnn_bwd_plan_tune(e->plan, p, capturing, stream, why, sizeof why);
    if (rc) {
        SAY("choosing the cuDNN backward engine failed: %s", why);
        return rc == ATTN_UNSUPPORTED ? ATTN_UNSUPPORTED : CUDNN_KERNEL_ERROR;
    }
    attn_cudnn_plan_info info;
    attn_cudnn_plan_get_info(e->plan, &info);
    SAY("backward engine %s (%d of %d configs built, %s)", info.engine, info.configs_built, info.configs_tried,
        info.tuned ? "the fastest kept" : "the first kept");
    e->chosen = 1;
    return ATTN_OK;
}

/* The backward problem as this kernel takes it: the forward normalized as fwd does; NULL,
 * or the reason it is not supported. */
static const char *bwd_normalized(const attn_bwd_params *in, attn_fwd_params *f, attn_bwd_params *p,
                                  int with_pointers, char *buf, size_t len) {
    *f = normalized(in->fwd);
    *p = *in;
    p->fwd = f;
    return bwd_precheck(p, with_pointers, buf, len);
}

static size_t bwd_workspace_locked(const attn_bwd_params *in) {
    attn_fwd_params f;
    attn_bwd_params p;
    char buf[256];
    bwd_entry *e = NULL;
    int device = 0;
    /* anything refused is said, and refused again, by bwd */
    if (!in || !in->fwd || bwd_normalized(in, &f, &p, 0, buf, sizeof buf) || cudaGetDevice(&device) != cudaSuccess ||
        bwd_plan_for(&p, 0, device, &e) != ATTN_OK)
        return 0;
    return attn_cudnn_bwd_plan_workspace(e->plan);
}

static int bwd_locked(const attn_bwd_params *in, cudaStream_t stream) {
    if (!in || !in->fwd) return CUDNN_KERNEL_ERROR;
    attn_fwd_params f;
    attn_bwd_params p;
    char buf[256];
    const char *no = bwd_normalized(in, &f, &p, 1, buf, sizeof buf);
    if (no) {
        static int said; /* the first few */
        if (said++ < 4) SAY("backward not supported: %s", no);
        return ATTN_UNSUPPORTED;
    }
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        SAY("cudaGetDevice failed");
        return CUDNN_KERNEL_ERROR;
    }
    bwd_entry *e = NULL;
    int rc = bwd_plan_for(&p, stream, device, &e);
    if (rc != ATTN_OK) return rc;
    const size_t need = attn_cudnn_bwd_plan_workspace(e->plan);
    if (p.workspace_bytes < need) {
        SAY("the backward's workspace is %zu bytes, %zu needed (bwd_workspace's answer)", p.workspace_bytes, need);
        return CUDNN_KERNEL_ERROR;
    }
    if ((rc = bwd_choose(e, &p, stream)) != ATTN_OK) return rc;
    char why[2048];
    if (attn_cudnn_bwd_plan_run(e->plan, &p, stream, why, sizeof why)) {
        SAY("%s", why);
        return CUDNN_KERNEL_ERROR;
    }
    return ATTN_OK;
}

/* The entry points: one call at a time (the header comment says why). */
static pthread_mutex_t entry_lock = PTHREAD_MUTEX_INITIALIZER;

static int cudnn_fwd(const attn_fwd_params *in, cudaStream_t stream) {
    pthread_mutex_lock(&entry_lock);
    const int rc = fwd_locked(in, stream);
    pthread_mutex_unlock(&entry_lock);
    return rc;
}

static size_t cudnn_bwd_workspace(const attn_bwd_params *in) {
    pthread_mutex_lock(&entry_lock);
    const size_t bytes = bwd_workspace_locked(in);
    pthread_mutex_unlock(&entry_lock);
    return bytes;
}

static int cudnn_bwd(const attn_bwd_params *in, cudaStream_t stream) {
    pthread_mutex_lock(&entry_lock);
    const int rc = bwd_locked(in, stream);
    pthread_mutex_unlock(&entry_lock);
    return rc;
}

/* caps: every version-2 feature, each mapped onto cuDNN's graph (cudnn_sdpa.h) and refused
 * (ATTN_UNSUPPORTED, cuDNN's or our reason) where cuDNN cannot do the combination; dtypes 0:
 * fp16 and bf16; head_dims and head_dim_pairs NULL: any (fwd reports the head dims cuDNN
 * refuses as not supported) */
const attn_kernel attn_kernel_cudnn = {
    .name = "cudnn",
    .fwd = cudnn_fwd,
    .caps = ATTN_CAP_GQA | ATTN_CAP_WINDOW | ATTN_CAP_SOFTCAP | ATTN_CAP_HEAD_DIM_V | ATTN_CAP_VARLEN |
            ATTN_CAP_PAGED | ATTN_CAP_SEQUSED_K,
    .bwd = cudnn_bwd,
    .bwd_workspace = cudnn_bwd_workspace,
    .bwd_caps = ATTN_CAP_GQA | ATTN_CAP_WINDOW | ATTN_CAP_SOFTCAP | ATTN_CAP_HEAD_DIM_V | ATTN_CAP_VARLEN |
                ATTN_CAP_SEQUSED_K | ATTN_BWD_DETERMINISTIC,
};
