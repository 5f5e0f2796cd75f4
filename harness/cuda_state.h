/* The process's CUDA state that a library call must leave as it found it: what a kernel could
 * change for every later call of its caller (the contract's checks state_unchanged and
 * bwd_state_unchanged). Read before the kernel's first call in a process and after its calls;
 * any difference is the kernel's. Not compared: the per-thread stack size and the device flag
 * cudaDeviceLmemResizeToMax, which the driver changes by itself for a kernel that needs more
 * local memory. */
#ifndef ATTN_CUDA_STATE_H
#define ATTN_CUDA_STATE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { ATTN_STATE_LIMITS = 5 };

/* Each item with whether it could be read (an item that could not, before or after, is not
 * compared). */
typedef struct {
    int device, device_ok;
    unsigned device_flags;
    int flags_ok;
    enum cudaFuncCache cache_config;
    int cache_ok;
    size_t limit[ATTN_STATE_LIMITS];
    int limit_ok[ATTN_STATE_LIMITS];
    cudaMemPool_t mempool; /* the device's current pool: what cudaMallocAsync takes from */
    int mempool_ok;
    uint64_t default_pool_release; /* the default pool's release threshold */
    int release_ok;
    enum cudaStreamCaptureMode capture_mode; /* this thread's */
    int capture_ok;
    struct cudaAccessPolicyWindow window; /* the stream's L2 access policy window */
    int window_ok;
    enum cudaSynchronizationPolicy sync_policy; /* the stream's */
    int sync_ok;
} attn_cuda_state;

/* Reads the state of the current device, this thread and `stream`; leaves no CUDA error
 * pending (an item it cannot read is marked so). */
void attn_cuda_state_read(attn_cuda_state *s, cudaStream_t stream);

/* The differences of `after` from `before`, one "; "-separated phrase each, in out; how many. */
int attn_cuda_state_diff(const attn_cuda_state *before, const attn_cuda_state *after, char *out, size_t len);

#ifdef __cplusplus
}
#endif

#endif
