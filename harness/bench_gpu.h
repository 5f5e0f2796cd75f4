/* Timing on the GPU for the benchmarks: cold timing learned from nvbench (L2 flushed
 * before every sample, its lines left clean; launch overhead kept out of the timed interval
 * by a kernel that holds the stream until everything is enqueued; the SM clock read after
 * each sample; a noise-based stopping rule). */
#ifndef ATTN_BENCH_GPU_H
#define ATTN_BENCH_GPU_H

#include <stddef.h>
#include <stdint.h>
#include "attn_abi.h"
#include "verdict.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int min_samples;       /* at least this many kept samples (10) */
    double min_time_s;     /* and at least this much kept GPU time (0.5 s) */
    double max_rsd;        /* then stop once the relative std dev is under this (0.005) */
    double timeout_s;      /* or at this wall time: the result is marked noisy */
    double min_clock_frac; /* samples under this fraction of the max SM clock are dropped */
    double warmup_s;       /* calls before the samples, for at least this long (0: 0.05 s) */
} attn_timing_rules;

typedef struct {
    int samples, dropped_clock, noisy;
    int held;              /* samples were enqueued behind the stream-holding kernel (below) */
    double enqueue_ms;     /* the host's time to enqueue one call, least over the warm-up */
    double median_ms, min_ms, ci_lo_ms, ci_hi_ms, rsd;
    double mean_clock_mhz, max_clock_mhz, gpu_time_s;
} attn_timing;

typedef struct attn_timer attn_timer;
/* One timer per stream; allocates the L2 flush buffer (twice the L2 size). */
int attn_timer_create(attn_timer **out, cudaStream_t stream, char *err, size_t errlen);
void attn_timer_destroy(attn_timer *t);

/* The L2 flush that precedes every sample, enqueued on the timer's stream: a write of twice
 * the L2's size (`index` varies the bytes), then a read of it back, so that the L2 holds none
 * of the timed call's data and only clean lines. 0, or 1 with err. */
int attn_timer_flush(attn_timer *t, int index, char *err, size_t errlen);

/* Enqueues a read of `bytes` (a multiple of 16) at p, 16-byte aligned, on `stream`: every
 * SM streams it and keeps nothing. */
cudaError_t attn_read_device(const void *p, size_t bytes, cudaStream_t stream);

/* Enqueues the work to time on `stream` (no allocation, no synchronization). */
typedef int (*attn_enqueue_fn)(void *ctx, cudaStream_t stream, char *err, size_t errlen);

/* Warms up, then takes cold samples until the rules say stop. 0, or non-zero with err. */
int attn_measure(attn_timer *t, attn_enqueue_fn fn, void *ctx, const attn_timing_rules *rules,
                 attn_timing *out, char *err, size_t errlen);

/* Times two functions interleaved (a sample of a, then one of b, each cold), so that a drift
 * of clock or temperature falls on both alike: the only comparison of two configurations that
 * holds on a shared GPU (the autotuner's confirmation). Stops once both meet the rules, or at
 * the timeout (marking noisy the one that did not). */
int attn_measure_pair(attn_timer *t, attn_enqueue_fn fa, void *ca, attn_enqueue_fn fb, void *cb,
                      const attn_timing_rules *rules, attn_timing *a, attn_timing *b, char *err,
                      size_t errlen);

/* Launches an empty kernel built like the harness's kernels: cudaErrorNoKernelImageForDevice
 * when this build holds no code for the current GPU. */
cudaError_t attn_probe_kernel_image(void);

#ifdef __cplusplus
}
#endif
#endif
