"""The software path's dequantisation, bit for bit (docs/codegen.md "Block-scaled products"):
`astype(x, bf16) * astype(scale, bf16)` repeated along K, as ir/passes/scaled.py writes it,
on the emulator against NumPy for every f8e4m3 and f8e5m2 code (subnormals, ±0, NaN) and
scales from 2^-127 to 2^127 and the NaN code 0xFF (OCP MX: a NaN scale makes its block
NaN). The f8 codes are converted two at a time from the loaded words (one cvt per pair on
sm_90+, elementwise._f8_pairs; integer code on sm_80), including tiles over the array's end,
whose loads take the predicated path.

The reference: element × scale is exact in f32 (at most 4 significant bits, magnitudes
2^-136 .. 2^136 or f32 overflow), then rounded once to bf16, as one bf16 multiply rounds
the exact product."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang

ml_dtypes = pytest.importorskip("ml_dtypes")

KERNEL = """
@launch(reqntid = (128, 1, 1))
kernel dq(x: Array[F8, 2], s: Array[ue8m0, 2], y: Array[bf16, 2]) {
    let m = bid(0);
    let t = load(x, index = (m, 0), shape = (64, 64), padding = 0);
    let u = astype(load(s, index = (m, 0), shape = (64, 2), padding = 0), bf16);
    let r = reshape(broadcast_to(expand_dims(u, 2), (64, 2, 32)), (64, 64));
    store(y, index = (m, 0), tile = astype(t, bf16) * r);
}
"""

ML = {"f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2}


def _reference(codes: np.ndarray, scales: np.ndarray, f8) -> np.ndarray:
    x = codes.view(f8).astype(np.float32)
    s = scales.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        p = x * np.repeat(s, 32, axis=1)
    return p.astype(ml_dtypes.bfloat16).view(np.uint16)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
@pytest.mark.parametrize("fmt", ["f8e4m3", "f8e5m2"])
def test_dequantisation_is_bit_exact(arch, fmt):
    mod = tilelang.compile(KERNEL.replace("F8", fmt), arch=arch, backend="emulator",
                           cache=False)
    rows = 64 * 4 + 40                      # the last tile runs over the end: predicated loads
    rng = np.random.default_rng(7)
    codes = np.concatenate([np.arange(256, dtype=np.uint8)] * (rows * 64 // 256 + 1))
    codes = rng.permutation(codes[:rows * 64]).reshape(rows, 64)
    scales = rng.integers(0, 256, (rows, 2)).astype(np.uint8)
    scales[:6, 0] = [0, 1, 127, 134, 254, 255]          # 2^-127, 2^-126, 1, 2^7, 2^127, NaN
    y = np.zeros((rows, 64), np.uint16).view(ml_dtypes.bfloat16)
    mod.dq[(5, 1)](codes.view(ML[fmt]), scales.view(ml_dtypes.float8_e8m0fnu), y)
    got, want = y.view(np.uint16), _reference(codes, scales, ML[fmt])
    nan_got = np.isnan(y.astype(np.float32))
    nan_want = np.isnan(want.view(ml_dtypes.bfloat16).astype(np.float32))
    assert np.array_equal(nan_got, nan_want)
    assert nan_want.sum() > 64                          # NaN codes and the NaN scales
    bad = (got != want) & ~nan_want
    assert not bad.any(), f"{bad.sum()} differ, first at {np.argwhere(bad)[0]}: " \
        f"{got[bad][0]:#06x} against {want[bad][0]:#06x}"
