/* The harness's device memory pool: device_memory.h says why. */
#include "device_memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEVICES = 64 };

typedef struct {
    cudaMemPool_t pool;  /* releases nothing on its own (threshold: all) */
    cudaStream_t stream; /* where attn_dev_malloc allocates and attn_dev_free gives back */
} device_pool;

static device_pool pools[MAX_DEVICES];
static int use_pool = -1; /* -1: $ATTN_DEVICE_POOL not read yet */

static int pool_wanted(void) {
    if (use_pool < 0) {
        const char *v = getenv("ATTN_DEVICE_POOL");
        use_pool = !(v && strcmp(v, "0") == 0);
    }
    return use_pool;
}

/* The current device's pool, made on first use. */
static cudaError_t current_pool(device_pool **out) {
    int dev;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if (dev < 0 || dev >= MAX_DEVICES) return cudaErrorInvalidDevice;
    device_pool *d = &pools[dev];
    if (!d->pool) {
        struct cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = dev;
        cudaMemPool_t pool;
        if ((e = cudaMemPoolCreate(&pool, &props)) != cudaSuccess) return e;
        uint64_t keep_all = UINT64_MAX;
        if ((e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all)) != cudaSuccess ||
            (e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking)) != cudaSuccess) {
            cudaMemPoolDestroy(pool);
            return e;
        }
        d->pool = pool;
    }
    *out = d;
    return cudaSuccess;
}

/* From d's pool on `stream`; when the pool cannot grow, its unused memory is given back to the
 * driver once (after the device is idle) and the allocation tried again, so that memory freed
 * in other sizes never makes an allocation fail that cudaMalloc would have made. */
static cudaError_t pool_alloc(device_pool *d, void **p, size_t bytes, cudaStream_t stream) {
    cudaError_t e = cudaMallocFromPoolAsync(p, bytes, d->pool, stream);
    if (e != cudaErrorMemoryAllocation) return e;
    cudaGetLastError(); /* not sticky: cleared before trying again */
    if ((e = cudaDeviceSynchronize()) != cudaSuccess || (e = cudaMemPoolTrimTo(d->pool, 0)) != cudaSuccess) return e;
    return cudaMallocFromPoolAsync(p, bytes, d->pool, stream);
}

cudaError_t attn_dev_malloc(void **p, size_t bytes) {
    *p = NULL;
    if (!pool_wanted()) return cudaMalloc(p, bytes);
    device_pool *d;
    cudaError_t e = current_pool(&d);
    if (e == cudaSuccess) e = pool_alloc(d, p, bytes, d->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream); /* usable on every stream from here */
    return e;
}

cudaError_t attn_dev_free(void *p) {
    if (!p) return cudaSuccess;
    if (!pool_wanted()) return cudaFree(p);
    device_pool *d;
    cudaError_t e = current_pool(&d);
    if (e != cudaSuccess) return e;
    e = cudaDeviceSynchronize(); /* as cudaFree: no work may still use p */
    cudaError_t f = cudaFreeAsync(p, d->stream);
    return e != cudaSuccess ? e : f;
}

cudaError_t attn_dev_malloc_async(void **p, size_t bytes, cudaStream_t stream) {
    *p = NULL;
    if (!pool_wanted()) return cudaMallocAsync(p, bytes, stream);
    device_pool *d;
    cudaError_t e = current_pool(&d);
    return e == cudaSuccess ? pool_alloc(d, p, bytes, stream) : e;
}

cudaError_t attn_dev_trim(void) {
    if (!pool_wanted()) return cudaSuccess;
    device_pool *d;
    cudaError_t e = current_pool(&d);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    return e == cudaSuccess ? cudaMemPoolTrimTo(d->pool, 0) : e;
}
