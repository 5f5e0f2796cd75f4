/* Host helpers shared by the GPU suites: fp16/bf16 conversion, seeded random numbers,
 * tensor layouts through strides, and the GPU-present check. */
#ifndef ATTN_HARNESS_H
#define ATTN_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include "attn_abi.h"

#define ATTN_EXIT_SKIP 77 /* CTest SKIP_RETURN_CODE: no GPU, or not supported */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- fp16 / bf16 on the host (round to nearest even) ---- */
uint16_t attn_f32_to_f16(float f);
float attn_f16_to_f32(uint16_t h);
uint16_t attn_f32_to_bf16(float f);
float attn_bf16_to_f32(uint16_t h);
uint16_t attn_to_dtype(attn_dtype dt, float f);
float attn_from_dtype(attn_dtype dt, uint16_t h);
const char *attn_dtype_name(attn_dtype dt); /* "fp16" / "bf16" */
int attn_dtype_parse(const char *s, attn_dtype *dt);

/* ---- seeds and random normals ---- */
/* Zeroes p but for the version-2 fields' "off" values (attn_abi.h): heads_k = heads, no
 * window. A version-1 problem is then whatever the caller fills in. */
void attn_params_clear(attn_fwd_params *p, int heads);

/* Seconds on a monotonic clock (for elapsed times). */
double attn_wall_s(void);
/* Sleeps s seconds (polling loops). */
void attn_sleep_s(double s);

uint64_t attn_seed_from_name(const char *name); /* FNV-1a, or $ATTN_SEED when set */
typedef struct { uint64_t s; int has_spare; double spare; } attn_rng;
void attn_rng_init(attn_rng *r, uint64_t seed);
double attn_rng_normal(attn_rng *r);
uint64_t attn_rng_u64(attn_rng *r); /* uniform 64 bits */

/* ---- layouts ---- */
typedef enum {
    ATTN_LAYOUT_BSHD,        /* [batch][seq][heads][dim]: FlashAttention's layout */
    ATTN_LAYOUT_BHSD,        /* [batch][heads][seq][dim] */
    ATTN_LAYOUT_BSHD_PADDED, /* BSHD with 8 unused elements after each row of all heads */
    ATTN_LAYOUT_BHSD_PADDED, /* BHSD with 8 unused elements after each row */
    ATTN_LAYOUT_BSHD_ODD,    /* BSHD with 1 unused element after each row of all heads: every
                                other row starts 2 bytes past a 4-byte boundary (check unaligned) */
    ATTN_LAYOUT_HEADS_BCAST, /* one head's [batch][seq][dim], head stride 0: every head reads it
                                (expand() over heads; check broadcast) */
    ATTN_LAYOUT_BATCH_BCAST, /* one sequence's [seq][heads][dim], batch stride 0: every batch
                                element reads it (a shared prefix; check broadcast) */
} attn_layout;
const char *attn_layout_name(attn_layout l);

typedef struct {
    int64_t batch, head, row; /* strides in elements */
    int64_t extent;           /* elements from the first to one past the last */
} attn_strides;
attn_strides attn_make_strides(attn_layout l, int batch, int heads, int seq, int dim);

/* offset in elements of logical element (b, h, s, d) */
static inline int64_t attn_offset(const attn_strides *st, int b, int h, int s, int d) {
    return b * st->batch + h * st->head + s * st->row + d;
}

/* ---- GPU present? Returns 1, or 0 with the reason (to print before exit 77). Under
 * CTest's resource allocation it also selects the GPU CTest assigned (exit 2 when that
 * assignment is malformed). ---- */
int attn_gpu_available(char *why, size_t whylen);
/* "id:1,slots:2" -> 1 (CTest's CTEST_RESOURCE_GROUP_0_GPUS); 0 ok, non-zero malformed. */
int attn_parse_ctest_gpu(const char *value, int *id);

#ifdef __cplusplus
}
#endif

#endif
