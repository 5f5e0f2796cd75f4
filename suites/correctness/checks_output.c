/* The checks of the output (group correctness in checks.def): accuracy, large inputs,
 * unwritten elements, guard bands, determinism, the softmax scale, layouts, the LSE. Each
 * builds its own problem of the case (its seed from the check's number), launches once and
 * judges. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include <cuda_runtime_api.h>

#include "context.h"
#include "gpu_verify.h"
#include "harness.h"

/* 1. normal random inputs, LSE not requested (lse = NULL must be honoured) */
outcome check_accuracy(check_ctx *c) {
    attn_gpu_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_accuracy);
    d.with_lse = 0;
    int fail;
    outcome oc = prepare(c, &x, &d, "accuracy", &fail);
    if (!fail) verify_inputs(c, &x, "accuracy");
    if (!fail) oc = judge_output(c, &x, "output") ? CHECK_FAIL : CHECK_PASS;
    attn_gpu_problem_free(&x);
    return oc;
}

/* 2. scaled scores beyond +-100: exp overflows (or underflows to 0/0) in float32 unless
 * the row max is subtracted. The score std is sigma^2 * sqrt(d) * scale = 400, so even the
 * 6 visible scores of q239k1 causal reach |s| > 100 (checked, from the golden LSE). */
outcome check_large_inputs(check_ctx *c) {
    attn_gpu_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_large_inputs);
    d.sigma_qk = 20.0f;
    int fail;
    outcome oc = prepare(c, &x, &d, "large_inputs", &fail);
    if (!fail) {
        double top = 0;
        int bad = judge_output(c, &x, "output");
        bad |= judge_lse(c, &x, "lse", &top);
        /* max s <= LSE <= max s + ln(seqlen_k): |LSE| > 100 + ln(seqlen_k) puts a score
         * beyond +-100. With a softcap the scores stay within +-softcap (no overflow to
         * provoke; the check then tests tanh's saturation) and the LSE cannot show them. */
        if (d.softcap == 0 && !(top > 100.0 + log((double)d.seqlen_k))) {
            say(c, "  harness error: the stimulus did not reach a score beyond +-100 (max |LSE| %g)\n", top);
            bad = 1;
        }
        oc = bad ? CHECK_FAIL : CHECK_PASS;
    }
    attn_gpu_problem_free(&x);
    return oc;
}

/* NaN left in O and the LSE, said; 0 when none (an LSE all NaN is check 'lse''s). */
static int count_unwritten(check_ctx *c, const attn_gpu_problem *x) {
    attn_match o, l, lpoison;
    attn_tensor_view ov = attn_gpu_problem_view(x, ATTN_T_O);
    if (attn_count_nan_view(x->p.o, x->desc.dtype, &ov, &o, c->stream) != cudaSuccess ||
        attn_count_nan_f32(x->p.lse, x->rows, &l, &lpoison, c->stream) != cudaSuccess) {
        say(c, "  counting NaN on the GPU failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    if (o.count) {
        int b, h, s, dd;
        where(x, o.first, &b, &h, &s, &dd);
        say(c, "  %llu of %zu O elements still NaN after the launch (never written?); first at "
            "(b=%d, h=%d, s=%d, d=%d), where G=%.6g\n", o.count, x->o_elems, b, h, s, dd,
            attn_peek_f32(x->g, o.first));
    }
    int lbad = l.count && l.count < x->rows; /* all NaN: no LSE at all (see check 'lse') */
    if (lbad)
        say(c, "  %llu of %zu LSE values still NaN after the launch; first at row %llu\n", l.count, x->rows,
            l.first);
    return o.count || lbad;
}

/* 3. every element of O and LSE written: they were NaN before the launch */
outcome check_unwritten(check_ctx *c) {
    attn_gpu_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_unwritten);
    int fail;
    outcome oc = prepare(c, &x, &d, "unwritten", &fail);
    if (!fail) oc = count_unwritten(c, &x) ? CHECK_FAIL : CHECK_PASS;
    attn_gpu_problem_free(&x);
    return oc;
}

/* Bytes of buf[from, to) that lost their poison; 0 when none (or on error, said in msg). */
static unsigned long long touched(check_ctx *c, const void *buf, size_t from, size_t to, size_t *first) {
    attn_match m;
    cudaError_t e = attn_count_changed_bytes(buf, from, to, ATTN_POISON, &m, c->stream);
    if (e != cudaSuccess) {
        say(c, "  counting bytes on the GPU failed: %s\n", cudaGetErrorString(e));
        return 1;
    }
    *first = m.first;
    return m.count;
}

/* The bytes outside O and the LSE, and O's padding, that lost their poison, said. */
static int count_guards_written(check_ctx *c, const attn_gpu_problem *x) {
    const size_t G = ATTN_GUARD_BYTES, OG = attn_gpu_problem_lead(x, ATTN_T_O); /* O's: 2 more when shifted */
    const attn_strides *os = &x->st[ATTN_T_O];
    const void *ob = x->buf[ATTN_T_O], *lb = x->buf[ATTN_T_LSE];
    size_t first = 0, bad = 0;
    unsigned long long n;
    size_t obytes = (size_t)os->extent * 2;
    if ((n = touched(c, ob, 0, OG, &first)))
        bad++, say(c, "  %llu bytes written in the %zu bytes before O (nearest at O-%zu)\n", n, OG, OG - first);
    if ((n = touched(c, ob, OG + obytes, x->bytes[ATTN_T_O], &first)))
        bad++, say(c, "  %llu bytes written in the %zu bytes after O's last element (first at end+%zu)\n", n, OG,
                   first - OG - obytes);
    /* padding: elements of each row past heads*head_dim */
    attn_match pad;
    if (attn_count_padding_written(x->p.o, os->extent, os->row, (int64_t)x->desc.heads * x->desc.head_dim_v, &pad,
                                   c->stream) != cudaSuccess)
        bad++, say(c, "  counting padding on the GPU failed\n");
    else if (pad.count)
        bad++, say(c, "  %llu padding elements between O's rows written (row stride %lld, first at "
                   "element %llu: s=%lld)\n", pad.count, (long long)os->row, pad.first,
                   (long long)(pad.first % os->batch / os->row));
    size_t lbytes = x->rows * 4;
    if ((n = touched(c, lb, 0, G, &first)))
        bad++, say(c, "  %llu bytes written in the %d bytes before LSE\n", n, ATTN_GUARD_BYTES);
    if ((n = touched(c, lb, G + lbytes, lbytes + 2 * G, &first)))
        bad++, say(c, "  %llu bytes written in the %d bytes after LSE's last value (first at end+%zu)\n", n,
                   ATTN_GUARD_BYTES, first - G - lbytes);
    return bad > 0;
}

/* 4. nothing written outside the outputs: guard bands before and after O and LSE, and the
 * padding between O's rows (padded layout) keep their poison */
outcome check_guard_bands(check_ctx *c) {
    attn_gpu_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_guard_bands);
    d.layout[3] = ATTN_LAYOUT_BSHD_PADDED;
    int fail;
    outcome oc = prepare(c, &x, &d, "guard_bands", &fail);
    if (!fail) oc = count_guards_written(c, &x) ? CHECK_FAIL : CHECK_PASS;
    attn_gpu_problem_free(&x);
    return oc;
}

/* Bytes in which a and b (device, n bytes) differ; 0 when none. */
static unsigned long long differing(check_ctx *c, const void *a, const void *b, size_t n, size_t *first) {
    attn_match m;
    cudaError_t e = attn_count_diff_bytes(a, b, n, &m, c->stream);
    if (e != cudaSuccess) {
        say(c, "  comparing on the GPU failed: %s\n", cudaGetErrorString(e));
        return 1;
    }
    *first = m.first;
    return m.count;
}

/* A second launch on x's inputs against the first one's outputs, kept in `first`. */
static outcome second_launch(check_ctx *c, attn_gpu_problem *x, const attn_gpu_snapshot *first) {
    launch_result lr = run_kernel(c, x);
    if (lr != LAUNCH_OK) return launch_outcome(lr);
    size_t fo = 0, fl = 0;
    unsigned long long no = differing(c, first->buf[ATTN_T_O], x->buf[ATTN_T_O], x->bytes[ATTN_T_O], &fo);
    unsigned long long nl = differing(c, first->buf[ATTN_T_LSE], x->buf[ATTN_T_LSE], x->bytes[ATTN_T_LSE], &fl);
    if (no)
        say(c, "  O differs between two launches on the same inputs in %llu bytes (first at "
            "byte %zd from O's start)\n", no, (ssize_t)fo - (ssize_t)attn_gpu_problem_lead(x, ATTN_T_O));
    if (nl) say(c, "  LSE differs between two launches in %llu bytes\n", nl);
    return no || nl ? CHECK_FAIL : CHECK_PASS;
}

/* 5. two launches on the same inputs give bit-identical O and LSE */
outcome check_determinism(check_ctx *c) {
    attn_gpu_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_determinism);
    int fail;
    outcome oc = prepare(c, &x, &d, "determinism", &fail);
    if (!fail) {
        attn_gpu_snapshot first;
        char err[1024];
        if (attn_gpu_problem_snapshot(&x, ATTN_FWD_OUTPUTS, &first, c->stream, err, sizeof err)) {
            say(c, "  keeping the first launch's outputs failed: %s\n", err);
            oc = CHECK_FAIL;
        } else {
            oc = second_launch(c, &x, &first);
        }
        attn_gpu_snapshot_free(&first);
    }
    attn_gpu_problem_free(&x);
    return oc;
}

/* 6. a softmax scale other than 1/sqrt(d) */
outcome check_scale(check_ctx *c) {
    attn_gpu_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_scale);
    d.softmax_scale = 0.5f; /* 4x (d=64) or 5.7x (d=128) the usual 1/sqrt(d) */
    int fail;
    outcome oc = prepare(c, &x, &d, "scale", &fail);
    if (!fail) {
        int bad = judge_output(c, &x, "output");
        bad |= judge_lse(c, &x, "lse", NULL);
        oc = bad ? CHECK_FAIL : CHECK_PASS;
    }
    attn_gpu_problem_free(&x);
    return oc;
}

/* 7. layouts through the strides: all BHSD, then each tensor its own (padded) layout */
outcome check_layouts(check_ctx *c) {
    static const attn_layout sets[2][4] = {
        {ATTN_LAYOUT_BHSD, ATTN_LAYOUT_BHSD, ATTN_LAYOUT_BHSD, ATTN_LAYOUT_BHSD},
        {ATTN_LAYOUT_BHSD, ATTN_LAYOUT_BSHD_PADDED, ATTN_LAYOUT_BHSD_PADDED, ATTN_LAYOUT_BSHD},
    };
    outcome oc = CHECK_PASS;
    for (int i = 0; i < 2 && oc == CHECK_PASS; i++) {
        attn_gpu_problem x;
        attn_problem_desc d = case_problem(c, CHECK_NO_layouts + 16 * i);
        memcpy(d.layout, sets[i], sizeof sets[i]);
        int fail;
        oc = prepare(c, &x, &d, "layouts", &fail);
        if (!fail) {
            char what[128];
            snprintf(what, sizeof what, "output with q %s, k %s, v %s, o %s", attn_layout_name(sets[i][0]),
                     attn_layout_name(sets[i][1]), attn_layout_name(sets[i][2]), attn_layout_name(sets[i][3]));
            int bad = judge_output(c, &x, what);
            bad |= judge_lse(c, &x, "lse", NULL);
            oc = bad ? CHECK_FAIL : CHECK_PASS;
        }
        attn_gpu_problem_free(&x);
    }
    return oc;
}

/* One problem of a check that a kernel may decline (unaligned, broadcast): the header and what
 * the problem is, build, launch. ATTN_UNSUPPORTED passes (declining is allowed; the case is not
 * called unsupported for it); else the references, a second launch, the inputs verified, O and
 * the LSE judged, and the bytes around O and between its rows (a kernel that declines costs no
 * reference). */
static outcome declinable(check_ctx *c, const attn_problem_desc *d, const char *check, const char *what) {
    char kept[sizeof c->unsupported];
    memcpy(kept, c->unsupported, sizeof kept);
    say_header(c, check, d);
    say(c, "  %s\n", what);
    attn_gpu_problem x;
    outcome oc = CHECK_FAIL;
    if (!build_problem(c, &x, d)) {
        const launch_result lr = run_kernel(c, &x);
        if (lr == LAUNCH_UNSUPPORTED)
            oc = CHECK_PASS;
        else if (lr == LAUNCH_OK && !problem_references(c, &x) && run_kernel(c, &x) == LAUNCH_OK) {
            verify_inputs(c, &x, check);
            oc = judge_output(c, &x, what) | judge_lse(c, &x, what, NULL) | count_guards_written(c, &x) ? CHECK_FAIL
                                                                                                      : CHECK_PASS;
        }
    }
    attn_gpu_problem_free(&x);
    memcpy(c->unsupported, kept, sizeof kept);
    return oc;
}

/* 26. Layouts a real caller passes that are not 16-byte aligned (the ABI sets no alignment rule):
 * one tensor with an odd row stride (BSHD+1: every other row starts 2 bytes past a 4-byte
 * boundary), then with its base 2 bytes past a 16-byte boundary (a slice's pointer); the others
 * BSHD. The tensor is the case's pick, so that the matrix gives each of Q, K, V and O both (a
 * kernel that checks the alignment of some tensors and assumes it of the others). Right, or
 * declined. Vector accesses that assume alignment fault, or read and write the wrong elements. */
outcome check_unaligned(check_ctx *c) {
    static const char *const names[] = {"Q", "K", "V", "O"};
    const test_case *tc = c->tc;
    /* for each shape, the four (dtype, head dim) pairs pick the four tensors */
    const attn_tensor_id t = (attn_tensor_id)((tc->dtype + 2 * (tc->head_dim > 64) + tc->seqlen_q + tc->seqlen_k) % 4);
    char what[128];
    attn_problem_desc d = case_problem(c, CHECK_NO_unaligned);
    d.layout[t] = ATTN_LAYOUT_BSHD_ODD;
    snprintf(what, sizeof what, "%s with an odd row stride (BSHD+1), the others BSHD", names[t]);
    outcome oc = declinable(c, &d, "unaligned", what);
    if (oc != CHECK_PASS) return oc;
    d = case_problem(c, CHECK_NO_unaligned + 16);
    d.shifted = ATTN_TENSOR_BIT(t);
    snprintf(what, sizeof what, "%s's base 2 bytes past a 16-byte boundary, the others aligned", names[t]);
    return declinable(c, &d, "unaligned", what);
}

/* 28. K and V broadcast, as a caller's expand() gives them (the ABI allows a batch or head stride
 * of 0): first over the heads (head stride 0: every query head reads one KV head's memory), then
 * over the batch (batch stride 0: a prefix every sequence shares). Right, or declined. A kernel
 * that takes a zero stride for "not given" and puts a dense stride in its place reads past the
 * tensor. */
outcome check_broadcast(check_ctx *c) {
    attn_problem_desc d = case_problem(c, CHECK_NO_broadcast);
    d.layout[ATTN_T_K] = d.layout[ATTN_T_V] = ATTN_LAYOUT_HEADS_BCAST;
    outcome oc = declinable(c, &d, "broadcast", "K and V broadcast over the heads (head stride 0)");
    if (oc != CHECK_PASS) return oc;
    d = case_problem(c, CHECK_NO_broadcast + 16);
    d.layout[ATTN_T_K] = d.layout[ATTN_T_V] = ATTN_LAYOUT_BATCH_BCAST;
    return declinable(c, &d, "broadcast", "K and V broadcast over the batch (batch stride 0)");
}

/* 8. the LSE against the golden LSE; a kernel that writes no LSE at all is "not supported"
 * for this check */
outcome check_lse(check_ctx *c) {
    attn_gpu_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_lse);
    int fail;
    outcome oc = prepare(c, &x, &d, "lse", &fail);
    if (!fail) {
        verify_inputs(c, &x, "lse");
        attn_match nan, untouched;
        if (attn_count_nan_f32(x.p.lse, x.rows, &nan, &untouched, c->stream) != cudaSuccess) {
            say(c, "  counting LSE poison on the GPU failed\n");
            oc = CHECK_FAIL;
        } else if (untouched.count == x.rows) {
            if (!c->unsupported[0])
                snprintf(c->unsupported, sizeof c->unsupported, "kernel '%s' does not write the LSE",
                         c->kernel->name);
            oc = CHECK_UNSUPPORTED;
        } else {
            oc = judge_lse(c, &x, "lse", NULL) ? CHECK_FAIL : CHECK_PASS;
        }
    }
    attn_gpu_problem_free(&x);
    return oc;
}
