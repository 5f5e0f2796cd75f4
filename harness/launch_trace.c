/* Launch tracing through CUPTI, loaded with dlopen: see launch_trace.h. Built without the
 * CUPTI headers (ATTN_HAVE_CUPTI undefined), the tracing calls report "not available". */
#define _GNU_SOURCE
#include "launch_trace.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- occupancy ------------------------------------------------------------------------ */

int attn_sm_limits_query(attn_sm_limits *l, char *err, size_t errlen) {
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&l->regs_per_sm, cudaDevAttrMaxRegistersPerMultiprocessor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&l->smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&l->smem_reserved_per_block, cudaDevAttrReservedSharedMemoryPerBlock, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&l->max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&l->max_blocks_per_sm, cudaDevAttrMaxBlocksPerMultiprocessor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&l->warp_size, cudaDevAttrWarpSize, dev) != cudaSuccess) {
        put(err, errlen, "cudaDeviceGetAttribute failed");
        return 1;
    }
    return 0;
}

void attn_occupancy(const attn_sm_limits *l, int threads, int registers, int smem, attn_launch_info *info) {
    const int warps = (threads + l->warp_size - 1) / l->warp_size;
    const int max_warps = l->max_threads_per_sm / l->warp_size;
    int blocks = l->max_blocks_per_sm;
    const char *why = "blocks";
    const int by_threads = warps > 0 ? max_warps / warps : 0;
    if (by_threads < blocks) blocks = by_threads, why = "threads";
    if (registers > 0 && warps > 0) {
        const int per_warp = (registers * l->warp_size + 255) / 256 * 256; /* allocation unit */
        const int by_regs = l->regs_per_sm / per_warp / warps;
        if (by_regs < blocks) blocks = by_regs, why = "registers";
    }
    const int by_smem = l->smem_per_sm / (smem + l->smem_reserved_per_block);
    if (by_smem < blocks) blocks = by_smem, why = "shared memory";
    info->blocks_per_sm = blocks;
    info->occupancy = max_warps > 0 ? (double)(blocks * warps) / max_warps : 0;
    info->limited_by = why;
}

#ifndef ATTN_HAVE_CUPTI

int attn_trace_launches(attn_call_fn fn, void *ctx, cudaStream_t s, attn_launch_info *out, int max,
                        int *n, char *err, size_t errlen) {
    (void)fn, (void)ctx, (void)s, (void)out, (void)max;
    *n = 0;
    put(err, errlen, "this build has no CUPTI headers (cupti.h was not found at configure time)");
    return 1;
}
int attn_requests_begin(char *err, size_t errlen) {
    put(err, errlen, "this build has no CUPTI headers");
    return 1;
}
int attn_requests_end(void) { return 0; }

#else

#include <cupti.h> /* also declares the generated *_params structs of the API callbacks */

/* ---- CUPTI, loaded at run time -------------------------------------------------------- */

static struct {
    int tried, ok;
    char why[512];
    CUptiResult (*GetVersion)(uint32_t *);
    CUptiResult (*GetResultString)(CUptiResult, const char **);
    CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*ActivityEnable)(CUpti_ActivityKind);
    CUptiResult (*ActivityDisable)(CUpti_ActivityKind);
    CUptiResult (*ActivityFlushAll)(uint32_t);
    CUptiResult (*ActivityGetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*Subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
} C;

static const char *cupti_str(CUptiResult r) {
    const char *s = NULL;
    if (C.GetResultString) C.GetResultString(r, &s);
    return s ? s : "unknown CUPTI error";
}

/* ATTN_CUPTI_LIB, else the library found at configure time, else the loader's search. */
static int cupti_load(char *err, size_t errlen) {
    if (C.tried) {
        if (!C.ok) put(err, errlen, "%s", C.why);
        return C.ok ? 0 : 1;
    }
    C.tried = 1;
    if (getenv("ATTN_NO_CUPTI") && *getenv("ATTN_NO_CUPTI")) {
        put(C.why, sizeof C.why, "CUPTI turned off (ATTN_NO_CUPTI is set)");
        put(err, errlen, "%s", C.why);
        return 1;
    }
    const char *env = getenv("ATTN_CUPTI_LIB");
    const char *names[] = {env && *env ? env : NULL,
#ifdef ATTN_CUPTI_PATH
                           ATTN_CUPTI_PATH,
#endif
                           "libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    void *lib = NULL;
    char tried[400] = "";
    for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++) {
        if (!names[i]) continue;
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s", *tried ? ", " : "", names[i]);
    }
    if (!lib) {
        put(C.why, sizeof C.why, "CUPTI not found (tried %s; set ATTN_CUPTI_LIB)", tried);
        put(err, errlen, "%s", C.why);
        return 1;
    }
#define SYM(field, name)                                                                   \
    if (!(*(void **)&C.field = dlsym(lib, name))) {                                        \
        put(C.why, sizeof C.why, "CUPTI library lacks %s", name);                          \
        put(err, errlen, "%s", C.why);                                                     \
        return 1;                                                                          \
    }
    SYM(GetVersion, "cuptiGetVersion");
    SYM(GetResultString, "cuptiGetResultString");
    SYM(ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
    SYM(ActivityEnable, "cuptiActivityEnable");
    SYM(ActivityDisable, "cuptiActivityDisable");
    SYM(ActivityFlushAll, "cuptiActivityFlushAll");
    SYM(ActivityGetNextRecord, "cuptiActivityGetNextRecord");
    SYM(Subscribe, "cuptiSubscribe");
    SYM(Unsubscribe, "cuptiUnsubscribe");
    SYM(EnableCallback, "cuptiEnableCallback");
#undef SYM
    uint32_t v = 0;
    C.GetVersion(&v);
    /* the kernel records are read through this build's header: an older library may write
     * an older record layout */
    if (v < CUPTI_API_VERSION) {
        put(C.why, sizeof C.why, "CUPTI API version %u is older than this build's headers (%u)", v,
            (unsigned)CUPTI_API_VERSION);
        put(err, errlen, "%s", C.why);
        return 1;
    }
    C.ok = 1;
    return 0;
}

/* ---- kernel activity records ---------------------------------------------------------- */

typedef CUpti_ActivityKernel10 kernel_record; /* the header's latest kernel record */

static struct {
    attn_launch_info *out;
    int max, n;
} T;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = 1 << 20;
    *buffer = (uint8_t *)aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *rec = NULL;
    while (C.ActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const kernel_record *k = (const kernel_record *)rec;
        if (T.n < T.max) {
            attn_launch_info *o = &T.out[T.n];
            memset(o, 0, sizeof *o);
            snprintf(o->name, sizeof o->name, "%s", k->name ? k->name : "?");
            o->grid[0] = k->gridX, o->grid[1] = k->gridY, o->grid[2] = k->gridZ;
            o->block[0] = k->blockX, o->block[1] = k->blockY, o->block[2] = k->blockZ;
            o->registers = k->registersPerThread;
            o->static_smem = k->staticSharedMemory, o->dynamic_smem = k->dynamicSharedMemory;
            o->local_bytes = (int)k->localMemoryPerThread;
            o->smem_carveout = (int)k->sharedMemoryExecuted;
            o->duration_us = k->end > k->start ? (k->end - k->start) * 1e-3 : 0;
        }
        T.n++;
    }
    free(buffer);
}

int attn_trace_launches(attn_call_fn fn, void *ctx, cudaStream_t s, attn_launch_info *out, int max,
                        int *n, char *err, size_t errlen) {
    *n = 0;
    if (cupti_load(err, errlen)) return 1;
    static int registered;
    CUptiResult r;
    if (!registered) {
        if ((r = C.ActivityRegisterCallbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS) {
            put(err, errlen, "cuptiActivityRegisterCallbacks: %s", cupti_str(r));
            return 1;
        }
        registered = 1;
    }
    attn_sm_limits lim;
    if (attn_sm_limits_query(&lim, err, errlen)) return 1;
    if (cudaStreamSynchronize(s) != cudaSuccess) {
        put(err, errlen, "cudaStreamSynchronize before tracing failed");
        return 2;
    }
    T.out = out, T.max = max, T.n = 0;
    if ((r = C.ActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) != CUPTI_SUCCESS) {
        put(err, errlen, "cuptiActivityEnable(CONCURRENT_KERNEL): %s", cupti_str(r));
        return 1;
    }
    int rc = fn(ctx, s, err, errlen) ? 2 : 0;
    cudaError_t e = cudaStreamSynchronize(s);
    C.ActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    C.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* every record, now */
    if (!rc && e != cudaSuccess) put(err, errlen, "the traced call: %s", cudaGetErrorString(e)), rc = 2;
    if (rc) return rc;
    *n = T.n;
    for (int i = 0; i < T.n && i < max; i++) {
        attn_launch_info *o = &out[i];
        attn_occupancy(&lim, o->block[0] * o->block[1] * o->block[2], o->registers,
                       o->static_smem + o->dynamic_smem, o);
    }
    if (T.n == 0) {
        put(err, errlen, "CUPTI recorded no kernel launch for the call");
        return 1;
    }
    return 0;
}

/* ---- shared memory requests (API callbacks) ------------------------------------------- */

static CUpti_SubscriberHandle subscriber;
static int max_request;

static void note(long bytes) {
    if (bytes > max_request) max_request = (int)bytes;
}

static void CUPTIAPI on_api(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
    (void)user;
    const CUpti_CallbackData *cb = (const CUpti_CallbackData *)data;
    if (cb->callbackSite != CUPTI_API_ENTER) return;
    const void *p = cb->functionParams;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        switch (cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaFuncSetAttribute_v9000: {
            const cudaFuncSetAttribute_v9000_params *a = p;
            if (a->attr == cudaFuncAttributeMaxDynamicSharedMemorySize) note(a->value);
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
        /* CUDA 13's <<<>>> launch: (cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t),
         * the same layout as cudaLaunchKernel's parameters (its header declares no struct) */
        case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
        case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000:
            note((long)((const cudaLaunchKernel_v7000_params *)p)->sharedMem);
            break;
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
            const cudaLaunchKernelExC_v11060_params *a = p;
            if (a->config) note((long)a->config->dynamicSmemBytes);
            break;
        }
        default: break;
        }
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute: {
            const cuFuncSetAttribute_params *a = p;
            if (a->attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) note(a->value);
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
            note(((const cuLaunchKernel_params *)p)->sharedMemBytes);
            break;
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
            const cuLaunchKernelEx_params *a = p;
            if (a->config) note(a->config->sharedMemBytes);
            break;
        }
        default: break;
        }
    }
}

int attn_requests_begin(char *err, size_t errlen) {
    max_request = 0;
    if (cupti_load(err, errlen)) return 1;
    CUptiResult r = C.Subscribe(&subscriber, on_api, NULL);
    if (r != CUPTI_SUCCESS) {
        subscriber = NULL;
        put(err, errlen, "cuptiSubscribe: %s", cupti_str(r));
        return 1;
    }
    static const CUpti_CallbackId runtime[] = {
        CUPTI_RUNTIME_TRACE_CBID_cudaFuncSetAttribute_v9000,      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,     CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
        CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,       CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060};
    static const CUpti_CallbackId driver[] = {
        CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz};
    for (size_t i = 0; i < sizeof runtime / sizeof *runtime; i++)
        C.EnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, runtime[i]);
    for (size_t i = 0; i < sizeof driver / sizeof *driver; i++)
        C.EnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, driver[i]);
    return 0;
}

int attn_requests_end(void) {
    if (subscriber) C.Unsubscribe(subscriber);
    subscriber = NULL;
    return max_request;
}

#endif
