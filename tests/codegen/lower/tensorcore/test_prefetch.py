"""A loop whose body does more than load -> one product (attention) copies its product
operands one iteration ahead into a ring of images of their own (lower/tensorcore/mma_prefetch.py), by
TMA or cp.async: results on the emulator against NumPy over enough iterations for the ring to
wrap, ragged and empty loops, under the race checker (which checks the cp.async rings; it
does not model mbarriers, so a TMA ring's launch is checked by its results), and the PTX of
the loop (one barrier per iteration, the copies of the next iteration before the products)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tilelang.tools.sass import ptx_loop_lines
from wgmma_support import attention_reference, run

ROOT = Path(__file__).resolve().parents[4]
TMA_LOAD = r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global"

# two products per iteration with element-wise work between them, both B operands loaded
# in the loop (one through a transpose), A kept from before the loop
TWO = """
@launch(reqntid = (128, 1, 1))
kernel two(a: Array[f16, 2], k: Array[f16, 2], v: Array[f16, 2], c: Array[f32, 2], n: i32) {
    let ta = load(a, index = (0, 0), shape = (64, 64));
    var acc = zeros((64, 64), f32);
    for j in range(n) {
        let tk = load(k, index = (j, 0), shape = (64, 64), padding = 0);
        let tv = load(v, index = (j, 0), shape = (64, 64), padding = 0);
        let s = mma(ta, transpose(tk), zeros((64, 64), f32)) * 0.25;
        acc = mma(astype(s, f16), tv, acc);
    }
    store(c, index = (0, 0), tile = acc);
}
"""


def _two_reference(a, k, v, n):
    pad = -k.shape[0] % 64
    kk = np.concatenate([k, np.zeros((pad, 64), k.dtype)]).astype(np.float64)
    vv = np.concatenate([v, np.zeros((pad, 64), v.dtype)]).astype(np.float64)
    acc = np.zeros((64, 64))
    for j in range(0, 64 * n, 64):
        s = (a.astype(np.float64) @ kk[j:j + 64].T * 0.25).astype(np.float16)
        acc = s.astype(np.float64) @ vv[j:j + 64] + acc
    return acc


@pytest.mark.parametrize("tma", [True, False])
@pytest.mark.parametrize("rows,n", [(64 * 5, 5), (200, 4), (64, 0)])
def test_two_products_per_iteration(rows, n, tma):
    # 5 iterations: the two-stage ring wraps; 200 rows: a ragged last tile (zero-filled);
    # n = 0: the loop never runs (cp.async: the prologue's copies are waited for at the exit;
    # TMA: none is issued). TMA is the default; without it, cp.async
    rng = np.random.default_rng(rows)
    a = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    k = rng.integers(-3, 4, (rows, 64)).astype(np.float16)
    v = rng.integers(-3, 4, (rows, 64)).astype(np.float16)
    arrays = {"a": a, "k": k, "v": v, "c": np.full((64, 64), np.nan, np.float32)}
    res, _ = run(TWO, "two", arrays, (1,), scalars=[np.int32(n)], race_check=True, tma=tma)
    assert np.array_equal(arrays["c"], _two_reference(a, k, v, n))
    ptx = res.ptx
    lines = ptx.splitlines()
    text = "\n".join(lines[n - 1] for n in ptx_loop_lines(ptx))
    # the ring is its own buffer of two stages of two 8 KiB images (and, with TMA, a 64-bit
    # mbarrier per stage, in whole KiB), more than half the static limit: in dynamic shared
    # memory, which the launch provides; one barrier per iteration; nothing exchanged
    ring = 32768 + (1024 if tma else 0)
    assert re.search(r"\.extern \.shared \.align 1024 \.b8 __tile_dyn_two\[\];", ptx)
    assert "__tile_kept" not in ptx                 # A is kept in registers, not an image
    (art,) = res.codegen.kernels
    assert art.dynamic_smem == ring
    assert text.count("bar.sync") == 1 and "st.shared" not in text
    if tma:
        # two tiles (one 128-byte panel each) per stage, spread over warps 0 and 1: one copy
        # in the prologue's issue and one in the loop's (LLVM places that branch, and the
        # phase wait's spin, after the loop's lines), each warp announcing its own bytes on
        # a stage mbarrier that expects two arrivals; nothing by cp.async
        assert len(re.findall(TMA_LOAD, ptx)) == 2 and "cp.async.cg" not in ptx
        assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 2;", ptx)) == 2
        assert len(re.findall(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, "
                              r"\[%r\d+\], 8192;", ptx)) == 2
        assert "mbarrier.try_wait.parity" in ptx
    else:
        # one wait for the copies, the next iteration's copies (two 8 KiB tiles over 128
        # threads: 4 chunks of 16 bytes each per thread), then the MMAs
        assert text.count("cp.async.wait_group") == 1
        assert text.count("cp.async.cg.shared.global") == 8
        assert text.index("cp.async.commit_group") < text.index("wgmma.mma_async")


def test_attention_loop_is_prefetched():
    from tilelang.diagnostics import render_all
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    src = (ROOT / "examples" / "attention.tile").read_text().replace(
        "reqntid = by_target(sm_90a = (256, 1, 1), default = (128, 1, 1))",
        "reqntid = (128, 1, 1)")                    # 4 warps, not sm_90a's default 8
    res = compile_source(src, "attention.tile", CompileOptions(
        target="sm_90a", defines={"BM": "64", "BN": "64", "D": "64", "CAUSAL": "false"}),
        kernels=["attention"], until="ptx")
    assert res.ok, render_all(res.diagnostics)
    lines = res.ptx.splitlines()
    text = "\n".join(lines[n - 1] for n in ptx_loop_lines(res.ptx))
    # one barrier; warps 0 and 1 copy K and V by TMA, one each (the prologue's key tile
    # and, in the loop, the next one); 8 MMAs. Loop splitting (docs/ir.md) leaves the ragged
    # last key tile to a second loop, whose ring (dynamic shared memory, as the first's) has
    # the first's bytes: TMA there too, and the kernel's dynamic shared memory is one ring
    assert text.count("bar.sync") == 1 and "fence.proxy.async" not in text
    assert len(re.findall(TMA_LOAD, res.ptx)) == 4 and "cp.async.cg" not in res.ptx
    assert text.count("wgmma.mma_async") == 8
    (art,) = res.codegen.kernels
    assert art.dynamic_smem == 2 * 16384 + 1024 and art.static_smem < 48 * 1024


ATTENTION_SMALL = ROOT / "examples" / "attention.tile"


@pytest.mark.parametrize("d,bn,causal,seq", [(64, 64, "false", 200), (128, 32, "true", 100)])
def test_attention_under_the_race_checker(d, bn, causal, seq):
    # several key tiles per block (the ring wraps), ragged; the emulator's race checker sees
    # every shared-memory access of the ring, the kept Q image and the exchanges
    rng = np.random.default_rng(d)
    q, k, v = (rng.standard_normal((1, seq, d)).astype(np.float16) for _ in range(3))
    arrays = {"q": q, "k": k, "v": v, "o": np.full((1, seq, d), np.nan, np.float16)}
    scale = 1.0 / np.sqrt(d)
    defines = {"BM": "64", "BN": str(bn), "D": str(d), "CAUSAL": causal}
    run(ATTENTION_SMALL.read_text(), "attention", arrays, (-(-seq // 64), 1),
        scalars=[np.float32(scale)], defines=defines, race_check=True)
    want = attention_reference(q[0], k[0], v[0], scale, causal)
    got = arrays["o"][0].astype(np.float64)
    assert np.abs(got - want).max() / np.abs(want).max() < 4e-3


RAGGED = """
@launch(reqntid = (128, 1, 1))
kernel mm(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2]) {
    var acc = zeros((64, 64), f32);
    for kk in range(num_tiles(a, axis = 1, shape = (64, 64))) {
        let ta = load(a, index = (bid(0), kk), shape = (64, 64), padding = 0);
        let tb = load(b, index = (kk, bid(1)), shape = (64, 64), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (bid(0), bid(1)), tile = acc);
}
"""


def test_one_operand_prefetched_the_other_through_registers():
    # a's rows are 132 bytes (no 16-byte facts): no ring of both operands, a goes through
    # registers every step while b (aligned) is copied a step ahead by TMA
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, (100, 66)).astype(np.float16)
    b = rng.integers(-3, 4, (66, 72)).astype(np.float16)
    arrays = {"a": a, "b": b, "c": np.full((100, 72), np.nan, np.float32)}
    res, _ = run(RAGGED, "mm", arrays, (2, 2), race_check=True)
    assert "b" in [m.array for m in res.codegen.kernel("mm").tensor_maps]
    assert "a" not in [m.array for m in res.codegen.kernel("mm").tensor_maps]
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))


def test_a_replicating_warp_group_does_not_copy_again():
    # 384 threads: the layouts use 256, the third warp group replicates the first; only the
    # block's thread 0 (not its replica, thread 256) may announce and issue a stage's TMA
    src = TWO.replace("reqntid = (128, 1, 1)", "reqntid = (384, 1, 1)")
    rng = np.random.default_rng(9)
    a = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    k = rng.integers(-3, 4, (200, 64)).astype(np.float16)
    v = rng.integers(-3, 4, (200, 64)).astype(np.float16)
    arrays = {"a": a, "k": k, "v": v, "c": np.full((64, 64), np.nan, np.float32)}
    res, rep = run(src, "two", arrays, (1,), scalars=[np.int32(4)])
    assert np.array_equal(arrays["c"], _two_reference(a, k, v, 4))
    # 4 stages announced, 2 tiles each, by one thread
    ops = rep.instructions
    assert ops["mbarrier.arrive.expect_tx.shared::cta.b64"] == 4
    assert sum(n for o, n in ops.items() if re.match(TMA_LOAD, o)) == 8


@pytest.mark.parametrize("bm,threads,ring", [(64, 128, 2 * 32768 + 1024),
                                             (128, 256, 2 * 65536 + 1024)])
def test_attention_ring_beyond_the_static_limit_is_dynamic(bm, threads, ring):
    # at D = 128 a stage of K and V is 2 x BN x 128 x 2 bytes: two stages do not fit in the
    # 48 KiB a block may declare statically; the ring is dynamic shared memory (one `.extern`
    # array, shared by the split loop's two parts), which the artifact tells the launch, and
    # its copies are TMA (they were cp.async while the ring had to be static)
    from tilelang.diagnostics import render_all
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    src = (ROOT / "examples" / "attention.tile").read_text().replace(
        "reqntid = by_target(sm_90a = (256, 1, 1), default = (128, 1, 1))", f"reqntid = ({threads}, 1, 1)")
    opts = CompileOptions(target="sm_90a", defines={"BM": str(bm), "BN": str(bm), "D": "128"})
    res = compile_source(src, "attention.tile", opts, kernels=["attention"], until="ptx")
    assert res.ok, render_all(res.diagnostics)
    plan = compile_source(src, "attention.tile", opts, kernels=["attention"], until="plan").plan
    (art,) = res.codegen.kernels
    assert art.dynamic_smem == ring and art.static_smem <= 48 * 1024
    assert re.search(r"\.extern \.shared \.align 1024 \.b8 __tile_dyn_attention\[\];", res.ptx)
    # K and V are two 128-byte panels each: four copies per stage, one per warp (each of the
    # two loops' prologue and body issues one), on mbarriers that expect four arrivals
    assert "cp.async.cg" not in res.ptx and len(re.findall(TMA_LOAD, res.ptx)) == 4
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 4;", res.ptx)) == 4
    assert plan.count(f"TMA ring of 2 stages x {ring // 2048} KB in dynamic shared memory") == 2
    assert plan.count("copies spread over the warps, one each") == 2


# two products whose A operands are both computed before the loop (attention backward's Q
# and dO in its dQ kernel): each is stored into an image of its own once, before the loop
KEPT_TWO = """
@launch(reqntid = (128, 1, 1))
kernel kept_two(a: Array[f16, 2], g: Array[f16, 2], k: Array[f16, 2], v: Array[f16, 2],
                w: Array[f16, 2], c: Array[f32, 2], n: i32) {
    let ta = load(a, index = (0, 0), shape = (64, 64));
    let tg = load(g, index = (0, 0), shape = (64, 64));
    var acc = zeros((64, 64), f32);
    for j in range(n) {
        let tk = load(k, index = (j, 0), shape = (64, 64), padding = 0);
        let tv = load(v, index = (j, 0), shape = (64, 64), padding = 0);
        let tw = load(w, index = (j, 0), shape = (64, 64), padding = 0);
        let s = mma(ta, transpose(tk), zeros((64, 64), f32));
        let d = mma(tg, transpose(tv), zeros((64, 64), f32));
        acc = mma(astype(s - d, f16), tw, acc);
    }
    store(c, index = (0, 0), tile = acc);
}
"""


@pytest.mark.parametrize("n", [3, 0])
def test_two_register_operands_kept_before_the_loop(n):
    # small integers: every product and sum is exact in f16 / f32, so the result is NumPy's
    rng = np.random.default_rng(n)
    a, g, k, v, w = (rng.integers(-3, 4, shape).astype(np.float16)
                     for shape in ((64, 64), (64, 64), (192, 64), (192, 64), (192, 64)))
    arrays = {"a": a, "g": g, "k": k, "v": v, "w": w,
              "c": np.full((64, 64), np.nan, np.float32)}
    res, _ = run(KEPT_TWO, "kept_two", arrays, (1,), scalars=[np.int32(n)], race_check=True)
    want = np.zeros((64, 64))
    a64, g64 = a.astype(np.float64), g.astype(np.float64)
    for j in range(0, 64 * n, 64):
        kk, vv, ww = (x[j:j + 64].astype(np.float64) for x in (k, v, w))
        want += (a64 @ kk.T - g64 @ vv.T) @ ww
    assert np.array_equal(arrays["c"], want)
    ptx = res.ptx
    lines = ptx.splitlines()
    text = "\n".join(lines[i - 1] for i in ptx_loop_lines(ptx))
    # both A images are filled before the loop: no shared store and one barrier inside it
    assert "st.shared" not in text and text.count("bar.sync") == 1
    # the two products from zeros start with scale-d false (a predicate that is 0), the
    # carried one with scale-d true: no register is zeroed for them
    wg = [ln for ln in text.splitlines() if "wgmma.mma_async" in ln]
    assert len(wg) == 12
    preds = {m.group(1) for ln in wg for m in [re.search(r", (%p\d+), 1, 1,", ln)] if m}
    assert len(preds) == 2


# one loaded tile read by two products, K-major by one and transposed by the other (attention
# backward's K in its dQ kernel): the loop copies it once, both products read that image
SHARED_TILE = """
@launch(reqntid = (128, 1, 1))
kernel shared_tile(a: Array[f16, 2], k: Array[f16, 3], c: Array[f32, 2], n: i32) {
    let ta = load(a, index = (0, 0), shape = (64, 64));
    var acc = zeros((64, 64), f32);
    for j in range(n) {
        let tk = reshape(load(k, index = (0, j, 0), shape = (1, 64, 64), padding = 0),
                         (64, 64));
        let s = mma(ta, transpose(tk), zeros((64, 64), f32));
        acc = mma(astype(s, f16), tk, acc);
    }
    store(c, index = (0, 0), tile = acc);
}
"""


@pytest.mark.parametrize("target,tma", [("sm_90a", True), ("sm_90a", False), ("sm_80", None)])
@pytest.mark.parametrize("rows,n", [(64 * 3, 3), (100, 2)])
def test_a_tile_shared_by_two_products(target, tma, rows, n):
    # small integers: exact in f16 / f32; 100 rows: the second tile is ragged (zeros past
    # the end). sm_80 (mma.sync) copies the tile for each product
    rng = np.random.default_rng(rows)
    a = rng.integers(-2, 3, (64, 64)).astype(np.float16)
    k = rng.integers(-2, 3, (1, rows, 64)).astype(np.float16)
    arrays = {"a": a, "k": k, "c": np.full((64, 64), np.nan, np.float32)}
    res, _ = run(SHARED_TILE, "shared_tile", arrays, (1,), scalars=[np.int32(n)],
                 target=target, tma=tma, race_check=tma is False)
    kk = np.concatenate([k[0], np.zeros((-rows % 64, 64), np.float16)]).astype(np.float64)
    want = np.zeros((64, 64))
    for j in range(0, 64 * n, 64):
        want += (a.astype(np.float64) @ kk[j:j + 64].T) @ kk[j:j + 64]
    assert np.array_equal(arrays["c"], want)
    if target != "sm_90a":
        return
    lines = res.ptx.splitlines()
    text = "\n".join(lines[i - 1] for i in ptx_loop_lines(res.ptx))
    # a ring of two stages of one 8 KiB image (and a 64-bit mbarrier per stage with TMA);
    # no tile goes through registers: nothing is stored into shared memory in the loop
    ring = 16384 + (1024 if tma else 0)
    assert re.search(rf"\.shared \.align 1024 \.b8 __tile_kept\d+_shared_tile\[{ring}\];",
                     res.ptx), res.ptx[:3000]
    assert "st.shared" not in text
    if tma:     # one copy per stage: the prologue's and the loop's
        assert len(re.findall(TMA_LOAD, res.ptx)) == 2
    else:
        assert text.count("cp.async.cg.shared.global") == 4


# a row the loop loads beside its operand tiles (attention backward's lse) and a column
# computed before it (dQ's lse): the row is copied ahead by the ring's TMA and read from its
# stage, the column is converted into the accumulator layout once, before the loop
SIDE_ROWS = """
@launch(reqntid = (128, 1, 1))
kernel side_rows(a: Array[f16, 2], k: Array[f16, 2], r: Array[f32, 2], w: Array[f32, 2],
                 c: Array[f32, 2], n: i32) {
    let ta = load(a, index = (0, 0), shape = (64, 64));
    let tw = reshape(load(w, index = (0, 0), shape = (1, 64)), (64, 1));
    var acc = zeros((64, 64), f32);
    for j in range(n) {
        let tk = load(k, index = (j, 0), shape = (64, 64), padding = 0);
        let tr = load(r, index = (0, j), shape = (1, 64), padding = 0);
        let s = mma(ta, transpose(tk), zeros((64, 64), f32)) - tr + tw;
        acc = mma(astype(s, f16), tk, acc);
    }
    store(c, index = (0, 0), tile = acc);
}
"""


@pytest.mark.parametrize("rows,n", [(64 * 3, 3), (100, 2)])
def test_a_row_copied_beside_the_operands(rows, n):
    # small integers: exact in f16 / f32; 100: the second key tile and row are ragged (zeros)
    rng = np.random.default_rng(rows)
    a = rng.integers(-2, 3, (64, 64)).astype(np.float16)
    k = rng.integers(-2, 3, (rows, 64)).astype(np.float16)
    r = rng.integers(-8, 9, (1, rows)).astype(np.float32)
    w = rng.integers(-8, 9, (1, 64)).astype(np.float32)
    arrays = {"a": a, "k": k, "r": r, "w": w, "c": np.full((64, 64), np.nan, np.float32)}
    res, _ = run(SIDE_ROWS, "side_rows", arrays, (1,), scalars=[np.int32(n)])
    pad = -rows % 64
    kk = np.concatenate([k, np.zeros((pad, 64), np.float16)]).astype(np.float64)
    rr = np.concatenate([r[0], np.zeros(pad, np.float32)]).astype(np.float64)
    want = np.zeros((64, 64))
    for j in range(0, 64 * n, 64):
        s = a.astype(np.float64) @ kk[j:j + 64].T - rr[None, j:j + 64] + w.T.astype(np.float64)
        want += s @ kk[j:j + 64]
    assert np.array_equal(arrays["c"], want)
    lines = res.ptx.splitlines()
    text = "\n".join(lines[i - 1] for i in ptx_loop_lines(res.ptx))
    # the row: one 2-d box per stage (the prologue's, the loop's) beside the 2-d key tile's;
    # in the loop nothing is loaded from global memory, nothing stored into shared memory,
    # and one barrier (the ring's)
    boxes = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", res.ptx)
    assert len(boxes) == 4
    assert "ld.global" not in text and "st.shared" not in text and text.count("bar.sync") == 1
