/* Inputs and verification figures computed on the GPU, so that no correctness path loops
 * over a tensor on the host (a tensor above 2^31 elements takes milliseconds here, minutes
 * on one host core). Each figure function synchronizes `stream` and returns a few numbers. */
#ifndef ATTN_GPU_VERIFY_H
#define ATTN_GPU_VERIFY_H

#include <stddef.h>
#include <stdint.h>
#include "attn_abi.h"
#include "verdict.h"

#ifdef __cplusplus
extern "C" {
#endif

/* n normal random values (mean 0, std sigma) in the dtype, from a counter-based hash:
 * the same seed gives the same tensor. */
cudaError_t attn_fill_normal(void *dst, attn_dtype dtype, size_t n, uint64_t seed, float sigma,
                             cudaStream_t stream);

/* A logical [batch][heads][seq][dim] tensor through element strides. Element (b, h, s, d)
 * takes the value attn_fill_normal gives index ((b*heads + h)*seq + s)*dim + d, whatever the
 * layout: the same seed and shape give the same tensor in every layout. Elements outside
 * the tensor (padding) are not written. */
typedef struct {
    int batch, heads, seq, dim;
    int64_t batch_stride, head_stride, row_stride;
} attn_tensor_view;
cudaError_t attn_fill_normal_view(void *dst, attn_dtype dtype, const attn_tensor_view *v,
                                  uint64_t seed, float sigma, cudaStream_t stream);

/* How many elements matched a condition, and the index of the first. */
typedef struct {
    unsigned long long count, first; /* first = 0 when count = 0 */
} attn_match;

/* O elements (dtype, through the view) that are NaN; `first` is a logical BHSD index. */
cudaError_t attn_count_nan_view(const void *o, attn_dtype dtype, const attn_tensor_view *v,
                                attn_match *out, cudaStream_t stream);
/* float values that are NaN, and those whose bits are all ones (untouched poison). */
cudaError_t attn_count_nan_f32(const float *x, size_t n, attn_match *nan, attn_match *poison,
                               cudaStream_t stream);
/* bytes of buf[from, to) other than `poison`. */
cudaError_t attn_count_changed_bytes(const void *buf, size_t from, size_t to,
                                     unsigned char poison, attn_match *out, cudaStream_t stream);
/* bytes where a[i] != b[i], i < n. */
cudaError_t attn_count_diff_bytes(const void *a, const void *b, size_t n, attn_match *out,
                                  cudaStream_t stream);
/* 16-bit elements e < extent with e % row_stride >= used (the padding after each row of a
 * padded layout) that are not 0xffff (the poison). */
cudaError_t attn_count_padding_written(const void *o, int64_t extent, int64_t row_stride,
                                       int64_t used, attn_match *out, cudaStream_t stream);

/* An input as attn_fill_normal_view left it? `buf` holds `guard` bytes of `poison`, the
 * tensor's data, then `guard` bytes of poison again (`bytes` in all). Its logical elements
 * are compared, bit for bit, with the values the fill gives (seed, sigma), and the guard
 * bytes with the poison; the padding between rows is not looked at. */
typedef struct {
    unsigned long long count, first;             /* elements that differ; the first's logical BHSD index */
    unsigned int filled;                         /* the fill's 16 bits at `first` */
    unsigned long long guard_count, guard_first; /* guard bytes not poison; the first's offset in buf */
} attn_fill_diff;
cudaError_t attn_diff_fill_view(const void *buf, size_t bytes, size_t guard, attn_dtype dtype,
                                const attn_tensor_view *v, uint64_t seed, float sigma, unsigned char poison,
                                attn_fill_diff *out, cudaStream_t stream);
/* The 16 bits of element i (logical BHSD index) of a tensor through the view. */
unsigned int attn_peek_view_bits(const void *t, const attn_tensor_view *v, size_t i);

/* The verdict rule's figures for the output p->o (the dtype, through p's strides) against
 * the golden G and low-precision R ([batch][heads][seqlen_q][head_dim] floats on the
 * device). Below 2^32 elements (the index of the worst element is kept in 32 bits). */
cudaError_t attn_output_stats_gpu(const attn_fwd_params *p, const float *g, const float *r,
                                  attn_output_stats *out, cudaStream_t stream);

/* The LSE rule (attn_judge_lse) on the GPU: lse and the golden lg are `rows` floats.
 * Also the largest finite |lg| (max_abs_g). Below 2^32 rows. */
cudaError_t attn_lse_verdict_gpu(const float *lse, const float *lg, size_t rows,
                                 const attn_tolerance *t, attn_lse_verdict *out,
                                 double *max_abs_g, cudaStream_t stream);

/* Packed rows (attn_abi.h's cu_seqlens layout) into the reference's dense layout, so that
 * the rules above judge them: row r of sequence b, head h is at
 * packed + (cu[b] + r) * row_stride + h * head_stride (dtype), copied to
 * dense[b][h][r][0..dim) (dtype, contiguous, max_rows rows a head). Rows past a sequence's
 * length get 0 in `dense` and in the float arrays g and r (the reference's G and R, which
 * leave them unwritten), so that they compare equal. cu is a device array [batch + 1]. */
cudaError_t attn_unpack_rows(const void *packed, attn_dtype dtype, const int32_t *cu, int batch, int heads,
                             int max_rows, int dim, int64_t row_stride, int64_t head_stride, void *dense,
                             float *g, float *r, cudaStream_t stream);
/* The same for a packed LSE [heads][total] (total = cu[batch]) into dense [batch][heads][max_rows];
 * rows past a sequence's length get -inf there and in the golden lg. */
cudaError_t attn_unpack_lse(const float *packed, const int32_t *cu, int batch, int heads, int max_rows,
                            float *dense, float *lg, cudaStream_t stream);

/* The other way: dense floats [batch][heads][max_rows][dim] stored in a kernel's layout,
 * rounded to nearest even: row r of sequence b, head h at dst + (cu ? (cu[b] + r) * row_stride
 * : b * batch_stride + r * row_stride) + h * head_stride + d (elements of the stored type),
 * for r below the sequence's length (cu's span; without cu, every row). The forward's O and
 * LSE given to a backward: the LSE as F32 with dim 1. Enqueued. */
typedef enum { ATTN_STORE_F16 = ATTN_F16, ATTN_STORE_BF16 = ATTN_BF16, ATTN_STORE_F32 } attn_store_type;
cudaError_t attn_pack_rows(const float *dense, attn_store_type type, const int32_t *cu, int batch, int heads,
                           int max_rows, int dim, int64_t batch_stride, int64_t head_stride, int64_t row_stride,
                           void *dst, cudaStream_t stream);
/* dK and dV rows past a sequence's used keys (rows s >= used[b] of the view, used a device
 * array [batch]), which bwd writes as 0 or leaves alone: the untouched poison (0xffff) is
 * set to 0 so that the verdict sees 0 there, and the elements that are neither are counted
 * (out; `first` a logical BHSD index). Synchronizes `stream`. */
cudaError_t attn_clear_stale_rows(void *t, attn_dtype dtype, const attn_tensor_view *v, const int32_t *used,
                                  attn_match *out, cudaStream_t stream);

/* One element of a device tensor, as float: O (dtype) at logical BHSD index i through the
 * view, or a float array at i. For messages about the worst element. */
float attn_peek_view(const void *o, attn_dtype dtype, const attn_tensor_view *v, size_t i);
float attn_peek_f32(const float *x, size_t i);

/* A gate that holds a stream: a kernel that spins until the host opens it (or timeout_s
 * passes), so that work enqueued behind it cannot start early. Work a kernel under test
 * does on another stream runs while the gate is shut: the contract checks see it. */
typedef struct attn_gate attn_gate;
cudaError_t attn_gate_create(attn_gate **out);
/* Enqueues the shut gate on `stream`. */
cudaError_t attn_gate_shut(attn_gate *g, cudaStream_t stream, double timeout_s);
/* Enqueues the shut gate on `stream` as `blocks` (at most ATTN_GATE_MAX_BLOCKS) blocks of one
 * thread, each with the most shared memory a block may have, so that no other block fits on
 * an SM one of them holds: the SMs they hold are busy until the gate opens. */
enum { ATTN_GATE_MAX_BLOCKS = 1024 };
cudaError_t attn_gate_hold_sms(attn_gate *g, cudaStream_t stream, double timeout_s, int blocks);
/* How many of the gate's blocks run now (started, not yet returned). */
int attn_gate_running(const attn_gate *g);
/* The SM that block `block` runs on (%smid), or -1 when it is not running. */
int attn_gate_block_sm(const attn_gate *g, int block);
/* Lets block `block` alone return (the SM it held is free once it has: attn_gate_block_sm). */
void attn_gate_release_block(attn_gate *g, int block);
/* Enqueues one cluster of two blocks of an empty kernel on `stream` (sm_90 on; else
 * cudaErrorNotSupported): whether such a cluster can start while SMs are held. */
cudaError_t attn_cluster_probe(cudaStream_t stream);
void attn_gate_open(attn_gate *g);
/* 1 when the last gate opened by its timeout, not by attn_gate_open (read after the stream
 * has passed it). */
int attn_gate_timed_out(const attn_gate *g);
void attn_gate_destroy(attn_gate *g);

#ifdef __cplusplus
}
#endif
#endif
