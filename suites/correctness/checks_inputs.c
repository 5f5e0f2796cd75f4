/* 14. inputs_unchanged: fwd leaves its inputs as it found them. A caller reuses Q, K, V and
 * the layout arrays (a second call, the backward pass, a serving engine's next step), so a
 * kernel that pre-scales Q in place, converts K or V in place and back with rounding, or
 * sorts, clamps or rewrites cu_seqlens, the block table or seqused_k breaks every later call.
 *
 * No launch of its own: verify_inputs runs after launches the case makes anyway (accuracy's
 * and lse's, the packed check's first, each of the contract checks'), and this check reports
 * the first change they saw. Q, K and V are compared on the GPU with the seeded fill they
 * came from (one read of each, guard bands included); the layout arrays are read back and
 * compared with the host's copies (harness/gpu_problem.h). Only a case that made no such
 * launch (the check run alone: CK_RUN_CASE=inputs_unchanged) builds and launches its own. */
#include <stdio.h>
#include <string.h>

#include "context.h"
#include "gpu_problem.h"

void verify_inputs(check_ctx *c, const attn_gpu_problem *x, const char *check) {
    if (!c->verify_inputs) return;
    attn_input_change ch[ATTN_N_INPUTS];
    char err[512], line[1024];
    const int n = attn_gpu_problem_input_changes(x, ch, c->stream, err, sizeof err);
    c->inputs_verified++;
    if (n == 0 || c->inputs_changed[0]) return; /* the first change of the case is the one said */
    char *out = c->inputs_changed;
    const size_t len = sizeof c->inputs_changed;
    snprintf(out, len, "  after the launch of check '%s' (its problem's seed 0x%016llx):\n", check,
             (unsigned long long)x->desc.seed);
    if (n < 0) snprintf(line, sizeof line, "comparing the inputs failed: %s", err);
    for (int i = 0; i < (n < 0 ? 1 : n); i++) {
        if (n > 0) attn_input_change_describe(x, &ch[i], line, sizeof line);
        const size_t at = strlen(out);
        snprintf(out + at, len - at, "  %s\n", line);
    }
}

/* The check run alone: a problem of the case, one launch, its inputs verified. */
static outcome own_launch(check_ctx *c, const attn_problem_desc *d) {
    attn_gpu_problem x;
    outcome oc = CHECK_FAIL;
    if (!build_problem(c, &x, d)) {
        const launch_result lr = run_kernel(c, &x);
        oc = launch_outcome(lr);
        if (lr == LAUNCH_OK) verify_inputs(c, &x, "inputs_unchanged");
    }
    attn_gpu_problem_free(&x);
    return oc;
}

outcome check_inputs_unchanged(check_ctx *c) {
    const attn_problem_desc d = case_problem(c, CHECK_NO_inputs_unchanged);
    say_header(c, "inputs_unchanged", &d);
    if (!c->inputs_verified) {
        const outcome oc = own_launch(c, &d);
        if (oc != CHECK_PASS) return oc;
    }
    if (!c->inputs_changed[0]) return CHECK_PASS;
    say(c, "%s", c->inputs_changed);
    say(c, "  fwd must leave every input bit for bit as it was (Q, K and V are const, so are cu_seqlens, "
        "the block table and seqused_k): a caller reuses them; no scaling, converting or sorting in place, "
        "no scratch in them\n");
    return CHECK_FAIL;
}
