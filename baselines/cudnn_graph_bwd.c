/* The cuDNN baseline's backward graph: the composite graph cudnn-frontend's SDPA backward node
 * (1.x, cuDNN 9.0-9.20) lowers to, each operation, shape and data type as it emits them (the
 * runtime-fusion engines match these patterns), in its order:
 *   sum = rowsum(dO * O) * 1                  fp32, non-virtual (the workspace)
 *   S = Q . K^T * scale                       K read as K^T (swapped strides), fp32
 *   [softcap: S = softcap * tanh(S / softcap)]
 *   [padding mask], S - Stats, [padding mask again, cuDNN 9.0-9.9], [bands], P = exp(.)
 *   P^T (a reshape to the I/O type), dV = P^T . dO        GQA: [B,H,Sk,dv], summed per group
 *   dP = dO . V^T, dS = (dP - sum) * P
 *   [softcap: dS = tanh'(S / softcap) applied as cudnn-frontend's Softcap::backward does]
 *   dS = dS * scale
 *   dS^T (a reshape), dK = dS^T . Q                        GQA alike
 *   K (a reshape of K^T), dQ = dS . K         into the fp32 accumulator then IDENTITY into
 *                                             dQ, or (deterministic) straight into dQ
 * The GEMMs' M/N/K are overridden by the per-sequence lengths when padded. */
#include "cudnn_sdpa_internal.h"

/* The graph's non-virtual tensors, and the pre-tanh scores softcap's derivative reads. */
typedef struct {
    void *q, *kt, *vt, *o, *dout, *dq, *dk, *dv, *stats, *sum, *accum;
    void *scale, *one, *softcap;
    void *koff;        /* K's ragged offsets (the K view of dQ = dS . K carries them too) */
    void *before_tanh; /* softcap: S / softcap */
} bwd_io;

/* y = x viewed with y's shape, strides and data type */
static void *reshape(sdpa_graph *g, const char *what, void *x, void *y) {
    builder *b = g->b;
    if (!y) return NULL;
    void *op = sdpa_mk(b, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what);
    if (!op || SA(b, op, what, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        sdpa_fin(b, op, what) || sdpa_add_op(g, op))
        return NULL;
    return y;
}

/* The per-sequence lengths (padded) and the ragged offsets of the eight tensors (packed rows),
 * off[] in the order Q, K, V, O, dQ, dK, dV, dO. 0, or -1. */
static int lengths_and_offsets(sdpa_graph *g, void *off[8]) {
    builder *b = g->b;
    const problem *pr = g->pr;
    const int64_t one[4] = {1, 1, 1, 1}, dseq[4] = {pr->B, 1, 1, 1}, doff[4] = {pr->B + 1, 1, 1, 1};
    static const char *const names[8] = {"Q ragged offsets",  "K ragged offsets",  "V ragged offsets",
                                         "O ragged offsets",  "dQ ragged offsets", "dK ragged offsets",
                                         "dV ragged offsets", "dO ragged offsets"};
    static const int uids[8] = {UID_Q_OFF, UID_K_OFF, UID_V_OFF, UID_O_OFF, UID_DQ_OFF, UID_DK_OFF, UID_DV_OFF,
                                UID_DO_OFF};
    static const int roles[8] = {ROLE_Q_OFF,  ROLE_K_OFF,  ROLE_V_OFF,  ROLE_O_OFF,
                                 ROLE_DQ_OFF, ROLE_DK_OFF, ROLE_DV_OFF, ROLE_DO_OFF};
    if (pr->padded) {
        g->seq_q = sdpa_io_tensor(b, "seq_len_q tensor", UID_SEQ_Q, ROLE_SEQ_Q, CUDNN_DATA_INT32, dseq, one, false, NULL);
        g->seq_kv = g->seq_q ? sdpa_io_tensor(b, "seq_len_kv tensor", UID_SEQ_KV, ROLE_SEQ_KV, CUDNN_DATA_INT32, dseq,
                                              one, false, NULL)
                             : NULL;
        if (!g->seq_kv) return -1;
    }
    for (int t = 0; t < 8; t++) {
        off[t] = NULL;
        if (pr->ragged_q &&
            !(off[t] = sdpa_io_tensor(b, names[t], uids[t], roles[t], CUDNN_DATA_INT64, doff, one, false, NULL)))
            return -1;
    }
    return 0;
}

/* Q, K^T, V^T, O, dO, dQ, dK, dV, the Stats, the row sums, the accumulator and the scalars. */
static int inputs(sdpa_graph *g, bwd_io *io) {
    builder *b = g->b;
    const problem *pr = g->pr;
    const int F = CUDNN_DATA_FLOAT, T = pr->dtype;
    const int64_t B = pr->B, H = pr->H, Hk = pr->Hk, Sq = pr->Sq, Sk = pr->Sk, D = pr->D, Dv = pr->Dv;
    void *off[8];
    if (lengths_and_offsets(g, off)) return -1;
    io->koff = off[1];
    const int64_t dq[4] = {B, H, Sq, D}, dkt[4] = {B, Hk, D, Sk}, dvt[4] = {B, Hk, Dv, Sk}, dout[4] = {B, H, Sq, Dv};
    const int64_t dk[4] = {B, Hk, Sk, D}, dv[4] = {B, Hk, Sk, Dv}, dr[4] = {B, H, Sq, 1};
    const int64_t sq_[4] = {pr->qs[0], pr->qs[1], pr->qs[2], 1}, skt[4] = {pr->ks[0], pr->ks[1], 1, pr->ks[2]};
    const int64_t svt[4] = {pr->vs[0], pr->vs[1], 1, pr->vs[2]}, so[4] = {pr->os[0], pr->os[1], pr->os[2], 1};
    const int64_t sdo[4] = {pr->dos[0], pr->dos[1], pr->dos[2], 1}, sdq[4] = {pr->dqs[0], pr->dqs[1], pr->dqs[2], 1};
    const int64_t sdk[4] = {pr->dks[0], pr->dks[1], pr->dks[2], 1}, sdv[4] = {pr->dvs[0], pr->dvs[1], pr->dvs[2], 1};
    const int64_t sr[4] = {H * Sq, Sq, 1, 1}, sacc[4] = {H * Sq * D, Sq * D, D, 1};
    if (!(io->q = sdpa_io_tensor(b, "Q tensor", UID_Q, ROLE_Q, T, dq, sq_, false, off[0])) ||
        !(io->kt = sdpa_io_tensor(b, "K^T tensor", UID_K, ROLE_K, T, dkt, skt, false, off[1])) ||
        !(io->vt = sdpa_io_tensor(b, "V^T tensor", UID_V, ROLE_V, T, dvt, svt, false, off[2])) ||
        !(io->o = sdpa_io_tensor(b, "O tensor", UID_O, ROLE_O, T, dout, so, false, off[3])) ||
        !(io->dq = sdpa_io_tensor(b, "dQ tensor", UID_DQ, ROLE_DQ, T, dq, sdq, false, off[4])) ||
        !(io->dk = sdpa_io_tensor(b, "dK tensor", UID_DK, ROLE_DK, T, dk, sdk, false, off[5])) ||
        !(io->dv = sdpa_io_tensor(b, "dV tensor", UID_DV, ROLE_DV, T, dv, sdv, false, off[6])) ||
        !(io->dout = sdpa_io_tensor(b, "dO tensor", UID_DO, ROLE_DO, T, dout, sdo, false, off[7])) ||
        !(io->stats = sdpa_io_tensor(b, "Stats tensor (the LSE)", UID_STATS, b->pl->stats_role, F, dr, sr, false,
                                     NULL)) ||
        !(io->sum = sdpa_io_tensor(b, "rowsum(dO * O) tensor", UID_SUM, ROLE_SUM, F, dr, sr, false, NULL)) ||
        (pr->accum &&
         !(io->accum = sdpa_io_tensor(b, "dQ accumulator tensor", UID_ACCUM, ROLE_ACCUM, F, dq, sacc, false, NULL))) ||
        !(io->scale = sdpa_scalar(g, "scale tensor", UID_SCALE, ROLE_SCALE, F)) ||
        !(io->one = sdpa_scalar(g, "one scalar", UID_ONE, ROLE_ONE, F)) ||
        (pr->softcap > 0 && !(io->softcap = sdpa_scalar(g, "softcap scalar", UID_SOFTCAP, ROLE_SOFTCAP, F))))
        return -1;
    return 0;
}

/* sum = rowsum(dO * O) * 1 (cudnn-frontend's dropout-inverse scale, 1 without dropout) */
static int row_sums(sdpa_graph *g, const bwd_io *io) {
    builder *b = g->b;
    const problem *pr = g->pr;
    const int F = CUDNN_DATA_FLOAT;
    const int64_t B = pr->B, H = pr->H, Sq = pr->Sq, Dv = pr->Dv;
    /* strides as cudnn-frontend declares this virtual tensor */
    const int64_t dm[4] = {B, H, Sq, Dv}, sm[4] = {H * Sq * Dv, Sq * Dv, H * Dv, 1};
    const int64_t dr[4] = {B, H, Sq, 1}, sr[4] = {H * Sq, Sq, 1, 1};
    void *m = sdpa_virt(b, "dO * O", F, dm, sm);
    if (!m || sdpa_add_op(g, sdpa_pointwise(b, "mul dO O", CUDNN_POINTWISE_MUL, F, -1, io->dout, io->o, NULL, m)))
        return -1;
    void *r = sdpa_virt(b, "rowsum(dO * O)", F, dr, sr);
    if (!r || sdpa_add_op(g, sdpa_reduction(b, "reduce dO * O", CUDNN_REDUCE_TENSOR_ADD, m, r))) return -1;
    return sdpa_add_op(g, sdpa_pointwise(b, "rowsum * 1", CUDNN_POINTWISE_MUL, F, -1, r, io->one, NULL, io->sum));
}

/* P = exp(masked S - Stats): the forward's probabilities, recomputed. NULL on failure. */
static void *probabilities(sdpa_graph *g, bwd_io *io) {
    builder *b = g->b;
    const problem *pr = g->pr;
    const int F = CUDNN_DATA_FLOAT;
    void *s = sdpa_virt(b, "S = Q.K^T", F, g->ds, g->ss);
    if (!s || sdpa_add_op(g, sdpa_matmul(b, "matmul Q.K^T", io->q, io->kt, s, g->seq_q, g->seq_kv, NULL))) return NULL;
    if (!(s = sdpa_pw(g, "S * scale", CUDNN_POINTWISE_MUL, F, F, s, io->scale))) return NULL;
    if (io->softcap &&
        (!(io->before_tanh = sdpa_pw(g, "S / softcap", CUDNN_POINTWISE_DIV, F, F, s, io->softcap)) ||
         !(s = sdpa_pw(g, "tanh", CUDNN_POINTWISE_TANH_FWD, F, F, io->before_tanh, NULL)) ||
         !(s = sdpa_pw(g, "tanh * softcap", CUDNN_POINTWISE_MUL, F, F, s, io->softcap))))
        return NULL;
    if (!(s = sdpa_mask_padding(g, s)) || !(s = sdpa_pw(g, "S - Stats", CUDNN_POINTWISE_SUB, F, F, s, io->stats)))
        return NULL;
    /* cudnn-frontend puts the padding value back after the statistics on cuDNN 9.0-9.9 */
    const long v = b->c->version;
    if (pr->padded && v >= 90000 && v < 91000 && !(s = sdpa_mask_padding(g, s))) return NULL;
    if (!(s = sdpa_mask_bands(g, s))) return NULL;
    return sdpa_pw(g, "P = exp(S - Stats)", CUDNN_POINTWISE_EXP, F, F, s, NULL);
}

/* dX = a . bm for K or V (w columns), with M = seq_kv and K = seq_q; GQA: into [B,H,Sk,w]
 * in the I/O type, then summed over each group of query heads into dX. */
static int kv_gradient(sdpa_graph *g, const char *what, void *a, void *bm, void *dx, int64_t w) {
    builder *b = g->b;
    const problem *pr = g->pr;
    void *c = dx;
    if (!a) return -1; /* its reshape failed (the reason is in b->why) */
    if (pr->H != pr->Hk) {
        const int64_t df[4] = {pr->B, pr->H, pr->Sk, w}, sf[4] = {pr->H * pr->Sk * w, pr->Sk * w, w, 1};
        if (!(c = sdpa_virt(b, "gradient per query head", pr->dtype, df, sf))) return -1;
    }
    if (sdpa_add_op(g, sdpa_matmul(b, what, a, bm, c, g->seq_kv, NULL, g->seq_q))) return -1;
    if (pr->H == pr->Hk) return 0;
    return sdpa_add_op(g, sdpa_reduction(b, "sum over the query heads of a KV head", CUDNN_REDUCE_TENSOR_ADD, c, dx));
}

/* [B,H,Sq,Sk] scores x transposed to [B,H,Sk,Sq] in the I/O type (a reshape); NULL on failure */
static void *transposed(sdpa_graph *g, const char *what, void *x) {
    const problem *pr = g->pr;
    const int64_t B = pr->B, H = pr->H, Sq = pr->Sq, Sk = pr->Sk;
    const int64_t dt[4] = {B, H, Sk, Sq}, st[4] = {H * Sq * Sk, Sq * Sk, 1, Sk};
    return reshape(g, what, x, sdpa_virt(g->b, what, pr->dtype, dt, st));
}

/* dS = ((dO . V^T - sum) * P [* softcap's derivative]) * scale; NULL on failure */
static void *score_gradient(sdpa_graph *g, const bwd_io *io, void *p) {
    builder *b = g->b;
    const int F = CUDNN_DATA_FLOAT;
    void *x = sdpa_virt(b, "dP = dO.V^T", F, g->ds, g->ss);
    if (!x || sdpa_add_op(g, sdpa_matmul(b, "matmul dO.V^T", io->dout, io->vt, x, g->seq_q, g->seq_kv, NULL)))
        return NULL;
    if (!(x = sdpa_pw(g, "dP - sum", CUDNN_POINTWISE_SUB, F, F, x, io->sum)) ||
        !(x = sdpa_pw(g, "(dP - sum) * P", CUDNN_POINTWISE_MUL, F, F, x, p)))
        return NULL;
    if (io->softcap && (!(x = sdpa_pw(g, "dS * softcap", CUDNN_POINTWISE_MUL, F, F, x, io->softcap)) ||
                        !(x = sdpa_pw(g, "dS * tanh'(S / softcap)", CUDNN_POINTWISE_TANH_BWD, F, F, io->before_tanh,
                                      x)) ||
                        !(x = sdpa_pw(g, "dS / softcap", CUDNN_POINTWISE_DIV, F, F, x, io->softcap))))
        return NULL;
    return sdpa_pw(g, "dS * scale", CUDNN_POINTWISE_MUL, F, F, x, io->scale);
}

/* dQ = dS . K (K viewed back from K^T), through the accumulator when pr->accum */
static int query_gradient(sdpa_graph *g, const bwd_io *io, void *ds) {
    builder *b = g->b;
    const problem *pr = g->pr;
    const int64_t dk[4] = {pr->B, pr->Hk, pr->Sk, pr->D}, sk[4] = {pr->ks[0], pr->ks[1], pr->ks[2], 1};
    void *k = reshape(g, "K from K^T", io->kt, sdpa_tensor(b, "K view", b->next_uid++, pr->dtype, dk, sk, true, false,
                                                          io->koff));
    void *out = pr->accum ? io->accum : io->dq;
    if (!k || sdpa_add_op(g, sdpa_matmul(b, "matmul dS.K", ds, k, out, g->seq_q, NULL, g->seq_kv))) return -1;
    if (!pr->accum) return 0;
    return sdpa_add_op(g, sdpa_pointwise(b, "dQ = accumulator", CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, -1,
                                         io->accum, NULL, NULL, io->dq));
}

int sdpa_graph_bwd(builder *b, const problem *pr) {
    const int64_t B = pr->B, H = pr->H, Sq = pr->Sq, Sk = pr->Sk;
    sdpa_graph g = {.b = b, .pr = pr, .n = 0, .ds = {B, H, Sq, Sk}, .ss = {H * Sq * Sk, Sq * Sk, Sk, 1}};
    bwd_io io = {0};
    if (inputs(&g, &io) || row_sums(&g, &io)) return -1;
    void *p = probabilities(&g, &io);
    if (!p || kv_gradient(&g, "matmul P^T.dO (dV)", transposed(&g, "P^T", p), io.dout, io.dv, pr->Dv)) return -1;
    void *ds = score_gradient(&g, &io, p);
    if (!ds || kv_gradient(&g, "matmul dS^T.Q (dK)", transposed(&g, "dS^T", ds), io.q, io.dk, pr->D) ||
        query_gradient(&g, &io, ds))
        return -1;
    return sdpa_make_plan(b, g.ops, g.n);
}
