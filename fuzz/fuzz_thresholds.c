/* The thresholds loader (harness/thresholds.c): a thresholds file read by path, as
 * attn_benchmark reads thresholds/<gpu>.ini, then each class looked up as the benchmarks look it
 * up. Beyond memory and UB errors: every error names the file; a loaded file has its peaks and,
 * for each class, ranges that are not empty and figures in their domains; a lookup at a class's
 * own corner finds a class that covers it. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "fuzz_util.h"
#include "thresholds.h"

static int positive_or_unset(double x) { return isnan(x) || (isfinite(x) && x > 0); }

static void check_class(const attn_thresholds *t, const attn_threshold_class *k) {
    if (k->s_lo < 1 || k->s_hi < k->s_lo || k->q_lo < 0 || k->q_hi < k->q_lo)
        fuzz_fail("[%s]: empty range %d-%d q%d-%d", k->section, k->s_lo, k->s_hi, k->q_lo, k->q_hi);
    if (!(k->min_roofline > 0 && k->min_roofline <= 1) || !positive_or_unset(k->min_speedup_reference) ||
        !positive_or_unset(k->min_speedup_cudnn))
        fuzz_fail("[%s]: a figure outside its domain", k->section);
    if (k->dtype < -1 || k->dtype > ATTN_BF16 || k->head_dim < 0 || k->workload < -1 ||
        k->workload >= ATTN_WORKLOAD_COUNT || !attn_pass_name(k->pass))
        fuzz_fail("[%s]: dtype %d, head_dim %d, workload %d, pass %d", k->section, k->dtype, k->head_dim, k->workload,
                  k->pass);
    const attn_dtype dt = k->dtype < 0 ? ATTN_F16 : (attn_dtype)k->dtype;
    const int w = k->workload < 0 ? ATTN_WORKLOAD_FULL : k->workload;
    const attn_threshold_class *found =
        attn_thresholds_find(t, k->kernel, k->pass, dt, k->head_dim, w, k->s_hi, k->q_lo);
    if (!found || strcmp(found->kernel, k->kernel) || found->s_lo > k->s_hi || found->s_hi < k->s_hi)
        fuzz_fail("[%s]: its own corner finds %s", k->section, found ? found->section : "no class");
    (void)attn_workload_name(k->workload);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    attn_thresholds t;
    char err[1024], slug[256];
    const char *path = fuzz_file(data, size);
    if (attn_thresholds_load(path, &t, err, sizeof err)) {
        if (strncmp(err, path, strlen(path))) fuzz_fail("an error that does not name the file: %s", err);
        if (t.classes || t.nclasses) fuzz_fail("a failed load kept %d classes", t.nclasses);
        return 0;
    }
    if (!(t.fp16_tflops > 0 && t.bf16_tflops > 0 && t.bandwidth_gbs > 0) || !isfinite(t.fp16_tflops + t.bf16_tflops + t.bandwidth_gbs))
        fuzz_fail("peaks %g %g %g", t.fp16_tflops, t.bf16_tflops, t.bandwidth_gbs);
    attn_gpu_slug(t.gpu_name, slug, sizeof slug);
    for (int i = 0; i < t.nclasses; i++) check_class(&t, &t.classes[i]);
    attn_thresholds_free(&t);
    return 0;
}
