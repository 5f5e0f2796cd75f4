/* Per-GPU benchmark thresholds: thresholds/<gpu slug>.ini (see the H100's file for the
 * format). Peaks come from `attn_calibrate`; minimums are set per shape class. */
#ifndef ATTN_THRESHOLDS_H
#define ATTN_THRESHOLDS_H

#include <stddef.h>
#include "attn_abi.h"

typedef struct {
    char kernel[64];
    int dtype;                 /* attn_dtype, or -1 for any */
    int head_dim;              /* 0 for any */
    int causal;                /* 0, 1, or -1 for any */
    int s_lo, s_hi;            /* seqlen range, inclusive */
    double min_speedup_reference;
    double min_speedup_cudnn;  /* NAN when not set */
    double min_roofline;       /* fraction of the roofline, 0..1 */
    char section[128];         /* the section's text, to name it in messages */
    unsigned seen;             /* keys given (bit mask) */
} attn_threshold_class;

typedef struct {
    char path[512];
    char gpu_name[256];
    double fp16_tflops, bf16_tflops, bandwidth_gbs;
    int nclasses, capacity;
    attn_threshold_class *classes; /* grown as sections come; attn_thresholds_free */
} attn_thresholds;

/* "NVIDIA H100 80GB HBM3" -> "nvidia_h100_80gb_hbm3" */
void attn_gpu_slug(const char *name, char *out, size_t outlen);

/* Loads and validates a thresholds file: every peak is required (a missing peak is an
 * error, not a zero); each class needs min_speedup_reference and min_roofline. Returns 0,
 * or non-zero with "path:line: what was expected" in err. */
int attn_thresholds_load(const char *path, attn_thresholds *t, char *err, size_t errlen);
void attn_thresholds_free(attn_thresholds *t);

/* The first class (in file order) that covers the case, or NULL. */
const attn_threshold_class *attn_thresholds_find(const attn_thresholds *t, const char *kernel,
                                                 attn_dtype dtype, int head_dim, int causal,
                                                 int seqlen);

#endif
