"""`mma_scaled` compiled and run on the emulator against NumPy (values through ml_dtypes):
every element format (f8e4m3, f8e5m2 mixed with it, f6e2m3, f6e3m2, f4e2m1) with ue8m0
scales, and NVFP4 (f4e2m1 with f8e4m3 scales, one per 16), on sm_120a's block-scaled
mma.sync and sm_100a's block-scaled tcgen05.mma (the 8-bit floats with ue8m0 scales:
plan/scaled.py; tcgen05 at M = 128) and otherwise through the
software path (ir/passes/scaled.py: dequantize to bf16, then the target's bf16 product:
mma.sync on sm_80 and sm_120a, wgmma on sm_90a, tcgen05 on sm_100a); ragged shapes (the loads
pad) and a batched product. Packed FP4 (f4e2m1x2, MXFP4 and NVFP4) runs on sm_120a's
`mma.sync...m16n8k64.kind::mxf4nvf4` and sm_100a's `tcgen05.mma...kind::mxf4` /
`kind::mxf4nvf4` and, elsewhere, unpacked by the software path (ir/passes/packed_f4.py).

Tolerance: every element times its scale is exact in bf16 here (scales 2^-6 .. 2^6) and
every product of two is exact in f32, so only the f32 sums round: at most K roundings of
2^-24 relative to the sum of the terms' magnitudes. Where the inputs make every partial sum
exact (small multiples of powers of two), the result must equal the exact product."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang

ml_dtypes = pytest.importorskip("ml_dtypes")

ML = {"f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2,
      "f6e2m3": ml_dtypes.float6_e2m3fn, "f6e3m2": ml_dtypes.float6_e3m2fn,
      "f4e2m1": ml_dtypes.float4_e2m1fn, "ue8m0": ml_dtypes.float8_e8m0fnu}

KERNEL = """
@launch(reqntid = (128, 1, 1))
kernel mms(a: Array[TA, 2], sa: Array[TS, 2], b: Array[TB, 2], sb: Array[TS, 2],
           c: Array[f32, 2]) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((64, 32), f32);
    for k in range(num_tiles(a, axis = 1, shape = (64, 64))) {
        let ta = load(a, index = (m, k), shape = (64, 64), padding = 0);
        let ts = load(sa, index = (m, k), shape = (64, floordiv(64, V)), padding = 0);
        let tb = load(b, index = (k, n), shape = (64, 32), padding = 0);
        let us = load(sb, index = (k, n), shape = (floordiv(64, V), 32), padding = 0);
        acc = mma_scaled(ta, ts, tb, us, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""

BATCHED = """
@launch(reqntid = (128, 1, 1))
kernel mmb(a: Array[f8e4m3, 3], sa: Array[ue8m0, 3], b: Array[f6e2m3, 3],
           sb: Array[ue8m0, 3], c: Array[f32, 3]) {
    let ta = load(a, index = (0, 0, 0), shape = (2, 32, 64), padding = 0);
    let ts = load(sa, index = (0, 0, 0), shape = (2, 32, 2), padding = 0);
    let tb = load(b, index = (0, 0, 0), shape = (2, 64, 16), padding = 0);
    let us = load(sb, index = (0, 0, 0), shape = (2, 2, 16), padding = 0);
    store(c, index = (0, 0, 0), tile = mma_scaled(ta, ts, tb, us, zeros((2, 32, 16), f32)));
}
"""


def _elements(rng, shape, fmt):
    top = float(ml_dtypes.finfo(ML[fmt]).max)
    return np.clip(rng.standard_normal(shape) * top / 3, -top, top).astype(ML[fmt])


def _scales(rng, shape, fmt):
    if fmt == "ue8m0":
        return rng.integers(121, 134, shape).astype(np.uint8).view(ML["ue8m0"])   # 2^-6..2^6
    return (rng.uniform(0.125, 8, shape)).astype(ML["f8e4m3"])                     # NVFP4


def _check(got, a, sa, b, sb, v, batched=False):
    ka, kb = (-1, -2)
    av = a.astype(np.float64) * np.repeat(sa.astype(np.float64), v, axis=ka)
    bv = b.astype(np.float64) * np.repeat(sb.astype(np.float64), v, axis=kb)
    want = av @ bv
    bound = a.shape[-1] * 2.0 ** -24 * (np.abs(av) @ np.abs(bv))
    bad = np.abs(got - want) > bound
    assert not bad.any(), f"{bad.sum()} elements differ, first at {np.argwhere(bad)[0]}"


CASES = [("f8e4m3", "f8e4m3", "ue8m0", 32), ("f8e4m3", "f8e5m2", "ue8m0", 32),
         ("f6e2m3", "f6e3m2", "ue8m0", 32), ("f4e2m1", "f4e2m1", "ue8m0", 32),
         ("f8e4m3", "f4e2m1", "ue8m0", 32), ("f6e3m2", "f8e5m2", "ue8m0", 32),
         ("f4e2m1", "f6e2m3", "ue8m0", 32),
         ("f4e2m1", "f4e2m1", "f8e4m3", 16)]


# sm_80 in the default suite; the wgmma (sm_90a) and sm_100a (PTX cvt) variants are slow
@pytest.fixture(scope="module", params=["sm_80", "sm_120a",
                                        pytest.param("sm_90a", marks=pytest.mark.slow),
                                        pytest.param("sm_100a", marks=pytest.mark.slow)])
def arch(request):
    return request.param


@pytest.mark.parametrize("ta,tb,ts,v", CASES, ids=[f"{c[0]}x{c[1]}/{c[2]}" for c in CASES])
def test_every_format_on_the_emulator(arch, ta, tb, ts, v):
    src = KERNEL.replace("TA", ta).replace("TB", tb).replace("TS", ts).replace("V", str(v))
    mod = tilelang.compile(src, arch=arch, backend="emulator", cache=False)
    rng = np.random.default_rng(len(ta) + v)
    m, n, k = 80, 48, 96                      # ragged: two blocks each way, K not a tile multiple
    a, b = _elements(rng, (m, k), ta), _elements(rng, (k, n), tb)
    sa, sb = _scales(rng, (m, k // v), ts), _scales(rng, (k // v, n), ts)
    c = np.zeros((m, n), np.float32)
    mod.mms[(2, 2)](a, sa, b, sb, c)
    _check(c, a, sa, b, sb, v)


@pytest.mark.parametrize("arch", ["sm_80", "sm_120a"])
def test_exact_sums_give_the_exact_product_f8(arch):
    """f8e4m3 elements ±1, ±0.5, ±0.25 and scales 2^-2 .. 2^2: every partial sum is a small
    multiple of 2^-8, exact in f32, so the block-scaled instruction (sm_120a) and the
    software path (sm_80) both give exactly NumPy's product; the scales differ per row of a,
    per column of b and per 32 of K, so one read from the wrong lane or byte shows."""
    src = KERNEL.replace("TA", "f8e4m3").replace("TB", "f8e4m3").replace("TS", "ue8m0") \
        .replace("V", "32")
    mod = tilelang.compile(src, arch=arch, backend="emulator", cache=False)
    rng = np.random.default_rng(5)
    vals = [-1.0, -0.5, -0.25, 0.25, 0.5, 1.0]
    a = rng.choice(vals, (64, 64)).astype(ML["f8e4m3"])
    b = rng.choice(vals, (64, 32)).astype(ML["f8e4m3"])
    sa = rng.integers(125, 130, (64, 2)).astype(np.uint8).view(ML["ue8m0"])
    sb = rng.integers(125, 130, (2, 32)).astype(np.uint8).view(ML["ue8m0"])
    c = np.zeros((64, 32), np.float32)
    mod.mms[(1, 1)](a, sa, b, sb, c)
    want = (a.astype(np.float64) * np.repeat(sa.astype(np.float64), 32, 1)) @ \
        (b.astype(np.float64) * np.repeat(sb.astype(np.float64), 32, 0))
    assert np.array_equal(c, want.astype(np.float32))


PACKED = """
@launch(reqntid = (128, 1, 1))
kernel mmp(a: Array[f4e2m1x2, 2], sa: Array[TS, 2], b: Array[f4e2m1x2, 2], sb: Array[TS, 2],
           c: Array[f32, 2]) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((64, 32), f32);
    for k in range(num_tiles(a, axis = 1, shape = (64, 32))) {
        let ta = load(a, index = (m, k), shape = (64, 32), padding = 0);
        let ts = load(sa, index = (m, k), shape = (64, floordiv(64, V)), padding = 0);
        let tb = load(b, index = (k, n), shape = (32, 32), padding = 0);
        let us = load(sb, index = (k, n), shape = (floordiv(64, V), 32), padding = 0);
        acc = mma_scaled(ta, ts, tb, us, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""


@pytest.mark.parametrize("ts,v", [("ue8m0", 32), ("f8e4m3", 16)], ids=["mxfp4", "nvfp4"])
def test_packed_fp4_on_the_emulator(arch, ts, v):
    """Packed FP4 (f4e2m1x2, two a byte along K: a (M, K / 2), b (K / 2, N) bytes from
    `tilelang.pack_f4`), MXFP4 and NVFP4 scales; ragged (K = 96 elements, 48 bytes, not a
    tile multiple: the padding bytes are two zeros)."""
    src = PACKED.replace("TS", ts).replace("V", str(v))
    mod = tilelang.compile(src, arch=arch, backend="emulator", cache=False)
    rng = np.random.default_rng(v)
    m, n, k = 80, 48, 96
    a, b = _elements(rng, (m, k), "f4e2m1"), _elements(rng, (k, n), "f4e2m1")
    sa, sb = _scales(rng, (m, k // v), ts), _scales(rng, (k // v, n), ts)
    c = np.zeros((m, n), np.float32)
    mod.mmp[(2, 2)](tilelang.pack_f4(a), sa, tilelang.pack_f4(b, axis=0), sb, c)
    _check(c, a, sa, b, sb, v)


@pytest.mark.parametrize("arch", ["sm_80", "sm_120a"])
@pytest.mark.parametrize("ts,v", [("ue8m0", 32), ("f8e4m3", 16)], ids=["mxfp4", "nvfp4"])
def test_packed_fp4_exact_sums_and_every_code(arch, ts, v):
    """All 16 codes in a and b (so a nibble read from the wrong half or sign shows), scales
    that differ per row of a, column of b and block of K — powers of two 2^-2 .. 2^2 (ue8m0)
    or e4m3 values with two significant bits — so every partial sum is exact in f32 and the
    software path (sm_80) and the block-scaled mma.sync (sm_120a: `kind::mxf4nvf4`
    `scale_vec::2X`/`4X`) must both give exactly NumPy's product."""
    src = PACKED.replace("TS", ts).replace("V", str(v))
    mod = tilelang.compile(src, arch=arch, backend="emulator", cache=False)
    rng = np.random.default_rng(9)
    a = np.arange(16, dtype=np.uint8)[rng.integers(0, 16, (64, 64))].view(ML["f4e2m1"])
    b = np.arange(16, dtype=np.uint8)[rng.integers(0, 16, (64, 32))].view(ML["f4e2m1"])
    if ts == "ue8m0":
        sa = rng.integers(125, 130, (64, 64 // v)).astype(np.uint8).view(ML["ue8m0"])
        sb = rng.integers(125, 130, (64 // v, 32)).astype(np.uint8).view(ML["ue8m0"])
    else:
        pick = np.array([0.25, 0.375, 0.5, 0.75, 1, 1.5, 2, 3])
        sa = rng.choice(pick, (64, 64 // v)).astype(ML["f8e4m3"])
        sb = rng.choice(pick, (64 // v, 32)).astype(ML["f8e4m3"])
    c = np.zeros((64, 32), np.float32)
    mod.mmp[(1, 1)](tilelang.pack_f4(a), sa, tilelang.pack_f4(b, axis=0), sb, c)
    want = (a.astype(np.float64) * np.repeat(sa.astype(np.float64), v, 1)) @ \
        (b.astype(np.float64) * np.repeat(sb.astype(np.float64), v, 0))
    assert np.array_equal(c, want.astype(np.float32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_120a"])
def test_exact_sums_give_the_exact_product(arch):
    """Elements ±1, ±0.5 and scales 2^-2 .. 2^2: every partial sum is a small multiple of
    2^-6, exact in f32, so the result is exactly NumPy's (sm_120a: e2m1 in the block-scaled
    mma.sync's 8-bit containers, an element in the wrong bits shows)."""
    src = KERNEL.replace("TA", "f4e2m1").replace("TB", "f4e2m1").replace("TS", "ue8m0") \
        .replace("V", "32")
    mod = tilelang.compile(src, arch=arch, backend="emulator", cache=False)
    rng = np.random.default_rng(3)
    a = rng.choice([-1.0, -0.5, 0.5, 1.0], (64, 64)).astype(ML["f4e2m1"])
    b = rng.choice([-1.0, -0.5, 0.5, 1.0], (64, 32)).astype(ML["f4e2m1"])
    sa = rng.integers(125, 130, (64, 2)).astype(np.uint8).view(ML["ue8m0"])
    sb = rng.integers(125, 130, (2, 32)).astype(np.uint8).view(ML["ue8m0"])
    c = np.zeros((64, 32), np.float32)
    mod.mms[(1, 1)](a, sa, b, sb, c)
    want = (a.astype(np.float64) * np.repeat(sa.astype(np.float64), 32, 1)) @ \
        (b.astype(np.float64) * np.repeat(sb.astype(np.float64), 32, 0))
    assert np.array_equal(c, want.astype(np.float32))


def test_batched():
    mod = tilelang.compile(BATCHED, arch="sm_80", backend="emulator", cache=False)
    rng = np.random.default_rng(4)
    a, b = _elements(rng, (2, 32, 64), "f8e4m3"), _elements(rng, (2, 64, 16), "f6e2m3")
    sa, sb = _scales(rng, (2, 32, 2), "ue8m0"), _scales(rng, (2, 2, 16), "ue8m0")
    c = np.zeros((2, 32, 16), np.float32)
    mod.mmb[(1,)](a, sa, b, sb, c)
    _check(c, a, sa, b, sb, 32, batched=True)


def _tiles_64(src: str, bk: int = 64) -> str:
    """examples/matmul_mxfp8.tile with 64 x 64 x `bk` tiles and four warps on every target
    (sm_100a's defaults are the warp-specialized ring's 128 x 128 x 128)."""
    out = src.replace("by_target(sm_100a = (192, 1, 1), default = (128, 1, 1))", "(128, 1, 1)") \
        .replace("const BK: i32 = by_target(sm_100a = 128, default = 64)", f"const BK: i32 = {bk}")
    out = out.replace("by_target(sm_100a = 128, default = 64)", "64")
    assert "by_target" not in out.split("//")[-1]
    return out


def test_the_software_path_in_the_ptx():
    """examples/matmul_mxfp8.tile at 64 x 64 x 64 on four warps: bf16 products (mma.sync on sm_80, wgmma on sm_90a,
    tcgen05 kind::f16 on sm_100a) and, on sm_100a only, the scales decoded by
    `cvt.rn.bf16x2.ue8m0x2` (the arch-specific feature keeps `.target sm_100a`)."""
    import pathlib
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    path = pathlib.Path(__file__).resolve().parents[4] / "examples" / "matmul_mxfp8.tile"
    ptx = {}
    for t in ("sm_80", "sm_90a", "sm_100a"):
        res = compile_source(_tiles_64(path.read_text("utf-8")), str(path),
                             CompileOptions(target=t), until="ptx")
        assert res.ok
        ptx[t] = res.ptx
    assert ptx["sm_80"].count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 32
    assert ptx["sm_100a"].count("tcgen05.mma.cta_group::1.kind::f16") == 4
    assert ptx["sm_90a"].count("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") == 4
    assert "cvt.rn.bf16x2.ue8m0x2" in ptx["sm_100a"] and ".target sm_100a" in ptx["sm_100a"]
    assert "ue8m0x2" not in ptx["sm_80"] + ptx["sm_90a"]


def _example_ptx(name: str, target: str) -> str:
    import pathlib
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    path = pathlib.Path(__file__).resolve().parents[4] / "examples" / name
    res = compile_source(path.read_text("utf-8"), str(path), CompileOptions(target=target),
                         until="ptx")
    assert res.ok
    return res.ptx


def test_the_block_scaled_mma_sync_in_the_ptx():
    """examples/matmul_mxfp8.tile on sm_120a: per K step of 64 each of the 2 x 2 warps issues
    2 m-tiles x 4 n-tiles x 2 k32 block-scaled instructions (16) with the scales from
    registers, one byte load per m-tile (2 x 2) and n-tile (4 x 2) and k32; no bf16 product,
    no scale decoding; the arch-specific instruction keeps `.target sm_120a`."""
    ptx = _example_ptx("matmul_mxfp8.tile", "sm_120a")
    instr = ("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"
             ".f32.e4m3.e4m3.f32.ue8m0")
    assert ptx.count(instr) == 16
    assert ptx.count("{0, 0}") == 32
    assert ptx.count("ld.shared.b8") == 12
    assert "bf16" not in ptx and "ue8m0x2" not in ptx
    assert ".target sm_120a" in ptx


def test_nvfp4_on_sm_120a_takes_the_block_scaled_mma_sync():
    """examples/matmul_nvfp4.tile on sm_120a: per K step of 64 elements (32 bytes) each of
    the 2 x 2 warps issues 2 m-tiles x 4 n-tiles of `m16n8k64...kind::mxf4nvf4.block_scale
    .scale_vec::4X...ue4m3` (8), each scale word one 32-bit load per m-tile (2) and n-tile
    (4: b_scale goes to shared memory transposed), no byte loads; no bf16 product, nothing
    unpacked."""
    ptx = _example_ptx("matmul_nvfp4.tile", "sm_120a")
    instr = ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X"
             ".f32.e2m1.e2m1.f32.ue4m3")
    assert ptx.count(instr) == 8
    assert ptx.count("ld.shared.b32") == 6 and ptx.count("ld.shared.b8") == 0
    assert "bf16" not in ptx and ".target sm_120a" in ptx


def _plan_text(name: str, target: str) -> str:
    import pathlib
    from tilelang.codegen.generate import kernel_plans
    from tilelang.codegen.plan.dump import format_plan
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    path = pathlib.Path(__file__).resolve().parents[4] / "examples" / name
    res = compile_source(path.read_text("utf-8"), str(path), CompileOptions(target=target),
                         until="tir")
    (kernel, plan), = kernel_plans(res.ir, CompileOptions(target=target))
    return format_plan(plan, kernel)


def test_the_plan_says_which_path():
    text = _plan_text("matmul_mxfp8.tile", "sm_120a")
    assert ("64x64: block-scaled mma.sync kind::mxf8f6f4 m16n8k32 scale_vec::1X .ue8m0: "
            "2 x 2 warps (R5)") in text
    assert "software dequantisation" not in text
    assert ("64x64: block-scaled mma.sync kind::mxf4nvf4 m16n8k64 scale_vec::4X .ue4m3: "
            "2 x 2 warps (R5)") in _plan_text("matmul_nvfp4.tile", "sm_120a")
    assert ("128x64: block-scaled tcgen05 kind::mxf4nvf4 m128n64k64 scale_vec::4X .ue4m3: "
            "1 instruction(s) per product, 128 TMEM columns (R5)") \
        in _plan_text("matmul_nvfp4.tile", "sm_100a")
    assert "software dequantisation: no block-scaled tensor-core instruction for sm_90a" \
        in _plan_text("matmul_nvfp4.tile", "sm_90a")
    assert "mma_scaled: software dequantisation: no block-scaled tensor-core instruction " \
        "for sm_80 in Tile (S1)" in _plan_text("matmul_mxfp8.tile", "sm_80")


TC5 = """
@launch(reqntid = (128, 1, 1))
kernel mms(a: Array[f8e4m3, 2], sa: Array[ue8m0, 2], b: Array[TB, 2], sb: Array[ue8m0, 2],
           c: Array[f32, 2]) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((128, BN), f32);
    for k in range(num_tiles(a, axis = 1, shape = (128, 64))) {
        let ta = load(a, index = (m, k), shape = (128, 64), padding = 0);
        let ts = load(sa, index = (m, k), shape = (128, 2), padding = 0);
        let tb = load(b, index = (k, n), shape = (64, BN), padding = 0);
        let us = load(sb, index = (k, n), shape = (2, BN), padding = 0);
        acc = mma_scaled(ta, ts, tb, us, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""


@pytest.mark.parametrize("bn,tb", [(64, "f8e4m3"), (32, "f8e5m2"), (128, "f8e4m3")])
def test_block_scaled_tcgen05_on_the_emulator(bn, tb):
    """sm_100a: a 128 x BN accumulator takes tcgen05.mma kind::mxf8f6f4.block_scale with the
    scales in tensor memory (N = 32, 64, 128: one, two, four scale columns of B); ragged
    (two blocks each way, K = 96 not a tile multiple)."""
    mod = tilelang.compile(TC5.replace("BN", str(bn)).replace("TB", tb), arch="sm_100a",
                           backend="emulator", cache=False)
    rng = np.random.default_rng(bn)
    m, n, k = 200, bn + 16, 96
    a, b = _elements(rng, (m, k), "f8e4m3"), _elements(rng, (k, n), tb)
    sa, sb = _scales(rng, (m, k // 32), "ue8m0"), _scales(rng, (k // 32, n), "ue8m0")
    c = np.zeros((m, n), np.float32)
    mod.mms[(2, 2)](a, sa, b, sb, c)
    _check(c, a, sa, b, sb, 32)


def test_block_scaled_tcgen05_exact():
    """Exact sums (as test_exact_sums_give_the_exact_product_f8) on sm_100a's tcgen05."""
    mod = tilelang.compile(TC5.replace("BN", "64").replace("TB", "f8e4m3"), arch="sm_100a",
                           backend="emulator", cache=False)
    rng = np.random.default_rng(6)
    vals = [-1.0, -0.5, -0.25, 0.25, 0.5, 1.0]
    a = rng.choice(vals, (128, 64)).astype(ML["f8e4m3"])
    b = rng.choice(vals, (64, 64)).astype(ML["f8e4m3"])
    sa = rng.integers(125, 130, (128, 2)).astype(np.uint8).view(ML["ue8m0"])
    sb = rng.integers(125, 130, (2, 64)).astype(np.uint8).view(ML["ue8m0"])
    c = np.zeros((128, 64), np.float32)
    mod.mms[(1, 1)](a, sa, b, sb, c)
    want = (a.astype(np.float64) * np.repeat(sa.astype(np.float64), 32, 1)) @ \
        (b.astype(np.float64) * np.repeat(sb.astype(np.float64), 32, 0))
    assert np.array_equal(c, want.astype(np.float32))


def test_block_scaled_tcgen05_in_the_ptx_and_plan():
    """Two block-scaled tcgen05.mma per K step of 64, the scale words stored to tensor
    memory by every warp (A: 4 columns, B: 2 for N = 64), no bf16 product or scale decoding;
    the plan says so. The examples' 64-row accumulators stay on the software path (S4)."""
    from tilelang.codegen.generate import kernel_plans
    from tilelang.codegen.plan.dump import format_plan
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    src = TC5.replace("BN", "64").replace("TB", "f8e4m3")
    opts = CompileOptions(target="sm_100a")
    ptx = compile_source(src, "t.tile", opts, until="ptx").ptx
    assert ptx.count("tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X") == 2
    assert ptx.count("tcgen05.st.sync.aligned.32x32b.x4.b32") == 1
    assert ptx.count("tcgen05.st.sync.aligned.32x32b.x2.b32") == 1
    assert "bf16" not in ptx and "ue8m0x2" not in ptx and "kind::f16" not in ptx
    res = compile_source(src, "t.tile", opts, until="tir")
    (kernel, plan), = kernel_plans(res.ir, opts)
    assert ("128x64: block-scaled tcgen05 kind::mxf8f6f4 m128n64k32 scale_vec::1X .ue8m0: "
            "2 instruction(s) per product, 128 TMEM columns (R5)") in format_plan(plan, kernel)
    res = compile_source(_tiles_64(_example("matmul_mxfp8.tile")), "m.tile", opts,
                         until="tir")
    (kernel, plan), = kernel_plans(res.ir, opts)
    assert ("mma_scaled: software dequantisation: tcgen05's block-scaled form takes a 128 x "
            "32..256 accumulator, K up to 128 and four (or six) warps, not 64 x 64, K = 64, "
            "128 threads (S4)") in format_plan(plan, kernel)


def _example(name: str) -> str:
    import pathlib
    return (pathlib.Path(__file__).resolve().parents[4] / "examples" / name).read_text("utf-8")


def test_the_example_takes_the_block_scaled_ring_on_sm_100a():
    """examples/matmul_mxfp8.tile at sm_100a's defaults (128 x 128 x 128, 192 threads): the
    warp-specialized ring (plan/loops.py R12), per stage one tcgen05.cp of A's scales and one
    of B's, four block-scaled MMAs (K = 128), the scale bytes loaded by the producer warp
    (one u32 a row of A, 4 x 4 bytes of B a lane: the arrays' default facts make a row of
    a_scale 16-byte aligned); no bf16 product."""
    ptx = _example_ptx("matmul_mxfp8.tile", "sm_100a")
    assert ptx.count("tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X") == 4
    assert ptx.count("tcgen05.cp.cta_group::1.32x128b.warpx4") == 2
    assert ptx.count("ld.global.u8") == 16 and ptx.count("ld.global.u32") == 4
    assert "kind::f16" not in ptx and "bf16" not in ptx and "tcgen05.st.sync.aligned.32x32b.x4" \
        not in ptx
    text = _plan_text("matmul_mxfp8.tile", "sm_100a")
    assert "pipelined (tcgen05), TMA ring of 3 stages x 33 KB" in text
    assert "staged by the producer warp's lanes, tcgen05.cp into tensor memory (R12)" in text
    assert "warp-specialized" in text


def _loop_per_mma(ptx: str, target: str, op: str) -> float:
    """SASS instructions of the K loop (the backward-branch loop with the most `op`) per
    `op` instruction, from nvJitLink's cubin through cuobjdump."""
    from tilelang.codegen.target.link import link_ptx
    from tilelang.targets import get_target
    from tilelang.tools import sass
    link = link_ptx(ptx, get_target(target))
    (name,) = link.resources
    instrs = sass.disassemble(link.cubin)[name]

    def count(lp):
        return sum(i.op.split(".")[0] == op for i in lp.instrs)
    lp = max(sass.loops(instrs), key=count)
    return len(lp.instrs) / count(lp)


@pytest.mark.parametrize("target,op,bk,fixture", [
    ("sm_120a", "QMMA", 128, "triton_scaled_matmul_sm120.ptx"),
    ("sm_100a", "UTCQMMA", 64, "triton_scaled_matmul_bk64_sm100.ptx")])
def test_no_more_sass_per_k_step_than_triton(target, op, bk, fixture):
    """examples/matmul_mxfp8.tile at Triton 3.9's `tl.dot_scaled` fixture tile (128 x 64 x
    BK, 4 warps; benchmarks/triton_ref/gen_scaled_matmul_ptx.py), both on the block-scaled
    instruction with the same count per K-step, assembled by the same nvJitLink: measured
    sm_120a 606 SASS a K-step against 1385, sm_100a 235 against 684
    (benchmarks/blackwell_static.py's block-scaled table)."""
    import pathlib
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    from tilelang.tools import sass
    if not sass.tools_available():
        pytest.skip("cuobjdump/nvdisasm not installed")
    root = pathlib.Path(__file__).resolve().parents[4]
    src = _tiles_64((root / "examples" / "matmul_mxfp8.tile").read_text("utf-8"), bk) \
        .replace("const BM: i32 = 64", "const BM: i32 = 128")
    ours = compile_source(src, "m.tile", CompileOptions(target=target), until="ptx").ptx
    theirs = (root / "tests" / "emulator" / "fixtures" / fixture).read_text()
    assert _loop_per_mma(ours, target, op) <= _loop_per_mma(theirs, target, op)


@pytest.mark.parametrize("target,op,bk,fixture", [
    ("sm_120a", "OMMA", 128, "triton_scaled_matmul_nvfp4_sm120.ptx"),
    ("sm_100a", "UTCOMMA", 64, "triton_scaled_matmul_nvfp4_bk64_sm100.ptx")])
def test_nvfp4_no_more_sass_per_k_step_than_triton(target, op, bk, fixture):
    """examples/matmul_nvfp4.tile at Triton 3.9's NVFP4 `tl.dot_scaled` fixture tile (128 x 64
    x BK, 4 warps; gen_scaled_matmul_ptx.py --fmt e2m1 --scale e4m3), both on the FP4
    block-scaled instruction (OMMA: mma.sync m16n8k64; UTCOMMA: tcgen05 kind::mxf4nvf4), the
    same count per K-step, assembled by the same nvJitLink: measured SASS per instruction
    sm_120a 12.9 against 22.6, sm_100a 320 against 335 (benchmarks/blackwell_static.py)."""
    import pathlib
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    from tilelang.tools import sass
    if not sass.tools_available():
        pytest.skip("cuobjdump/nvdisasm not installed")
    root = pathlib.Path(__file__).resolve().parents[4]
    src = (root / "examples" / "matmul_nvfp4.tile").read_text("utf-8") \
        .replace("const BM: i32 = by_target(sm_100a = 128, default = 64)",
                 "const BM: i32 = 128") \
        .replace("const BK: i32 = 64", f"const BK: i32 = {bk}")
    ours = compile_source(src, "m.tile", CompileOptions(target=target), until="ptx").ptx
    theirs = (root / "tests" / "emulator" / "fixtures" / fixture).read_text()
    assert _loop_per_mma(ours, target, op) <= _loop_per_mma(theirs, target, op)


def test_the_software_path_no_more_sass_per_k_step_than_triton():
    """examples/matmul_mxfp8.tile at 64 x 64 x 64 on four warps on sm_100a, where neither
    compiler has a block-scaled tcgen05 form (M = 64): both dequantize to bf16 and issue
    tcgen05 kind::f16 (benchmarks/triton_ref/gen_scaled_matmul_ptx.py --bm 64 --bk 64).
    Measured: 445 SASS a K-step (4 UTCHMMA) against Triton 3.9's 490 (627 before the f8
    codes were converted two at a time from their loaded words)."""
    import pathlib
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    from tilelang.tools import sass
    if not sass.tools_available():
        pytest.skip("cuobjdump/nvdisasm not installed")
    root = pathlib.Path(__file__).resolve().parents[4]
    src = _tiles_64((root / "examples" / "matmul_mxfp8.tile").read_text("utf-8"))
    ours = compile_source(src, "m.tile", CompileOptions(target="sm_100a"), until="ptx").ptx
    assert "kind::f16" in ours and "block_scale" not in ours
    theirs = (root / "tests" / "emulator" / "fixtures" /
              "triton_scaled_matmul_bm64_sm100.ptx").read_text()
    assert "kind::f16" in theirs and "block_scale" not in theirs
    assert _loop_per_mma(ours, "sm_100a", "UTCHMMA") <= \
        _loop_per_mma(theirs, "sm_100a", "UTCHMMA")


LAYOUTS = """
@launch(reqntid = (128, 1, 1))
kernel mms(a: Array[f8e4m3, 2], sa: Array[ue8m0, 2], b: Array[f8e4m3, 2], sb: Array[ue8m0, 2],
           c: Array[f32, 2]) {
    let ta = load(a, index = (0, 0), shape = (128, 64), padding = 0);
    let tb = load(b, index = (0, 0), shape = (64, 64), padding = 0);
    store(c, index = (0, 0), tile = mma_scaled(ta, SA, tb, SB, zeros((128, 64), f32)));
}
"""


@pytest.mark.parametrize("arch", ["sm_120a", "sm_100a"])
@pytest.mark.parametrize("how", ["transposed", "broadcast", "constant"])
def test_scales_in_other_layouts(arch, how):
    """The block-scaled instructions take scale tiles in any register layout (a transposed
    load, a broadcast column, a converted constant): they pass through shared memory."""
    sa_src, sb_src = {
        "transposed": ("load(sa, index = (0, 0), shape = (128, 2))",
                       "transpose(load(sb, index = (0, 0), shape = (64, 2)))"),
        "broadcast": ("broadcast_to(load(sa, index = (0, 0), shape = (128, 1)), (128, 2))",
                      "load(sb, index = (0, 0), shape = (2, 64))"),
        "constant": ("astype(full((128, 2), 0.5, f32), ue8m0)",
                     "astype(full((2, 64), 4.0, f32), ue8m0)")}[how]
    src = LAYOUTS.replace("SA", sa_src).replace("SB", sb_src)
    mod = tilelang.compile(src, arch=arch, backend="emulator", cache=False)
    rng = np.random.default_rng(2)
    a, b = _elements(rng, (128, 64), "f8e4m3"), _elements(rng, (64, 64), "f8e4m3")
    sa = _scales(rng, (128, 2), "ue8m0")
    sb = _scales(rng, (64, 2) if how == "transposed" else (2, 64), "ue8m0")
    c = np.zeros((128, 64), np.float32)
    mod.mms[(1,)](a, sa, b, sb, c)
    want_sa, want_sb = {
        "transposed": (sa, sb.T),
        "broadcast": (np.repeat(sa[:, :1], 2, 1), sb),
        "constant": (np.full((128, 2), 0.5), np.full((2, 64), 4.0))}[how]
    _check(c, a, np.asarray(want_sa, np.float64), b, np.asarray(want_sb, np.float64), 32)


RING = """
@launch(reqntid = (192, 1, 1))
kernel mms(a: Array[f8e4m3, 2], sa: Array[ue8m0, 2], b: Array[TB, 2], sb: Array[ue8m0, 2],
           c: Array[f32, 2]) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((128, BN), f32);
    for k in range(num_tiles(a, axis = 1, shape = (128, BK))) {
        let ta = load(a, index = (m, k), shape = (128, BK), padding = 0);
        let ts = load(sa, index = (m, k), shape = (128, floordiv(BK, 32)), padding = 0);
        let tb = load(b, index = (k, n), shape = (BK, BN), padding = 0);
        let us = load(sb, index = (k, n), shape = (floordiv(BK, 32), BN), padding = 0);
        acc = mma_scaled(ta, ts, tb, us, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""


@pytest.mark.parametrize("bn,bk,tb,k", [(128, 128, "f8e4m3", 416), (64, 64, "f8e5m2", 224),
                                        (32, 32, "f8e4m3", 96), (128, 128, "f8e4m3", 512),
                                        (64, 64, "f8e4m3", 512)])
def test_block_scaled_tcgen05_ring_on_the_emulator(bn, bk, tb, k):
    """sm_100a, 192 threads: the warp-specialized ring (plan/loops.py R12) with TMA copies
    of the operands, the scales staged by the producer warp and copied into tensor memory by
    tcgen05.cp, more iterations than stages (K = 416: 4 iterations of 128, the last ragged;
    K = 96 in 3 of 32), N from 32 to 128 (a 128 x 256 f32 accumulator is more registers
    than four epilogue warps have: E0783); ragged M and N (two blocks each way). K = 512:
    rows of a_scale 16 bytes, so A's scales of a row load as one u32 (BK 128) or u16 (BK 64)
    (tcgen05_scaled_ring._tile_words), else byte by byte."""
    src = RING.replace("BN", str(bn)).replace("BK", str(bk)).replace("TB", tb)
    mod = tilelang.compile(src, arch="sm_100a", backend="emulator", cache=False)
    rng = np.random.default_rng(bn + bk)
    m, n = 200, bn + 16
    a, b = _elements(rng, (m, k), "f8e4m3"), _elements(rng, (k, n), tb)
    sa, sb = _scales(rng, (m, k // 32), "ue8m0"), _scales(rng, (k // 32, n), "ue8m0")
    c = np.zeros((m, n), np.float32)
    mod.mms[(2, 2)](a, sa, b, sb, c)
    _check(c, a, sa, b, sb, 32)


@pytest.mark.parametrize("ta,tb,four,six", [("f4e2m1", "f6e2m3", 8, 16),
                                            ("f6e3m2", "f8e4m3", 0, 8),
                                            ("f8e4m3", "f4e2m1", 16, 0)])
def test_f6_f4_in_8_bit_containers_on_sm_120a(ta, tb, four, six):
    """sm_120a multiplies f6/f4 operands (mixed with f8 or not) on the block-scaled mma.sync:
    the instruction names both types, and each fragment register of a 4-bit operand is
    shifted left by 2 and masked (e2m1 in bits 2-5 of each byte), a 6-bit one masked (bits
    0-5): per K step of 64 in the 64 x 32 kernel, 8 A and 16 B fragment registers (LLVM
    computes each conversion once)."""
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    name = {"f8e4m3": "e4m3", "f6e2m3": "e2m3", "f6e3m2": "e3m2", "f4e2m1": "e2m1"}
    src = KERNEL.replace("TA", ta).replace("TB", tb).replace("TS", "ue8m0").replace("V", "32")
    ptx = compile_source(src, "t.tile", CompileOptions(target="sm_120a"), until="ptx").ptx
    instr = (f"mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"
             f".f32.{name[ta]}.{name[tb]}.f32.ue8m0")
    assert ptx.count(instr) == 8
    assert "bf16" not in ptx
    assert ptx.count("1010580540") == four          # 0x3C3C3C3C
    assert ptx.count("1061109567") == six           # 0x3F3F3F3F


@pytest.mark.parametrize("how", ["transposed", "broadcast"])
def test_packed_fp4_scales_in_other_layouts(how):
    """sm_120a's FP4 form writes b_scale transposed to shared memory (a column's four
    scales adjacent): from a transposed load and from a broadcast row as from a plain one."""
    sb_src = {"transposed": "transpose(load(sb, index = (0, 0), shape = (32, 4)))",
              "broadcast": "broadcast_to(load(sb, index = (0, 0), shape = (1, 32)), (4, 32))"}
    src = PACKED.replace("TS", "f8e4m3").replace("V", "16").replace(
        "load(sb, index = (k, n), shape = (floordiv(64, 16), 32), padding = 0)", sb_src[how])
    assert sb_src[how] in src
    mod = tilelang.compile(src, arch="sm_120a", backend="emulator", cache=False)
    rng = np.random.default_rng(4)
    a, b = _elements(rng, (64, 64), "f4e2m1"), _elements(rng, (64, 32), "f4e2m1")
    sa = _scales(rng, (64, 4), "f8e4m3")
    sb = _scales(rng, (32, 4) if how == "transposed" else (1, 32), "f8e4m3")
    want_sb = sb.T if how == "transposed" else np.repeat(sb, 4, 0)
    c = np.zeros((64, 32), np.float32)
    mod.mmp[(1, 1)](tilelang.pack_f4(a), sa, tilelang.pack_f4(b, axis=0), sb, c)
    _check(c, a, sa, b, np.asarray(want_sb.astype(np.float64)), 16)


@pytest.mark.parametrize("arch", ["sm_120a", "sm_100a"])
def test_nvfp4_example_at_its_defaults(arch):
    """examples/matmul_nvfp4.tile at its default tiles on the block-scaled instruction,
    ragged in M, N and K (the loads pad bytes with two zeros and scales with 0), against
    NumPy: f8e4m3 scales over their whole range, within one f32 rounding per product term."""
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[4] / "examples" / "matmul_nvfp4.tile"
    mod = tilelang.compile(str(path), arch=arch, backend="emulator", cache=False)
    rng = np.random.default_rng(11)
    m, n, k = 96, 80, 160
    a, b = _elements(rng, (m, k), "f4e2m1"), _elements(rng, (k, n), "f4e2m1")
    sa = rng.uniform(0.01, 400, (m, k // 16)).astype(ML["f8e4m3"])
    sb = rng.uniform(0.01, 400, (k // 16, n)).astype(ML["f8e4m3"])
    c = np.zeros((m, n), np.float32)
    bm = 128 if arch == "sm_100a" else 64               # by_target(sm_100a = 128, ...)
    mod.matmul_nvfp4[(-(-m // bm), 2)](tilelang.pack_f4(a), sa, tilelang.pack_f4(b, axis=0),
                                       sb, c)
    _check(c, a, sa, b, sb, 16)


TC5_PACKED = """
@launch(reqntid = (128, 1, 1))
kernel mmq(a: Array[f4e2m1x2, 2], sa: Array[TS, 2], b: Array[f4e2m1x2, 2], sb: Array[TS, 2],
           c: Array[f32, 2]) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((128, BN), f32);
    for k in range(num_tiles(a, axis = 1, shape = (128, KB))) {
        let ta = load(a, index = (m, k), shape = (128, KB), padding = 0);
        let ts = load(sa, index = (m, k), shape = (128, floordiv(2 * KB, V)), padding = 0);
        let tb = load(b, index = (k, n), shape = (KB, BN), padding = 0);
        let us = load(sb, index = (k, n), shape = (floordiv(2 * KB, V), BN), padding = 0);
        acc = mma_scaled(ta, ts, tb, us, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""


@pytest.mark.parametrize("ts,v,kb,bn,kind", [
    ("ue8m0", 32, 64, 64, "kind::mxf4.block_scale.scale_vec::2X"),        # two per product
    ("f8e4m3", 16, 32, 128, "kind::mxf4nvf4.block_scale.scale_vec::4X"),
    ("f8e4m3", 16, 32, 32, "kind::mxf4nvf4.block_scale.scale_vec::4X")],
    ids=["mxfp4-k128-n64", "nvfp4-k64-n128", "nvfp4-k64-n32"])
def test_packed_fp4_tcgen05_exact(ts, v, kb, bn, kind):
    """sm_100a: packed FP4 on `tcgen05.mma...kind::mxf4` (MXFP4: K = 128 elements a tile is
    two instructions, the second reading scale bytes 2-3) and `kind::mxf4nvf4 ...
    scale_vec::4X` (NVFP4, ue4m3 scales); every code in a and b, scales differing per row,
    column and block, every partial sum exact in f32: equal to NumPy's product. Ragged in
    N (two column blocks, the second partial)."""
    src = TC5_PACKED.replace("TS", ts).replace("V", str(v)).replace("KB", str(kb)) \
        .replace("BN", str(bn))
    mod = tilelang.compile(src, arch="sm_100a", backend="emulator", cache=False)
    rng = np.random.default_rng(kb + bn)
    m, n, k = 128, bn + bn // 2, 4 * kb
    a = np.arange(16, dtype=np.uint8)[rng.integers(0, 16, (m, k))].view(ML["f4e2m1"])
    b = np.arange(16, dtype=np.uint8)[rng.integers(0, 16, (k, n))].view(ML["f4e2m1"])
    if ts == "ue8m0":
        sa = rng.integers(125, 130, (m, k // v)).astype(np.uint8).view(ML["ue8m0"])
        sb = rng.integers(125, 130, (k // v, n)).astype(np.uint8).view(ML["ue8m0"])
    else:
        pick = np.array([0.25, 0.375, 0.5, 0.75, 1, 1.5, 2, 3])
        sa = rng.choice(pick, (m, k // v)).astype(ML["f8e4m3"])
        sb = rng.choice(pick, (k // v, n)).astype(ML["f8e4m3"])
    c = np.zeros((m, n), np.float32)
    mod.mmq[(1, 2)](tilelang.pack_f4(a), sa, tilelang.pack_f4(b, axis=0), sb, c)
    want = (a.astype(np.float64) * np.repeat(sa.astype(np.float64), v, 1)) @ \
        (b.astype(np.float64) * np.repeat(sb.astype(np.float64), v, 0))
    assert np.array_equal(c, want.astype(np.float32))
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(src, "t.tile", CompileOptions(target="sm_100a"), until="ptx")
    assert res.ok and res.ptx.count(f"tcgen05.mma.cta_group::1.{kind}") == 2 * kb // 64
    assert "bf16" not in res.ptx
