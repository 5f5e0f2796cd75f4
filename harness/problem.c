/* Problem validation (problem.h): each rule a line or a table row, the first broken one
 * reported. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "problem.h"

static int fail(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return 1;
}

/* cu_seqlens (name) of batch sequences: from 0, non-decreasing, none longer than max */
static int check_cu_seqlens(const char *name, const int32_t *cu, int batch, const char *max_name,
                            int max, char *err, size_t len) {
    if (cu[0] != 0) return fail(err, len, "%s[0] = %d (must be 0)", name, cu[0]);
    for (int b = 0; b < batch; b++) {
        if (cu[b + 1] < cu[b])
            return fail(err, len, "%s[%d] = %d < %s[%d] = %d (must not decrease)", name, b + 1,
                        cu[b + 1], name, b, cu[b]);
        if ((int64_t)cu[b + 1] - cu[b] > max)
            return fail(err, len, "%s[%d] - %s[%d] = %lld > %s %d (sequence %d is longer than the maximum)",
                        name, b + 1, name, b, (long long)cu[b + 1] - cu[b], max_name, max, b);
    }
    return 0;
}

/* Strides >= 0, a zero row stride only for a tensor of at most one row, and no broadcast
 * output (attn_abi.h). Its
 * rows: Q and O seqlen_q or the packed total, K and V seqlen_k, the packed total or a page's.
 * The cu_seqlens are checked already. */
static int check_strides(const attn_fwd_params *p, const attn_problem_host *h, char *err, size_t len) {
    const int64_t rows_q = h->cu_seqlens_q ? h->cu_seqlens_q[p->batch] : p->seqlen_q;
    const int64_t rows_k = p->block_table ? p->page_size : h->cu_seqlens_k ? h->cu_seqlens_k[p->batch] : p->seqlen_k;
    const struct { const char *tensor; int64_t batch, head, row, rows; } t[] = {
        {"q", p->q_batch_stride, p->q_head_stride, p->q_row_stride, rows_q},
        {"k", p->k_batch_stride, p->k_head_stride, p->k_row_stride, rows_k},
        {"v", p->v_batch_stride, p->v_head_stride, p->v_row_stride, rows_k},
        {"o", p->o_batch_stride, p->o_head_stride, p->o_row_stride, rows_q},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const struct { const char *dim; int64_t stride; } s[] = {
            {"batch", t[i].batch}, {"head", t[i].head}, {"row", t[i].row}};
        for (size_t j = 0; j < sizeof s / sizeof s[0]; j++)
            if (s[j].stride < 0)
                return fail(err, len, "%s_%s_stride %lld must be >= 0", t[i].tensor, s[j].dim,
                            (long long)s[j].stride);
        if (t[i].row == 0 && t[i].rows > 1)
            return fail(err, len, "%s_row_stride 0 with %lld rows (0 is for a tensor of one row)", t[i].tensor,
                        (long long)t[i].rows);
    }
    /* O is written: a broadcast output would have several heads or sequences race for it */
    if (p->o_head_stride == 0 && p->heads > 1)
        return fail(err, len, "o_head_stride 0 with %d heads (the output cannot be broadcast)", p->heads);
    if (p->o_batch_stride == 0 && p->batch > 1 && !h->cu_seqlens_q)
        return fail(err, len, "o_batch_stride 0 with batch %d (the output cannot be broadcast)", p->batch);
    return 0;
}

/* The rules on p's scalars alone. */
static int check_scalars(const attn_fwd_params *p, char *err, size_t len) {
    const int paged = p->block_table != NULL;
    /* minima; the paged rows only with block_table */
    const struct { const char *field; int value, min, paged_only; } ints[] = {
        {"batch", p->batch, 1, 0},
        {"heads", p->heads, 1, 0},
        {"seqlen_q", p->seqlen_q, 1, 0},
        {"seqlen_k", p->seqlen_k, 1, 0},
        {"head_dim", p->head_dim, 1, 0},
        {"heads_k", p->heads_k, 1, 0},
        {"window_left", p->window_left, -1, 0},
        {"window_right", p->window_right, -1, 0},
        {"head_dim_v", p->head_dim_v, 0, 0},
        {"page_size", p->page_size, 1, 1},
        {"num_pages", p->num_pages, 1, 1},
        {"block_table_stride", p->block_table_stride, 1, 1},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((paged || !ints[i].paged_only) && ints[i].value < ints[i].min)
            return fail(err, len, "%s %d must be >= %d%s", ints[i].field, ints[i].value,
                        ints[i].min, ints[i].paged_only ? " (block_table is set)" : "");
    if (p->heads % p->heads_k)
        return fail(err, len, "heads_k %d does not divide heads %d", p->heads_k, p->heads);
    if (paged && p->cu_seqlens_k)
        return fail(err, len, "cu_seqlens_k with block_table (a paged problem's lengths are seqused_k, or all "
                              "seqlen_k)");
    if (paged && (int64_t)p->block_table_stride * p->page_size < p->seqlen_k)
        return fail(err, len, "block_table_stride %d * page_size %d < seqlen_k %d (a sequence's pages must hold its keys)",
                    p->block_table_stride, p->page_size, p->seqlen_k);
    if (p->causal && p->window_right > 0)
        return fail(err, len, "window_right %d with causal (causal means window_right 0)",
                    p->window_right);
    if (!isfinite(p->softcap) || p->softcap < 0)
        return fail(err, len, "softcap %g must be finite and >= 0", (double)p->softcap);
    if (!isfinite(p->softmax_scale))
        return fail(err, len, "softmax_scale %g must be finite", (double)p->softmax_scale);
    if (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16)
        return fail(err, len, "dtype %d is neither ATTN_F16 nor ATTN_BF16", (int)p->dtype);
    return 0;
}

/* Each sequence's used keys within its stored ones, and the block-table entries it reads (its
 * first ceil(used / page_size)) inside the pool; the entries past them are never read. */
static int check_sequences(const attn_fwd_params *p, const attn_problem_host *h, char *err, size_t len) {
    for (int b = 0; b < p->batch; b++) {
        const int keys = h->cu_seqlens_k ? h->cu_seqlens_k[b + 1] - h->cu_seqlens_k[b] : p->seqlen_k;
        if (h->seqused_k && (h->seqused_k[b] < 0 || h->seqused_k[b] > keys))
            return fail(err, len, "seqused_k[%d] = %d is outside [0, %d] (sequence %d's keys)", b,
                        h->seqused_k[b], keys, b);
        const int used = h->seqused_k ? h->seqused_k[b] : keys;
        const int64_t pages = p->block_table ? ((int64_t)used + p->page_size - 1) / p->page_size : 0;
        for (int64_t j = 0; j < pages; j++) {
            const int32_t page = h->block_table[(int64_t)b * p->block_table_stride + j];
            if (page < 0 || page >= p->num_pages)
                return fail(err, len, "block_table[%d][%lld] = %d is outside the pool (num_pages %d)",
                            b, (long long)j, page, p->num_pages);
        }
    }
    return 0;
}

int attn_problem_check(const attn_fwd_params *p, const attn_problem_host *h, char *err,
                       size_t len) {
    static const attn_problem_host none;
    if (!h) h = &none;
    if (check_scalars(p, err, len)) return 1;

    const struct { const char *field; const void *ptr; } ptrs[] = {
        {"q", p->q}, {"k", p->k}, {"v", p->v}, {"o", p->o}};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (!ptrs[i].ptr) return fail(err, len, "%s is NULL (a device pointer is required)", ptrs[i].field);

    const struct { const char *field; const void *dev, *host; } arrays[] = {
        {"cu_seqlens_q", p->cu_seqlens_q, h->cu_seqlens_q},
        {"cu_seqlens_k", p->cu_seqlens_k, h->cu_seqlens_k},
        {"block_table", p->block_table, h->block_table},
        {"seqused_k", p->seqused_k, h->seqused_k},
    };
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        if (!arrays[i].dev != !arrays[i].host)
            return fail(err, len, "%s is %s in the problem but %s in the host copies",
                        arrays[i].field, arrays[i].dev ? "set" : "NULL",
                        arrays[i].host ? "set" : "NULL");

    if (h->cu_seqlens_q &&
        check_cu_seqlens("cu_seqlens_q", h->cu_seqlens_q, p->batch, "seqlen_q", p->seqlen_q, err, len))
        return 1;
    if (h->cu_seqlens_k &&
        check_cu_seqlens("cu_seqlens_k", h->cu_seqlens_k, p->batch, "seqlen_k", p->seqlen_k, err, len))
        return 1;
    const struct { const char *field; int total; const int32_t *cu; } totals[] = {
        {"total_q", p->total_q, h->cu_seqlens_q}, {"total_k", p->total_k, h->cu_seqlens_k}};
    for (size_t i = 0; i < sizeof totals / sizeof totals[0]; i++) {
        const int want = totals[i].cu ? totals[i].cu[p->batch] : 0;
        if (totals[i].total != want)
            return fail(err, len, "%s %d, but the packed rows are %d (cu_seqlens_%c[%d]%s)", totals[i].field,
                        totals[i].total, want, totals[i].field[6], p->batch, totals[i].cu ? "" : " is NULL: 0");
    }
    return check_strides(p, h, err, len) || check_sequences(p, h, err, len);
}

/* The backward's tensors: pointers set, strides >= 0, a zero row stride only over one row, and
 * dQ, dK, dV not broadcast (each is written). */
static int check_bwd_tensors(const attn_bwd_params *bp, const attn_problem_host *h, char *err, size_t len) {
    const attn_fwd_params *p = bp->fwd;
    const int64_t rows_q = h->cu_seqlens_q ? h->cu_seqlens_q[p->batch] : p->seqlen_q;
    const int64_t rows_k = h->cu_seqlens_k ? h->cu_seqlens_k[p->batch] : p->seqlen_k;
    const int packed_q = h->cu_seqlens_q != NULL, packed_k = h->cu_seqlens_k != NULL;
    const struct { const char *t; const void *ptr; int64_t batch, head, row, rows; int heads, out, packed; } t[] = {
        {"dout", bp->dout, bp->do_batch_stride, bp->do_head_stride, bp->do_row_stride, rows_q, p->heads, 0, packed_q},
        {"dq", bp->dq, bp->dq_batch_stride, bp->dq_head_stride, bp->dq_row_stride, rows_q, p->heads, 1, packed_q},
        {"dk", bp->dk, bp->dk_batch_stride, bp->dk_head_stride, bp->dk_row_stride, rows_k, p->heads_k, 1, packed_k},
        {"dv", bp->dv, bp->dv_batch_stride, bp->dv_head_stride, bp->dv_row_stride, rows_k, p->heads_k, 1, packed_k},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (!t[i].ptr) return fail(err, len, "%s is NULL (a device pointer is required)", t[i].t);
        if (t[i].batch < 0 || t[i].head < 0 || t[i].row < 0)
            return fail(err, len, "%s strides (batch %lld, head %lld, row %lld) must be >= 0", t[i].t,
                        (long long)t[i].batch, (long long)t[i].head, (long long)t[i].row);
        if (t[i].row == 0 && t[i].rows > 1)
            return fail(err, len, "%s row stride 0 with %lld rows (0 is for a tensor of one row)", t[i].t,
                        (long long)t[i].rows);
        if (t[i].out && t[i].head == 0 && t[i].heads > 1)
            return fail(err, len, "%s head stride 0 with %d heads (a gradient cannot be broadcast)", t[i].t,
                        t[i].heads);
        if (t[i].out && t[i].batch == 0 && p->batch > 1 && !t[i].packed)
            return fail(err, len, "%s batch stride 0 with batch %d (a gradient cannot be broadcast)", t[i].t,
                        p->batch);
    }
    return 0;
}

int attn_bwd_problem_check(const attn_bwd_params *bp, const attn_problem_host *h, char *err, size_t len) {
    static const attn_problem_host none;
    if (!h) h = &none;
    if (!bp->fwd) return fail(err, len, "fwd is NULL (the backward needs its forward problem)");
    if (attn_problem_check(bp->fwd, h, err, len)) return 1;
    if (bp->fwd->block_table)
        return fail(err, len, "block_table is set: a paged problem has no backward in ABI version %d",
                    ATTN_ABI_VERSION);
    if (!bp->fwd->lse) return fail(err, len, "lse is NULL (the backward reads the forward's LSE)");
    if (bp->deterministic != 0 && bp->deterministic != 1)
        return fail(err, len, "deterministic %d must be 0 or 1", bp->deterministic);
    if (!bp->workspace != !bp->workspace_bytes)
        return fail(err, len, "workspace %s with workspace_bytes %zu (NULL exactly when 0 bytes)",
                    bp->workspace ? "set" : "NULL", bp->workspace_bytes);
    if ((uintptr_t)bp->workspace % 256)
        return fail(err, len, "workspace %p is not 256-byte aligned", bp->workspace);
    return check_bwd_tensors(bp, h, err, len);
}
