/* The GPU side of attn_results (tools/results_collect.c) for the results fuzz target: a fixed,
 * made-up device, so that --collect reads the fragments on a machine without a GPU, and
 * deterministically. Only the calls attn_results makes are here; a new one in
 * results_collect.c shows up as an undefined symbol when linking fuzz_results (add it here). */
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cudnn_sdpa.h"
#include "harness.h"

int attn_gpu_available(char *why, size_t whylen) {
    (void)why, (void)whylen;
    return 1;
}

cudaError_t CUDARTAPI cudaGetDevice(int *device) {
    *device = 0;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    (void)device;
    memset(prop, 0, sizeof *prop);
    strcpy(prop->name, "Fuzz GPU"); /* results/fuzz_gpu/ */
    prop->major = 9, prop->multiProcessorCount = 132, prop->l2CacheSize = 50 << 20;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDriverGetVersion(int *v) { return *v = 12040, cudaSuccess; }
cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *v) { return *v = 12040, cudaSuccess; }

cudaError_t CUDARTAPI cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    (void)attr, (void)device;
    *value = 1000000;
    return cudaSuccess;
}

cublasStatus_t CUBLASWINAPI cublasCreate(cublasHandle_t *handle) {
    *handle = NULL;
    return CUBLAS_STATUS_NOT_INITIALIZED; /* attn_results then records no cuBLAS version */
}
cublasStatus_t CUBLASWINAPI cublasGetVersion(cublasHandle_t handle, int *version) {
    (void)handle;
    return *version = 0, CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasDestroy(cublasHandle_t handle) {
    (void)handle;
    return CUBLAS_STATUS_SUCCESS;
}

int attn_cudnn_open(attn_cudnn **out, char *why, size_t whylen) {
    *out = NULL;
    strncpy(why, "no cuDNN in the fuzz target", whylen);
    return 1;
}
long attn_cudnn_version(const attn_cudnn *c) { return (void)c, 0; }
void attn_cudnn_close(attn_cudnn *c) { (void)c; }
