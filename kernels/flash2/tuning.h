/* flash2's autotuning (v11): the compiled points of its tunable space (space.h) and the tuned
 * points the kernel runs on a GPU named in a committed tuned file (thresholds/<gpu>.tuned.txt,
 * written by attn_tune). The generated instances (space_instances.cu.in, one translation unit
 * per dtype, head dim, warps and row tiles) list their points; tuning.cu gathers them and
 * implements attn_tuning_flash2 (attn_abi.h). */
#ifndef FLASH2_TUNING_H
#define FLASH2_TUNING_H

#include "attn_abi.h"
#include "space.h"

/* -DATTN_TUNE_SPACE=ON (CMake): every buildable point, for the autotuner */
#ifndef FLASH2_TUNE_SPACE
#define FLASH2_TUNE_SPACE 0
#endif

namespace flash2_tune {

/* A committed tuned point: on the GPU whose name is `gpu` (cudaDeviceProp.name), problems of
 * this dtype and head dim, causal or not, with S_q and S_k in [lo, hi], on the plain path. */
struct Tuned {
    const char *gpu;
    int dtype, d, causal, lo, hi;
    flash2_space::Point x;
};
constexpr Tuned kTuned[] = {
#define FLASH2_TUNED(gpu, dtype, d, causal, lo, hi, w, mt, bn, st, qr, mb) {gpu, dtype, d, causal, lo, hi, {w, mt, bn, st, qr, mb}},
#include "flash2_tuned.inc" /* generated from thresholds/*.tuned.txt (space.cmake) */
#undef FLASH2_TUNED
    {nullptr, 0, 0, 0, 0, 0, {}}, /* the end (and never an empty array) */
};

constexpr bool is_tuned(const flash2_space::Point &x, int dtype, int d) {
    for (const Tuned &t : kTuned)
        if (t.gpu && t.dtype == dtype && t.d == d && flash2_space::same(t.x, x)) return true;
    return false;
}

/* The default points (default_point(d, 1) and (d, 2)) are flash2.cu's own instantiations; a
 * generated instance compiles the other buildable points that a tuned file names, or all of
 * them for the autotuner's build. */
constexpr bool instanced(const flash2_space::Point &x, int dtype, int d) {
    return flash2_space::buildable(x, d, d) && !flash2_space::same(x, flash2_space::default_point(d, 1)) &&
           !flash2_space::same(x, flash2_space::default_point(d, 2)) && (FLASH2_TUNE_SPACE || is_tuned(x, dtype, d));
}

using Launch = int (*)(const attn_fwd_params *p, cudaStream_t stream);
struct Instance {
    flash2_space::Point x;
    int dtype, d;
    Launch launch;    /* the plain path without EXT or VAR (version-1 problems), at this point */
    const void *func; /* its __global__ function, for cudaFuncGetAttributes */
};
/* the most points one generated unit can hold: block_n x stages x q_in_regs x min_blocks */
constexpr int kPerUnit = 3 * 2 * 2 * 4;

} // namespace flash2_tune

/* flash2.cu: the plain path at a default point (row_tiles 1 or 2) for p's dtype and head dim
 * (64 or 128), as flash2_fwd runs it untuned; its kernel function in *func when func is given. */
int flash2_launch_default(const attn_fwd_params *p, int row_tiles, cudaStream_t stream, const void **func);
/* flash2.cu: what flash2_fwd checks of a dense problem before it runs (sizes, pointers, 16-byte
 * aligned rows and strides), so that fwd_config takes no problem that fwd would refuse. */
bool flash2_dense_ok(const attn_fwd_params *p);
/* tuning.cu: flash2_fwd's plain path for a version-1 problem at the tuned point of this GPU and
 * p's class; ATTN_UNSUPPORTED when no tuned point applies (the default then runs). */
int flash2_tuned_fwd(const attn_fwd_params *p, cudaStream_t stream);

#endif
