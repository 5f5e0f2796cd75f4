/* Measures this GPU's two ceilings, the way the benchmarks time kernels (cold, median):
 * a cuBLAS 8192^3 GEMM per dtype (FLOP/s) and a large device-to-device copy (bytes read
 * plus written per second).
 *   attn_calibrate                 print them
 *   attn_calibrate --write DIR     also write DIR/<gpu slug>.ini with [gpu] and [peaks]
 *                                  (refuses to replace an existing file without --force)
 * Exit 0, 1 error, 77 no GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "args.h"
#include "bench_gpu.h"
#include "gpu_verify.h"
#include "harness.h"
#include "thresholds.h"

enum { N = 8192 };
static const size_t COPY_BYTES = (size_t)2 << 30;

/* What the timed calls work on: main owns it, the calls get it as their context. */
typedef struct {
    cublasHandle_t blas;
    void *a, *b, *c, *src, *dst;
    cudaDataType_t type;
} buffers;

static int run_gemm(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    const buffers *g = ctx;
    const float one = 1, zero = 0;
    cublasSetStream(g->blas, s);
    cublasStatus_t st = cublasGemmEx(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, g->a, g->type, N,
                                     g->b, g->type, N, &zero, g->c, g->type, N, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) snprintf(err, errlen, "cublasGemmEx: %s", cublasGetStatusString(st));
    return st != CUBLAS_STATUS_SUCCESS;
}

static int run_copy(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    const buffers *g = ctx;
    cudaError_t e = cudaMemcpyAsync(g->dst, g->src, COPY_BYTES, cudaMemcpyDeviceToDevice, s);
    if (e != cudaSuccess) snprintf(err, errlen, "cudaMemcpyAsync: %s", cudaGetErrorString(e));
    return e != cudaSuccess;
}

/* The measured ceilings, as printed and as written to the thresholds file. */
struct peaks {
    double tflops[2]; /* fp16, bf16 */
    double gbs;       /* bytes read plus written */
};

/* Times the cuBLAS GEMM once per dtype on random (never zero) inputs, printing each. */
static int measure_gemms(buffers *g, attn_timer *timer, cudaStream_t stream, const attn_timing_rules *rules,
                         struct peaks *pk, char *err, size_t errlen) {
    for (int d = 0; d < 2; d++) {
        g->type = d ? CUDA_R_16BF : CUDA_R_16F;
        attn_dtype dt = d ? ATTN_BF16 : ATTN_F16;
        attn_fill_normal(g->a, dt, (size_t)N * N, 1, 1.0f, stream); /* random, never zeros */
        attn_fill_normal(g->b, dt, (size_t)N * N, 2, 1.0f, stream);
        attn_timing t;
        if (attn_measure(timer, run_gemm, g, rules, &t, err, errlen)) {
            fprintf(stderr, "attn_calibrate: %s\n", err);
            return 1;
        }
        pk->tflops[d] = 2.0 * N * N * (double)N / (t.median_ms * 1e-3) * 1e-12;
        printf("cuBLAS %dx%dx%d %s GEMM: %.3f ms median [%.3f, %.3f], %d samples, %.0f MHz: %.0f TFLOP/s\n",
               N, N, N, d ? "bf16" : "fp16", t.median_ms, t.ci_lo_ms, t.ci_hi_ms, t.samples,
               t.mean_clock_mhz, pk->tflops[d]);
    }
    return 0;
}

/* Times the device-to-device copy, printing it. */
static int measure_copy(buffers *g, attn_timer *timer, cudaStream_t stream, const attn_timing_rules *rules,
                        struct peaks *pk, char *err, size_t errlen) {
    attn_fill_normal(g->src, ATTN_F16, COPY_BYTES / 2, 3, 1.0f, stream);
    attn_timing t;
    if (attn_measure(timer, run_copy, g, rules, &t, err, errlen)) {
        fprintf(stderr, "attn_calibrate: %s\n", err);
        return 1;
    }
    pk->gbs = 2.0 * COPY_BYTES / (t.median_ms * 1e-3) * 1e-9;
    printf("device-to-device copy of %zu MiB: %.3f ms median, %d samples: %.0f GB/s (read + written)\n",
           COPY_BYTES >> 20, t.median_ms, t.samples, pk->gbs);
    return 0;
}

/* Writes DIR/<gpu slug>.ini through a temporary file and a rename, so that the file is whole
 * or absent; an existing one is kept unless `force`. */
static int write_thresholds(const char *write_dir, int force, const char *gpu_name, const struct peaks *pk) {
    char slug[256], path[1024], date[32];
    attn_gpu_slug(gpu_name, slug, sizeof slug);
    snprintf(path, sizeof path, "%s/%s.ini", write_dir, slug);
    FILE *f = fopen(path, "r");
    if (f && !force) {
        fclose(f);
        fprintf(stderr, "attn_calibrate: %s exists; --force replaces it\n", path);
        return 1;
    }
    if (f) fclose(f);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "attn_calibrate: cannot write %s\n", tmp);
        return 1;
    }
    fprintf(f, "; Benchmark thresholds for %s. Peaks measured by attn_calibrate on %s:\n"
               "; cuBLAS %d^3 GEMM per dtype, and a %zu MiB device-to-device copy (read + written).\n"
               "[gpu]\nname = %s\n\n[peaks]\nfp16_tflops = %.0f\nbf16_tflops = %.0f\nbandwidth_gbs = %.0f\n\n"
               "; Minimums per shape class, first match wins:\n"
               "; [<kernel> <fp16|bf16|*> <d64|d128|*> <full|causal|*> <seqlen lo>-<hi>]\n"
               "; min_speedup_reference = ...   (vs the cuBLAS + softmax baseline)\n"
               "; min_speedup_cudnn = ...       (optional)\n"
               "; min_roofline = ...            (fraction of the roofline, 0..1)\n",
            gpu_name, date, N, COPY_BYTES >> 20, gpu_name, pk->tflops[0], pk->tflops[1], pk->gbs);
    if (fclose(f) || rename(tmp, path)) {
        fprintf(stderr, "attn_calibrate: cannot write %s\n", path);
        return 1;
    }
    printf("wrote %s\n", path);
    return 0;
}

#define USAGE "usage: attn_calibrate [--write DIR [--force]]\n"

/* The command line: -1 to go on, else main's exit code (0 after --help; 2 after a line naming
 * the bad argument). */
static int parse_args(int argc, char **argv, const char **write_dir, int *force) {
    for (int i = 1; i < argc; i++) {
        if (attn_is_help(argv[i])) {
            printf(USAGE "This GPU's ceilings, timed as the benchmarks time kernels (cold, median): a cuBLAS 8192^3\n"
                   "GEMM per dtype (FLOP/s) and a large device-to-device copy (bytes read plus written per second).\n"
                   "  --write DIR  also write DIR/<gpu slug>.ini with [gpu] and [peaks]\n"
                   "  --force      replace that file if it exists\n"
                   "Exit 0, 1 error, 77 no GPU, 2 bad arguments.\n");
            return 0;
        }
        if (!strcmp(argv[i], "--write") && i + 1 < argc) *write_dir = argv[++i];
        else if (!strcmp(argv[i], "--force")) *force = 1;
        else {
            fprintf(stderr, "attn_calibrate: %s '%s'\n" USAGE,
                    strcmp(argv[i], "--write") ? "unknown argument" : "a value is missing after", argv[i]);
            return 2;
        }
    }
    return -1;
}

int main(int argc, char **argv) {
    const char *write_dir = NULL;
    int force = 0;
    int rc = parse_args(argc, argv, &write_dir, &force);
    if (rc >= 0) return rc;
    char err[1024];
    if (!attn_gpu_available(err, sizeof err)) {
        printf("SKIPPED: %s\n", err);
        return ATTN_EXIT_SKIP;
    }
    struct cudaDeviceProp prop;
    int dev = 0;
    cudaGetDevice(&dev); /* the GPU attn_gpu_available chose */
    cudaGetDeviceProperties(&prop, dev);
    /* The stream, timer, handle and buffers live until the process exits, on every path. */
    cudaStream_t stream;
    attn_timer *timer;
    buffers g = {0};
    snprintf(err, sizeof err, "cudaStreamCreate or cublasCreate failed");
    if (cudaStreamCreate(&stream) != cudaSuccess || attn_timer_create(&timer, stream, err, sizeof err) ||
        cublasCreate(&g.blas) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "attn_calibrate: setup failed: %s\n", err);
        return 1;
    }
    size_t mat = (size_t)N * N * 2;
    if (cudaMalloc(&g.a, mat) || cudaMalloc(&g.b, mat) || cudaMalloc(&g.c, mat) ||
        cudaMalloc(&g.src, COPY_BYTES) || cudaMalloc(&g.dst, COPY_BYTES)) {
        fprintf(stderr, "attn_calibrate: cudaMalloc failed\n");
        return 1;
    }
    attn_timing_rules rules = {10, 0.5, 0.005, 5.0, 0.75, 0};
    struct peaks pk;
    if (measure_gemms(&g, timer, stream, &rules, &pk, err, sizeof err) ||
        measure_copy(&g, timer, stream, &rules, &pk, err, sizeof err))
        return 1;
    if (write_dir && write_thresholds(write_dir, force, prop.name, &pk)) return 1;
    return 0;
}
