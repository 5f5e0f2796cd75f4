/* The environment check: what this machine offers the harness, and what to fix.
 *   attn_envcheck [--thresholds-dir DIR (default: the thresholds/ of the tree it was built from)]
 *                 [--skip-without-gpu]
 * Reports driver and runtime versions, the GPU (name, compute capability, SMs, clocks, L2,
 * shared memory per block, ECC), cuBLAS and cuDNN versions, whether this build holds code
 * for this GPU, and whether a thresholds file matches it. Exit: the number of problems
 * (0 = ready), each printed with its fix; 77 without a GPU under --skip-without-gpu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "args.h"
#include "bench_gpu.h"
#include "cudnn_sdpa.h"
#include "harness.h"
#include "thresholds.h"

#ifndef ATTN_CUDA_ARCHS
#define ATTN_CUDA_ARCHS "unknown"
#endif

static int problems;

static void problem(const char *what, const char *fix) {
    problems++;
    printf("PROBLEM: %s\n  fix: %s\n", what, fix);
}

static const char *version(int v, char *buf, size_t n) { /* 13000 -> "13.0" */
    snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10);
    return buf;
}

/* The GPU's name, capability, SMs, clocks, L2, shared memory, memory size and ECC. */
static void report_gpu(struct cudaDeviceProp *prop) {
    int dev = 0, khz = 0, mem_khz = 0;
    cudaGetDevice(&dev);
    cudaGetDeviceProperties(prop, dev);
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev);
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev);
    printf("GPU %d: %s, compute capability %d.%d, %d SMs, SM clock up to %d MHz, memory clock up to %d MHz\n",
           dev, prop->name, prop->major, prop->minor, prop->multiProcessorCount, khz / 1000, mem_khz / 1000);
    printf("  L2 %d MiB, shared memory per block %zu KiB (%zu KiB opt-in), %.1f GiB, ECC %s\n",
           prop->l2CacheSize >> 20, prop->sharedMemPerBlock >> 10, prop->sharedMemPerBlockOptin >> 10,
           prop->totalGlobalMem / (double)(1 << 30), prop->ECCEnabled ? "on" : "off");
}

/* Whether this build holds code that runs on the GPU; the fix names the architecture to add. */
static void check_kernel_image(const struct cudaDeviceProp *prop) {
    cudaError_t e = attn_probe_kernel_image();
    if (e != cudaSuccess) {
        char what[512], fix[512];
        snprintf(what, sizeof what, "this build cannot run kernels on %s (sm_%d%d): %s", prop->name,
                 prop->major, prop->minor, cudaGetErrorString(e));
        snprintf(fix, sizeof fix, "reconfigure with -DCMAKE_CUDA_ARCHITECTURES=\"%s;%d%d%s\" and rebuild",
                 ATTN_CUDA_ARCHS, prop->major, prop->minor, prop->major == 9 ? "a" : "");
        problem(what, fix);
    } else {
        printf("  this build holds code for sm_%d%d\n", prop->major, prop->minor);
    }
}

/* cuBLAS (a problem if missing: the reference needs it) and cuDNN (optional). */
static void report_libraries(void) {
    cublasHandle_t h;
    int cublas = 0;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
        cublasGetVersion(h, &cublas);
        cublasDestroy(h);
        printf("cuBLAS %d.%d.%d\n", cublas / 10000, cublas / 100 % 100, cublas % 100);
    } else {
        problem("cuBLAS cannot be initialized (the reference and baseline need it)",
                "check that libcublas from the CUDA toolkit is on the library path");
    }
    char why[512];
    attn_cudnn *cudnn = NULL;
    if (attn_cudnn_open(&cudnn, why, sizeof why) == 0) {
        long v = attn_cudnn_version(cudnn);
        attn_cudnn_lib_info lib;
        attn_cudnn_get_library(cudnn, &lib);
        printf("cuDNN %ld.%ld.%ld (the cuDNN baseline is available): %s, chosen by %s\n", v / 10000,
               v / 100 % 100, v % 100, lib.path[0] ? lib.path : lib.requested, lib.chosen_by);
        attn_cudnn_close(cudnn);
    } else {
        printf("cuDNN not available (benchmarks report its speedup as not available): %s\n", why);
    }
}

/* Whether DIR/<gpu slug>.ini exists, loads, and names this GPU. */
static void check_thresholds(const char *thresholds_dir, const struct cudaDeviceProp *prop) {
    char slug[256], path[1024], err[1024];
    attn_gpu_slug(prop->name, slug, sizeof slug);
    snprintf(path, sizeof path, "%s/%s.ini", thresholds_dir, slug);
    static attn_thresholds t;
    FILE *f = fopen(path, "r");
    if (!f) {
        char what[1400];
        snprintf(what, sizeof what, "no thresholds file for %s (%s): benchmarks will be skipped", prop->name, path);
        problem(what, "run attn_calibrate --write thresholds on this GPU, one benchmark run, then "
                      "scripts/set_thresholds.py on its results file");
    } else {
        fclose(f);
        if (attn_thresholds_load(path, &t, err, sizeof err)) problem(err, "fix the file at the line named");
        else if (strcmp(t.gpu_name, prop->name)) problem("the thresholds file names another GPU", "regenerate it with attn_calibrate --write");
        else printf("thresholds: %s (%d shape classes; peaks %.0f / %.0f TFLOP/s, %.0f GB/s)\n", path,
                    t.nclasses, t.fp16_tflops, t.bf16_tflops, t.bandwidth_gbs);
    }
}

#define USAGE "usage: attn_envcheck [--thresholds-dir DIR] [--skip-without-gpu]\n"

/* The command line: -1 to go on, else main's exit code (0 after --help; 2 after a line naming
 * the bad argument). */
static int parse_args(int argc, char **argv, const char **thresholds_dir, int *skip_without_gpu) {
    for (int i = 1; i < argc; i++) {
        if (attn_is_help(argv[i])) {
            printf(USAGE "What this machine offers the harness, and what to fix: the driver and runtime versions, the\n"
                   "GPU, cuBLAS and cuDNN, whether this build holds code for the GPU, and whether a thresholds\n"
                   "file matches it.\n"
                   "  --thresholds-dir DIR  the thresholds files (default %s)\n"
                   "  --skip-without-gpu    without a GPU, exit 77 (skipped) instead of counting a problem\n"
                   "Exit: the number of problems (0 = ready), each printed with its fix; 2 bad arguments.\n",
                   ATTN_THRESHOLDS_DEFAULT);
            return 0;
        }
        if (!strcmp(argv[i], "--thresholds-dir") && i + 1 < argc) *thresholds_dir = argv[++i];
        else if (!strcmp(argv[i], "--skip-without-gpu")) *skip_without_gpu = 1;
        else {
            fprintf(stderr, "attn_envcheck: %s '%s'\n" USAGE,
                    strcmp(argv[i], "--thresholds-dir") ? "unknown argument" : "a value is missing after", argv[i]);
            return 2;
        }
    }
    return -1;
}

int main(int argc, char **argv) {
    /* the thresholds of the tree this was built from, wherever it runs */
    const char *thresholds_dir = ATTN_THRESHOLDS_DEFAULT;
    int skip_without_gpu = 0;
    int rc = parse_args(argc, argv, &thresholds_dir, &skip_without_gpu);
    if (rc >= 0) return rc;
    char buf[64], why[512];
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    printf("CUDA runtime %s (this build), driver supports CUDA %s\n", version(runtime, buf, sizeof buf),
           driver ? version(driver, buf + 32, 32) : "none");
    printf("built for CUDA architectures: %s\n", ATTN_CUDA_ARCHS);
    if (!attn_gpu_available(why, sizeof why)) {
        if (skip_without_gpu) {
            printf("SKIPPED: %s\n", why);
            return ATTN_EXIT_SKIP;
        }
        problem(why, driver ? "run on a machine with an NVIDIA GPU"
                            : "install the NVIDIA driver, or run on a machine with an NVIDIA GPU");
        return problems;
    }
    if (driver < runtime)
        problem("the driver is older than the CUDA runtime this build uses",
                "update the NVIDIA driver, or build with an older CUDA toolkit");

    struct cudaDeviceProp prop;
    report_gpu(&prop);
    check_kernel_image(&prop);
    report_libraries();
    check_thresholds(thresholds_dir, &prop);
    printf(problems ? "%d problem(s)\n" : "ready\n", problems);
    return problems;
}
