#include "bench_gpu.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stats.h"

/* ---- random inputs ---------------------------------------------------------------- */

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_normal_kernel(T *dst, size_t n, uint64_t seed, float sigma) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t r = mix64(seed + 0x9e3779b97f4a7c15ull * (i + 1));
        float u1 = ((r >> 40) + 1.0f) * 0x1p-24f; /* (0, 1] */
        float u2 = ((r >> 16) & 0xffffff) * 0x1p-24f;
        dst[i] = (T)(sigma * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2)); /* Box-Muller */
    }
}

extern "C" cudaError_t attn_fill_normal(void *dst, attn_dtype dtype, size_t n, uint64_t seed,
                                        float sigma, cudaStream_t stream) {
    if (dtype == ATTN_BF16)
        fill_normal_kernel<<<1024, 256, 0, stream>>>((__nv_bfloat16 *)dst, n, seed, sigma);
    else
        fill_normal_kernel<<<1024, 256, 0, stream>>>((__half *)dst, n, seed, sigma);
    return cudaGetLastError();
}

/* ---- timing helpers ----------------------------------------------------------------- */

__device__ __forceinline__ uint64_t globaltimer_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Holds the stream until the host has enqueued a whole sample (or 1 s passes). */
__global__ void hold_stream_kernel(const volatile int *release) {
    uint64_t t0 = globaltimer_ns();
    while (!*release && globaltimer_ns() - t0 < 1000000000ull) __nanosleep(1000);
}

/* One block per SM: the SM clock over a 50 us window, from clock64 against %globaltimer. */
__global__ void clock_probe_kernel(float *mhz) {
    if (threadIdx.x) return;
    uint64_t t0 = globaltimer_ns(), t1;
    long long c0 = clock64();
    do t1 = globaltimer_ns(); while (t1 - t0 < 50000);
    long long c1 = clock64();
    mhz[blockIdx.x] = (float)(c1 - c0) * 1000.0f / (float)(t1 - t0);
}

struct attn_timer {
    cudaStream_t stream;
    void *flush;
    size_t flush_bytes;
    int *release;       /* pinned, mapped */
    int *release_dev;
    float *mhz, *mhz_host; /* per-SM clock of the last probe */
    int sms;
    double max_clock_mhz;
    cudaEvent_t start, stop;
};

#define TRY(call)                                                                            \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            snprintf(err, errlen, "%s:%d: %s: %s", __FILE__, __LINE__, #call,                \
                     cudaGetErrorString(e_));                                                \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

extern "C" int attn_timer_create(attn_timer **out, cudaStream_t stream, char *err,
                                 size_t errlen) {
    attn_timer *t = (attn_timer *)calloc(1, sizeof *t);
    *out = t;
    if (!t) {
        snprintf(err, errlen, "out of host memory");
        return 1;
    }
    t->stream = stream;
    int dev, l2, khz;
    TRY(cudaGetDevice(&dev));
    TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    TRY(cudaDeviceGetAttribute(&t->sms, cudaDevAttrMultiProcessorCount, dev));
    TRY(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
    t->max_clock_mhz = khz / 1000.0;
    t->flush_bytes = 2 * (size_t)l2;
    TRY(cudaMalloc(&t->flush, t->flush_bytes));
    TRY(cudaHostAlloc((void **)&t->release, sizeof(int), cudaHostAllocMapped));
    TRY(cudaHostGetDevicePointer((void **)&t->release_dev, t->release, 0));
    TRY(cudaMalloc((void **)&t->mhz, t->sms * sizeof(float)));
    TRY(cudaMallocHost((void **)&t->mhz_host, t->sms * sizeof(float)));
    TRY(cudaEventCreate(&t->start));
    TRY(cudaEventCreate(&t->stop));
    return 0;
}

extern "C" void attn_timer_destroy(attn_timer *t) {
    if (!t) return;
    cudaFree(t->flush);
    cudaFreeHost(t->release);
    cudaFree(t->mhz);
    cudaFreeHost(t->mhz_host);
    if (t->start) cudaEventDestroy(t->start);
    if (t->stop) cudaEventDestroy(t->stop);
    free(t);
}

static double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A call whose enqueue alone takes longer than this is not held: its launches would fill the
 * launch queue behind the hold kernel, the host would block until the hold's 1 s safety
 * release, and each sample would cost a second. Unheld, its launch overhead is part of its
 * time, as it is in use (a baseline that loops over batches is launch-bound). */
#define HOLD_MAX_ENQUEUE_MS 10.0

/* One cold sample: ms, and the mean SM clock right after it. */
static int sample(attn_timer *t, attn_enqueue_fn fn, void *ctx, int held, int index, float *ms,
                  double *mhz, char *err, size_t errlen) {
    *(volatile int *)t->release = 0;
    if (held) {
        hold_stream_kernel<<<1, 1, 0, t->stream>>>(t->release_dev);
        TRY(cudaGetLastError());
    }
    TRY(cudaMemsetAsync(t->flush, index & 0xff, t->flush_bytes, t->stream)); /* L2 flush */
    TRY(cudaEventRecord(t->start, t->stream));
    if (fn(ctx, t->stream, err, errlen)) {
        *(volatile int *)t->release = 1;
        cudaStreamSynchronize(t->stream);
        return 1;
    }
    TRY(cudaEventRecord(t->stop, t->stream));
    clock_probe_kernel<<<t->sms, 32, 0, t->stream>>>(t->mhz);
    TRY(cudaGetLastError());
    TRY(cudaMemcpyAsync(t->mhz_host, t->mhz, t->sms * sizeof(float), cudaMemcpyDeviceToHost,
                        t->stream));
    *(volatile int *)t->release = 1;
    TRY(cudaStreamSynchronize(t->stream));
    TRY(cudaEventElapsedTime(ms, t->start, t->stop));
    double sum = 0;
    for (int i = 0; i < t->sms; i++) sum += t->mhz_host[i];
    *mhz = sum / t->sms;
    return 0;
}

extern "C" int attn_measure(attn_timer *t, attn_enqueue_fn fn, void *ctx,
                            const attn_timing_rules *rules, attn_timing *out, char *err,
                            size_t errlen) {
    memset(out, 0, sizeof *out);
    out->max_clock_mhz = t->max_clock_mhz;
    /* warm-up: module load, handles, lazily allocated buffers, clocks ramping up; and the
     * host's time to enqueue one call (the least over the warm-up, past the first) */
    double t0 = now_s();
    out->enqueue_ms = 1e30;
    for (int i = 0; i < 3 || now_s() - t0 < 0.05; i++) {
        const double e0 = now_s();
        if (fn(ctx, t->stream, err, errlen)) return 1;
        const double e1 = now_s();
        if (i > 0 && (e1 - e0) * 1e3 < out->enqueue_ms) out->enqueue_ms = (e1 - e0) * 1e3;
        TRY(cudaStreamSynchronize(t->stream));
        if (i > 1000) break;
    }
    out->held = out->enqueue_ms <= HOLD_MAX_ENQUEUE_MS;
    size_t cap = 1024, n = 0;
    double *ms = (double *)malloc(cap * sizeof *ms);
    if (!ms) {
        snprintf(err, errlen, "out of host memory");
        return 1;
    }
    double clock_sum = 0, kept_s = 0;
    const double start = now_s();
    for (int i = 0;; i++) {
        float m;
        double mhz;
        if (sample(t, fn, ctx, out->held, i, &m, &mhz, err, errlen)) {
            free(ms);
            return 1;
        }
        if (mhz < rules->min_clock_frac * t->max_clock_mhz) {
            out->dropped_clock++; /* throttled: not a measurement of the kernel */
        } else {
            if (n == cap) {
                double *grown = (double *)realloc(ms, 2 * cap * sizeof *ms);
                if (!grown) break;
                ms = grown, cap *= 2;
            }
            ms[n++] = m;
            clock_sum += mhz;
            kept_s += m * 1e-3;
        }
        if (n >= (size_t)rules->min_samples && kept_s >= rules->min_time_s &&
            attn_rsd(ms, n) < rules->max_rsd)
            break;
        if (now_s() - start > rules->timeout_s) {
            out->noisy = 1;
            break;
        }
    }
    if (n == 0) {
        snprintf(err, errlen, "every sample was dropped: the SM clock stayed under %.0f%% of "
                 "%.0f MHz (%d samples)", 100 * rules->min_clock_frac, t->max_clock_mhz,
                 out->dropped_clock);
        free(ms);
        return 1;
    }
    out->samples = (int)n;
    out->median_ms = attn_median(ms, n);
    out->min_ms = attn_min(ms, n);
    out->rsd = attn_rsd(ms, n);
    attn_bootstrap_median_ci(ms, n, 1000, 0x5eed, &out->ci_lo_ms, &out->ci_hi_ms);
    out->mean_clock_mhz = clock_sum / n;
    out->gpu_time_s = kept_s;
    free(ms);
    return 0;
}

/* ---- does this build hold code for this GPU? ------------------------------------------ */

__global__ void probe_kernel() {}

extern "C" cudaError_t attn_probe_kernel_image(void) {
    probe_kernel<<<1, 1>>>();
    cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

/* ---- the verdict rule's figures, on the GPU ----------------------------------------- */

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

__device__ __forceinline__ float load_f(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float load_f(const __nv_bfloat16 *p) { return __bfloat162float(*p); }

template <typename T>
__global__ void output_stats_kernel(const attn_fwd_params p, const float *__restrict__ g,
                                    const float *__restrict__ r, unsigned long long n, DevStats *st) {
    const T *o = (const T *)p.o;
    const int D = p.head_dim, S = p.seqlen_q, H = p.heads;
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
        if (p.causal && (long long)s + p.seqlen_k - S < 0 && ov != 0.0f) {
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
    const unsigned long long n = (unsigned long long)p->batch * p->heads * p->seqlen_q * p->head_dim;
    if (n >= 0xffffffffull) return cudaErrorInvalidValue; /* the index must fit the key's 32 bits */
    DevStats init = {}, host;
    init.first_nonfinite = init.first_empty = ~0ull;
    DevStats *dst;
    cudaError_t e = cudaMalloc((void **)&dst, sizeof *dst);
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
    cudaFree(dst);
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
