/* flash2's backward pass (bwd.cu; NOTES_bwd.md): attn_kernel_flash2's bwd and bwd_workspace. */
#ifndef FLASH2_BWD_H
#define FLASH2_BWD_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "attn_abi.h"

/* What the backward takes beyond fp16/bf16, head dims 64 and 128 (equal for V), dense rows,
 * full and causal masks; bwd returns ATTN_UNSUPPORTED for anything else (windows, softcap,
 * other head dims, strides that are not multiples of 8 elements, misaligned pointers). */
#define FLASH2_BWD_CAPS (ATTN_CAP_GQA | ATTN_CAP_VARLEN | ATTN_CAP_SEQUSED_K | ATTN_BWD_DETERMINISTIC)

/* Enqueues dQ, dK, dV for bp on stream (attn_kernel.bwd): ATTN_OK, ATTN_UNSUPPORTED, or 2 on
 * an error (a workspace smaller than flash2_bwd_workspace(bp), a launch failure). */
int flash2_bwd(const attn_bwd_params *bp, cudaStream_t stream);
/* The workspace bytes bwd needs for bp (attn_kernel.bwd_workspace): bwd_plan.h's plan. */
size_t flash2_bwd_workspace(const attn_bwd_params *bp);

#endif
