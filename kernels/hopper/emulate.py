# CPU emulation of hopper.cu's tile logic (not of the PTX fragment layouts): which key tiles a block
# visits and in what order, the moved packed tails (a read past the last row asserts), the masks,
# the online softmax with its -inf rules, and which rows the epilogue writes (each exactly once),
# against a float64 reference. Run: python3 kernels/hopper/emulate.py (numpy; ~1 minute).
import numpy as np
BM = 128
BN = 128  # keys per tile: 128, 176, 192 or 256; BM and BN are set by the loop at the end
def ref(q, k, v, scale, causal):
    sq, sk = q.shape[0], k.shape[0]
    o = np.zeros((sq, q.shape[1])); lse = np.full(sq, -np.inf)
    for i in range(sq):
        last = min(sk - 1, i + sk - sq) if causal else sk - 1
        if last < 0: continue
        s = q[i] @ k[:last + 1].T * scale
        m = s.max(); e = np.exp(s - m); l = e.sum()
        o[i] = e @ v[:last + 1] / l; lse[i] = m + np.log(l)
    return o, lse

def run(lens_q, lens_k, packed_q, packed_k, causal, d=16, seed=0):
    rng = np.random.default_rng(seed)
    B = len(lens_q)
    seqlen_q, seqlen_k = max(max(lens_q), 1), max(max(lens_k), 1)
    cq = np.concatenate([[0], np.cumsum(lens_q)]).astype(int); ck = np.concatenate([[0], np.cumsum(lens_k)]).astype(int)
    # global row storage: packed -> total rows; dense -> per batch seqlen rows
    Qrows = cq[-1] if packed_q else B * seqlen_q
    Krows = ck[-1] if packed_k else B * seqlen_k
    Q = rng.standard_normal((Qrows, d)); K = rng.standard_normal((Krows, d)); V = rng.standard_normal((Krows, d))
    scale = 1 / np.sqrt(d) * 3; sl2 = scale * np.log2(np.e)
    O = np.full((Qrows, d), np.nan); L = np.full(Qrows, np.nan); writes = np.zeros(Qrows, int)
    def load(M, packed, row0, row, b, seqlen, total, rows):  # one box of `rows` rows
        out = np.zeros((rows, d))
        for r in range(rows):
            g = row + r
            if packed:
                gg = row0 + g
                assert gg < total, "read past the last row"
                if gg >= 0: out[r] = M[gg]
            else:
                if 0 <= g < seqlen: out[r] = M[b * seqlen + g]
        return out
    m_blocks = (seqlen_q + BM - 1) // BM
    for b in range(B):
        sq = lens_q[b] if packed_q else seqlen_q
        sk = lens_k[b] if packed_k else seqlen_k
        q_row0 = cq[b] if packed_q else 0; k_row0 = ck[b] if packed_k else 0
        for bx in range(m_blocks):
            m0 = (m_blocks - 1 - bx) * BM
            if m0 >= sq: continue
            q_first = sq - BM if (packed_q and m0 + BM > sq) else m0
            n_max = (sk + BN - 1) // BN
            if causal:
                lim = min(m0 + BM, sq) - 1 + sk - sq
                n_max = 0 if lim < 0 else min(n_max, lim // BN + 1)
            rmax = np.full(BM, -np.inf); rsum = np.zeros(BM); acc = np.zeros((BM, d))
            if n_max > 0:
                qt = load(Q, packed_q, q_row0, q_first, b, seqlen_q, Qrows, BM)
            # HOPPER_SKIP_HIDDEN: warpgroup w skips its first it0[w] tiles, as hopper.cu counts them
            it0 = np.zeros(BM // 64, int)
            if SKIP:
                for w in range(BM // 64):
                    first = q_first + 64 * w; last = min(first + 63, sq - 1)
                    last_key = -1 if first >= sq else (last + sk - sq if causal else sk - 1)
                    it0[w] = n_max - (0 if last_key < 0 else min(n_max, last_key // BN + 1))
            for it in range(n_max):
                n = n_max - 1 - it
                kf = sk - BN if (packed_k and (n + 1) * BN > sk) else n * BN
                kt = load(K, packed_k, k_row0, kf, b, seqlen_k, Krows, BN); vt = load(V, packed_k, k_row0, kf, b, seqlen_k, Krows, BN)
                s = qt @ kt.T
                masked = kf + BN > sk or kf < n * BN or (causal and kf + BN - 1 > q_first + sk - sq)
                if masked:
                    for r in range(BM):
                        last = min(sk - 1, q_first + r + sk - sq) if causal else sk - 1
                        for c in range(BN):
                            key = kf + c
                            if key < n * BN or key > last: s[r, c] = -np.inf
                live = np.array([it >= it0[r // 64] for r in range(BM)])
                for r in np.nonzero(~live)[0]:  # a skipped tile: none of its keys visible to a written row
                    qq = q_first + r
                    if qq < sq:
                        last = min(sk - 1, qq + sk - sq)
                        assert last < max(kf, n * BN), "skipped a visible tile"
                mx = s.max(axis=1)
                mnew = np.maximum(rmax, mx * sl2)
                muse = np.where(mnew == -np.inf, 0, mnew)
                corr = np.exp2(rmax - muse)
                p = np.exp2(s * sl2 - muse[:, None])
                rmax = np.where(live, mnew, rmax)
                rsum = np.where(live, rsum * corr + p.sum(axis=1), rsum)
                acc = np.where(live[:, None], acc * corr[:, None] + p @ vt, acc)
            for r in range(BM):
                qq = q_first + r
                if qq < m0 or qq >= sq: continue
                l = rsum[r]
                g = q_row0 + qq if packed_q else b * seqlen_q + qq
                O[g] = acc[r] / l if l > 0 else 0
                L[g] = (rmax[r] + np.log2(l)) * np.log(2) if l > 0 else -np.inf
                writes[g] += 1
    err = 0
    for b in range(B):
        sq = lens_q[b] if packed_q else seqlen_q
        sk = lens_k[b] if packed_k else seqlen_k
        qs = Q[cq[b]:cq[b] + sq] if packed_q else Q[b * seqlen_q:(b + 1) * seqlen_q]
        ks = K[ck[b]:ck[b] + sk] if packed_k else K[b * seqlen_k:(b + 1) * seqlen_k]
        vs = V[ck[b]:ck[b] + sk] if packed_k else V[b * seqlen_k:(b + 1) * seqlen_k]
        o, lse = ref(qs, ks, vs, scale, causal)
        g = np.arange(sq) + (cq[b] if packed_q else b * seqlen_q)
        assert np.all(writes[g] == 1), "row written %s times" % set(writes[g])
        err = max(err, np.abs(O[g] - o).max() if sq else 0)
        fin = np.isfinite(lse)
        assert np.all(np.isneginf(L[g][~fin])), "lse -inf"
        if fin.any(): err = max(err, np.abs(L[g][fin] - lse[fin]).max())
    return err

cases = [([1], [1], 0, 0), ([17], [17], 0, 0), ([200], [333], 0, 0), ([333], [200], 0, 0), ([129], [127], 0, 0),
         ([5, 130, 300], [5, 130, 300], 1, 1), ([17, 0, 129, 256], [300, 40, 0, 200], 1, 1),
         ([100, 7, 250], [180, 180, 180], 1, 0), ([150, 150, 150], [1, 260, 129], 0, 1), ([64], [600], 0, 0),
         ([3, 300], [260, 2], 1, 1)]
cases += [([385], [385], 0, 0), ([100], [577], 0, 0), ([577], [100], 0, 0), ([3, 400, 0, 190], [200, 1, 385, 193], 1, 1)]
cases += [([63, 65, 1, 127, 16], [70, 1, 200, 127, 17], 1, 1), ([79], [79], 0, 0)]
cases += [([767], [385], 0, 0), ([600, 1, 513], [300, 700, 513], 1, 1)]  # three consumers' tails
# the kernel's blocks: BM 128 (two consumer warpgroups) with BN 128 or 176 (d128 full), BM 192
# (three, d64 from S_q = 512) with BN 128; and the 128- and 192-row blocks with HOPPER_SKIP_HIDDEN
cases += [([640], [640], 0, 0), ([300], [900], 0, 0), ([900], [300], 0, 0), ([5, 700, 190], [700, 5, 400], 1, 1)]
SKIP = False
for BM, BN, SKIP in ((128, 128, 0), (128, 176, 0), (192, 128, 0), (128, 128, 1), (192, 128, 1)):
    for lq, lk, pq, pk in cases:
        for causal in (0, 1):
            e = run(lq, lk, pq, pk, causal)
            print("BM %d BN %d skip %d q%s k%s packed %d%d causal %d: max err %.2e %s" % (BM, BN, SKIP, lq, lk, pq, pk, causal, e, "OK" if e < 1e-9 else "BAD"))

# the persistent versions' scheduler (hopper.cu unit_tile): every (row block, head, sequence) exactly
# once over the units, and the blocks' round-robin over them
def unit_tile(M, H, u, k, causal):
    if not causal:
        if k: return None
        mb, bh = M - 1 - u % M, u // M
    else:
        P = (M + 1) // 2; pi = u % P
        if k and pi == M - 1 - pi: return None
        mb, bh = (pi if k else M - 1 - pi), u // P
    return mb, bh % H, bh // H
for M in range(1, 20):
    for H in (1, 3, 16):
        for B in (1, 2, 5):
            for causal in (0, 1):
                units = ((M + 1) // 2 if causal else M) * H * B
                seen = {}
                for grid in (1, 7, 132):
                    seen = {}
                    for blk in range(min(grid, units)):
                        for u in range(blk, units, min(grid, units)):
                            for k in (0, 1):
                                t = unit_tile(M, H, u, k, causal)
                                if t: seen[t] = seen.get(t, 0) + 1
                    assert len(seen) == M * H * B and set(seen.values()) == {1}, (M, H, B, causal, grid)
print("scheduler: every tile exactly once (M 1..19, H 1/3/16, B 1/2/5, grids 1/7/132)")

# HOPPER_SMEM_EPILOGUE: one warp's staging of O through its 2 KB (16 rows x 64 columns, chunk c of
# local row R at R 128 + 16 (c ^ R % 8)): every fragment word lands at its own address, each
# fragment store (fixed c, r) and each quarter-warp's 16-byte load hits 32 different banks, and
# the 16 bytes lane l loads for (row l / 8 + 4 it, chunk l % 8) are that row's columns
# 64 p + 8 c .. + 7 in order (so the global 16-byte store at column 64 p + 8 c is right).
for D in (64, 128):
    for pnl in range(D // 64):
        mem = {}
        for c in range(8):
            for r in range(2):
                banks = set()
                for lane in range(32):
                    R = lane // 4 + 8 * r; i = 8 * pnl + c
                    addr = R * 128 + ((c ^ (R & 7)) << 4) + 4 * (lane % 4)
                    assert addr not in mem and 0 <= addr < 2048
                    mem[addr] = (R, 8 * i + 2 * (lane % 4))  # the pair (col, col + 1) of row R
                    banks.add(addr // 4 % 32)
                assert len(banks) == 32, (D, pnl, c, r)
        assert len(mem) == 512
        for it in range(4):
            for quarter in range(4):
                banks = set()
                for lane in range(8 * quarter, 8 * quarter + 8):
                    R = lane // 8 + 4 * it; c = lane % 8
                    base = R * 128 + ((c ^ (R & 7)) << 4)
                    assert base % 16 == 0
                    words = [mem[base + 4 * w] for w in range(4)]
                    assert words == [(R, 64 * pnl + 8 * c + 2 * w) for w in range(4)], (D, pnl, it, lane)
                    banks.update((base // 4 + w) % 32 for w in range(4))
                assert len(banks) == 32
print("smem epilogue: staging layout bijective, conflict-free, 16-byte loads are contiguous row segments")
