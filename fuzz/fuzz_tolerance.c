/* The tolerance loader (harness/verdict.c): thresholds/tolerance.ini's format read by path, as
 * attn_correctness reads it. Beyond memory and UB errors: every error names the file, and a
 * loaded file's six factors are finite and non-negative (the verdict rule multiplies by them). */
#include <math.h>
#include <string.h>

#include "fuzz_util.h"
#include "verdict.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    attn_tolerance t;
    char err[1024];
    const char *path = fuzz_file(data, size);
    if (attn_tolerance_load(path, &t, err, sizeof err)) {
        if (strncmp(err, path, strlen(path))) fuzz_fail("an error that does not name the file: %s", err);
        return 0;
    }
    const double f[] = {t.max_factor, t.atol_steps, t.mean_factor, t.mean_eps_steps, t.lse_atol, t.lse_rtol};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!isfinite(f[i]) || f[i] < 0) fuzz_fail("factor %zu loaded as %g", i, f[i]);
    return 0;
}
