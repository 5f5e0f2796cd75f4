/* What a kernel under test launches, and what it asks of the GPU, seen through CUPTI (loaded
 * at run time, so the harness builds and runs without it):
 *
 * - attn_trace_launches: CUPTI's activity records of the launches one call of the kernel
 *   makes (any launch path: runtime, driver, a plugin's own), with registers, shared memory
 *   and local memory (spills and stack) per launch, and the occupancy those allow on this GPU;
 * - attn_requests_begin/end: the shared memory the kernel asks for (cudaFuncSetAttribute,
 *   cuFuncSetAttribute, or at launch), from CUPTI's API callbacks, so that a kernel that
 *   fails because it needs more than this GPU allows is reported as not supported, with the
 *   numbers, instead of as an error. */
#ifndef ATTN_LAUNCH_TRACE_H
#define ATTN_LAUNCH_TRACE_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char name[256];                  /* the kernel's (mangled) name */
    int grid[3], block[3];
    int registers;                   /* per thread */
    int static_smem, dynamic_smem;   /* bytes per block */
    int local_bytes;                 /* per thread: spills and stack */
    int smem_carveout;               /* bytes of shared memory per SM the launch ran with */
    double duration_us;              /* from the activity record (one traced call, not a timing) */
    int blocks_per_sm;               /* resident blocks per SM these resources allow */
    double occupancy;                /* resident warps / max warps per SM */
    const char *limited_by;          /* "registers", "shared memory", "threads" or "blocks" */
} attn_launch_info;

/* Device limits for the occupancy rules (cudaDeviceGetAttribute on the current device). */
typedef struct {
    int regs_per_sm, smem_per_sm, smem_reserved_per_block, max_threads_per_sm;
    int max_blocks_per_sm, warp_size;
} attn_sm_limits;
int attn_sm_limits_query(attn_sm_limits *l, char *err, size_t errlen);

/* Resident blocks per SM for a block of `threads` threads using `registers` per thread and
 * `smem` bytes of shared memory (static + dynamic), by the CUDA occupancy calculator's rules
 * for compute capability 8.x and 9.x (registers allocated per warp in units of 256;
 * 1 KB of shared memory reserved per block). Fills info->blocks_per_sm, occupancy, limited_by. */
void attn_occupancy(const attn_sm_limits *l, int threads, int registers, int smem, attn_launch_info *info);

typedef int (*attn_call_fn)(void *ctx, cudaStream_t s, char *err, size_t errlen);

/* Calls fn once (it enqueues the kernel on s) with kernel activity tracing on, synchronizes,
 * and returns its launches in out[0..*n) (at most max; *n counts all of them). 0 on success;
 * 1 when CUPTI is not there or refuses (the reason in err; the results say "not available");
 * 2 when fn itself failed (its reason in err). */
int attn_trace_launches(attn_call_fn fn, void *ctx, cudaStream_t s, attn_launch_info *out, int max,
                        int *n, char *err, size_t errlen);

/* The largest shared memory per block the code asked for between begin and end: dynamic
 * shared memory raised with cudaFuncSetAttribute / cuFuncSetAttribute, or given at launch.
 * begin returns 1 (reason in err) where CUPTI is not there: end then reports 0. */
int attn_requests_begin(char *err, size_t errlen);
int attn_requests_end(void);

#ifdef __cplusplus
}
#endif
#endif
