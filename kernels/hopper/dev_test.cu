/* Standalone check and benchmark of the "hopper" kernel, outside the harness:
 *
 *   nvcc -std=c++17 -O3 -arch=sm_90a -I/work/main/kernels -o hopper_dev \
 *        kernels/hopper/dev_test.cu kernels/hopper/hopper.cu
 *   ./hopper_dev            correctness: every case against a float64 CPU reference
 *   ./hopper_dev --bench    + TFLOP/s on the FlashAttention benchmark shapes
 *   ./hopper_dev --only 64:fp16:full:2048   that one benchmark config alone (for ncu)
 *   (-DHOPPER_WAIT_BOUNDARY=1, -DHOPPER_SKIP_HIDDEN=1, -DHOPPER_D64_THREE_FROM=N and
 *   -DHOPPER_D64_THREE_FROM_CAUSAL=N select the kernel's variant: hopper.cu; the banner prints
 *   them; variants.sh builds and times several side by side)
 *
 * Correctness: random N(0, 1) inputs (fixed seed) in fp16 / bf16, outputs poisoned with a NaN
 * pattern, inputs followed by NaN guard rows (a read past a tensor shows up as NaN), padding
 * and guards of O and the LSE checked unchanged afterwards (a write outside the problem shows),
 * every problem element checked written (not NaN). O: max |err| <= tol max |ref| (tol 2e-2
 * fp16, 3e-2 bf16) and rms err <= tol / 4 rms ref; LSE: |err| <= 2e-3 (1 + |ref|), -inf
 * exactly where a row sees no key. Each case runs twice, the second time captured in a CUDA
 * graph on a non-default stream; the two outputs must match bit for bit. Exit 1 if any fails. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "attn_abi.h"
#include "hopper/ptx.cuh"

extern "C" const attn_kernel attn_kernel_hopper;
extern "C" const int hopper_build_wait_boundary, hopper_build_skip_hidden, hopper_build_three_from[2];

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)

static const uint16_t kPoison16[2] = {0x7E55, 0x7FD5}; /* fp16, bf16 NaNs with a mark */
static const uint32_t kPoisonLse = 0x7FC00055u;

static float to_float(uint16_t x, attn_dtype t) {
    if (t == ATTN_F16) {
        __half_raw r;
        r.x = x;
        return __half2float(__half(r));
    }
    __nv_bfloat16_raw r;
    r.x = x;
    return __bfloat162float(__nv_bfloat16(r));
}
static uint16_t from_float(float f, attn_dtype t) {
    if (t == ATTN_F16) {
        __half_raw r = __half(__float2half_rn(f));
        return r.x;
    }
    __nv_bfloat16_raw r = __nv_bfloat16(__float2bfloat16_rn(f));
    return r.x;
}

enum Layout { BHSD, BSHD, BSHD_PAD };
static const char *layout_name(Layout l) { return l == BHSD ? "bhsd" : l == BSHD ? "bshd" : "bshd+pad"; }

/* One tensor: dense [batch][heads][seq][d] in some layout, or packed rows [rows][heads][d]. */
struct Tensor {
    int64_t bs = 0, hs = 0, rs = 0; /* strides, elements */
    size_t elems = 0;               /* the problem's span; guard rows follow */
    size_t guard = 0;
    std::vector<uint16_t> host;
    uint16_t *dev = nullptr;
};
static void shape_dense(Tensor &t, Layout l, int batch, int heads, int seq, int d) {
    if (l == BHSD) {
        t.rs = d, t.hs = (int64_t)seq * d, t.bs = (int64_t)heads * seq * d;
    } else {
        t.rs = (int64_t)heads * d + (l == BSHD_PAD ? 8 : 0), t.hs = d, t.bs = (int64_t)seq * t.rs;
    }
    t.elems = (size_t)t.bs * batch;
}
static void shape_packed(Tensor &t, int rows, int heads, int d) {
    t.rs = (int64_t)heads * d, t.hs = d, t.bs = 0;
    t.elems = (size_t)rows * t.rs;
}

struct Case {
    std::string name;
    int batch, heads, heads_k, sq, sk;
    Layout layout;
    std::vector<int> lens_q, lens_k; /* packed when non-empty (batch = their count) */
    float scale_mul;
};

struct Result {
    bool pass;
    double max_err, max_ref, rms_err, rms_ref, lse_err;
    std::string why;
};

/* seq lengths and row bases of sequence b */
struct Seqs {
    std::vector<int> lq, lk, cq, ck; /* lengths; cu offsets (packed) */
};

static Result run_case(const Case &c, int d, attn_dtype dt, bool causal, cudaStream_t stream, bool *unsupported) {
    Result res{true, 0, 0, 0, 0, 0, ""};
    *unsupported = false;
    const bool packed_q = !c.lens_q.empty(), packed_k = !c.lens_k.empty();
    const int batch = packed_q ? (int)c.lens_q.size() : packed_k ? (int)c.lens_k.size() : c.batch;
    Seqs s;
    s.cq.assign(batch + 1, 0), s.ck.assign(batch + 1, 0);
    int sq = c.sq, sk = c.sk;
    if (packed_q) sq = *std::max_element(c.lens_q.begin(), c.lens_q.end());
    if (packed_k) sk = *std::max_element(c.lens_k.begin(), c.lens_k.end());
    sq = std::max(sq, 1), sk = std::max(sk, 1);
    for (int b = 0; b < batch; ++b) {
        s.lq.push_back(packed_q ? c.lens_q[b] : sq);
        s.lk.push_back(packed_k ? c.lens_k[b] : sk);
        s.cq[b + 1] = s.cq[b] + s.lq[b];
        s.ck[b + 1] = s.ck[b] + s.lk[b];
    }
    const int H = c.heads, HK = c.heads_k;
    Tensor q, k, v, o;
    if (packed_q) shape_packed(q, s.cq[batch], H, d), shape_packed(o, s.cq[batch], H, d);
    else shape_dense(q, c.layout, batch, H, sq, d), shape_dense(o, c.layout, batch, H, sq, d);
    if (packed_k) shape_packed(k, s.ck[batch], HK, d), shape_packed(v, s.ck[batch], HK, d);
    else shape_dense(k, c.layout, batch, HK, sk, d), shape_dense(v, c.layout, batch, HK, sk, d);

    std::mt19937_64 rng(12345 + d * 7 + (int)dt * 13 + (causal ? 1 : 0));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const uint16_t poison = kPoison16[dt];
    for (Tensor *t : {&q, &k, &v}) {
        t->guard = 256 * (size_t)std::max<int64_t>(t->rs, d); /* 256 rows of NaN after the tensor */
        t->host.assign(t->elems + t->guard, poison);          /* padding stays NaN too */
    }
    o.guard = 256 * (size_t)o.rs;
    o.host.assign(o.elems + o.guard, poison);
    /* fill the problem's elements */
    auto fill = [&](Tensor &t, bool pk, const std::vector<int> &lens, const std::vector<int> &cu, int heads, int seq) {
        for (int b = 0; b < batch; ++b)
            for (int h = 0; h < heads; ++h)
                for (int i = 0; i < (pk ? lens[b] : seq); ++i) {
                    const size_t base = pk ? (size_t)(cu[b] + i) * t.rs + (size_t)h * t.hs
                                           : (size_t)b * t.bs + (size_t)h * t.hs + (size_t)i * t.rs;
                    for (int x = 0; x < d; ++x) t.host[base + x] = from_float(normal(rng), dt);
                }
    };
    fill(q, packed_q, s.lq, s.cq, H, sq);
    fill(k, packed_k, s.lk, s.ck, HK, sk);
    fill(v, packed_k, s.lk, s.ck, HK, sk);

    const int64_t lse_n = (int64_t)H * (packed_q ? s.cq[batch] : (int64_t)batch * sq);
    const size_t lse_guard = 1024;
    std::vector<uint32_t> lse_host(lse_n + lse_guard, kPoisonLse);

    for (Tensor *t : {&q, &k, &v, &o}) {
        CK(cudaMalloc(&t->dev, t->host.size() * 2));
        CK(cudaMemcpy(t->dev, t->host.data(), t->host.size() * 2, cudaMemcpyHostToDevice));
    }
    float *lse_dev;
    CK(cudaMalloc(&lse_dev, (lse_n + lse_guard) * 4));
    CK(cudaMemcpy(lse_dev, lse_host.data(), (lse_n + lse_guard) * 4, cudaMemcpyHostToDevice));
    int32_t *cu_dev = nullptr;
    if (packed_q || packed_k) {
        CK(cudaMalloc(&cu_dev, 2 * (batch + 1) * sizeof(int32_t)));
        CK(cudaMemcpy(cu_dev, s.cq.data(), (batch + 1) * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(cu_dev + batch + 1, s.ck.data(), (batch + 1) * 4, cudaMemcpyHostToDevice));
    }

    attn_fwd_params p;
    memset(&p, 0, sizeof p);
    p.dtype = dt, p.batch = batch, p.heads = H, p.heads_k = HK, p.seqlen_q = sq, p.seqlen_k = sk, p.head_dim = d;
    p.causal = causal;
    p.softmax_scale = (float)(c.scale_mul / sqrt((double)d));
    p.q = q.dev, p.k = k.dev, p.v = v.dev, p.o = o.dev, p.lse = lse_dev;
    p.q_batch_stride = q.bs, p.q_head_stride = q.hs, p.q_row_stride = q.rs;
    p.k_batch_stride = k.bs, p.k_head_stride = k.hs, p.k_row_stride = k.rs;
    p.v_batch_stride = v.bs, p.v_head_stride = v.hs, p.v_row_stride = v.rs;
    p.o_batch_stride = o.bs, p.o_head_stride = o.hs, p.o_row_stride = o.rs;
    p.window_left = -1, p.window_right = causal ? 0 : -1;
    p.head_dim_v = d;
    p.cu_seqlens_q = packed_q ? cu_dev : nullptr;
    p.cu_seqlens_k = packed_k ? cu_dev + batch + 1 : nullptr;

    int rc = attn_kernel_hopper.fwd(&p, stream);
    if (rc == ATTN_UNSUPPORTED) {
        *unsupported = true;
    } else if (rc != ATTN_OK) {
        res.pass = false, res.why = "fwd returned " + std::to_string(rc);
    }
    CK(cudaStreamSynchronize(stream));
    CK(cudaGetLastError());
    std::vector<uint16_t> o_out(o.host.size());
    std::vector<uint32_t> lse_out(lse_host.size());
    CK(cudaMemcpy(o_out.data(), o.dev, o_out.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse_out.data(), lse_dev, lse_out.size() * 4, cudaMemcpyDeviceToHost));

    /* second run, captured in a graph, outputs re-poisoned: must reproduce the first bit for bit */
    if (res.pass && !*unsupported) {
        CK(cudaMemcpy(o.dev, o.host.data(), o.host.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(lse_dev, lse_host.data(), lse_host.size() * 4, cudaMemcpyHostToDevice));
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        rc = attn_kernel_hopper.fwd(&p, stream);
        CK(cudaStreamEndCapture(stream, &graph));
        if (rc != ATTN_OK) {
            res.pass = false, res.why = "fwd under graph capture returned " + std::to_string(rc);
        } else {
            CK(cudaGraphInstantiate(&exec, graph, 0));
            CK(cudaGraphLaunch(exec, stream));
            CK(cudaStreamSynchronize(stream));
            CK(cudaGraphExecDestroy(exec));
            std::vector<uint16_t> o2(o_out.size());
            std::vector<uint32_t> lse2(lse_out.size());
            CK(cudaMemcpy(o2.data(), o.dev, o2.size() * 2, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(lse2.data(), lse_dev, lse2.size() * 4, cudaMemcpyDeviceToHost));
            if (o2 != o_out || lse2 != lse_out) res.pass = false, res.why = "graph replay differs from the first run";
        }
        CK(cudaGraphDestroy(graph));
    }
    for (Tensor *t : {&q, &k, &v, &o}) CK(cudaFree(t->dev));
    CK(cudaFree(lse_dev));
    if (cu_dev) CK(cudaFree(cu_dev));
    if (*unsupported || !res.pass) return res;

    /* reference, float64 from the dtype inputs; also marks which O / LSE entries the problem owns */
    const int group = H / HK;
    const double scale = p.softmax_scale;
    std::vector<char> owned_o(o.host.size(), 0);
    std::vector<char> owned_lse(lse_host.size(), 0);
    double se = 0, sr = 0;
    long nan_o = 0, nan_lse = 0;
    std::vector<double> qf(d), sc, acc(d);
    std::vector<double> kf, vf;
    for (int b = 0; b < batch; ++b)
        for (int hk = 0; hk < HK; ++hk) {
            const int Sk = s.lk[b], Sq = s.lq[b];
            kf.assign((size_t)Sk * d, 0), vf.assign((size_t)Sk * d, 0);
            for (int j = 0; j < Sk; ++j) {
                const size_t kb = packed_k ? (size_t)(s.ck[b] + j) * k.rs + (size_t)hk * k.hs
                                           : (size_t)b * k.bs + (size_t)hk * k.hs + (size_t)j * k.rs;
                const size_t vb = packed_k ? (size_t)(s.ck[b] + j) * v.rs + (size_t)hk * v.hs
                                           : (size_t)b * v.bs + (size_t)hk * v.hs + (size_t)j * v.rs;
                for (int x = 0; x < d; ++x) kf[(size_t)j * d + x] = to_float(k.host[kb + x], dt),
                                            vf[(size_t)j * d + x] = to_float(v.host[vb + x], dt);
            }
            for (int h = hk * group; h < (hk + 1) * group; ++h)
                for (int i = 0; i < Sq; ++i) {
                    const size_t qb = packed_q ? (size_t)(s.cq[b] + i) * q.rs + (size_t)h * q.hs
                                               : (size_t)b * q.bs + (size_t)h * q.hs + (size_t)i * q.rs;
                    const size_t ob = packed_q ? (size_t)(s.cq[b] + i) * o.rs + (size_t)h * o.hs
                                               : (size_t)b * o.bs + (size_t)h * o.hs + (size_t)i * o.rs;
                    const int64_t li = packed_q ? (int64_t)h * s.cq[batch] + s.cq[b] + i
                                                : ((int64_t)b * H + h) * sq + i;
                    for (int x = 0; x < d; ++x) qf[x] = to_float(q.host[qb + x], dt);
                    const int last = causal ? std::min(Sk - 1, i + Sk - Sq) : Sk - 1;
                    double m = -INFINITY;
                    sc.assign(std::max(last + 1, 0), 0);
                    for (int j = 0; j <= last; ++j) {
                        double dot = 0;
                        const double *kr = &kf[(size_t)j * d];
                        for (int x = 0; x < d; ++x) dot += qf[x] * kr[x];
                        sc[j] = dot * scale;
                        m = std::max(m, sc[j]);
                    }
                    double l = 0;
                    std::fill(acc.begin(), acc.end(), 0.0);
                    for (int j = 0; j <= last; ++j) {
                        const double e = exp(sc[j] - m);
                        l += e;
                        const double *vr = &vf[(size_t)j * d];
                        for (int x = 0; x < d; ++x) acc[x] += e * vr[x];
                    }
                    for (int x = 0; x < d; ++x) {
                        const double ref = l > 0 ? acc[x] / l : 0.0;
                        const float got = to_float(o_out[ob + x], dt);
                        owned_o[ob + x] = 1;
                        if (isnan(got)) {
                            ++nan_o;
                            continue;
                        }
                        const double e = fabs(got - ref);
                        res.max_err = std::max(res.max_err, e);
                        res.max_ref = std::max(res.max_ref, fabs(ref));
                        se += e * e, sr += ref * ref;
                        if (l == 0 && got != 0.0f) res.pass = false, res.why = "a row that sees no key is not zero";
                    }
                    owned_lse[li] = 1;
                    float got_lse;
                    memcpy(&got_lse, &lse_out[li], 4);
                    if (isnan(got_lse)) {
                        ++nan_lse;
                    } else if (l == 0) {
                        if (!(isinf(got_lse) && got_lse < 0)) res.pass = false, res.why = "LSE of an empty row is not -inf";
                    } else {
                        const double ref = m + log(l);
                        const double e = fabs(got_lse - ref);
                        res.lse_err = std::max(res.lse_err, e / (1 + fabs(ref)));
                    }
                }
        }
    const long n_o = std::count(owned_o.begin(), owned_o.end(), 1);
    res.rms_err = n_o ? sqrt(se / n_o) : 0, res.rms_ref = n_o ? sqrt(sr / n_o) : 0;
    /* what the problem does not own must keep its poison */
    long stray_o = 0, stray_lse = 0;
    for (size_t x = 0; x < o_out.size(); ++x)
        if (!owned_o[x] && o_out[x] != poison) ++stray_o;
    for (size_t x = 0; x < lse_out.size(); ++x)
        if (!owned_lse[x] && lse_out[x] != kPoisonLse) ++stray_lse;
    const double tol = dt == ATTN_F16 ? 2e-2 : 3e-2;
    char buf[256];
    if (nan_o || nan_lse) {
        snprintf(buf, sizeof buf, "%ld NaN (or unwritten) O elements, %ld LSE entries", nan_o, nan_lse);
        res.pass = false, res.why = buf;
    } else if (stray_o || stray_lse) {
        snprintf(buf, sizeof buf, "%ld O elements and %ld LSE entries written outside the problem", stray_o, stray_lse);
        res.pass = false, res.why = buf;
    } else if (res.max_err > tol * std::max(res.max_ref, 1e-6) || res.rms_err > tol / 4 * std::max(res.rms_ref, 1e-6)) {
        res.pass = false, res.why = "O error over tolerance";
    } else if (res.lse_err > 2e-3) {
        res.pass = false, res.why = "LSE error over tolerance";
    }
    return res;
}

/* 40 packed sequence lengths with empty ones, the pattern rotated by r */
static std::vector<int> lens40(int r) {
    static const int pat[10] = {0, 1, 130, 300, 17, 0, 256, 129, 5, 200};
    std::vector<int> v;
    for (int i = 0; i < 40; ++i) v.push_back(pat[(i + r) % 10]);
    return v;
}

static int correctness() {
    std::vector<Case> cases = {
        {"1x1 q1 k1", 1, 1, 1, 1, 1, BHSD, {}, {}, 1},
        {"1x2 q17 k17", 1, 2, 2, 17, 17, BHSD, {}, {}, 1},
        {"2x3 q128 k128", 2, 3, 3, 128, 128, BHSD, {}, {}, 1},
        {"1x2 q200 k333", 1, 2, 2, 200, 333, BHSD, {}, {}, 1},
        {"2x2 q333 k200", 2, 2, 2, 333, 200, BHSD, {}, {}, 1},
        {"1x1 q129 k127", 1, 1, 1, 129, 127, BHSD, {}, {}, 1},
        {"1x1 q1000 k1000", 1, 1, 1, 1000, 1000, BHSD, {}, {}, 1},
        {"1x4 q64 k2048", 1, 4, 4, 64, 2048, BHSD, {}, {}, 1},
        {"1x2 q256 k256 scale x4", 1, 2, 2, 256, 256, BHSD, {}, {}, 4},
        {"gqa 2x8/2 q257 k300", 2, 8, 2, 257, 300, BHSD, {}, {}, 1},
        {"gqa 1x6/3 q100 k100 bshd", 1, 6, 3, 100, 100, BSHD, {}, {}, 1},
        {"2x4 q300 k300 bshd", 2, 4, 4, 300, 300, BSHD, {}, {}, 1},
        {"1x3 q190 k260 bshd+pad", 1, 3, 3, 190, 260, BSHD_PAD, {}, {}, 1},
        {"varlen q,k {5,130,300}", 0, 2, 2, 0, 0, BSHD, {5, 130, 300}, {5, 130, 300}, 1},
        {"varlen q{17,0,129,256} k{300,40,0,200}", 0, 2, 1, 0, 0, BSHD, {17, 0, 129, 256}, {300, 40, 0, 200}, 1},
        {"varlen q{100,7,250} k dense 180", 0, 2, 2, 0, 180, BSHD, {100, 7, 250}, {}, 1},
        {"varlen q dense 150 k{1,260,129}", 0, 4, 2, 150, 0, BSHD, {}, {1, 260, 129}, 1},
        /* tails of 1 and 191 past a 192-row block or key tile (three consumers at d64 from
         * S_q = 512: q577 is 3 x 192 + 1) */
        {"1x2 q385 k385", 1, 2, 2, 385, 385, BHSD, {}, {}, 1},
        {"1x1 q100 k577 bshd", 1, 1, 1, 100, 577, BSHD, {}, {}, 1},
        {"1x1 q577 k100 bshd", 1, 1, 1, 577, 100, BSHD, {}, {}, 1},
        {"2x2 q767 k385", 2, 2, 2, 767, 385, BHSD, {}, {}, 1},
        {"varlen q{600,1,513} k{300,700,513}", 0, 2, 2, 0, 0, BSHD, {600, 1, 513}, {300, 700, 513}, 1},
        /* more work units than SMs (several per block, odd row-block
         * count: the causal middle block alone), and packed sequences with empty ones */
        {"persist 4x40 q260 k260 bshd", 4, 40, 40, 260, 260, BSHD, {}, {}, 1},
        {"persist varlen 40 seqs gqa 4/2", 0, 4, 2, 0, 0, BSHD, lens40(0), lens40(3), 1},
        /* exponents far below -126 (flushed to 0), and rows one short of / one past a 16-row
         * warp slice and a 64-row warpgroup near sequence ends (the epilogue's per-row bounds) */
        {"1x2 q300 k300 scale x16", 1, 2, 2, 300, 300, BHSD, {}, {}, 16},
        {"varlen q{63,65,1,127,16} k{70,1,200,127,17}", 0, 2, 2, 0, 0, BSHD, {63, 65, 1, 127, 16}, {70, 1, 200, 127, 17}, 1},
        {"1x3 q79 k79 bshd+pad", 1, 3, 3, 79, 79, BSHD_PAD, {}, {}, 1},
    };
    cudaStream_t stream;
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    int fails = 0, runs = 0;
    for (int d : {64, 128})
        for (attn_dtype dt : {ATTN_F16, ATTN_BF16})
            for (int causal = 0; causal < 2; ++causal)
                for (const Case &c : cases) {
                    bool unsupported;
                    const Result r = run_case(c, d, dt, causal, stream, &unsupported);
                    ++runs;
                    if (unsupported) {
                        printf("FAIL  d%-3d %-4s %-6s %-40s %s: returned ATTN_UNSUPPORTED\n", d, dt ? "bf16" : "fp16",
                               causal ? "causal" : "full", c.name.c_str(), layout_name(c.layout));
                        ++fails;
                        continue;
                    }
                    printf("%s  d%-3d %-4s %-6s %-40s max|err| %.2e (max|ref| %.2f) rms %.2e / %.2e lse %.1e%s%s\n",
                           r.pass ? "PASS" : "FAIL", d, dt ? "bf16" : "fp16", causal ? "causal" : "full", c.name.c_str(),
                           r.max_err, r.max_ref, r.rms_err, r.rms_ref, r.lse_err, r.pass ? "" : "  -- ",
                           r.why.c_str());
                    fflush(stdout);
                    fails += !r.pass;
                }
    CK(cudaStreamDestroy(stream));
    printf("%d of %d cases passed\n", runs - fails, runs);
    return fails;
}

/* FlashAttention's benchmark convention: batch x S = 16384 tokens, heads x d = 2048, BSHD. */
static void bench(const char *only) {
    const int tokens = 16384, hidden = 2048;
    const size_t elems = (size_t)tokens * hidden;
    void *q, *k, *v, *o;
    for (void **x : {&q, &k, &v, &o}) CK(cudaMalloc(x, elems * 2));
    auto upload = [&](attn_dtype dt) { /* N(0, 1) in the dtype */
        std::vector<uint16_t> h(elems);
        std::mt19937_64 rng(7);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (void *x : {q, k, v}) {
            for (auto &e : h) e = from_float(normal(rng), dt);
            CK(cudaMemcpy(x, h.data(), elems * 2, cudaMemcpyHostToDevice));
        }
    };
    float *lse;
    CK(cudaMalloc(&lse, (size_t)tokens * 32 * sizeof(float)));
    cudaStream_t stream;
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    printf("\nbenchmark (BSHD, batch x S = %d, heads x d = %d; median of 20, TFLOP/s; wait boundary %d, d64 three "
           "consumers from S %d (causal %d))\n",
           tokens, hidden, hopper_build_wait_boundary, hopper_build_three_from[0], hopper_build_three_from[1]);
    printf("%-5s %-5s %-7s %6s %6s %10s %9s\n", "d", "dtype", "mask", "S", "batch", "time(us)", "TFLOP/s");
    for (attn_dtype dt : {ATTN_F16, ATTN_BF16}) {
        upload(dt);
        for (int d : {128, 64})
            for (int causal = 0; causal < 2; ++causal)
                for (int S : {4, 32, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}) {
                    char tag[64];
                    snprintf(tag, sizeof tag, "%d:%s:%s:%d", d, dt ? "bf16" : "fp16", causal ? "causal" : "full", S);
                    if (only && strcmp(only, tag) != 0) continue;
                    const int batch = tokens / S, heads = hidden / d;
                    attn_fwd_params p;
                    memset(&p, 0, sizeof p);
                    p.dtype = dt, p.batch = batch, p.heads = heads, p.heads_k = heads, p.seqlen_q = S, p.seqlen_k = S;
                    p.head_dim = d, p.head_dim_v = d, p.causal = causal, p.softmax_scale = (float)(1.0 / sqrt((double)d));
                    p.window_left = -1, p.window_right = causal ? 0 : -1;
                    p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse;
                    const int64_t rs = hidden, hs = d, bs = (int64_t)S * hidden;
                    p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = rs;
                    p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = hs;
                    p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = bs;
                    int rc = 0;
                    for (int w = 0; w < 3; ++w) rc |= attn_kernel_hopper.fwd(&p, stream);
                    if (rc != ATTN_OK) {
                        printf("d%d %s S=%d: fwd returned %d\n", d, dt ? "bf16" : "fp16", S, rc);
                        continue;
                    }
                    std::vector<float> ms;
                    for (int r = 0; r < 20; ++r) {
                        CK(cudaEventRecord(e0, stream));
                        attn_kernel_hopper.fwd(&p, stream);
                        CK(cudaEventRecord(e1, stream));
                        CK(cudaEventSynchronize(e1));
                        float t;
                        CK(cudaEventElapsedTime(&t, e0, e1));
                        ms.push_back(t);
                    }
                    CK(cudaGetLastError());
                    std::sort(ms.begin(), ms.end());
                    const double t = ms[ms.size() / 2] * 1e-3;
                    const double flops = 4.0 * batch * heads * (double)S * S * d / (causal ? 2 : 1);
                    printf("%-5d %-5s %-7s %6d %6d %10.1f %9.3f\n", d, dt ? "bf16" : "fp16", causal ? "causal" : "full",
                           S, batch, t * 1e6, flops / t * 1e-12);
                    fflush(stdout);
                }
    }
    CK(cudaStreamDestroy(stream));
    for (void *x : {q, k, v, o}) CK(cudaFree(x));
    CK(cudaFree(lse));
}

int main(int argc, char **argv) {
    bool do_bench = false, only_bench = false;
    const char *only = nullptr; /* one benchmark config, d:dtype:mask:S (e.g. 64:fp16:full:2048), for ncu */
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--bench")) do_bench = true;
        else if (!strcmp(argv[i], "--bench-only")) do_bench = only_bench = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) do_bench = only_bench = true, only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--bench | --bench-only | --only d:dtype:mask:S]\n", argv[0]);
            return 2;
        }
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("hopper dev_test: wait boundary %d, skip hidden %d, d64 three consumers from S %d (causal %d), device %s "
           "(sm_%d%d)\n",
           hopper_build_wait_boundary, hopper_build_skip_hidden, hopper_build_three_from[0], hopper_build_three_from[1],
           prop.name, prop.major, prop.minor);
    int fails = only_bench ? 0 : correctness();
    if (do_bench) bench(only);
    return fails ? 1 : 0;
}
