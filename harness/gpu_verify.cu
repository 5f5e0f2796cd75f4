#include "gpu_verify.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device_memory.h"

enum { GRID = 1024, BLOCK = 256 };

__device__ __forceinline__ float load_f(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float load_f(const __nv_bfloat16 *p) { return __bfloat162float(*p); }

/* ---- random inputs ---------------------------------------------------------------- */

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The i-th value of the stream `seed`: a counter-based hash, so any element is computed
 * alone, in any order, on any thread. */
__device__ __forceinline__ float normal_at(uint64_t seed, uint64_t i, float sigma) {
    uint64_t r = mix64(seed + 0x9e3779b97f4a7c15ull * (i + 1));
    float u1 = ((r >> 40) + 1.0f) * 0x1p-24f; /* (0, 1] */
    float u2 = ((r >> 16) & 0xffffff) * 0x1p-24f;
    return sigma * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2); /* Box-Muller */
}

template <typename T>
__global__ void fill_normal_kernel(T *dst, size_t n, uint64_t seed, float sigma) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = (T)normal_at(seed, i, sigma);
}

extern "C" cudaError_t attn_fill_normal(void *dst, attn_dtype dtype, size_t n, uint64_t seed,
                                        float sigma, cudaStream_t stream) {
    if (dtype == ATTN_BF16)
        fill_normal_kernel<<<GRID, BLOCK, 0, stream>>>((__nv_bfloat16 *)dst, n, seed, sigma);
    else
        fill_normal_kernel<<<GRID, BLOCK, 0, stream>>>((__half *)dst, n, seed, sigma);
    return cudaGetLastError();
}

/* offset in elements of logical BHSD index i through the view */
__device__ __forceinline__ int64_t view_offset(const attn_tensor_view &v, uint64_t i) {
    const uint64_t d = i % v.dim, s = i / v.dim % v.seq, h = i / v.dim / v.seq % v.heads,
                   b = i / v.dim / v.seq / v.heads;
    return (int64_t)b * v.batch_stride + (int64_t)h * v.head_stride + (int64_t)s * v.row_stride +
           (int64_t)d;
}

static unsigned long long view_elems(const attn_tensor_view *v) {
    return (unsigned long long)v->batch * v->heads * v->seq * v->dim;
}

template <typename T>
__global__ void fill_view_kernel(T *dst, attn_tensor_view v, unsigned long long n, uint64_t seed,
                                 float sigma) {
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        dst[view_offset(v, i)] = (T)normal_at(seed, i, sigma);
}

extern "C" cudaError_t attn_fill_normal_view(void *dst, attn_dtype dtype, const attn_tensor_view *v,
                                             uint64_t seed, float sigma, cudaStream_t stream) {
    const unsigned long long n = view_elems(v);
    if (dtype == ATTN_BF16)
        fill_view_kernel<<<GRID, BLOCK, 0, stream>>>((__nv_bfloat16 *)dst, *v, n, seed, sigma);
    else
        fill_view_kernel<<<GRID, BLOCK, 0, stream>>>((__half *)dst, *v, n, seed, sigma);
    return cudaGetLastError();
}

/* ---- counting: how many indices match a predicate, and the first ------------------- */

struct DevMatch {
    unsigned long long count, first;
};

template <class Pred>
__global__ void match_kernel(Pred pred, unsigned long long n, DevMatch *m) {
    unsigned long long c = 0, f = ~0ull;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        if (pred(i)) {
            if (!c) f = i; /* i grows: this thread's first */
            c++;
        }
    for (int off = 16; off > 0; off >>= 1) {
        c += __shfl_xor_sync(0xffffffffu, c, off);
        f = min(f, __shfl_xor_sync(0xffffffffu, f, off));
    }
    if ((threadIdx.x & 31) == 0 && c) {
        atomicAdd(&m->count, c);
        atomicMin(&m->first, f);
    }
}

/* Runs the predicate over [0, n) and synchronizes the stream. */
template <class Pred>
static cudaError_t run_match(Pred pred, unsigned long long n, attn_match *out, cudaStream_t stream) {
    DevMatch init = {0, ~0ull}, host;
    DevMatch *dm;
    cudaError_t e = attn_dev_malloc_async((void **)&dm, sizeof *dm, stream);
    if (e != cudaSuccess) return e;
    e = cudaMemcpyAsync(dm, &init, sizeof init, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess && n) {
        match_kernel<<<GRID, BLOCK, 0, stream>>>(pred, n, dm);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(&host, dm, sizeof host, cudaMemcpyDeviceToHost, stream);
    cudaFreeAsync(dm, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) return e;
    out->count = host.count;
    out->first = host.count ? host.first : 0;
    return cudaSuccess;
}

template <typename T> struct NanInView {
    const T *o;
    attn_tensor_view v;
    __device__ bool operator()(uint64_t i) const { return isnan(load_f(o + view_offset(v, i))); }
};
struct NanF32 {
    const float *x;
    __device__ bool operator()(uint64_t i) const { return isnan(x[i]); }
};
struct PoisonF32 {
    const float *x;
    __device__ bool operator()(uint64_t i) const { return __float_as_uint(x[i]) == 0xffffffffu; }
};
struct ByteNot {
    const unsigned char *b;
    unsigned char value;
    __device__ bool operator()(uint64_t i) const { return b[i] != value; }
};
struct BytesDiffer {
    const unsigned char *a, *b;
    __device__ bool operator()(uint64_t i) const { return a[i] != b[i]; }
};
struct PaddingWritten {
    const unsigned short *o;
    int64_t row_stride, used;
    __device__ bool operator()(uint64_t i) const {
        return (int64_t)(i % (uint64_t)row_stride) >= used && o[i] != 0xffffu;
    }
};

extern "C" cudaError_t attn_count_nan_view(const void *o, attn_dtype dtype, const attn_tensor_view *v,
                                           attn_match *out, cudaStream_t stream) {
    if (dtype == ATTN_BF16)
        return run_match(NanInView<__nv_bfloat16>{(const __nv_bfloat16 *)o, *v}, view_elems(v), out, stream);
    return run_match(NanInView<__half>{(const __half *)o, *v}, view_elems(v), out, stream);
}

extern "C" cudaError_t attn_count_nan_f32(const float *x, size_t n, attn_match *nan,
                                          attn_match *poison, cudaStream_t stream) {
    cudaError_t e = run_match(NanF32{x}, n, nan, stream);
    return e != cudaSuccess ? e : run_match(PoisonF32{x}, n, poison, stream);
}

extern "C" cudaError_t attn_count_changed_bytes(const void *buf, size_t from, size_t to,
                                                unsigned char poison, attn_match *out,
                                                cudaStream_t stream) {
    cudaError_t e = run_match(ByteNot{(const unsigned char *)buf + from, poison}, to - from, out, stream);
    if (e == cudaSuccess && out->count) out->first += from;
    return e;
}

extern "C" cudaError_t attn_count_diff_bytes(const void *a, const void *b, size_t n, attn_match *out,
                                             cudaStream_t stream) {
    return run_match(BytesDiffer{(const unsigned char *)a, (const unsigned char *)b}, n, out, stream);
}

extern "C" cudaError_t attn_count_padding_written(const void *o, int64_t extent, int64_t row_stride,
                                                  int64_t used, attn_match *out, cudaStream_t stream) {
    return run_match(PaddingWritten{(const unsigned short *)o, row_stride, used},
                     (unsigned long long)extent, out, stream);
}

/* ---- single elements, for messages ------------------------------------------------ */

extern "C" float attn_peek_f32(const float *x, size_t i) {
    float f = NAN;
    cudaMemcpy(&f, x + i, sizeof f, cudaMemcpyDeviceToHost);
    return f;
}

extern "C" float attn_peek_view(const void *o, attn_dtype dtype, const attn_tensor_view *v, size_t i) {
    const uint64_t d = i % v->dim, s = i / v->dim % v->seq, h = i / v->dim / v->seq % v->heads,
                   b = i / v->dim / v->seq / v->heads;
    const int64_t off = (int64_t)b * v->batch_stride + (int64_t)h * v->head_stride +
                        (int64_t)s * v->row_stride + (int64_t)d;
    unsigned short bits = 0xffffu;
    cudaMemcpy(&bits, (const unsigned short *)o + off, sizeof bits, cudaMemcpyDeviceToHost);
    float f;
    if (dtype == ATTN_BF16) {
        unsigned int u = (unsigned int)bits << 16;
        memcpy(&f, &u, sizeof f);
    } else {
        __half_raw raw;
        raw.x = bits;
        f = __half2float(__half(raw));
    }
    return f;
}
static float float_from_bits(unsigned int bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

struct DevStats {
    unsigned long long max_err_key; /* float bits of max |O-G| << 32 | (~index): first of the max */
    unsigned int max_ref_bits, max_g_bits; /* non-negative floats order like their bits */
    double sum_err, sum_ref;
    unsigned long long nonfinite, empty_nonzero, first_nonfinite, first_empty;
};




template <typename T>
__global__ void output_stats_kernel(const attn_fwd_params p, const float *__restrict__ g,
                                    const float *__restrict__ r, unsigned long long n, DevStats *st) {
    const T *o = (const T *)p.o;
    const int D = p.head_dim_v ? p.head_dim_v : p.head_dim, S = p.seqlen_q, H = p.heads;
    const int right = p.causal ? 0 : p.window_right; /* the window rule of attn_abi.h */
    float lmax = 0.f, lref = 0.f, lg = 0.f;
    unsigned int lidx = 0xffffffffu;
    double lsum = 0.0, lsumr = 0.0;
    unsigned long long nf = 0, ne = 0, first_nf = ~0ull, first_e = ~0ull;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned long long d = i % D, s = i / D % S, h = i / D / S % H, b = i / D / S / H;
        const float ov = load_f(o + b * p.o_batch_stride + h * p.o_head_stride + s * p.o_row_stride + d);
        const float gv = g[i], rv = r[i];
        if (isfinite(gv) && !isfinite(ov)) { /* counted, not summed */
            nf++;
            first_nf = min(first_nf, i);
            continue;
        }
        const long long diag = (long long)s + p.seqlen_k - S;
        const long long lo = max(p.window_left < 0 ? 0ll : diag - p.window_left, 0ll);
        const long long hi = min(right < 0 ? (long long)p.seqlen_k : diag + right + 1, (long long)p.seqlen_k);
        if (hi <= lo && ov != 0.0f) { /* a row that sees no key must be exactly zero */
            ne++;
            first_e = min(first_e, i);
        }
        const double e = fabs((double)ov - gv), er = fabs((double)rv - gv);
        if ((float)e > lmax) lmax = (float)e, lidx = (unsigned int)i; /* i grows: first of the max */
        lref = fmaxf(lref, (float)er);
        lg = fmaxf(lg, fabsf(gv));
        lsum += e;
        lsumr += er;
    }
    unsigned long long key = ((unsigned long long)__float_as_uint(lmax) << 32) | (0xffffffffu - lidx);
    for (int off = 16; off > 0; off >>= 1) {
        key = max(key, __shfl_xor_sync(0xffffffffu, key, off));
        lref = fmaxf(lref, __shfl_xor_sync(0xffffffffu, lref, off));
        lg = fmaxf(lg, __shfl_xor_sync(0xffffffffu, lg, off));
        lsum += __shfl_xor_sync(0xffffffffu, lsum, off);
        lsumr += __shfl_xor_sync(0xffffffffu, lsumr, off);
        nf += __shfl_xor_sync(0xffffffffu, nf, off);
        ne += __shfl_xor_sync(0xffffffffu, ne, off);
        first_nf = min(first_nf, __shfl_xor_sync(0xffffffffu, first_nf, off));
        first_e = min(first_e, __shfl_xor_sync(0xffffffffu, first_e, off));
    }
    if ((threadIdx.x & 31) == 0) {
        atomicMax(&st->max_err_key, key);
        atomicMax(&st->max_ref_bits, __float_as_uint(lref));
        atomicMax(&st->max_g_bits, __float_as_uint(lg));
        atomicAdd(&st->sum_err, lsum);
        atomicAdd(&st->sum_ref, lsumr);
        atomicAdd(&st->nonfinite, nf);
        atomicAdd(&st->empty_nonzero, ne);
        atomicMin(&st->first_nonfinite, first_nf);
        atomicMin(&st->first_empty, first_e);
    }
}

extern "C" cudaError_t attn_output_stats_gpu(const attn_fwd_params *p, const float *g, const float *r,
                                             attn_output_stats *out, cudaStream_t stream) {
    const int dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
    const unsigned long long n = (unsigned long long)p->batch * p->heads * p->seqlen_q * dv;
    if (n >= 0xffffffffull) return cudaErrorInvalidValue; /* the index must fit the key's 32 bits */
    DevStats init = {}, host;
    init.first_nonfinite = init.first_empty = ~0ull;
    DevStats *dst;
    cudaError_t e = attn_dev_malloc((void **)&dst, sizeof *dst);
    if (e != cudaSuccess) return e;
    e = cudaMemcpyAsync(dst, &init, sizeof init, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) {
        if (p->dtype == ATTN_BF16)
            output_stats_kernel<__nv_bfloat16><<<1024, 256, 0, stream>>>(*p, g, r, n, dst);
        else
            output_stats_kernel<__half><<<1024, 256, 0, stream>>>(*p, g, r, n, dst);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(&host, dst, sizeof host, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    attn_dev_free(dst);
    if (e != cudaSuccess) return e;
    memset(out, 0, sizeof *out);
    out->max_err = float_from_bits((unsigned int)(host.max_err_key >> 32));
    out->worst = out->max_err > 0 ? 0xffffffffu - (unsigned int)(host.max_err_key & 0xffffffffu) : 0;
    out->max_ref_err = float_from_bits(host.max_ref_bits);
    out->max_abs_g = float_from_bits(host.max_g_bits);
    out->sum_err = host.sum_err;
    out->sum_ref_err = host.sum_ref;
    out->nonfinite = host.nonfinite;
    out->first_nonfinite = host.nonfinite ? host.first_nonfinite : 0;
    out->empty_nonzero = host.empty_nonzero;
    out->first_empty_nonzero = host.empty_nonzero ? host.first_empty : 0;
    out->counted = n - host.nonfinite;
    return cudaSuccess;
}

/* ---- the LSE rule, on the GPU --------------------------------------------------- */

/* float -> unsigned int with the same order (negatives included) */
__device__ __forceinline__ unsigned int ordered_bits(float f) {
    unsigned int u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct DevLse {
    unsigned long long bad, first_bad, worst_key; /* worst: the largest e - bound, first row */
    unsigned int max_g_bits;
};

__global__ void lse_verdict_kernel(const float *__restrict__ lse, const float *__restrict__ lg,
                                   unsigned long long rows, double atol, double rtol, DevLse *st) {
    unsigned long long bad = 0, first = ~0ull, key = 0;
    float gmax = 0.f;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const float g = lg[i], l = lse[i];
        bool b;
        if (isinf(g) && g < 0) {
            b = !(isinf(l) && l < 0);
        } else {
            const double bound = atol + rtol * fabs((double)g), e = fabs((double)l - g);
            b = !(e <= bound); /* NaN fails too */
            if (isfinite(e)) {
                unsigned long long k = ((unsigned long long)ordered_bits((float)(e - bound)) << 32) |
                                       (0xffffffffu - (unsigned int)i);
                key = max(key, k);
            }
            if (isfinite(g)) gmax = fmaxf(gmax, fabsf(g));
        }
        if (b) {
            if (!bad) first = i;
            bad++;
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        bad += __shfl_xor_sync(0xffffffffu, bad, off);
        first = min(first, __shfl_xor_sync(0xffffffffu, first, off));
        key = max(key, __shfl_xor_sync(0xffffffffu, key, off));
        gmax = fmaxf(gmax, __shfl_xor_sync(0xffffffffu, gmax, off));
    }
    if ((threadIdx.x & 31) == 0) {
        if (bad) atomicAdd(&st->bad, bad), atomicMin(&st->first_bad, first);
        atomicMax(&st->worst_key, key);
        atomicMax(&st->max_g_bits, __float_as_uint(gmax));
    }
}

extern "C" cudaError_t attn_lse_verdict_gpu(const float *lse, const float *lg, size_t rows,
                                            const attn_tolerance *t, attn_lse_verdict *v,
                                            double *max_abs_g, cudaStream_t stream) {
    if (rows >= 0xffffffffull) return cudaErrorInvalidValue; /* the row must fit the key's 32 bits */
    DevLse init = {0, ~0ull, 0, 0}, host;
    DevLse *dst;
    cudaError_t e = attn_dev_malloc_async((void **)&dst, sizeof *dst, stream);
    if (e != cudaSuccess) return e;
    e = cudaMemcpyAsync(dst, &init, sizeof init, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) {
        lse_verdict_kernel<<<GRID, BLOCK, 0, stream>>>(lse, lg, rows, t->lse_atol, t->lse_rtol, dst);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(&host, dst, sizeof host, cudaMemcpyDeviceToHost, stream);
    cudaFreeAsync(dst, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) return e;
    memset(v, 0, sizeof *v);
    if (host.worst_key) { /* the row nearest to failing: its figures, as attn_judge_lse gives them */
        size_t w = 0xffffffffu - (unsigned int)(host.worst_key & 0xffffffffu);
        double g = attn_peek_f32(lg, w), l = attn_peek_f32(lse, w);
        v->worst = w;
        v->bound = t->lse_atol + t->lse_rtol * fabs(g);
        v->max_err = fabs(l - g);
    }
    v->bad_count = host.bad;
    if (host.bad) v->worst = host.first_bad;
    v->ok = host.bad == 0;
    *max_abs_g = float_from_bits(host.max_g_bits);
    return cudaSuccess;
}

/* ---- the stream gate ------------------------------------------------------------ */

/* pinned, mapped: [0] open, [1] timed out, [RUNNING + i] block i's SM + 1 while it runs (0
 * before it starts and once it has returned), [RELEASED + i] block i let go alone */
enum { GATE_RUNNING = 2, GATE_RELEASED = GATE_RUNNING + ATTN_GATE_MAX_BLOCKS, GATE_FLAGS = GATE_RELEASED + ATTN_GATE_MAX_BLOCKS };
struct attn_gate {
    volatile int *flags, *flags_dev;
};

__global__ void gate_kernel(volatile int *flags, unsigned long long timeout_ns) {
    unsigned long long t0, t;
    unsigned sm;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    flags[GATE_RUNNING + blockIdx.x] = (int)sm + 1;
    do {
        if (flags[0] || flags[GATE_RELEASED + blockIdx.x]) break;
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < timeout_ns);
    if (!flags[0] && !flags[GATE_RELEASED + blockIdx.x]) flags[1] = 1;
    __threadfence_system();
    flags[GATE_RUNNING + blockIdx.x] = 0;
}

extern "C" cudaError_t attn_gate_create(attn_gate **out) {
    attn_gate *g = (attn_gate *)calloc(1, sizeof *g);
    *out = g;
    if (!g) return cudaErrorMemoryAllocation;
    cudaError_t e = cudaHostAlloc((void **)&g->flags, GATE_FLAGS * sizeof(int), cudaHostAllocMapped);
    if (e == cudaSuccess) e = cudaHostGetDevicePointer((void **)&g->flags_dev, (void *)g->flags, 0);
    return e;
}

static cudaError_t gate_launch(attn_gate *g, cudaStream_t stream, double timeout_s, int blocks, int smem) {
    if (blocks < 1 || blocks > ATTN_GATE_MAX_BLOCKS) return cudaErrorInvalidValue;
    for (int i = 0; i < GATE_FLAGS; i++) g->flags[i] = 0;
    gate_kernel<<<blocks, 1, smem, stream>>>(g->flags_dev, (unsigned long long)(timeout_s * 1e9));
    return cudaGetLastError();
}

extern "C" cudaError_t attn_gate_shut(attn_gate *g, cudaStream_t stream, double timeout_s) {
    return gate_launch(g, stream, timeout_s, 1, 0);
}

extern "C" cudaError_t attn_gate_hold_sms(attn_gate *g, cudaStream_t stream, double timeout_s, int blocks) {
    int dev, optin;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    /* the most a block may have: with the 1 KB each block reserves, the SM's whole shared memory */
    if (e == cudaSuccess) e = cudaFuncSetAttribute(gate_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(gate_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared);
    return e == cudaSuccess ? gate_launch(g, stream, timeout_s, blocks, optin) : e;
}

extern "C" int attn_gate_running(const attn_gate *g) {
    int n = 0;
    for (int i = 0; i < ATTN_GATE_MAX_BLOCKS; i++) n += g->flags[GATE_RUNNING + i] != 0;
    return n;
}

extern "C" int attn_gate_block_sm(const attn_gate *g, int block) {
    return block >= 0 && block < ATTN_GATE_MAX_BLOCKS ? g->flags[GATE_RUNNING + block] - 1 : -1;
}

extern "C" void attn_gate_release_block(attn_gate *g, int block) {
    if (block >= 0 && block < ATTN_GATE_MAX_BLOCKS) g->flags[GATE_RELEASED + block] = 1;
}

__global__ void cluster_probe_kernel() {}

extern "C" cudaError_t attn_cluster_probe(cudaStream_t stream) {
    int dev, major;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e != cudaSuccess) return e;
    if (major < 9) return cudaErrorNotSupported;
    cudaLaunchAttribute cluster[1];
    cluster[0].id = cudaLaunchAttributeClusterDimension;
    cluster[0].val.clusterDim.x = 2, cluster[0].val.clusterDim.y = 1, cluster[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(2), cfg.blockDim = dim3(32), cfg.stream = stream, cfg.attrs = cluster, cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, cluster_probe_kernel);
}

extern "C" void attn_gate_open(attn_gate *g) { g->flags[0] = 1; }
extern "C" int attn_gate_timed_out(const attn_gate *g) { return g->flags[1]; }

extern "C" void attn_gate_destroy(attn_gate *g) {
    if (!g) return;
    if (g->flags) cudaFreeHost((void *)g->flags);
    free(g);
}

/* ---- packed rows into the dense layout (attn_unpack_rows, attn_unpack_lse) ---- */

template <typename T>
__global__ void unpack_rows_kernel(const T *packed, const int32_t *cu, int batch, int heads, int max_rows, int dim,
                                   int64_t row_stride, int64_t head_stride, T *dense, float *g, float *r) {
    const uint64_t n = (uint64_t)batch * heads * max_rows * dim;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t d = i % dim, row = i / dim % max_rows, h = i / dim / max_rows % heads, b = i / dim / max_rows / heads;
        const int32_t len = cu[b + 1] - cu[b];
        if ((int64_t)row < len) {
            dense[i] = packed[((int64_t)cu[b] + (int64_t)row) * row_stride + (int64_t)h * head_stride + (int64_t)d];
        } else {
            dense[i] = T(0.0f);
            if (g) g[i] = 0.0f;
            if (r) r[i] = 0.0f;
        }
    }
}

__global__ void unpack_lse_kernel(const float *packed, const int32_t *cu, int batch, int heads, int max_rows,
                                  float *dense, float *lg) {
    const uint64_t n = (uint64_t)batch * heads * max_rows;
    const int64_t total = cu[batch];
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t row = i % max_rows, h = i / max_rows % heads, b = i / max_rows / heads;
        if ((int64_t)row < cu[b + 1] - cu[b]) {
            dense[i] = packed[(int64_t)h * total + cu[b] + (int64_t)row];
        } else {
            dense[i] = -INFINITY;
            if (lg) lg[i] = -INFINITY;
        }
    }
}

extern "C" cudaError_t attn_unpack_rows(const void *packed, attn_dtype dtype, const int32_t *cu, int batch, int heads,
                                        int max_rows, int dim, int64_t row_stride, int64_t head_stride, void *dense,
                                        float *g, float *r, cudaStream_t stream) {
    if (dtype == ATTN_BF16)
        unpack_rows_kernel<__nv_bfloat16><<<1024, 256, 0, stream>>>((const __nv_bfloat16 *)packed, cu, batch, heads,
                                                                  max_rows, dim, row_stride, head_stride,
                                                                  (__nv_bfloat16 *)dense, g, r);
    else
        unpack_rows_kernel<__half><<<1024, 256, 0, stream>>>((const __half *)packed, cu, batch, heads, max_rows, dim,
                                                           row_stride, head_stride, (__half *)dense, g, r);
    return cudaGetLastError();
}

extern "C" cudaError_t attn_unpack_lse(const float *packed, const int32_t *cu, int batch, int heads, int max_rows,
                                       float *dense, float *lg, cudaStream_t stream) {
    unpack_lse_kernel<<<256, 256, 0, stream>>>(packed, cu, batch, heads, max_rows, dense, lg);
    return cudaGetLastError();
}

/* ---- an input against its fill (attn_diff_fill_view) ---------------------------- */

__device__ __forceinline__ unsigned short bits_of(__half x) { return __half_as_ushort(x); }
__device__ __forceinline__ unsigned short bits_of(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }

struct DevFillDiff {
    unsigned long long count, key; /* key: first index << 16 | the fill's bits there */
    unsigned long long guard_count, guard_first;
};

/* The fill's value is computed as fill_view_kernel computes it, (T)normal_at(...): the same
 * code, so the same bits. */
template <typename T>
__global__ void fill_diff_kernel(const unsigned char *buf, size_t bytes, size_t guard, attn_tensor_view v,
                                 unsigned long long n, uint64_t seed, float sigma, unsigned char poison,
                                 DevFillDiff *out) {
    const T *data = (const T *)(buf + guard);
    const uint64_t start = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, step = (uint64_t)gridDim.x * blockDim.x;
    unsigned long long c = 0, key = ~0ull, gc = 0, gf = ~0ull;
    for (uint64_t i = start; i < n; i += step) {
        const unsigned short want = bits_of((T)normal_at(seed, i, sigma)), got = bits_of(data[view_offset(v, i)]);
        if (want != got) {
            if (!c) key = i << 16 | want; /* i grows: this thread's first */
            c++;
        }
    }
    for (uint64_t j = start; j < 2 * guard; j += step) { /* [0, guard), then [bytes - guard, bytes) */
        const uint64_t at = j < guard ? j : bytes - 2 * guard + j;
        if (buf[at] != poison) {
            if (!gc) gf = at;
            gc++;
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        c += __shfl_xor_sync(0xffffffffu, c, off);
        key = min(key, __shfl_xor_sync(0xffffffffu, key, off));
        gc += __shfl_xor_sync(0xffffffffu, gc, off);
        gf = min(gf, __shfl_xor_sync(0xffffffffu, gf, off));
    }
    if ((threadIdx.x & 31) == 0 && (c || gc)) {
        atomicAdd(&out->count, c), atomicMin(&out->key, key);
        atomicAdd(&out->guard_count, gc), atomicMin(&out->guard_first, gf);
    }
}

extern "C" cudaError_t attn_diff_fill_view(const void *buf, size_t bytes, size_t guard, attn_dtype dtype,
                                           const attn_tensor_view *v, uint64_t seed, float sigma,
                                           unsigned char poison, attn_fill_diff *out, cudaStream_t stream) {
    const unsigned long long n = view_elems(v);
    if (n >> 48 || bytes < 2 * guard) return cudaErrorInvalidValue; /* the index must fit the key's 48 bits */
    DevFillDiff init = {0, ~0ull, 0, ~0ull}, host;
    DevFillDiff *dev;
    cudaError_t e = attn_dev_malloc_async((void **)&dev, sizeof *dev, stream);
    if (e != cudaSuccess) return e;
    e = cudaMemcpyAsync(dev, &init, sizeof init, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) {
        const unsigned char *b = (const unsigned char *)buf;
        if (dtype == ATTN_BF16)
            fill_diff_kernel<__nv_bfloat16>
                <<<GRID, BLOCK, 0, stream>>>(b, bytes, guard, *v, n, seed, sigma, poison, dev);
        else
            fill_diff_kernel<__half><<<GRID, BLOCK, 0, stream>>>(b, bytes, guard, *v, n, seed, sigma, poison, dev);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(&host, dev, sizeof host, cudaMemcpyDeviceToHost, stream);
    cudaFreeAsync(dev, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) return e;
    memset(out, 0, sizeof *out);
    out->count = host.count;
    if (host.count) out->first = host.key >> 16, out->filled = (unsigned int)(host.key & 0xffffu);
    out->guard_count = host.guard_count;
    out->guard_first = host.guard_count ? host.guard_first : 0;
    return cudaSuccess;
}

extern "C" unsigned int attn_peek_view_bits(const void *t, const attn_tensor_view *v, size_t i) {
    const uint64_t d = i % v->dim, s = i / v->dim % v->seq, h = i / v->dim / v->seq % v->heads,
                   b = i / v->dim / v->seq / v->heads;
    const int64_t off = (int64_t)b * v->batch_stride + (int64_t)h * v->head_stride + (int64_t)s * v->row_stride +
                        (int64_t)d;
    unsigned short bits = 0;
    cudaMemcpy(&bits, (const unsigned short *)t + off, sizeof bits, cudaMemcpyDeviceToHost);
    return bits;
}
