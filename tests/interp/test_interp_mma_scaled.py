"""The reference interpreter runs `mma_scaled` through its registry reference (exact products,
one rounding to f32): examples/matmul_nvfp4.tile on packed FP4 bytes (uint8, two f4e2m1 a
byte along K) and f8e4m3 scales held as float32, against a float64 NumPy product; ragged, so the loads' padding (0, for scales 2^-127 or 0)
takes part."""

from __future__ import annotations

import pathlib

import numpy as np

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.interp.interpreter import run_kernel
from tilelang.sema.types import DTYPES, round_to_dtype

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_nvfp4_example_in_the_interpreter():
    path = ROOT / "examples" / "matmul_nvfp4.tile"
    res = compile_source(path.read_text("utf-8"), str(path), until="tir")
    assert res.ok, render_all(res.diagnostics)
    rng = np.random.default_rng(2)
    m, n, k = 80, 72, 80
    f4, e4 = DTYPES["f4e2m1"], DTYPES["f8e4m3"]
    a = round_to_dtype(rng.standard_normal((m, k)) * 2, f4)
    b = round_to_dtype(rng.standard_normal((k, n)) * 2, f4)
    sa = round_to_dtype(rng.uniform(0.01, 400, (m, k // 16)), e4)
    sb = round_to_dtype(rng.uniform(0.01, 400, (k // 16, n)), e4)
    c = np.zeros((m, n), np.float32)
    from tilelang.runtime.mx_formats import pack_f4
    run_kernel(res.ir, [pack_f4(a), sa, pack_f4(b, axis=0), sb, c], grid=(2, 2))
    av = a.astype(np.float64) * np.repeat(sa.astype(np.float64), 16, 1)
    bv = b.astype(np.float64) * np.repeat(sb.astype(np.float64), 16, 0)
    want, first = av @ bv, av[:, :64] @ bv[:64]     # K tiles of 64: 0..63, then 64..79
    # the reference rounds the f32 accumulator once per K tile: after the first tile (its
    # exact sum) and at the end
    bound = 2.0 ** -24 * (np.abs(first) + np.abs(want)) * (1 + 2.0 ** -23)
    assert np.all(np.abs(c - want) <= bound)
