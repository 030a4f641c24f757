"""f8 warp-group MMA on sm_90a (issue 16, scope 2): products of f8e4m3 / f8e5m2 tiles (mixed
allowed) into an f32 accumulator run on `wgmma.mma_async.m64nNk32.f32.<a>.<b>` with both
operands K-major in shared memory (the instruction has no transpose for 8-bit types): an
operand stored along K (A as (M, K), B as (N, K) loaded with `order = (1, 0)`) is copied by
TMA (or cp.async) straight into its image; one stored along M/N (B as (K, N)) is loaded into
registers and stored into a K-major image, a transpose on the way (lower/tensorcore/wgmma_product.py).

Results are the emulator's (it decodes e4m3 / e5m2 with tilelang/emulator/fp8.py and reads
the descriptors on its own) against NumPy, with ml_dtypes for the f8 values:

* exact where the inputs make it so: multiples of 1/8 in [-1, 1] are exact in both formats
  (at most 3 significant bits), their products are multiples of 1/64 and every partial sum
  up to K = 512 is exact in f32;
* random f8 values (every finite code of small magnitude) against an f64 reference within
  one f32 rounding per k32 instruction of the running sum (the emulator accumulates each
  instruction's exact products in f64 and rounds once into the f32 accumulator; a GPU's
  f8 accumulation is coarser, which the GPU test allows for)."""

from __future__ import annotations

import re
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

from test_tma_store import padded, run_views
from wgmma_support import compile_for

F8 = {"f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2}
PTX_NAME = {"f8e4m3": "e4m3", "f8e5m2": "e5m2"}
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")

# A (M, K) and B stored (N, K): both K-major, both copied by TMA
KMAJOR = """
@launch(reqntid = (128, 1, 1))
kernel mm8(a: Array[TA, 2], bt: Array[TB, 2], c: Array[f32, 2], const BN: i32 = 128) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((128, BN), f32);
    for k in range(num_tiles(a, axis = 1, shape = (128, 128))) {
        let ta = load(a, index = (m, k), shape = (128, 128), padding = 0);
        let tb = load(bt, index = (k, n), shape = (128, BN), order = (1, 0), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""

# B stored (K, N): N-major, staged through registers into a K-major image
NMAJOR = """
@launch(reqntid = (128, 1, 1))
kernel mm8n(a: Array[f8e4m3, 2], b: Array[f8e4m3, 2], c: Array[f32, 2]) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((64, 64), f32);
    for k in range(num_tiles(a, axis = 1, shape = (64, 64))) {
        let ta = load(a, index = (m, k), shape = (64, 64), padding = 0);
        let tb = load(b, index = (k, n), shape = (64, 64), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""


def source(ta="f8e4m3", tb="f8e4m3") -> str:
    return KMAJOR.replace("TA", ta).replace("TB", tb)


def eighths(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.integers(-8, 9, shape) / 8).astype(F8[dtype])


def product(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def arrays_kmajor(M, N, K, ta="f8e4m3", tb="f8e4m3", values=eighths, pad=16):
    a = values((M, K), ta, 1)
    b = values((K, N), tb, 2)
    bt = np.ascontiguousarray(b.T)
    return a, b, {"a": padded(a, -K % 16 + pad, 0), "bt": padded(bt, -K % 16 + pad, 0),
                  "c": padded(np.full((M, N), np.nan, np.float32), -N % 4 + 4)}


def test_ptx_uses_wgmma_k32_with_tma():
    a, b, arrays = arrays_kmajor(256, 256, 256)
    res = compile_for(source(), "mm8", arrays)
    ptx = res.ptx
    art = res.codegen.kernel("mm8")
    # 128 x 128 x 128 per iteration, one warp group: 2 m64 tiles x 4 k32 steps
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3") == 8
    # no transpose immediates for 8-bit types: d, a-desc, b-desc, scale-d, 1, 1
    assert re.search(r"m64n128k32\.f32\.e4m3\.e4m3 \{[^}]*\}, %rd\d+, %rd\d+, %p\d+, 1, 1;", ptx)
    # both operands K-major through TMA: 128-byte rows of 128 elements, one panel each
    assert [(m.array, m.dtype.name, m.box, m.swizzle) for m in art.tensor_maps[:2]] == \
        [("a", "f8e4m3", (128, 128), 128), ("bt", "f8e4m3", (128, 128), 128)]
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    assert "mma.sync" not in ptx and re.search(r"^\.target sm_90a$", ptx, re.M)


@pytest.mark.parametrize("ta,tb", [("f8e4m3", "f8e4m3"), ("f8e5m2", "f8e5m2"),
                                   ("f8e5m2", "f8e4m3")])
def test_square_exact(ta, tb):
    a, b, arrays = arrays_kmajor(256, 256, 384, ta, tb)
    res, _ = run_views(source(ta, tb), "mm8", arrays, (2, 2), race_check=True)
    assert f"k32.f32.{PTX_NAME[ta]}.{PTX_NAME[tb]}" in res.ptx
    assert np.array_equal(arrays["c"], product(a, b))


def test_ragged_exact():
    # 200 x 136 x 200: the K tail and both output edges are partial boxes
    a, b, arrays = arrays_kmajor(200, 136, 200)
    res, _ = run_views(source(), "mm8", arrays, (2, 2))
    assert len(res.codegen.kernel("mm8").tensor_maps) == 3
    assert np.array_equal(arrays["c"], product(a, b))


def test_narrow_n_64_byte_rows():
    # BN = 64: one m64n64k32 per 64-row tile; B's image still 128-byte rows of K
    a, b, arrays = arrays_kmajor(128, 192, 256)
    res, _ = run_views(source(), "mm8", arrays, (1, 3), defines={"BN": 64})
    assert "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3" in res.ptx
    assert np.array_equal(arrays["c"], product(a, b))


def f8_values(shape, dtype, seed):
    """Random f8 codes whose values lie in [-2, 2] (normals and subnormals of both formats),
    so the products have full-width mantissas."""
    rng = np.random.default_rng(seed)
    codes = np.arange(256, dtype=np.uint8).view(F8[dtype])
    vals = codes.astype(np.float64)
    keep = codes[np.isfinite(vals) & (np.abs(vals) <= 2)]
    return rng.choice(keep, shape)


def test_random_values_within_f32_accumulation():
    a, b, arrays = arrays_kmajor(128, 128, 512, "f8e4m3", "f8e5m2", values=f8_values)
    run_views(source("f8e4m3", "f8e5m2"), "mm8", arrays, (1, 1))
    want = product(a, b)
    # one f32 rounding of the running sum per k32 instruction: K / 32 roundings of at most
    # 2^-24 of the partial sums' magnitude, which |a| @ |b| bounds
    bound = (512 / 32) * 2.0 ** -24 * (np.abs(a.astype(np.float64)) @
                                        np.abs(b.astype(np.float64))) + 1e-30
    err = np.abs(arrays["c"] - want)
    assert (err <= bound).all(), float((err / bound).max())


def test_n_major_b_is_staged_through_registers():
    # B (K, N) row-major: no TMA or cp.async copy into an N-major image (wgmma reads 8-bit
    # operands K-major only); it is loaded into registers and stored along K
    a = eighths((64, 128), "f8e4m3", 3)
    b = eighths((128, 64), "f8e4m3", 4)
    arrays = {"a": padded(a, 16, 0), "b": padded(b, 16, 0),
              "c": padded(np.full((64, 64), np.nan, np.float32), 4)}
    res, _ = run_views(NMAJOR, "mm8n", arrays, (1, 1), race_check=True)
    ptx = res.ptx
    assert "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3" in ptx
    assert "b" not in [m.array for m in res.codegen.kernel("mm8n").tensor_maps]
    assert re.search(r"ld\.global(\.nc)?(\.v\d)?\.(b|u)(8|16|32)", ptx)
    assert np.array_equal(arrays["c"], product(a, b))


AMAJOR = """
@launch(reqntid = (128, 1, 1))
kernel mm8a(at: Array[f8e5m2, 2], bt: Array[f8e5m2, 2], c: Array[f32, 2]) {
    var acc = zeros((64, 64), f32);
    for k in range(num_tiles(at, axis = 0, shape = (64, 64))) {
        // a stored (K, M): M-major, staged; b stored (N, K): K-major, copied
        let ta = load(at, index = (0, k), shape = (64, 64), order = (1, 0), padding = 0);
        let tb = load(bt, index = (k, 0), shape = (64, 64), order = (1, 0), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (0, 0), tile = acc);
}
"""


def test_m_major_a_is_staged_through_registers():
    a = eighths((64, 160), "f8e5m2", 7)
    b = eighths((160, 64), "f8e5m2", 8)
    arrays = {"at": padded(np.ascontiguousarray(a.T), 16, 0),
              "bt": padded(np.ascontiguousarray(b.T), 0, 0),
              "c": padded(np.full((64, 64), np.nan, np.float32), 4)}
    res, _ = run_views(AMAJOR, "mm8a", arrays, (1, 1), race_check=True)
    assert "wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e5m2" in res.ptx
    assert np.array_equal(arrays["c"], product(a, b))


PREFETCHED = """
@launch(reqntid = (128, 1, 1))
kernel pf(a: Array[f8e4m3, 2], bt: Array[f8e4m3, 2], c: Array[f32, 2]) {
    var acc = zeros((64, 64), f32);
    for k in range(num_tiles(a, axis = 1, shape = (64, 64))) {
        let ta = load(a, index = (0, k), shape = (64, 64), padding = 0);
        let tb = load(bt, index = (k, 0), shape = (64, 64), order = (1, 0), padding = 0);
        acc = mma(ta, tb, acc) * 0.5;
    }
    store(c, index = (0, 0), tile = acc);
}
"""


def test_loop_doing_more_than_the_product():
    # the body rescales the product: not the pipelined ring but the prefetching loop
    # (lower/tensorcore/mma_prefetch.py), its operands still copied by TMA into K-major images
    a = eighths((64, 192), "f8e4m3", 9)
    b = eighths((192, 64), "f8e4m3", 10)
    arrays = {"a": padded(a, 0, 0), "bt": padded(np.ascontiguousarray(b.T), 0, 0),
              "c": padded(np.full((64, 64), np.nan, np.float32), 4)}
    res, _ = run_views(PREFETCHED, "pf", arrays, (1, 1), race_check=True)
    assert "m64n64k32.f32.e4m3.e4m3" in res.ptx and "cp.async.bulk.tensor" in res.ptx
    want = np.zeros((64, 64))
    for k in range(3):
        want = (want + product(a[:, 64 * k:64 * k + 64], b[64 * k:64 * k + 64])) * 0.5
    assert np.array_equal(arrays["c"], want)


@needs_ptxas
def test_ptxas_accepts(tmp_path):
    _, _, arrays = arrays_kmajor(256, 256, 256, "f8e5m2", "f8e4m3")
    p = tmp_path / "m.ptx"
    p.write_text(compile_for(source("f8e5m2", "f8e4m3"), "mm8", arrays).ptx)
    out = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(p), "-o", str(tmp_path / "m.o")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in out.stderr, out.stderr


@pytest.mark.gpu
def test_matches_numpy_on_gpu():
    import tilelang
    mod = tilelang.compile(source("f8e4m3", "f8e5m2"), backend="cuda")
    M, N, K = 1000, 520, 1024
    a = f8_values((M, K), "f8e4m3", 5)
    b = f8_values((K, N), "f8e5m2", 6)
    bt = np.ascontiguousarray(b.T)
    da = tilelang.to_device(a, backend=mod.backend)
    dbt = tilelang.to_device(bt, backend=mod.backend)
    dc = tilelang.to_device(np.full((M, N), np.nan, np.float32), backend=mod.backend)
    gx = -(-M // 128)
    mod.mm8[(gx, -(-N // 128))](da, dbt, dc)
    mod.backend.synchronize()
    # Hopper's f8 MMA keeps fewer accumulator bits than f32 inside an instruction: allow
    # 2^-12 of the magnitude per k32 step
    want = product(a, b)
    bound = (K / 32) * 2.0 ** -12 * (np.abs(a.astype(np.float64)) @
                                      np.abs(b.astype(np.float64))) + 1e-30
    assert (np.abs(np.asarray(dc) - want) <= bound).all()
