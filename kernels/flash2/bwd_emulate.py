#!/usr/bin/env python3
"""Lane-level emulation of kernels/flash2/bwd_kernel.cuh (pre, main, post) on the CPU: a
development aid for changing the backward without a GPU (NOTES_bwd.md), not part of the build.

Transcribes every address formula of the kernels and emulates the PTX they use (ldmatrix x4
[.trans], mma.sync m16n8k16, cp.async landing at the wait of its commit group, red.add) lane
by lane, shared memory NaN-poisoned; compares dQ, dK, dV with a float64 reference of
attn_abi.h's backward and checks that nothing outside the rows it must write changes (NaN
poison between rows and past the ends). Inputs, P and dS rounded to fp16 as the kernel does.
The main kernel is v2's layout (BwdConfig: BR 128 at d64, 64 at d128; P^T and dS^T [BC][BR]
swizzled tiles in shared memory; a warp grid for S^T/dP^T, keys S_KEYS (w % S_KG) .., queries
by w / S_KG; one for dK/dV, keys 32 (w % 4) .., columns by w / 4; one for dQ, queries
32 (w % Q_RG) .., columns by w / Q_RG; all through mma_tiles, whose addresses are the values
the kernel's per-lane tables (lane_chunks) hold). Its barriers are phases: all warps' S^T, dP^T and softmax_grad, then
all warps' dV, dK and dQ; a cp.async destination is poisoned from its issue to its wait, P^T
and dS^T at each step's first barrier, and each of their elements may be written once a step.
It checks the index math, not the hardware (races, atomics' order, timing).
Usage: python3 bwd_emulate.py [substring of case names]   (needs numpy; exit 1 on a failure)"""
import math
import sys

import numpy as np

LOG2E = 1.4426950408889634
LN = np.arange(32)
G, TT = LN >> 2, LN & 3
L7, K_HI, HI16 = LN & 7, (LN >> 3) & 1, LN >> 4
ROW_A, ROW_B = L7 + 8 * K_HI, L7 + 8 * HI16


def r16(x):
    return np.asarray(x, dtype=np.float64).astype(np.float16).astype(np.float64)


def swz(LD, row, chunk):
    return row * LD + ((chunk ^ (row & 7)) << 3)


class Smem:
    def __init__(self, nbytes):
        self.h = np.full(nbytes // 2, np.nan)  # 16-bit elements, by element index
        self.f = np.full(nbytes // 4, np.nan)  # float32 words, by word index
        self.n = nbytes
        self.pending = []  # committed groups of copies
        self.open = []

    def ldsm(self, addr, trans):
        addr = np.asarray(addr)
        assert addr.shape == (32,) and np.all(addr % 16 == 0) and np.all(addr >= 0) and np.all(addr + 16 <= self.n)
        regs = []
        for mi in range(4):
            rows = addr[8 * mi:8 * mi + 8] // 2
            M = np.stack([self.h[r:r + 8] for r in rows])  # 8 x 8
            assert not np.isnan(M).any(), "ldmatrix reads unwritten shared memory"
            if not trans:
                regs.append(np.stack([M[LN // 4, 2 * (LN % 4)], M[LN // 4, 2 * (LN % 4) + 1]], 1))
            else:
                regs.append(np.stack([M[2 * (LN % 4), LN // 4], M[2 * (LN % 4) + 1, LN // 4]], 1))
        return regs

    def poison(self, byte_off, nbytes):
        assert byte_off % 4 == 0 and nbytes % 4 == 0 and byte_off + nbytes <= self.n
        self.h[byte_off // 2:(byte_off + nbytes) // 2] = np.nan
        self.f[byte_off // 4:(byte_off + nbytes) // 4] = np.nan

    # cp.async: the destination is undefined (poisoned) from the copy's issue, and the copy lands
    # at the wait
    def cp(self, kind, dst, vals):
        if kind == 'h':
            self.h[dst:dst + 8] = np.nan
        else:
            self.f[dst] = np.nan
        self.open.append((kind, dst, np.array(vals, dtype=np.float64)))

    def commit(self):
        self.pending.append(self.open)
        self.open = []

    def wait_all(self):
        for grp in self.pending:
            for kind, dst, vals in grp:
                if kind == 'h':
                    assert dst % 8 == 0 and 0 <= dst and dst + 8 <= len(self.h)
                    self.h[dst:dst + 8] = vals
                else:
                    self.f[dst] = vals
        self.pending = []


def mma(c, a, b0, b1):
    A = np.zeros((16, 16))
    for j in range(2):
        A[G, 2 * TT + j] = a[0][:, j]
        A[G + 8, 2 * TT + j] = a[1][:, j]
        A[G, 2 * TT + 8 + j] = a[2][:, j]
        A[G + 8, 2 * TT + 8 + j] = a[3][:, j]
    B = np.zeros((16, 8))
    for j in range(2):
        B[2 * TT + j, G] = b0[:, j]
        B[2 * TT + 8 + j, G] = b1[:, j]
    assert not np.isnan(A).any() and not np.isnan(B).any()
    C = A @ B
    return c + np.stack([C[G, 2 * TT], C[G, 2 * TT + 1], C[G + 8, 2 * TT], C[G + 8, 2 * TT + 1]], 1)


def pack(lo, hi):
    return np.stack([r16(lo), r16(hi)], 1)


class Tensor:
    """a flat global array with poison, element (b, h, i, c) at b bs + h hs + i rs + c"""

    def __init__(self, size, bs, hs, rs):
        self.a = np.full(size, np.nan)
        self.bs, self.hs, self.rs = bs, hs, rs


# --------------------------------------------------------------------------------------
class Cfg:
    """bwd_kernel.cuh's BwdConfig"""

    def __init__(self, D):
        self.D, self.WARPS = D, 8
        self.THREADS, self.BC, self.BR = 256, 128, 128 if D == 64 else 64
        BC, BR = self.BC, self.BR
        self.KG = 4
        self.S_KG = 2 if D == 64 else 4
        self.S_KEYS = BC // self.S_KG
        self.MT_S = self.S_KEYS // 16
        self.S_COLS = BR // (self.WARPS // self.S_KG)
        self.NT_S = self.S_COLS // 8
        self.KV_COLS = D // (self.WARPS // self.KG)
        self.NT_KV = self.KV_COLS // 8
        self.Q_RG = BR // 32
        self.Q_COLS = D // (self.WARPS // self.Q_RG)
        self.NT_Q = self.Q_COLS // 8
        self.OFF_K = 0
        self.OFF_V = self.OFF_K + BC * D * 2
        self.OFF_Q = self.OFF_V + BC * D * 2
        self.OFF_DO = self.OFF_Q + 2 * BR * D * 2
        self.OFF_P = self.OFF_DO + 2 * BR * D * 2
        self.OFF_DS = self.OFF_P + BC * BR * 2
        self.OFF_LSE = self.OFF_DS + BC * BR * 2
        self.OFF_DEL = self.OFF_LSE + 2 * BR * 4
        self.SMEM = self.OFF_DEL + 2 * BR * 4
        assert BC == 32 * self.KG and self.WARPS % self.KG == 0 and BR % 64 == 0 and self.THREADS >= 2 * BR
        assert self.NT_S % 2 == 0 and self.NT_KV % 2 == 0 and self.NT_Q % 2 == 0 and self.WARPS % self.Q_RG == 0
        assert self.SMEM <= 163 * 1024


def load_rows(sm, LD, NCH, ROWS, THREADS, tile_el, src_arr, first, row_stride, valid_rows):
    W = 16 if (LD // 8) % 16 == 0 else 8
    RSTEP, COLS = THREADS // W, (NCH + W - 1) // W
    assert ROWS % RSTEP == 0
    for x in range(THREADS):
        chunk, r = x % W, x // W
        if NCH < W and chunk >= NCH:
            continue
        dst = tile_el + swz(LD, r, chunk)
        src = first + r * row_stride + chunk * 8
        for i in range(ROWS // RSTEP):
            valid = valid_rows >= ROWS or r + i * RSTEP < valid_rows
            for m in range(COLS):
                d = dst + i * RSTEP * LD + m * W * 8
                if valid:
                    s = src + i * RSTEP * row_stride + m * W * 8
                    vals = src_arr[s:s + 8]
                    assert len(vals) == 8 and not np.isnan(vals).any(), "load_rows reads outside the data"
                    sm.cp('h', d, vals)
                else:
                    sm.cp('h', d, np.zeros(8))


def seq_len_q(p, b):
    return p['cu_q'][b + 1] - p['cu_q'][b] if p['cu_q'] is not None else p['Sq']


def seq_len_k(p, b):
    sk = p['cu_k'][b + 1] - p['cu_k'][b] if p['cu_k'] is not None else p['Sk']
    return min(sk, max(p['used'][b], 0)) if p['used'] is not None else sk


def ru8(n):
    return (n + 7) // 8 * 8


def head_rows(p):
    """bwd_plan.h's flash2_bwd_head_rows: workspace rows per head, padded to groups of 8"""
    return ru8(p['total_q']) + 8 * p['B'] if p['cu_q'] is not None else ru8(p['Sq'])


def q_rows(p, b):
    """(len, ws_base, ws_head, tok0, lse_base, lse_head), as bwd_kernel.cuh's q_rows"""
    ln = seq_len_q(p, b)
    if p['cu_q'] is not None:
        tok0 = p['cu_q'][b]
        return ln, ru8(tok0) + 8 * b, head_rows(p), tok0, tok0, p['total_q']
    return ln, b * p['H'] * head_rows(p), head_rows(p), -1, b * p['H'] * p['Sq'], p['Sq']


def dq_acc_index(D, row, col):
    """bwd_kernel.cuh's dq_acc_index: (workspace row, column) -> float offset in a slice"""
    g, nt, t = row % 8, (col % 32) // 8, (col % 8) // 2
    return (row - g) * D + (col // 32) * 256 + (nt // 2) * 128 + 4 * (4 * g + t) + 2 * (nt % 2) + col % 2


def seq_off(tok0, b, bs, rs):
    return tok0 * rs if tok0 >= 0 else b * bs


def pre_post(p, a, D, post):
    CH = D // 8
    STEP = 256 // CH
    for b in range(p['B']):
        for h in range(p['H']):
            for bx in range((p['Sq'] + 63) // 64):
                m0 = bx * 64
                qlen, ws_base, ws_head, tok0, lse_base, lse_head = q_rows(p, b)
                if m0 >= qlen:
                    continue
                ws0, lse0 = ws_base + h * ws_head, lse_base + h * lse_head
                for tid in range(256):
                    chunk = tid % CH
                    if not post:
                        o = seq_off(tok0, b, p['O'].bs, p['O'].rs) + h * p['O'].hs + chunk * 8
                        do = seq_off(tok0, b, p['dO'].bs, p['dO'].rs) + h * p['dO'].hs + chunk * 8
                    else:
                        dq = seq_off(tok0, b, p['dQ'].bs, p['dQ'].rs) + h * p['dQ'].hs + chunk * 8
                    for r in range(tid // CH, 64, STEP):
                        i = m0 + r
                        if i >= (ru8(qlen) if not post else qlen):
                            continue
                        row = ws0 + i
                        if not post:
                            # each workspace row (padding included) belongs to one (sequence, head)
                            assert a['owner'].setdefault(row, (b, h)) == (b, h), "workspace rows overlap"
                            if i < qlen:
                                ov = p['O'].a[o + i * p['O'].rs:o + i * p['O'].rs + 8]
                                dv = p['dO'].a[do + i * p['dO'].rs:do + i * p['dO'].rs + 8]
                                assert not np.isnan(ov).any() and not np.isnan(dv).any()
                                a['dot'][(row, chunk)] = float(np.dot(ov, dv))
                                if chunk == 0:
                                    a['rows_pre'][row] = lse0 + i
                            for s in range(a['nsplit']):
                                base = s * a['split_stride'] + row * D + chunk * 8
                                a['dq_acc'][base:base + 8] = 0.0
                        else:
                            idx = [dq_acc_index(D, row, chunk * 8 + c) for c in range(8)]
                            acc = a['dq_acc'][idx].copy()
                            for s in range(1, a['nsplit']):
                                acc = acc + a['dq_acc'][[s * a['split_stride'] + x for x in idx]]
                            assert not np.isnan(acc).any(), "dq_acc read before zeroing"
                            off = dq + i * p['dQ'].rs
                            p['dQ'].a[off:off + 8] = r16(acc * p['scale'])
    if not post:  # the shuffle reduction and the chunk-0 writes
        for row, li in a['rows_pre'].items():
            dot = sum(a['dot'][(row, c)] for c in range(CH))
            a['delta'][row] = dot
            lse = p['lse'][li]
            a['lse2'][row] = math.inf if lse == -math.inf else lse * LOG2E


def main_kernel(p, a, cfg, det):
    key_blocks = (p['Sk'] + cfg.BC - 1) // cfg.BC
    gx = a['nsplit'] if det else key_blocks
    for b in range(p['B']):
        for hk in range(p['Hk']):
            for bx in range(gx):
                block(p, a, cfg, bx, gx, hk, b)


def block(p, a, cfg, bx, gx, hk, b):
    D, BC, BR, TH, KG, QRG = cfg.D, cfg.BC, cfg.BR, cfg.THREADS, cfg.KG, cfg.Q_RG
    NT_S, NT_KV, NT_Q = cfg.NT_S, cfg.NT_KV, cfg.NT_Q
    STAGE_BYTES = BR * D * 2
    sm = Smem(cfg.SMEM)
    Sq, ws_base, ws_head, tok0, _, _ = q_rows(p, b)
    Sk = seq_len_k(p, b)
    offset, group = Sk - Sq, p['H'] // p['Hk']
    k_tok0 = p['cu_k'][b] if p['cu_k'] is not None else -1

    def kv_base(T):
        return (k_tok0 * T.rs if k_tok0 >= 0 else b * T.bs) + hk * T.hs

    k_head, v_head = kv_base(p['K']), kv_base(p['V'])
    q_seq = seq_off(tok0, b, p['Q'].bs, p['Q'].rs)
    do_seq = seq_off(tok0, b, p['dO'].bs, p['dO'].rs)
    dq_acc0 = bx * a['split_stride']
    # the lanes' tile addresses, bytes
    k_a, v_a = cfg.OFF_K + ROW_A * D * 2, cfg.OFF_V + ROW_A * D * 2
    q_b, do_b = cfg.OFF_Q + ROW_B * D * 2, cfg.OFF_DO + ROW_B * D * 2
    q_bt, do_bt = cfg.OFF_Q + ROW_A * D * 2, cfg.OFF_DO + ROW_A * D * 2
    p_a, ds_a = cfg.OFF_P + ROW_A * BR * 2, cfg.OFF_DS + ROW_A * BR * 2
    ds_at, k_bt = cfg.OFF_DS + ROW_B * BR * 2, cfg.OFF_K + ROW_A * D * 2

    def load_step(stage, h, m0):
        load_rows(sm, D, D // 8, BR, TH, cfg.OFF_Q // 2 + stage * BR * D, p['Q'].a,
                  q_seq + h * p['Q'].hs + m0 * p['Q'].rs, p['Q'].rs, Sq - m0)
        load_rows(sm, D, D // 8, BR, TH, cfg.OFF_DO // 2 + stage * BR * D, p['dO'].a,
                  do_seq + h * p['dO'].hs + m0 * p['dO'].rs, p['dO'].rs, Sq - m0)
        for x in range(2 * BR):  # THREADS >= 2 BR
            r = x % BR
            valid = m0 + r < Sq
            src_arr = a['lse2'] if x < BR else a['delta']
            src = ws_base + h * ws_head + m0 + r
            dst = ((cfg.OFF_LSE if x < BR else cfg.OFF_DEL) + (stage * BR + r) * 4) // 4
            if valid:
                assert not np.isnan(src_arr[src])
            sm.cp('f', dst, src_arr[src] if valid else 0.0)

    n_kb = (Sk + BC - 1) // BC
    for kb in range(bx, n_kb, gx):
        n0 = kb * BC
        q_lo = max(n0 - offset, 0) if p['causal'] else 0
        qb_first, qb_end = q_lo // BR, (Sq + BR - 1) // BR
        steps = 0 if q_lo >= Sq else (qb_end - qb_first) * group
        acc_dk = [np.zeros((2, NT_KV, 32, 4)) for _ in range(8)]
        acc_dv = [np.zeros((2, NT_KV, 32, 4)) for _ in range(8)]
        # __syncthreads: every warp is done with the previous key block's tiles
        if steps > 0:
            load_rows(sm, D, D // 8, BC, TH, cfg.OFF_K // 2, p['K'].a, k_head + n0 * p['K'].rs, p['K'].rs, Sk - n0)
            load_rows(sm, D, D // 8, BC, TH, cfg.OFF_V // 2, p['V'].a, v_head + n0 * p['V'].rs, p['V'].rs, Sk - n0)
            load_step(0, hk * group, qb_first * BR)
            sm.commit()
        h, qb = hk * group, qb_first
        for it in range(steps):
            stage, hs, m0 = it & 1, h, qb * BR
            qb += 1
            if qb == qb_end:
                qb, h = qb_first, h + 1
            sm.wait_all()
            # __syncthreads: the last step's P^T and dS^T are dead (poisoned: a step reads only
            # what it wrote)
            sm.poison(cfg.OFF_P, 2 * BC * BR * 2)
            if it + 1 < steps:
                load_step(stage ^ 1, h, qb * BR)
            sm.commit()
            sq = stage * STAGE_BYTES
            mask = n0 + BC > Sk or m0 + BR > Sq or (p['causal'] and n0 + BC - 1 > m0 + offset)
            for w in range(8):
                skg, ssc = w % cfg.S_KG, w // cfg.S_KG
                s, dp = np.zeros((cfg.MT_S, NT_S, 32, 4)), np.zeros((cfg.MT_S, NT_S, 32, 4))
                mma_tiles(sm, s, D // 16, False, D, False, D, k_a, cfg.MT_S * skg, q_b + sq, ssc * NT_S)
                mma_tiles(sm, dp, D // 16, False, D, False, D, v_a, cfg.MT_S * skg, do_b + sq, ssc * NT_S)
                softmax_grad(sm, p, a, cfg, s, dp, cfg.OFF_LSE // 4 + stage * BR, cfg.OFF_DEL // 4 + stage * BR,
                             skg, ssc * cfg.S_COLS, n0 + cfg.S_KEYS * skg + G, m0, Sq, Sk, mask)
            # __syncthreads: P^T and dS^T are whole
            for w in range(8):
                kg, sc, qr, qc = w % KG, w // KG, w % QRG, w // QRG
                mma_tiles(sm, acc_dv[w], BR // 16, False, BR, True, D, p_a, 2 * kg, do_bt + sq, sc * NT_KV)
                mma_tiles(sm, acc_dk[w], BR // 16, False, BR, True, D, ds_a, 2 * kg, q_bt + sq, sc * NT_KV)
                dq = np.zeros((2, NT_Q, 32, 4))
                mma_tiles(sm, dq, BC // 16, True, BR, True, D, ds_at, 2 * qr, k_bt, qc * NT_Q)
                # group i (rows 32 qr + 8 i ..): two 16-byte reds per lane, n8 tiles 2 j, 2 j + 1
                dq_groups = dq_acc0 + (ws_base + hs * ws_head + m0 + 32 * qr) * D + qc * 256 + 4 * np.arange(32)
                for i in range(4):
                    if m0 + BR > Sq and not 32 * qr + 8 * i < Sq - m0:
                        continue
                    for j in range(2):
                        for lane in range(32):
                            dst = dq_groups[lane] + 8 * i * D + 128 * j
                            vals = np.concatenate([dq[i // 2, 2 * j, lane, 2 * (i % 2):2 * (i % 2) + 2],
                                                   dq[i // 2, 2 * j + 1, lane, 2 * (i % 2):2 * (i % 2) + 2]])
                            x = a['dq_acc'][dst:dst + 4]
                            assert dst % 4 == 0 and not np.isnan(x).any(), "atomic into an unzeroed accumulator"
                            # the element each value is, by dq_acc_index
                            row = ws_base + hs * ws_head + m0 + 32 * qr + 8 * i + G[lane]
                            for e in range(4):
                                col = qc * cfg.Q_COLS + 8 * (2 * j + e // 2) + 2 * TT[lane] + e % 2
                                assert dq_acc0 + dq_acc_index(D, row, col) == dst + e
                            a['dq_acc'][dst:dst + 4] = x + vals
                            a['touched'].add(dst)
        for w in range(8):
            kg, sc = w % KG, w // KG
            for mt in range(2):
                for r in range(2):
                    key = n0 + 32 * kg + 16 * mt + G + 8 * r
                    for lane in range(32):
                        if key[lane] >= Sk:
                            continue
                        dk = kv_base(p['dK']) + key[lane] * p['dK'].rs + sc * cfg.KV_COLS + 2 * TT[lane]
                        dv = kv_base(p['dV']) + key[lane] * p['dV'].rs + sc * cfg.KV_COLS + 2 * TT[lane]
                        for nt in range(NT_KV):
                            x = acc_dk[w][mt, nt, lane, 2 * r:2 * r + 2]
                            p['dK'].a[dk + nt * 8:dk + nt * 8 + 2] = r16(x * p['scale'])
                            p['dV'].a[dv + nt * 8:dv + nt * 8 + 2] = r16(acc_dv[w][mt, nt, lane, 2 * r:2 * r + 2])
    assert all(not grp for grp in sm.pending) and not sm.open, "copies in flight at exit"


def mma_tiles(sm, c, KSTEPS, A_T, LDA, B_T, LDB, a_lane, a_m16, b_lane, b_n8):
    """c [MT][NT] += A B (bwd_kernel.cuh's mma_tiles; addresses in bytes, 2-byte elements)"""
    MT, NT = c.shape[0], c.shape[1]
    for kk in range(KSTEPS):
        af = []
        for mt in range(MT):
            m16 = a_m16 + mt
            if A_T:
                af.append(sm.ldsm(a_lane + kk * 16 * LDA * 2 + (((2 * m16 + K_HI) ^ L7) << 4), True))
            else:
                af.append(sm.ldsm(a_lane + m16 * 16 * LDA * 2 + (((2 * kk + HI16) ^ L7) << 4), False))
        for nt in range(0, NT, 2):
            n8 = b_n8 + nt
            if B_T:
                bf = sm.ldsm(b_lane + kk * 16 * LDB * 2 + (((n8 + HI16) ^ L7) << 4), True)
            else:
                bf = sm.ldsm(b_lane + n8 * 8 * LDB * 2 + (((2 * kk + K_HI) ^ L7) << 4), False)
            for mt in range(MT):
                c[mt, nt] = mma(c[mt, nt], af[mt], bf[0], bf[1])
                c[mt, nt + 1] = mma(c[mt, nt + 1], af[mt], bf[2], bf[3])


def softmax_grad(sm, p, a, cfg, s, dp, lse_w, del_w, kg, q0, key0, m0, Sq, Sk, mask):
    """P^T and dS^T of the warp's S_KEYS keys (rows S_KEYS kg ..) x S_COLS queries (columns q0 ..) to
    their [BC][BR] tiles; lse_w, del_w: the stage's LSE2 and D (float words)"""
    offset, BR = Sk - Sq, cfg.BR

    def st2(tile_el, row, chunk, lo, hi):
        o = tile_el + swz(BR, row, chunk) + 2 * TT
        assert np.isnan(sm.h[o]).all() and np.isnan(sm.h[o + 1]).all(), "two writes of a P^T or dS^T element"
        v = pack(lo, hi)
        sm.h[o], sm.h[o + 1] = v[:, 0], v[:, 1]

    for nt in range(cfg.NT_S):
        cols = q0 + nt * 8 + 2 * TT
        l2 = (sm.f[lse_w + cols], sm.f[lse_w + cols + 1])
        dd = (sm.f[del_w + cols], sm.f[del_w + cols + 1])
        assert not np.isnan(np.stack(l2 + dd)).any(), "LSE2 or D read before it landed"
        for mt in range(cfg.MT_S):
            pv, ds = np.zeros((32, 4)), np.zeros((32, 4))
            for e in range(4):
                with np.errstate(over='ignore', invalid='ignore'):
                    pv[:, e] = np.exp2(s[mt, nt, :, e] * a['scale_log2'] - l2[e & 1])
                if mask:
                    key = key0 + 16 * mt + 8 * (e >> 1)
                    qi = m0 + q0 + nt * 8 + 2 * TT + (e & 1)
                    hid = (key >= Sk) | (qi >= Sq) | (p['causal'] & (key > qi + offset))
                    pv[hid, e] = 0.0
                ds[:, e] = pv[:, e] * (dp[mt, nt, :, e] - dd[e & 1])
            assert np.isfinite(pv).all() and np.isfinite(ds).all(), "inf or NaN in P or dS"
            row, chunk = cfg.S_KEYS * kg + 16 * mt + G, (q0 >> 3) + nt
            st2(cfg.OFF_P // 2, row, chunk, pv[:, 0], pv[:, 1])
            st2(cfg.OFF_P // 2, row + 8, chunk, pv[:, 2], pv[:, 3])
            st2(cfg.OFF_DS // 2, row, chunk, ds[:, 0], ds[:, 1])
            st2(cfg.OFF_DS // 2, row + 8, chunk, ds[:, 2], ds[:, 3])


# ----------------------------------------------------------------------------- reference
def reference(p, Qv, Kv, Vv, dOv):
    """float64 backward per sequence and head: dicts of arrays [len][D]; also O, LSE"""
    out = {}
    for b in range(p['B']):
        sq, sk = seq_len_q(p, b), seq_len_k(p, b)
        for h in range(p['H']):
            hk = h // (p['H'] // p['Hk'])
            q, k, v, do = Qv[b][h], Kv[b][hk][:sk], Vv[b][hk][:sk], dOv[b][h]
            S = p['scale'] * q @ k.T
            i = np.arange(sq)[:, None]
            j = np.arange(sk)[None, :]
            vis = np.ones((sq, sk), bool) if not p['causal'] else j <= i + sk - sq
            S = np.where(vis, S, -np.inf)
            m = S.max(1, initial=-np.inf)
            any_ = vis.any(1)
            P = np.where(vis, np.exp(S - np.where(any_, m, 0)[:, None]), 0.0)
            l = P.sum(1)
            P = np.where(any_[:, None], P / np.where(any_, l, 1)[:, None], 0.0)
            lse = np.where(any_, m + np.log(np.where(any_, l, 1)), -np.inf)
            O = P @ v
            out[(b, h)] = dict(O=O, lse=lse, P=P, q=q, k=k, v=v, do=do, hk=hk, sk=sk)
    return out


def run_case(name, B, H, Hk, Sq, Sk, D, causal, layout='bshd', det=False, cu_q=None, cu_k=None, used=None,
             seed=0):
    rng = np.random.default_rng(seed)
    cfg = Cfg(D)
    var_q, var_k = cu_q is not None, cu_k is not None
    qlens = [cu_q[b + 1] - cu_q[b] for b in range(B)] if var_q else [Sq] * B
    klens = [cu_k[b + 1] - cu_k[b] for b in range(B)] if var_k else [Sk] * B
    total_q = cu_q[B] if var_q else 0
    pad = 8  # elements of poison between rows

    def mk(heads, lens, var, rows_max):
        if var:
            tot = sum(lens)
            rs = heads * (D + pad)
            T = Tensor(tot * rs + 64, 0, D + pad, rs)
        elif layout == 'bshd':
            rs = heads * (D + pad)
            T = Tensor(B * rows_max * rs + 64, rows_max * rs, D + pad, rs)
        else:  # bhsd
            rs = D + pad
            T = Tensor(B * heads * rows_max * rs + 64, heads * rows_max * rs, rows_max * rs, rs)
        return T

    p = dict(B=B, H=H, Hk=Hk, Sq=Sq, Sk=Sk, causal=causal, scale=1.0 / math.sqrt(D) * 1.3,
             cu_q=cu_q, cu_k=cu_k, used=used, total_q=total_q)
    p['Q'], p['O'], p['dO'], p['dQ'] = (mk(H, qlens, var_q, Sq) for _ in range(4))
    p['K'], p['V'], p['dK'], p['dV'] = (mk(Hk, klens, var_k, Sk) for _ in range(4))

    def view(T, b, h, i, var, cu):
        off = (cu[b] * T.rs if var else b * T.bs) + h * T.hs + i * T.rs
        return off

    Qv, Kv, Vv, dOv = {}, {}, {}, {}
    for b in range(B):
        Qv[b], Kv[b], Vv[b], dOv[b] = {}, {}, {}, {}
        for h in range(H):
            Qv[b][h] = r16(rng.standard_normal((qlens[b], D)))
            dOv[b][h] = r16(rng.standard_normal((qlens[b], D)))
        for h in range(Hk):
            Kv[b][h] = r16(rng.standard_normal((klens[b], D)))
            Vv[b][h] = r16(rng.standard_normal((klens[b], D)))
    ref = reference(p, Qv, Kv, Vv, dOv)
    lse_rows = (H * total_q) if var_q else B * H * Sq
    p['lse'] = np.full(lse_rows, np.nan)
    for b in range(B):
        for h in range(H):
            for i in range(qlens[b]):
                p['Q'].a[view(p['Q'], b, h, i, var_q, cu_q):][:D] = Qv[b][h][i]
                p['dO'].a[view(p['dO'], b, h, i, var_q, cu_q):][:D] = dOv[b][h][i]
                p['O'].a[view(p['O'], b, h, i, var_q, cu_q):][:D] = r16(ref[(b, h)]['O'][i])
                li = h * total_q + cu_q[b] + i if var_q else (b * H + h) * Sq + i
                p['lse'][li] = np.float32(ref[(b, h)]['lse'][i])
        for h in range(Hk):
            for i in range(klens[b]):
                p['K'].a[view(p['K'], b, h, i, var_k, cu_k):][:D] = Kv[b][h][i]
                p['V'].a[view(p['V'], b, h, i, var_k, cu_k):][:D] = Vv[b][h][i]
    # the plan (bwd_plan.h's flash2_bwd_plan_for)
    rows = (1 if var_q else B) * H * head_rows(p)
    nsplit = 1
    if det:
        jobs = B * Hk
        n = (264 + jobs - 1) // jobs
        n = min(n, max(1, (Sk + 127) // 128))
        if n * rows * D * 4 > 1 << 30:
            n = (1 << 30) // (rows * D * 4)
        nsplit = max(1, n)
    a = dict(delta=np.full(rows, np.nan), lse2=np.full(rows, np.nan), dq_acc=np.full(nsplit * rows * D, np.nan),
             nsplit=nsplit if det else 1, split_stride=rows * D if det else 0, scale_log2=p['scale'] * LOG2E,
             dot={}, rows_pre={}, touched=set(), owner={})
    pre_post(p, a, D, post=False)
    main_kernel(p, a, cfg, det)
    pre_post(p, a, D, post=True)
    # compare
    worst = 0.0
    written = {k: np.zeros(len(p[k].a), bool) for k in ('dQ', 'dK', 'dV')}
    dK_ref, dV_ref = {}, {}
    for b in range(B):
        for h in range(H):
            r = ref[(b, h)]
            P, q, k, v, do = r['P'], r['q'], r['k'], r['v'], r['do']
            Dl = (do * r16(r['O'])).sum(1)
            dP = do @ v.T
            dS = P * (dP - Dl[:, None])
            dq = p['scale'] * dS @ k
            dk = p['scale'] * dS.T @ q
            dv = P.T @ do
            key = (b, r['hk'])
            dK_ref[key] = dK_ref.get(key, 0) + dk
            dV_ref[key] = dV_ref.get(key, 0) + dv
            for i in range(qlens[b]):
                off = view(p['dQ'], b, h, i, var_q, cu_q)
                got = p['dQ'].a[off:off + D]
                written['dQ'][off:off + D] = True
                worst = max(worst, np.abs(got - dq[i]).max() / (np.abs(dq).max() + 1e-3))
                assert not np.isnan(got).any(), (name, 'dQ unwritten', b, h, i)
        for hk in range(Hk):
            sk = seq_len_k(p, b)
            for i in range(sk):
                for t, refd in (('dK', dK_ref), ('dV', dV_ref)):
                    off = view(p[t], b, hk, i, var_k, cu_k)
                    got = p[t].a[off:off + D]
                    want = refd[(b, hk)][i] if (b, hk) in refd else np.zeros(D)
                    written[t][off:off + D] = True
                    assert not np.isnan(got).any(), (name, t, 'unwritten', b, hk, i)
                    worst = max(worst, np.abs(got - want).max() / (np.abs(refd[(b, hk)]).max() + 1e-3))
    for t in ('dQ', 'dK', 'dV'):
        bad = ~np.isnan(p[t].a) & ~written[t]
        assert not bad.any(), (name, t, 'written outside its rows', np.nonzero(bad)[0][:5])
    ok = worst < 2e-2
    print(f"{name:60s} worst rel err {worst:.2e} {'ok' if ok else 'FAIL'}  nsplit {a['nsplit']}")
    return ok


if __name__ == '__main__':
    only = sys.argv[1] if len(sys.argv) > 1 else ''
    cases = [
        ('d64 full 150x150 bshd', dict(B=1, H=1, Hk=1, Sq=150, Sk=150, D=64, causal=False)),
        ('d64 causal 150x150', dict(B=1, H=1, Hk=1, Sq=150, Sk=150, D=64, causal=True)),
        ('d64 causal Sq>Sk 200x70 (rows see nothing)', dict(B=1, H=1, Hk=1, Sq=200, Sk=70, D=64, causal=True)),
        ('d64 causal Sq<Sk 50x300', dict(B=1, H=1, Hk=1, Sq=50, Sk=300, D=64, causal=True)),
        ('d64 full Sq<Sk 1x1', dict(B=1, H=1, Hk=1, Sq=1, Sk=1, D=64, causal=False)),
        ('d64 GQA 4:2 causal 100x130 bhsd B2', dict(B=2, H=4, Hk=2, Sq=100, Sk=130, D=64, causal=True, layout='bhsd')),
        ('d64 GQA 4:2 causal 100x260 deterministic', dict(B=1, H=4, Hk=2, Sq=100, Sk=260, D=64, causal=True, det=True)),
        ('d128 causal 130x130 bhsd', dict(B=1, H=2, Hk=1, Sq=130, Sk=130, D=128, causal=True, layout='bhsd')),
        ('d128 full 70x200 deterministic', dict(B=1, H=1, Hk=1, Sq=70, Sk=200, D=128, causal=False, det=True)),
        # steps below the diagonal that take the unmasked path with the causal flag set
        ('d64 causal 256x256 (unmasked causal steps)', dict(B=1, H=1, Hk=1, Sq=256, Sk=256, D=64, causal=True)),
        ('d128 causal 256x256 (unmasked causal steps)', dict(B=1, H=1, Hk=1, Sq=256, Sk=256, D=128, causal=True)),
        ('d64 varlen causal, seqused_k, an empty sequence',
         dict(B=3, H=2, Hk=1, Sq=129, Sk=200, D=64, causal=True, cu_q=[0, 0, 70, 199], cu_k=[0, 50, 50, 250],
              used=[50, 0, 150])),
        ('d64 varlen full, q empty', dict(B=2, H=2, Hk=2, Sq=80, Sk=140, D=64, causal=False, cu_q=[0, 80, 80],
                                          cu_k=[0, 140, 170])),
        # sequences that start and end inside one group of 8 workspace rows (bwd_plan.h's padding)
        ('d128 varlen causal, short sequences', dict(B=4, H=2, Hk=2, Sq=9, Sk=20, D=128, causal=True,
                                                     cu_q=[0, 1, 2, 11, 14], cu_k=[0, 5, 25, 30, 32])),
    ]
    results = [run_case(n, **kw) for n, kw in cases if only in n]
    print('all ok' if all(results) else 'FAILURES')
    sys.exit(0 if all(results) else 1)
