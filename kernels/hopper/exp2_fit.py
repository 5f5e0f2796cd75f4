#!/usr/bin/env python3
"""Coefficients of the software exp2 of hopper's HOPPER_EXP2_EMU (ptx.cuh: exp2_poly).

2^x = 2^n * 2^f, n = floor(x), f = x - n in [0, 1]; 2^f ~ p(f) = 1 + f (c1 + f (c2 + f (c3 + f c4)))
(c0 = 1 exactly, so that 2^0 = 1 exactly: the row maximum's P is 1). The coefficients minimise the
max *relative* error |p(f) / 2^f - 1| on [0, 1] (Lawson's iteratively reweighted least squares on
a dense grid, which converges to the minimax solution), are rounded to float32, and the whole
device sequence (clamp, floor by a round-down add of 1.5 * 2^23, Horner in float32 FMAs, scale by
2^n built from the integer bits, ftz for results below 2^-126) is then emulated in float32 over a
dense sweep of [-130, 0] and its max relative error printed (the bound NOTES.md states).

    python3 kernels/hopper/exp2_fit.py [degree]     (default 4)
"""
import sys

import numpy as np

DEG = int(sys.argv[1]) if len(sys.argv) > 1 else 4


def fit(deg, iters=400):
    f = np.linspace(0.0, 1.0, 20001)
    y = np.exp2(f)
    # p(f) - 1 = f * q(f), q of degree deg - 1; relative error (1 + f q(f)) / 2^f - 1
    A = np.stack([f ** (k + 1) / y for k in range(deg)], axis=1)  # columns: f^k+1 / 2^f
    b = 1.0 - 1.0 / y  # want A c ~ b  (i.e. (1 + sum c_k f^k) / 2^f ~ 1)
    w = np.ones_like(f) / len(f)
    c = None
    for _ in range(iters):
        sw = np.sqrt(w)
        c, *_ = np.linalg.lstsq(A * sw[:, None], b * sw, rcond=None)
        e = np.abs(A @ c - b)
        w = w * e
        w /= w.sum()
    return c


def f32(x):
    return np.float32(x)


def fma32(a, b, c):
    """float32 fma: a b is exact in float64, one rounding of the sum (float64 then float32: the
    double rounding is below 2^-50 relative, far under what is measured here)"""
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def exp2_poly(x, c):
    """the device sequence of ptx.cuh exp2_poly, in float32"""
    x = np.maximum(x.astype(np.float32), f32(-127.0))
    magic = f32(12582912.0)  # 1.5 * 2^23
    # add.rm: x + magic rounded toward -inf is exactly magic + floor(x) (|x| < 2^22; ulp 1 there)
    j = (np.floor(x.astype(np.float64)) + np.float64(magic)).astype(np.float32)
    n = (j - magic).astype(np.float32)  # exact
    fr = (x - n).astype(np.float32)  # in [0, 1]; rounds to 1 for tiny negative x (harmless)
    p = np.full_like(fr, c[-1])
    for ck in c[-2::-1]:
        p = fma32(p, fr, np.full_like(fr, ck))
    p = fma32(p, fr, np.full_like(fr, f32(1.0)))
    # scale 2^n from the integer bits of j (low bits hold n): (j_bits << 23) + 127 << 23; n = -127 -> 0
    jb = j.view(np.uint32).astype(np.uint64)
    sb = ((jb << np.uint64(23)) + np.uint64(127 << 23)) & np.uint64(0xFFFFFFFF)
    s = sb.astype(np.uint32).view(np.float32)
    return (p.astype(np.float32) * s).astype(np.float32)


def main():
    c = fit(DEG)
    c32 = [f32(v) for v in c]
    f = np.linspace(0.0, 1.0, 200001)
    rel = np.abs((1 + sum(float(ck) * f ** (k + 1) for k, ck in enumerate(c32))) / np.exp2(f) - 1)
    print(f"degree {DEG} (c0 = 1): float32 coefficients c1..c{DEG}")
    for k, ck in enumerate(c32):
        print(f"  c{k + 1} = {float(ck):.9e}f  ({np.float32(ck).view(np.uint32):#010x})")
    print(f"max relative error of the polynomial on [0, 1] (float64 evaluation): {rel.max():.3e} = 2^{np.log2(rel.max()):.2f}")

    # dense sweep of the float32 device sequence over [-130, 0] (+ every float32 in [-1, 0) near 0)
    x = np.concatenate([np.linspace(-130.0, 0.0, 4_000_001, dtype=np.float64).astype(np.float32),
                        -np.logspace(-30, 0, 200_001).astype(np.float32),
                        np.array([0.0, -0.0, -126.0, -126.5, -127.0, -200.0, -np.inf], np.float32)])
    y = exp2_poly(x, c32)
    ref = np.exp2(x.astype(np.float64))
    normal = x >= -126.0
    err = np.abs(y[normal].astype(np.float64) / ref[normal] - 1)
    print(f"device sequence, float32, {normal.sum()} inputs in [-126, 0]: max relative error {err.max():.3e} "
          f"= 2^{np.log2(err.max()):.2f} (bound asked: 2^-14 = {2.0 ** -14:.3e})")
    flushed = ~normal
    print(f"inputs below -126 (incl. -inf): all 0: {bool(np.all(y[flushed] == 0))};  2^0 = {y[x == 0][0]!r}")
    assert err.max() < 2.0 ** -14 and np.all(y[flushed] == 0) and y[x == 0][0] == 1.0


if __name__ == "__main__":
    main()
