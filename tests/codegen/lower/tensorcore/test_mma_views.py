"""A load reaching a tensor-core product through views (a reshape dropping leading unit axes,
a transpose) is still copied straight into the product's shared-memory image with cp.async
(lower/tensorcore/mma_operands.py), on wgmma (sm_90a) and mma.sync (sm_80, through registers); results
on the emulator against NumPy, ragged edges zero-padded."""

from __future__ import annotations

import re

import numpy as np
import pytest

from wgmma_support import run

VIEWS = """
@launch(reqntid = (128, 1, 1))
kernel views(a: Array[f16, 3], b: Array[f16, 3], c: Array[f32, 3]) {
    let h = bid(0);
    let ta = reshape(load(a, index = (h, 0, 0), shape = (1, 64, 64), padding = 0), (64, 64));
    let tb = reshape(load(b, index = (h, 0, 0), shape = (1, 64, 64), padding = 0), (64, 64));
    // b is (N, K) in memory: its transpose is the (K, N) operand
    let r = mma(ta, transpose(tb), zeros((64, 64), f32)) * 0.5;
    store(c, index = (h, 0, 0), tile = reshape(r, (1, 64, 64)));
}
"""

STORE_BETWEEN = """
@launch(reqntid = (128, 1, 1))
kernel between(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2]) {
    let ta = load(a, index = (0, 0), shape = (64, 64));
    let tb = transpose(load(b, index = (0, 0), shape = (64, 64)));
    store(b, index = (0, 0), tile = zeros((64, 64), f16));     // the load reads b before
    store(c, index = (0, 0), tile = mma(ta, tb, zeros((64, 64), f32)));
}
"""


def _arrays(heads, rows, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, (heads, rows, 64)).astype(np.float16)
    b = rng.integers(-4, 5, (heads, rows, 64)).astype(np.float16)
    return a, b


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_reshaped_and_transposed_operands(target):
    a, b = _arrays(2, 50)                  # 50 rows: the tile's last 14 are padding
    arrays = {"a": a, "b": b, "c": np.full((2, 50, 64), np.nan, np.float32)}
    res, _ = run(VIEWS, "views", arrays, (2,), target=target)
    if target == "sm_90a":
        # both operands copied by cp.async, neither loaded into registers
        assert "cp.async.cg.shared.global" in res.ptx
        assert "ld.global" not in res.ptx
    pa = np.zeros((2, 64, 64)); pa[:, :50] = a
    pb = np.zeros((2, 64, 64)); pb[:, :50] = b
    want = (pa @ pb.transpose(0, 2, 1) * 0.5)[:, :50]
    assert np.array_equal(arrays["c"], want)


def test_store_between_keeps_the_load_before_it():
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (64, 64)).astype(np.float16)
    b = rng.integers(-4, 5, (64, 64)).astype(np.float16)
    arrays = {"a": a, "b": b.copy(), "c": np.full((64, 64), np.nan, np.float32)}
    run(STORE_BETWEEN, "between", arrays, (1,))
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64).T)
    assert not arrays["b"].any()


KEPT = """
@launch(reqntid = (128, 1, 1))
kernel kept(a: Array[f16, 2], b: Array[f16, 3], c: Array[f32, 2]) {
    // ta is loop-invariant and in registers (scaled): its image is written once, before
    // the loop; each iteration's B goes to the scratch buffer
    let ta = astype(load(a, index = (0, 0), shape = (64, 64)) * 2.0, f16);
    var acc = zeros((64, 64), f32);
    for j in range(dim(b, 0)) {
        let tb = reshape(load(b, index = (j, 0, 0), shape = (1, 64, 64)), (64, 64));
        acc = mma(ta, tb, acc * 0.5);
    }
    store(c, index = (0, 0), tile = acc);
}
"""


def test_loop_carries_a_rescaled_product_in_its_layout():
    # acc = mma(...) * 0.5: the yield is an element-wise op of the product, still carried in
    # the accumulator's layout, so nothing is exchanged through shared memory per iteration
    from tilelang.tools.sass import ptx_loop_lines
    src = KEPT.replace("acc = mma(ta, tb, acc * 0.5);", "acc = mma(ta, tb, acc) * 0.5;")
    rng = np.random.default_rng(8)
    a = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    b = rng.integers(-3, 4, (3, 64, 64)).astype(np.float16)
    arrays = {"a": a, "b": b, "c": np.full((64, 64), np.nan, np.float32)}
    res, _ = run(src, "kept", arrays, (1,))
    lines = res.ptx.splitlines()
    assert not any("st.shared" in lines[n - 1] for n in ptx_loop_lines(res.ptx))
    acc = np.zeros((64, 64))
    for j in range(3):
        acc = (2.0 * a.astype(np.float64) @ b[j].astype(np.float64) + acc) * 0.5
    assert np.array_equal(arrays["c"], acc)


@pytest.mark.parametrize("k", [64, 256])
def test_loop_invariant_operand_image_written_once(k):
    # ta is made once before the loop: at K = 64 (16 registers a thread) it is converted
    # there into wgmma's A fragment layout and each MMA takes it from registers (no image);
    # at K = 256 (64 registers, over wgmma_product.KEPT_FRAGMENT_REGS) its image is written
    # there, once. Either way nothing is stored to shared memory in the loop
    from tilelang.tools.sass import ptx_loop_lines
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, (64, k)).astype(np.float16)
    b = rng.integers(-3, 4, (3, k, 64)).astype(np.float16)
    arrays = {"a": a, "b": b, "c": np.full((64, 64), np.nan, np.float32)}
    src = KEPT.replace("shape = (64, 64)) * 2.0", f"shape = (64, {k})) * 2.0").replace(
        "shape = (1, 64, 64)), (64, 64))", f"shape = (1, {k}, 64)), ({k}, 64))")
    res, _ = run(src, "kept", arrays, (1,), race_check=True)
    lines = res.ptx.splitlines()
    loop = [lines[n - 1] for n in ptx_loop_lines(res.ptx)]
    assert any("wgmma.mma_async" in t for t in loop)
    assert not any("st.shared" in t for t in loop)      # neither A's fill nor an exchange
    acc = np.zeros((64, 64))
    for j in range(3):
        acc = 2.0 * a.astype(np.float64) @ b[j].astype(np.float64) + acc * 0.5
    assert np.array_equal(arrays["c"], acc)
    # the loop copies b a slice ahead by TMA (lower/tensorcore/mma_prefetch.py) into a ring
    # of two images and their two mbarriers (in whole KiB): at K = 64 (2 x 8 KiB) a static
    # buffer of its own; at K = 256 (2 x 32 KiB) dynamic shared memory. The kept image
    # counts as the kernel's static shared memory, beside the scratch buffer
    kept = re.findall(r"\.shared \.align 1024 \.b8 __tile_kept\d+_kept\[(\d+)\];", res.ptx)
    art = res.codegen.kernel("kept")
    if k == 64:
        assert kept == ["17408"] and art.dynamic_smem == 0
    else:
        assert kept == ["32768"] and art.dynamic_smem == 2 * 32768 + 1024
    declared = [int(n) for n in re.findall(r"\.shared \.align \d+ \.b8 \w+\[(\d+)\];", res.ptx)]
    assert art.static_smem == sum(declared)


def test_attention_loop_on_sm90a():
    # examples/attention.tile, f16, BM = BN = D = 64: K and V copied by TMA a key tile ahead
    # (test_prefetch.py), Q kept in registers, the running max / sum and output carried in the
    # layouts the loop makes them in (no shared-memory exchange), P packed by cvt.rn.f16x2.f32
    from pathlib import Path

    from tilelang.diagnostics import render_all
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    from tilelang.tools.sass import ptx_loop_lines
    src = (Path(__file__).resolve().parents[4] / "examples" / "attention.tile").read_text()
    src = src.replace("reqntid = by_target(sm_90a = (256, 1, 1), default = (128, 1, 1))",
                      "reqntid = (128, 1, 1)")                  # 4 warps, not sm_90a's 8
    defines = {"BM": "64", "BN": "64", "D": "64", "CAUSAL": "false"}
    res = compile_source(src, "attention.tile", CompileOptions(target="sm_90a", defines=defines),
                         kernels=["attention"], until="ptx")
    assert res.ok, render_all(res.diagnostics)
    lines = res.ptx.splitlines()
    loop = [lines[n - 1] for n in ptx_loop_lines(res.ptx)]
    # 2 copy sites a loop (prologue and body; K and V spread over warps 0 and 1, one copy
    # each): the split loop's ragged tail (docs/ir.md) has a ring too
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.3d\.shared::cluster", res.ptx)) == 4
    assert sum("wgmma.mma_async" in t for t in loop) == 8
    assert not any("st.shared" in t or "ld.global" in t for t in loop)
    assert sum("cvt.rn.f16x2.f32" in t for t in loop) == 16


BATCHED_VIEWS = """
@launch(reqntid = (128, 1, 1))
kernel bviews(a: Array[f16, 3], b: Array[f16, 3], e: Array[f16, 3], c: Array[f32, 3]) {
    let ta = load(a, index = (0, 0, 0), shape = (2, 64, 64));
    // b is (batch, N, K): transposing the last two axes keeps the batch (copied as it
    // lies); e is (K, batch, N): moving its batch axis first is not an image of the tile,
    // so that operand goes through registers
    let tb = transpose(load(b, index = (0, 0, 0), shape = (2, 64, 64)));
    let te = permute(load(e, index = (0, 0, 0), shape = (64, 2, 64)), (1, 0, 2));
    store(c, index = (0, 0, 0), tile = mma(ta, tb, ta @ te));
}
"""


def test_batched_transposed_view():
    rng = np.random.default_rng(11)
    a = rng.integers(-4, 5, (2, 64, 64)).astype(np.float16)
    b = rng.integers(-4, 5, (2, 64, 64)).astype(np.float16)
    e = rng.integers(-4, 5, (64, 2, 64)).astype(np.float16)
    arrays = {"a": a, "b": b, "e": e, "c": np.full((2, 64, 64), np.nan, np.float32)}
    res, _ = run(BATCHED_VIEWS, "bviews", arrays, (1,), race_check=True)
    assert "cp.async.cg.shared.global" in res.ptx
    assert "ld.global" in res.ptx                      # e's tile, through registers
    a64 = a.astype(np.float64)
    want = a64 @ b.astype(np.float64).transpose(0, 2, 1) + \
        a64 @ e.astype(np.float64).transpose(1, 0, 2)
    assert np.array_equal(arrays["c"], want)
