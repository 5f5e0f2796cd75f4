/* Per-GPU benchmark thresholds: thresholds/<gpu slug>.ini (see the H100's file for the
 * format). Peaks come from `attn_calibrate`; minimums are set per shape class. */
#ifndef ATTN_THRESHOLDS_H
#define ATTN_THRESHOLDS_H

#include <stddef.h>
#include "attn_abi.h"

/* What a benchmark measures: the dense matrix's two masks (shapes/benchmark.txt), or one of
 * version 2's workloads (shapes/benchmark_v2.txt). A class's fourth word. */
typedef enum {
    ATTN_WORKLOAD_FULL = 0,
    ATTN_WORKLOAD_CAUSAL = 1,
    ATTN_WORKLOAD_DECODE,  /* a few queries per sequence against a long, paged KV cache */
    ATTN_WORKLOAD_VARLEN,  /* a packed batch of prefill sequences of mixed lengths */
    ATTN_WORKLOAD_WINDOW,  /* sliding-window prefill */
    ATTN_WORKLOAD_COUNT
} attn_workload;

/* Which pass a benchmark times (attn_benchmark --pass): the forward; the backward (dQ, dK,
 * dV from the forward's O and LSE); or the forward then the backward, one call. A class's
 * optional word after the kernel; a section without it is fwd. */
typedef enum { ATTN_PASS_FWD = 0, ATTN_PASS_BWD, ATTN_PASS_FWD_BWD, ATTN_PASS_COUNT } attn_pass;

/* "fwd", "bwd", "fwd_bwd"; NULL past the end */
const char *attn_pass_name(int pass);
/* the pass named s, or -1 */
int attn_pass_parse(const char *s);

/* "full", "causal", "decode", "varlen", "window"; NULL past the end */
const char *attn_workload_name(int w);
/* the workload named s, or -1 */
int attn_workload_parse(const char *s);

typedef struct {
    char kernel[64];
    int pass;                  /* attn_pass: the optional word after the kernel (fwd without it) */
    int dtype;                 /* attn_dtype, or -1 for any */
    int head_dim;              /* 0 for any */
    int workload;              /* attn_workload, or -1 for any */
    int s_lo, s_hi;            /* seqlen range, inclusive (version 2's workloads: the longest
                                  sequence's keys, e.g. decode's cache length) */
    int q_lo, q_hi;            /* seqlen_q range (the longest sequence's queries), inclusive:
                                  the optional sixth word q<lo>[-<hi>]; else any */
    double min_speedup_reference; /* NAN when not set: only the dense workloads have the
                                     cuBLAS baseline, and require it */
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
 * error, not a zero); each class needs min_roofline, and min_speedup_reference unless it
 * covers only version 2's workloads (which have no cuBLAS baseline). Every number must fit
 * (class numbers in an int), every section and key appear once, every line and section name
 * be read whole (harness/ini_file.h). Returns 0, or non-zero with "path:line: what was
 * expected" in err. */
int attn_thresholds_load(const char *path, attn_thresholds *t, char *err, size_t errlen);
/* The same on a file's text in memory, text[0..len); `file` names it in the messages. */
int attn_thresholds_parse(const char *text, size_t len, const char *file, attn_thresholds *t, char *err,
                          size_t errlen);
void attn_thresholds_free(attn_thresholds *t);

/* The first class (in file order) of that pass that covers the case, or NULL. */
const attn_threshold_class *attn_thresholds_find(const attn_thresholds *t, const char *kernel, int pass,
                                                 attn_dtype dtype, int head_dim, int workload,
                                                 int seqlen, int seqlen_q);

#endif
