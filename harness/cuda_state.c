/* The process's CUDA state a library call must leave as it found it (cuda_state.h). */
#include "cuda_state.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const enum cudaLimit limits[ATTN_STATE_LIMITS] = {
    cudaLimitPrintfFifoSize, cudaLimitMallocHeapSize, cudaLimitDevRuntimePendingLaunchCount,
    cudaLimitMaxL2FetchGranularity, cudaLimitPersistingL2CacheSize};
static const char *const limit_names[ATTN_STATE_LIMITS] = {
    "printf FIFO size (cudaLimitPrintfFifoSize)", "device malloc heap (cudaLimitMallocHeapSize)",
    "pending device launches (cudaLimitDevRuntimePendingLaunchCount)",
    "L2 fetch granularity (cudaLimitMaxL2FetchGranularity)",
    "persisting-L2 set-aside (cudaLimitPersistingL2CacheSize)"};

/* 1 when e is cudaSuccess; else the (non-sticky) error is cleared and 0 */
static int ok(cudaError_t e) {
    if (e == cudaSuccess) return 1;
    cudaGetLastError();
    return 0;
}

void attn_cuda_state_read(attn_cuda_state *s, cudaStream_t stream) {
    memset(s, 0, sizeof *s);
    s->device_ok = ok(cudaGetDevice(&s->device));
    s->flags_ok = ok(cudaGetDeviceFlags(&s->device_flags));
    s->cache_ok = ok(cudaDeviceGetCacheConfig(&s->cache_config));
    for (int i = 0; i < ATTN_STATE_LIMITS; i++) s->limit_ok[i] = ok(cudaDeviceGetLimit(&s->limit[i], limits[i]));
    cudaMemPool_t def = NULL;
    if (s->device_ok) {
        s->mempool_ok = ok(cudaDeviceGetMemPool(&s->mempool, s->device));
        s->release_ok = ok(cudaDeviceGetDefaultMemPool(&def, s->device)) &&
                        ok(cudaMemPoolGetAttribute(def, cudaMemPoolAttrReleaseThreshold, &s->default_pool_release));
    }
    /* exchanging reads the old mode; the second exchange puts it back */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    if ((s->capture_ok = ok(cudaThreadExchangeStreamCaptureMode(&mode)))) {
        s->capture_mode = mode;
        ok(cudaThreadExchangeStreamCaptureMode(&mode));
    }
    cudaStreamAttrValue v;
    memset(&v, 0, sizeof v);
    if ((s->window_ok = ok(cudaStreamGetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &v))))
        s->window = v.accessPolicyWindow;
    memset(&v, 0, sizeof v);
    if ((s->sync_ok = ok(cudaStreamGetAttribute(stream, cudaStreamAttributeSynchronizationPolicy, &v))))
        s->sync_policy = v.syncPolicy;
}

typedef struct {
    char *out;
    size_t len, used;
    int n;
} phrases;

static void add(phrases *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(phrases *p, const char *fmt, ...) {
    if (p->used < p->len) {
        int w = snprintf(p->out + p->used, p->len - p->used, "%s", p->n ? "; " : "");
        if (w > 0) p->used += (size_t)w;
    }
    if (p->used < p->len) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(p->out + p->used, p->len - p->used, fmt, ap);
        va_end(ap);
        if (w > 0) p->used += (size_t)w;
    }
    if (p->used > p->len) p->used = p->len;
    p->n++;
}

static int same_window(const struct cudaAccessPolicyWindow *a, const struct cudaAccessPolicyWindow *b) {
    return a->base_ptr == b->base_ptr && a->num_bytes == b->num_bytes && a->hitRatio == b->hitRatio &&
           a->hitProp == b->hitProp && a->missProp == b->missProp;
}

int attn_cuda_state_diff(const attn_cuda_state *a, const attn_cuda_state *b, char *out, size_t len) {
    phrases p = {out, len, 0, 0};
    if (len) out[0] = 0;
    if (a->device_ok && b->device_ok && a->device != b->device)
        add(&p, "the current device %d -> %d (cudaSetDevice without putting it back)", a->device, b->device);
    /* not cudaDeviceLmemResizeToMax: the driver sets it when it grows the context's local memory
     * for a kernel (seen after cuDNN's backward kernels), as it grows the stack */
    const unsigned flags = ~(unsigned)cudaDeviceLmemResizeToMax;
    if (a->flags_ok && b->flags_ok && (a->device_flags & flags) != (b->device_flags & flags))
        add(&p, "the device flags 0x%x -> 0x%x (cudaSetDeviceFlags)", a->device_flags, b->device_flags);
    if (a->cache_ok && b->cache_ok && a->cache_config != b->cache_config)
        add(&p, "the device's cache configuration %d -> %d (cudaDeviceSetCacheConfig)", (int)a->cache_config,
            (int)b->cache_config);
    for (int i = 0; i < ATTN_STATE_LIMITS; i++)
        if (a->limit_ok[i] && b->limit_ok[i] && a->limit[i] != b->limit[i])
            add(&p, "the device's %s %zu -> %zu", limit_names[i], a->limit[i], b->limit[i]);
    if (a->mempool_ok && b->mempool_ok && a->mempool != b->mempool)
        add(&p, "the device's current memory pool %p -> %p (cudaDeviceSetMemPool: the caller's cudaMallocAsync now "
            "takes from another pool)", (void *)a->mempool, (void *)b->mempool);
    if (a->release_ok && b->release_ok && a->default_pool_release != b->default_pool_release)
        add(&p, "the default memory pool's release threshold %llu -> %llu", (unsigned long long)a->default_pool_release,
            (unsigned long long)b->default_pool_release);
    if (a->capture_ok && b->capture_ok && a->capture_mode != b->capture_mode)
        add(&p, "this thread's stream capture mode %d -> %d (cudaThreadExchangeStreamCaptureMode not put back)",
            (int)a->capture_mode, (int)b->capture_mode);
    if (a->window_ok && b->window_ok && !same_window(&a->window, &b->window))
        add(&p, "the stream's L2 access policy window {base %p, %zu bytes, hit ratio %.2f} -> {base %p, %zu bytes, hit "
            "ratio %.2f} (every later kernel on the caller's stream gets it)", a->window.base_ptr, a->window.num_bytes,
            a->window.hitRatio, b->window.base_ptr, b->window.num_bytes, b->window.hitRatio);
    if (a->sync_ok && b->sync_ok && a->sync_policy != b->sync_policy)
        add(&p, "the stream's synchronization policy %d -> %d", (int)a->sync_policy, (int)b->sync_policy);
    return p.n;
}
