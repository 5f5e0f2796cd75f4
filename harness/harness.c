#define _GNU_SOURCE /* clock_gettime */
#include "harness.h"

#include <dlfcn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

uint16_t attn_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) return sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u); /* NaN, Inf */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 rounds to Inf */
    if (a < 0x38800000u) {                       /* below 2^-14: subnormal (or zero) */
        float af;
        memcpy(&af, &a, 4);
        return sign | (uint16_t)lrintf(af * 16777216.0f); /* exact scaling by 2^24, RNE */
    }
    uint32_t h = ((a >> 23) - 112u) << 10 | (a & 0x7fffffu) >> 13;
    uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry moves the exponent */
    return sign | (uint16_t)h;
}

float attn_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) {
        float f = ldexpf((float)m, -24);
        return sign ? -f : f;
    }
    x = e == 31 ? sign | 0x7f800000u | m << 13 : sign | (e + 112u) << 23 | m << 13;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t attn_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float attn_bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t attn_to_dtype(attn_dtype dt, float f) {
    return dt == ATTN_BF16 ? attn_f32_to_bf16(f) : attn_f32_to_f16(f);
}
float attn_from_dtype(attn_dtype dt, uint16_t h) {
    return dt == ATTN_BF16 ? attn_bf16_to_f32(h) : attn_f16_to_f32(h);
}
const char *attn_dtype_name(attn_dtype dt) { return dt == ATTN_BF16 ? "bf16" : "fp16"; }
int attn_dtype_parse(const char *s, attn_dtype *dt) {
    if (!strcmp(s, "fp16")) *dt = ATTN_F16;
    else if (!strcmp(s, "bf16")) *dt = ATTN_BF16;
    else return 1;
    return 0;
}

void attn_params_clear(attn_fwd_params *p, int heads) {
    memset(p, 0, sizeof *p);
    p->heads = p->heads_k = heads;
    p->window_left = p->window_right = -1;
}

double attn_wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void attn_sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

uint64_t attn_seed_from_name(const char *name) {
    const char *env = getenv("ATTN_SEED");
    if (env && *env) return strtoull(env, NULL, 0);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        h ^= *c;
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t attn_rng_u64(attn_rng *r) { return splitmix64(&r->s); }

void attn_rng_init(attn_rng *r, uint64_t seed) {
    r->s = seed;
    r->has_spare = 0;
}

double attn_rng_normal(attn_rng *r) { /* Box-Muller, both values used */
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u1 = ((splitmix64(&r->s) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
    double u2 = (splitmix64(&r->s) >> 11) * 0x1.0p-53;
    double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    r->spare = rad * sin(th);
    r->has_spare = 1;
    return rad * cos(th);
}

const char *attn_layout_name(attn_layout l) {
    switch (l) {
    case ATTN_LAYOUT_BSHD: return "BSHD";
    case ATTN_LAYOUT_BHSD: return "BHSD";
    case ATTN_LAYOUT_BSHD_PADDED: return "BSHD+pad";
    case ATTN_LAYOUT_BHSD_PADDED: return "BHSD+pad";
    case ATTN_LAYOUT_BSHD_ODD: return "BSHD+1";
    case ATTN_LAYOUT_HEADS_BCAST: return "BSD (head stride 0)";
    case ATTN_LAYOUT_BATCH_BCAST: return "SHD (batch stride 0)";
    }
    return "?";
}

attn_strides attn_make_strides(attn_layout l, int batch, int heads, int seq, int dim) {
    attn_strides st;
    const int64_t pad = l == ATTN_LAYOUT_BSHD_PADDED || l == ATTN_LAYOUT_BHSD_PADDED ? 8
                        : l == ATTN_LAYOUT_BSHD_ODD                                  ? 1
                                                                                     : 0;
    if (l == ATTN_LAYOUT_HEADS_BCAST) {
        st.head = 0, st.row = dim, st.batch = (int64_t)seq * dim;
    } else if (l == ATTN_LAYOUT_BATCH_BCAST) {
        st.head = dim, st.row = (int64_t)heads * dim, st.batch = 0;
        st.extent = seq * st.row;
        return st;
    } else if (l == ATTN_LAYOUT_BSHD || l == ATTN_LAYOUT_BSHD_PADDED || l == ATTN_LAYOUT_BSHD_ODD) {
        st.head = dim;
        st.row = (int64_t)heads * dim + pad;
        st.batch = seq * st.row;
    } else {
        st.row = dim + pad;
        st.head = seq * st.row;
        st.batch = heads * st.head;
    }
    st.extent = batch * st.batch;
    return st;
}

int attn_gpu_available(char *why, size_t whylen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (driver) dlclose(driver);
        snprintf(why, whylen, "%s: cudaGetDeviceCount: %s (%s)",
                 driver ? "no usable CUDA GPU" : "no NVIDIA driver on this machine (no libcuda.so.1)",
                 cudaGetErrorName(e), cudaGetErrorString(e));
        return 0;
    }
    if (n == 0) {
        snprintf(why, whylen, "no CUDA GPU on this machine (cudaGetDeviceCount = 0)");
        return 0;
    }
    /* CTest's resource allocation (ctest --resource-spec-file): use the GPU it gave us */
    const char *groups = getenv("CTEST_RESOURCE_GROUP_COUNT");
    if (groups && atoi(groups) > 0) {
        const char *value = getenv("CTEST_RESOURCE_GROUP_0_GPUS");
        int id;
        if (!value || attn_parse_ctest_gpu(value, &id) || id >= n) {
            fprintf(stderr, "CTEST_RESOURCE_GROUP_0_GPUS='%s': expected 'id:<n>,slots:<n>' with a GPU "
                    "id below %d (see scripts/resource_spec.py)\n", value ? value : "(unset)", n);
            exit(2);
        }
        cudaError_t se = cudaSetDevice(id);
        if (se != cudaSuccess) {
            fprintf(stderr, "cudaSetDevice(%d): %s\n", id, cudaGetErrorString(se));
            exit(2);
        }
    }
    return 1;
}

int attn_parse_ctest_gpu(const char *value, int *id) {
    int slots, used = 0;
    if (sscanf(value, "id:%d,slots:%d%n", id, &slots, &used) != 2 || *id < 0 || slots < 1) return 1;
    return value[used] != 0 && value[used] != ';'; /* one GPU: take the first entry */
}
