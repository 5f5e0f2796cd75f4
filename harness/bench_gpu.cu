#include "bench_gpu.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "stats.h"

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

/* Reads n 16-byte words (attn_read_device). The sink is written only on an impossible value,
 * so that the reads are not optimised away. */
__device__ int read_sink;
__global__ void read_kernel(const int4 *p, size_t n) {
    int acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int4 v = p[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7a3b1c9d) read_sink = acc;
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


/* A call whose enqueue alone takes longer than this is not held: its launches would fill the
 * launch queue behind the hold kernel, the host would block until the hold's 1 s safety
 * release, and each sample would cost a second. Unheld, its launch overhead is part of its
 * time, as it is in use (a baseline that loops over batches is launch-bound). */
#define HOLD_MAX_ENQUEUE_MS 10.0

extern "C" cudaError_t attn_read_device(const void *p, size_t bytes, cudaStream_t stream) {
    int dev, sms;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    read_kernel<<<4 * sms, 512, 0, stream>>>((const int4 *)p, bytes / sizeof(int4));
    return cudaGetLastError();
}

/* A write of twice the L2's size evicts the call's data, and reading it back leaves the L2
 * clean. Dirty lines left by the write alone are written back during the timed call, whatever
 * it is: 9-10 us on an H100 for any call that touches more than the L2 holds
 * (results/nvidia_h100_80gb_hbm3/dev/2026-11-28-181c08b-l2-flush-clean.md). */
extern "C" int attn_timer_flush(attn_timer *t, int index, char *err, size_t errlen) {
    TRY(cudaMemsetAsync(t->flush, index & 0xff, t->flush_bytes, t->stream));
    TRY(attn_read_device(t->flush, t->flush_bytes, t->stream));
    return 0;
}

/* One cold sample: ms, and the mean SM clock right after it. */
static int sample(attn_timer *t, attn_enqueue_fn fn, void *ctx, int held, int index, float *ms,
                  double *mhz, char *err, size_t errlen) {
    *(volatile int *)t->release = 0;
    if (held) {
        hold_stream_kernel<<<1, 1, 0, t->stream>>>(t->release_dev);
        TRY(cudaGetLastError());
    }
    if (attn_timer_flush(t, index, err, errlen)) return 1;
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

/* Warm-up: module load, handles, lazily allocated buffers, clocks ramping up; and the host's
 * time to enqueue one call (the least over the warm-up, past the first), which decides
 * whether samples are held. */
static int warm_up(attn_timer *t, attn_enqueue_fn fn, void *ctx, const attn_timing_rules *rules, attn_timing *out,
                   char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->max_clock_mhz = t->max_clock_mhz;
    double t0 = attn_wall_s();
    const double warm_s = rules->warmup_s > 0 ? rules->warmup_s : 0.05;
    out->enqueue_ms = 1e30;
    for (int i = 0; i < 3 || attn_wall_s() - t0 < warm_s; i++) {
        const double e0 = attn_wall_s();
        if (fn(ctx, t->stream, err, errlen)) return 1;
        const double e1 = attn_wall_s();
        if (i > 0 && (e1 - e0) * 1e3 < out->enqueue_ms) out->enqueue_ms = (e1 - e0) * 1e3;
        TRY(cudaStreamSynchronize(t->stream));
        if (i > 1000) break;
    }
    out->held = out->enqueue_ms <= HOLD_MAX_ENQUEUE_MS;
    return 0;
}

/* The samples kept for one function so far. */
typedef struct {
    double *ms;
    size_t n, cap;
    double clock_sum, kept_s;
} samples;

/* Takes one sample of fn into s (or drops it: throttled). 0, or 1 with err. */
static int take(attn_timer *t, attn_enqueue_fn fn, void *ctx, const attn_timing_rules *rules, attn_timing *out,
                samples *s, int index, char *err, size_t errlen) {
    float m;
    double mhz;
    if (sample(t, fn, ctx, out->held, index, &m, &mhz, err, errlen)) return 1;
    if (mhz < rules->min_clock_frac * t->max_clock_mhz) {
        out->dropped_clock++; /* throttled: not a measurement of the kernel */
        return 0;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        double *grown = (double *)realloc(s->ms, cap * sizeof *grown);
        if (!grown) return snprintf(err, errlen, "out of host memory"), 1;
        s->ms = grown, s->cap = cap;
    }
    s->ms[s->n++] = m;
    s->clock_sum += mhz;
    s->kept_s += m * 1e-3;
    return 0;
}

static int enough(const samples *s, const attn_timing_rules *rules) {
    return s->n >= (size_t)rules->min_samples && s->kept_s >= rules->min_time_s && attn_rsd(s->ms, s->n) < rules->max_rsd;
}

/* The figures of the kept samples into out; 1 with err when none was kept. */
static int summarize(const attn_timer *t, const samples *s, const attn_timing_rules *rules, attn_timing *out,
                     char *err, size_t errlen) {
    if (s->n == 0) {
        snprintf(err, errlen, "every sample was dropped: the SM clock stayed under %.0f%% of "
                 "%.0f MHz (%d samples)", 100 * rules->min_clock_frac, t->max_clock_mhz, out->dropped_clock);
        return 1;
    }
    out->samples = (int)s->n;
    out->median_ms = attn_median(s->ms, s->n);
    out->min_ms = attn_min(s->ms, s->n);
    out->rsd = attn_rsd(s->ms, s->n);
    attn_bootstrap_median_ci(s->ms, s->n, 1000, 0x5eed, &out->ci_lo_ms, &out->ci_hi_ms);
    out->mean_clock_mhz = s->clock_sum / s->n;
    out->gpu_time_s = s->kept_s;
    return 0;
}

/* The timeout ends the wait for a low spread, never the minimum sample count: past 10x the
 * timeout, a call still short of it goes on while its samples so far (host time included) say
 * the minimum takes under a minute in all (a slow baseline: the backward's unfused twin, 114 ms
 * a call at S = 8k d64, had 9 samples when 10 s had passed); one that would take longer stops
 * (and the benchmark calls that an invalid measurement). */
static int timed_out(double spent, size_t n, const attn_timing_rules *rules) {
    if (spent <= rules->timeout_s || n >= (size_t)rules->min_samples) return spent > rules->timeout_s;
    const double projected = n ? spent / (double)n * rules->min_samples : 1e30;
    return spent > 10 * rules->timeout_s && projected > 60.0;
}

extern "C" int attn_measure(attn_timer *t, attn_enqueue_fn fn, void *ctx,
                            const attn_timing_rules *rules, attn_timing *out, char *err,
                            size_t errlen) {
    if (warm_up(t, fn, ctx, rules, out, err, errlen)) return 1;
    samples s = {};
    const double start = attn_wall_s();
    int rc = 0;
    for (int i = 0;; i++) {
        if ((rc = take(t, fn, ctx, rules, out, &s, i, err, errlen))) break;
        if (enough(&s, rules)) break;
        if (timed_out(attn_wall_s() - start, s.n, rules)) {
            out->noisy = 1;
            break;
        }
    }
    if (!rc) rc = summarize(t, &s, rules, out, err, errlen);
    free(s.ms);
    return rc;
}

extern "C" int attn_measure_pair(attn_timer *t, attn_enqueue_fn fa, void *ca, attn_enqueue_fn fb, void *cb,
                                 const attn_timing_rules *rules, attn_timing *a, attn_timing *b, char *err,
                                 size_t errlen) {
    if (warm_up(t, fa, ca, rules, a, err, errlen) || warm_up(t, fb, cb, rules, b, err, errlen)) return 1;
    samples sa = {}, sb = {};
    const double start = attn_wall_s();
    int rc = 0;
    for (int i = 0;; i++) {
        if ((rc = take(t, fa, ca, rules, a, &sa, 2 * i, err, errlen)) ||
            (rc = take(t, fb, cb, rules, b, &sb, 2 * i + 1, err, errlen)))
            break;
        if (enough(&sa, rules) && enough(&sb, rules)) break;
        if (timed_out(attn_wall_s() - start, sa.n < sb.n ? sa.n : sb.n, rules)) {
            a->noisy = !enough(&sa, rules), b->noisy = !enough(&sb, rules);
            break;
        }
    }
    if (!rc) rc = summarize(t, &sa, rules, a, err, errlen) || summarize(t, &sb, rules, b, err, errlen);
    free(sa.ms);
    free(sb.ms);
    return rc;
}

/* ---- does this build hold code for this GPU? ------------------------------------------ */

__global__ void probe_kernel() {}

extern "C" cudaError_t attn_probe_kernel_image(void) {
    probe_kernel<<<1, 1>>>();
    cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

