/* Device memory for the harness's own buffers (test problems, their references' outputs,
 * snapshots, the figures a check counts on the GPU): one stream-ordered memory pool per device
 * and process that keeps what is freed, in place of cudaMalloc and cudaFree. Those map and
 * unmap pages in the driver, which serializes them across processes: a check allocates some
 * twenty buffers, and a -j 8 run of the correctness label is eight processes doing so at once
 * (on the H100, 2,000 allocate/free pairs of 1-64 MB took 0.15 s alone and 1.8-2.2 s in each of
 * eight processes at once; from a pool 0.03 s and 0.09-0.15 s).
 *
 * $ATTN_DEVICE_POOL=0 makes these plain cudaMalloc and cudaFree (the sanitizer tests set it, so
 * that compute-sanitizer sees each buffer as an allocation of its own). Not thread-safe: the
 * pools are made on first use. */
#ifndef ATTN_DEVICE_MEMORY_H
#define ATTN_DEVICE_MEMORY_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* As cudaMalloc: *p usable on every stream when this returns. */
cudaError_t attn_dev_malloc(void **p, size_t bytes);

/* As cudaFree: waits for the device, then gives p back (NULL: nothing). */
cudaError_t attn_dev_free(void *p);

/* Stream-ordered: *p usable on `stream` only, until cudaFreeAsync on the same stream gives it
 * back (to the pool it came from). */
cudaError_t attn_dev_malloc_async(void **p, size_t bytes, cudaStream_t stream);

/* Gives the current device's pool's unused memory back to the driver (after waiting for the
 * device), so that cudaMemGetInfo counts it free: call it before asking how much is free. */
cudaError_t attn_dev_trim(void);

#ifdef __cplusplus
}
#endif

#endif
